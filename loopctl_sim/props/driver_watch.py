"""``DriverWatch``: the harness's eyes and hands on one ``BareLoop`` run.

A driver bug that feeds the brain something valid but wrong passes every brain invariant, so the
watch sees the driver from outside, through seams ``install`` puts in (a counting client, a
``sleep`` that waits no wall time, first pre- and post-tool hooks, itself as the last observer),
checks the brain and the hands (``invariants.driver``) after every step and feed, and bounds
steps, attempts and dispatches, so a driver bug that loops fails instead of hanging the test.
It strikes where a plan says (a cancel, a ``Crash``, a config change); a problem raises ``Broken``
from inside the run.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from loopctl.api import (
    ApiClient,
    ApiError,
    ModelReply,
    ModelRequest,
    StreamEvent,
    fold_events,
    whole_reply_of,
)
from loopctl.core import (
    CallLLM,
    CallTools,
    Compact,
    CompactReason,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    Message,
    ToolCall,
)
from loopctl.driver import (
    BareLoop,
    CancelSignal,
    Hooks,
    RetryConfig,
    RunResult,
    StepPoint,
    check_call_ids,
)
from loopctl.observe import LoopObserver
from loopctl_sim.props import invariants as inv

#: Dispatches of one call id before the watch stops the run (two bodies, one crash in flight,
#: is two; more means a driver that keeps dispatching).
MAX_DISPATCHES: Final = 4

#: A planned strike: ``("cancel", k)``, ``("crash", k)`` or ``("config", k, {field: value})``
#: at the k-th step or feed of the run (counted from 1, across bodies); ``("tool_crash", k)``
#: right after the k-th dispatched call ran (a process that dies with a tool's work done);
#: ``("results_crash", k)`` right after the k-th results of a wave were fed with their count, before
#: the next step; ``("before_step", k, change)`` in the k-th ``before_step`` of the run and
#: ``("hook", k, change)`` in the post-tool hook of the k-th call that ran, where ``change`` is
#: ``"compact"`` (a manual compaction requested) or ``{field: value}`` (``loop.config``
#: replaced): what the next step must be decided under.
Strike = tuple[Any, ...]
#: The strikes ``_tick`` does by the count of steps and feeds.
_COUNTED: Final = frozenset({"cancel", "crash", "config"})


class Crash(BaseException):
    """The process dies here (a BaseException: nothing in the loop may swallow it)."""


class Broken(BaseException):
    """A property broke (or a bound: the run would not end). A BaseException, so that no handler
    of the driver turns it into an error the run carries on with."""

    def __init__(self, problems: Sequence[str], where: str) -> None:
        super().__init__(f"{where}: " + "; ".join(problems))
        self.problems = list(problems)
        self.where = where

    def violation(self) -> inv.InvariantViolation:
        return inv.InvariantViolation(self.problems, self.where)


class _CountingClient:
    """The user's (or the world's) client, every attempt told to the watch: the ``ApiError`` it
    raised, or what the driver will make of a whole stream (folded and its call ids checked: a
    broken stream or duplicate ids is a failed attempt the client never raised)."""

    def __init__(self, watch: DriverWatch, inner: ApiClient) -> None:
        self.watch = watch
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # model, provider, ...: the inner client's
        return getattr(self.inner, name)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.watch._attempt_started()
        events: list[StreamEvent] = []
        try:
            async for event in self.inner.stream(request):
                events.append(event)
                yield event
        except ApiError as exc:
            self.watch.attempts.append(exc)
            raise
        self._tell(lambda: fold_events(events))

    async def whole_reply(self, request: ModelRequest) -> ModelReply:
        """The inner client's reply whole (or its stream folded), told the same way."""
        self.watch._attempt_started()
        whole = whole_reply_of(self.inner)
        try:
            if whole is not None:
                reply = await whole(request)
            else:
                reply = fold_events([event async for event in self.inner.stream(request)])
        except ApiError as exc:
            self.watch.attempts.append(exc)
            raise
        self._tell(lambda: reply)
        return reply

    def _tell(self, fold: Callable[[], ModelReply]) -> None:
        """A sent attempt: failed if its fold or its call ids fail (as the driver judges it)."""
        try:
            check_call_ids(fold().message)
        except ApiError as exc:
            self.watch.attempts.append(exc)
        else:
            self.watch.attempts.append(None)


class DriverWatch(LoopObserver):
    """See the module docstring. ``tolerated``: brain problem codes reported nowhere (known
    issues); ``skip``: driver property codes not checked (say, ``InvariantCode.RETRY`` for an
    agent whose model middleware retries on its own)."""

    def __init__(
        self,
        plan: Sequence[Strike] = (),
        *,
        signal: CancelSignal | None = None,
        tolerated: frozenset[str] = frozenset(),
        skip: frozenset[str] = frozenset(),
        max_steps: int = 200,
        brain: bool = True,
    ) -> None:
        self.plan = list(plan)
        # False: the brain's invariants are some other watcher's (a campaign's DriverChecker);
        # this watch checks only the hands
        self.brain = brain
        self.signal = signal or CancelSignal()
        self.tolerated = tolerated
        self.skip = skip
        self.max_steps = max_steps
        self.loop: BareLoop | None = None
        self.problems: list[str] = []
        self.events = 0
        self.steps = 0
        self.policy: MachinePolicy | None = None
        #: every backoff delay slept, in order
        self.slept: list[float] = []
        #: call id -> times through dispatch, over the whole run
        self.dispatches: Counter[str] = Counter()
        self.model_steps = 0  # CallLLM steps so far (the world's scripted model reads it)
        self.tools_ran = 0  # calls through the post-tool hooks so far
        self.attempts: list[ApiError | None] = []
        self._inner_sleep: Callable[[float], Awaitable[None]] | None = None
        self.boundaries = 0  # before_step calls so far, across bodies
        self.results_fed = 0  # tool_results feeds so far, across bodies
        #: the messages the run said so far, as ``RunResult.messages`` must give them: every
        #: message the brain added, across compactions; a restart starts from what the restored
        #: brain holds pending (a fresh body knows nothing of an earlier body's compactions)
        self.said: list[Message] = []
        self._said_pending = 0
        self._reset_body()
        self._overflowed = False

    def _reset_body(self) -> None:
        """What one body (one ``BareLoop``) owes the watch; a crash forgets it."""
        self.calls: tuple[ToolCall, ...] | None = None
        self.dispatched: Counter[str] = Counter()  # since the body's last CallTools
        self.in_call = False
        self.attempts = []
        self.delays: list[float] = []
        self.retry: RetryConfig | None = None
        self.tokens_at_call = 0  # the brain's count at the body's last CallTools
        #: a manual compaction this watch requested and no step asked for yet (a request of
        #: the user's own, or a fault's, is not judged: the watch cannot tell when it was made)
        self.compact_owed = False

    def install(self, loop: BareLoop) -> BareLoop:
        """``loop`` with the watch's seams put in (the user's client, hooks and observers kept)."""
        hooks = loop.hooks
        self._inner_sleep = loop.sleep if loop.sleep is not asyncio.sleep else None
        inner = loop.before_step

        def before_step(point: StepPoint) -> None:
            self._before_step(point)
            if inner is not None:
                inner(point)

        watched = loop.replace(
            client=_CountingClient(self, loop.client),
            observers=[*loop.observers, self],
            sleep=self._sleep,
            rng=lambda: 0.5,
            hooks=Hooks(
                pre_tool=[self._dispatching, *hooks.pre_tool],
                post_tool=[self._ran, *hooks.post_tool],
            ),
            before_step=before_step,
        )
        self.loop = watched
        return watched

    def restarted(self, loop: BareLoop) -> BareLoop:
        """A crash killed the body; ``loop`` (built fresh, holding the restored brain) goes on:
        it is installed, and what the old body owed is forgotten (an overflow's emergency
        compaction is still owed: the brain holds the count)."""
        self._reset_body()
        self.said = list(loop.machine.pending)
        self._said_pending = len(self.said)
        return self.install(loop)

    async def _sleep(self, delay: float) -> None:
        self.slept.append(delay)
        if self.in_call:
            self.delays.append(delay)
        if self._inner_sleep is not None:  # a harness's own sleep (it counts): still called
            await self._inner_sleep(delay)
        else:  # the real one would wait: the watch waits no wall time
            await asyncio.sleep(0)

    def _dispatching(self, call: ToolCall) -> None:
        self.dispatched[call.id] += 1
        self.dispatches[call.id] += 1
        if self.dispatches[call.id] > MAX_DISPATCHES:
            self._raise(
                [f"{inv.InvariantCode.RUNAWAY}: call {call.id} dispatched {MAX_DISPATCHES}+ times"]
            )

    def _ran(self, call: ToolCall, result: Any) -> None:
        self.tools_ran += 1
        for strike in list(self.plan):
            if strike[0] == "hook" and strike[1] == self.tools_ran:
                self.plan.remove(strike)
                self._change(strike[2])
        for strike in list(self.plan):
            if strike[0] == "tool_crash" and strike[1] == self.tools_ran:
                self.plan.remove(strike)
                raise Crash(f"after call {call.id} ran")

    def _before_step(self, point: StepPoint) -> None:
        self.boundaries += 1
        for strike in list(self.plan):
            if strike[0] == "before_step" and strike[1] == self.boundaries:
                self.plan.remove(strike)
                self._change(strike[2], point)

    def _change(self, change: Any, point: StepPoint | None = None) -> None:
        """A hook's or ``before_step``'s change of what the next step is decided under."""
        loop = self.loop
        if loop is None:
            return
        if change == "compact":
            (point or loop).request_compaction()
            self.compact_owed = True
        else:
            loop.config = loop.config.model_copy(update=dict(change))

    def _attempt_started(self) -> None:
        if not self.attempts:
            self.retry = self.loop.config.retry if self.loop is not None else RetryConfig()
        limit = (self.retry or RetryConfig()).max_retries + 1
        if len(self.attempts) >= limit:
            self._raise(
                [
                    f"{inv.InvariantCode.RUNAWAY}: attempt {len(self.attempts) + 1} of a model "
                    f"call, the config allows {limit}"
                ]
            )

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self.policy = policy
        self.steps += 1
        problems = inv.check_digest(machine) if self.brain else []
        if self.steps > self.max_steps:
            problems.append(
                f"{inv.InvariantCode.RUNAWAY}: more than {self.max_steps} steps in one run"
            )
            self._raise(problems)
        if self.brain:
            problems += inv.check_step(machine, step, policy)
        self._absorb(machine)
        loop = self.loop
        if loop is not None:
            problems += inv.check_policy(policy, loop.session, loop.config, loop.registry.names())
        if self._overflowed:
            self._overflowed = False
            problems += inv.check_after_overflow(step)
        if self.compact_owed:
            problems += inv.check_compact_now(policy)
        if isinstance(step, Compact) and step.reason is CompactReason.MANUAL:
            self.compact_owed = False
        if isinstance(step, CallTools):
            self.calls = step.calls
            self.tokens_at_call = machine.context_tokens
            self.dispatched = Counter()
        elif isinstance(step, CallLLM):
            self.model_steps += 1
            self.in_call = True
            self.attempts = []
            self.delays = []
        self._tick(machine, problems)

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        problems = inv.check_digest(machine) if self.brain else []
        if self.in_call and name in ("model_response", "fail", "set_context_tokens", "cancel"):
            self.in_call = False
            retry = self.retry or RetryConfig()
            problems += inv.check_model_call(self.attempts, self.delays, retry, name)
            last = self.attempts[-1] if self.attempts else None
            if last is not None and last.error.kind == "context_overflow" and name != "cancel":
                self._overflowed = True
        elif name == "tool_results":
            self.results_fed += 1
            message: Message = args["message"]
            if self.calls is None:
                problems.append(
                    f"{inv.InvariantCode.DISPATCH_ONCE}: results fed without a CallTools"
                )
            else:
                problems += inv.check_result_order(self.calls, message)
                problems += inv.check_dispatched_once(self.calls, self.dispatched)
            self.calls = None
            loop = self.loop
            if loop is not None:
                counted = (self.tokens_at_call, loop.estimator.count([message]))
                problems += inv.check_estimate(*counted, machine.context_tokens)
        if name == "compaction_result":  # pending moved out (the driver carries it)
            self._said_pending = 0
        elif name not in ("commit_pending", "discard_pending"):
            self._absorb(machine)
        self._tick(machine, problems)
        if name == "tool_results":
            for strike in list(self.plan):
                if strike[0] == "results_crash" and strike[1] == self.results_fed:
                    self.plan.remove(strike)
                    raise Crash(f"after the results of wave {self.results_fed}, before a step")

    def _absorb(self, machine: LoopMachine) -> None:
        """Add what the brain appended to pending since the last look: a feed's message, or
        the loop warning ``next_step`` itself adds (no feed may follow it: a run whose turns
        are used up ends at that very step, and the result still holds the warning)."""
        pending = machine.pending
        if len(pending) > self._said_pending:
            self.said += pending[self._said_pending :]
        self._said_pending = len(pending)

    def check_result(self, result: RunResult) -> list[str]:
        """After the run: ``result.messages`` is what the run said (``said``), every call's
        result in it once and in call order."""
        return inv.check_run_messages(self.said, result.messages)

    def _tick(self, machine: LoopMachine, problems: list[str]) -> None:
        if self.brain:
            problems += inv.check_machine(machine, self.policy)
        real = [
            p
            for p in problems
            if inv.problem_code(p) not in self.tolerated and inv.problem_code(p) not in self.skip
        ]
        if real:
            self._raise(real)
        self.events += 1
        for strike in list(self.plan):
            if strike[1] != self.events or strike[0] not in _COUNTED:
                continue
            self.plan.remove(strike)
            if strike[0] == "cancel":
                self.signal.cancel()
            elif strike[0] == "config" and self.loop is not None:
                self.loop.config = self.loop.config.model_copy(update=dict(strike[2]))
            elif strike[0] == "crash":
                raise Crash(f"at event {self.events}")

    def _raise(self, problems: list[str]) -> None:
        self.problems += problems
        raise Broken(problems, f"at step or feed {self.events + 1} of the run")


def unwrap(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first ``kind`` in ``exc``, its groups (a tool's crash comes out of a task group) and
    its causes, or None."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = unwrap(inner, kind)
            if found is not None:
                return found
    cause = exc.__cause__ or exc.__context__
    return unwrap(cause, kind) if cause is not None else None
