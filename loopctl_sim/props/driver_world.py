"""The scripted world ``DriverMachine`` runs ``BareLoop`` in: a model that plays a script, one
tool (``work``) whose arguments say what it does (``MODES``), and the strategies that draw both.

The model answers each ``CallLLM`` step with one script entry: tool calls, a final text, a call
of an unknown tool, or a failure whose first ``times`` attempts fail (``None``: every attempt),
so retries are judged per model call, as the driver makes them (the step and its attempt come
from the ``DriverWatch``). The strategies are skewed towards the driver's rules: small retry
budgets against short or persistent failures, retry-after values, overflows, parallel calls.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hypothesis import strategies as st

from loopctl.api import ApiError, ModelRequest
from loopctl.core import CompactReason, LoopError, Message, ToolCall
from loopctl.driver import MiddleOutCompactor, RetryConfig, RunConfig
from loopctl.testing import Reply
from loopctl.tools import Tool, tool
from loopctl_sim.props.brain_compactions import REFUSED, misbehaving_compaction
from loopctl_sim.props.driver_watch import Crash, DriverWatch

#: What ``work(n, mode)`` does: answer, answer after a few event-loop turns, raise, hang until
#: its timeout, cancel the run while working, crash the process while working.
MODES: Final = ("ok", "crash", "ok", "raise", "slow", "crash", "hang", "ok", "cancel")
TOOL_TIMEOUT: Final = 0.02

#: Provider failures a script can hold: (retryable, HTTP status, should_retry) by kind.
FAILURE_KINDS: Final[dict[str, tuple[bool, int | None, bool | None]]] = {
    "network": (True, None, None),
    "overloaded": (True, 529, None),
    "rate_limited": (True, 429, None),
    "provider": (False, 500, True),  # the server's x-should-retry overrides the kind
    "auth": (False, 401, None),
    "context_overflow": (False, 400, None),
}

#: A script entry: ``("calls", [mode, ...])``, ``("final", text)``, ``("unknown", None)`` or
#: ``("error", (kind, times, retry_after))`` (a bare ``kind`` means a persistent failure).
ReplySpec = tuple[str, Any]


def failure(kind: str, retry_after: float | None = None) -> ApiError:
    """The ``ApiError`` a provider raises for ``kind`` (see ``FAILURE_KINDS``)."""
    retryable, status, should_retry = FAILURE_KINDS[kind]
    details: dict[str, Any] = {"prompt_tokens": 10**9} if kind == "context_overflow" else {}
    message = f"scripted {kind}"
    error = LoopError(
        kind=kind, message=message, retryable=retryable, status=status, details=details
    )
    return ApiError(error, retry_after=retry_after, should_retry=should_retry)


@dataclass(frozen=True)
class Failure:
    """A script entry: the step's next ``times`` attempts raise ``error`` (None: all of them)."""

    error: ApiError
    times: int | None


Entry = Reply | Failure


class ScriptedModel:
    """The model of the world: each ``CallLLM`` step takes its plan from the script when its
    first attempt arrives (failures first, then one answer); see the module docstring."""

    def __init__(self, watch: DriverWatch, entries: list[Entry]) -> None:
        self.watch = watch
        self.entries = entries
        self.step = -1
        self.failures: list[ApiError] = []
        self.persistent: ApiError | None = None
        self.answer: Reply | None = None

    def __call__(self, request: ModelRequest) -> Reply:
        if self.watch.model_steps != self.step:
            self.step = self.watch.model_steps
            self.failures, self.persistent, self.answer = [], None, None
            while self.entries and isinstance(self.entries[0], Failure):
                entry = self.entries.pop(0)
                assert isinstance(entry, Failure)
                if entry.times is None:
                    self.persistent = entry.error
                    break
                self.failures += [entry.error] * entry.times
        attempt = len(self.watch.attempts)
        if attempt < len(self.failures):
            return self.failures[attempt]
        if self.persistent is not None:
            return self.persistent
        if self.answer is None:
            answer = self.entries.pop(0) if self.entries else Message.assistant("no more")
            assert not isinstance(answer, Failure)
            self.answer = answer
        return self.answer


class World:
    """The ``work`` tool and the counts it keeps: executions by ``n``, and the calls that
    crashed once while working."""

    def __init__(self, signal: Callable[[], Any]) -> None:
        self.signal = signal  # the run's CancelSignal, looked up when a call cancels
        self.executions: Counter[int] = Counter()
        self.crashed_in_tool: set[int] = set()
        self.nonce = 0
        self.tool: Tool[..., Any] = self._make_tool()

    def _make_tool(self) -> Tool[..., Any]:
        world = self

        @tool
        async def work(n: int, mode: str = "ok") -> str:
            """Do a unit of work."""
            world.executions[n] += 1
            # calls take 0 to 2 turns of the event loop by n (5 more when slow), so the calls
            # of one wave finish in another order than they were made
            for _ in range(-n % 3 + (5 if mode == "slow" else 0)):
                await asyncio.sleep(0)
            if mode == "raise":
                raise RuntimeError(f"work {n} failed")
            if mode == "hang":
                await asyncio.Event().wait()
            if mode == "cancel":
                world.signal().cancel()
                await asyncio.Event().wait()
            if mode == "crash" and n not in world.crashed_in_tool:
                world.crashed_in_tool.add(n)
                raise Crash(f"work {n}")
            return f"work {n} done"

        return work

    def entry(self, spec: ReplySpec) -> Entry:
        """A script entry for the model (fresh call ids and ``n`` for every call)."""
        kind, value = spec
        if kind == "final":
            return Message.assistant(value)
        if kind == "error":
            name, times, after = (value, None, None) if isinstance(value, str) else value
            return Failure(failure(name, after), times)
        if kind == "unknown":
            self.nonce += 1
            return Message.assistant(tool_calls=[ToolCall(id=f"u{self.nonce}", name="nope")])
        calls = []
        for mode in value:
            self.nonce += 1
            n = self.nonce
            calls.append(ToolCall(id=f"c{n}", name="work", arguments={"n": n, "mode": mode}))
        return Message.assistant("working", calls)


#: What ``PlannedCompactor`` does at a compaction: cut as the default compactor does, find
#: nothing to cut, raise, return more than it was given, or one of the histories the brain
#: refuses (``brain_compactions.REFUSED``).
COMPACTOR_MODES: Final = ("cut", "raise", "nothing", "growing", *sorted(REFUSED))


class _CompactorRaised(Exception):
    """What a ``raise`` compaction raises (the driver fails the run with a compaction error)."""


class PlannedCompactor:
    """The world's compactor: the k-th compaction does what ``plan[k]`` says (``cut`` once the
    plan runs out). It keeps what it was handed and what it did, so the harness can check that
    a refused history changed nothing and that a raise ended the run as a compaction failure."""

    def __init__(self, plan: list[str] | None = None) -> None:
        self.plan = list(plan or [])
        self.done: list[str] = []
        self.handed: list[Message] = []
        self._cut = MiddleOutCompactor()

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        mode = self.plan.pop(0) if self.plan else "cut"
        self.done.append(mode)
        self.handed = list(messages)
        if mode == "raise":
            raise _CompactorRaised(f"the compactor broke on {len(messages)} messages")
        if mode == "nothing":
            return None
        if mode == "cut":
            return await self._cut.compact(messages, reason)
        return misbehaving_compaction(messages, mode)


_TIMES: Final = st.sampled_from([1, 2, 1, 3, None])
#: Failures as drawn: rate limits and overloads with a retry-after over the backoff (so that an
#: ignored one shows), none, zero or one over ``max_retry_after``; overflows; other failures,
#: retryable, retryable on the server's word, or fatal.
#: Rate limits are drawn twice as often as either other kind: a retry-after is only judged when
#: such a failure is retried, which needs a retry budget and a run that gets that far.
_RATE_LIMITS: Final = st.tuples(
    st.sampled_from(["rate_limited", "overloaded"]),
    _TIMES,
    st.sampled_from([1.5, 30.0, None, 0.0, 500.0]),
)
_FAILURES: Final = st.one_of(
    _RATE_LIMITS,
    st.tuples(st.just("context_overflow"), st.just(1), st.none()),
    _RATE_LIMITS,
    st.tuples(st.sampled_from(["network", "provider", "auth"]), _TIMES, st.none()),
)


def reply_specs() -> st.SearchStrategy[ReplySpec]:
    """One script entry (see ``ReplySpec``): mostly calls and failures. A final text ends the
    run, and so does the end of the script (the model then answers ``"no more"``), so final
    texts are drawn least."""
    calls = st.tuples(st.just("calls"), st.lists(st.sampled_from(MODES), min_size=1, max_size=3))
    errors = st.tuples(st.just("error"), _FAILURES)
    return st.one_of(
        calls,
        errors,
        calls,
        st.tuples(st.just("unknown"), st.none()),
        errors,
        calls,
        st.tuples(st.just("final"), st.sampled_from(["done", "all good", ""])),
    )


@st.composite
def run_configs(draw: st.DrawFn) -> RunConfig:
    """Small run settings: few turns, every loop action, retry budgets of 0 to 2. Drawn from
    lists whose first (simplest) entries leave a run room to get somewhere: hypothesis draws
    the first entries most, and a run of one turn, or with no retries, exercises little."""
    return RunConfig(
        max_turns=draw(st.sampled_from([4, 2, 6, 1, 3, 5])),
        loop_action=draw(st.sampled_from(["warn", "fail", "off"])),
        retry=RetryConfig(max_retries=draw(st.sampled_from([1, 2, 0]))),
        tool_timeout=TOOL_TIMEOUT,
    )


def config_changes() -> st.SearchStrategy[dict[str, Any]]:
    """A mid-run change of ``loop.config`` (``model_copy(update=...)``): loop settings and the
    retry budget. ``max_turns`` is left alone: lowering it under the turns taken would be a turn
    limit the run already broke."""
    return st.fixed_dictionaries(
        {},
        optional={
            "loop_action": st.sampled_from(["warn", "fail", "off"]),
            "loop_window": st.integers(2, 12),
            "loop_repeat_limit": st.integers(2, 4),
            "retry": st.builds(RetryConfig, max_retries=st.integers(0, 3)),
            "compact_threshold": st.sampled_from([0.5, 0.8]),
        },
    )
