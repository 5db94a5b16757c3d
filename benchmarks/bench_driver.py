"""The driver's own overhead per tool-using turn, and snapshot size / save / restore time.

Workload (the same one ``bench_peers`` gives every peer): one run of ``T`` model calls ("turns");
calls 1..T-1 each ask for one call of the tool ``add(a, b)`` (arguments differ every turn, so the
loop detector never fires), call ``T`` answers the final text. The model is instant and in-process
(``FunctionClient``), so what is measured is the engine: the brain's decisions, the driver's
bookkeeping, the stream fold, tool dispatch. The tool must have run exactly ``T - 1`` times and the
run must return the final text; both are asserted after every timed run.

Figures are microseconds per turn (wall time of ``await loop.run(...)`` divided by ``T``), median
of ``repeats`` runs. Construction of the loop is not timed (it is not per turn).

    python -m benchmarks.bench_driver            # full: T = 10, 100, 1000; 5 repeats
    python -m benchmarks.bench_driver --smoke    # T = 10, 1 repeat
    python -m benchmarks.bench_driver --profile  # cProfile of one T = 1000 run, top functions
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import json
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from loopctl import BareLoop, LoopMachine, Message, RunConfig, ToolCall, ToolResult, tool
from loopctl.api import ModelRequest
from loopctl.testing import FunctionClient, ScriptedClient

__all__ = [
    "FINAL_TEXT",
    "REPEATS",
    "TURNS",
    "Counter",
    "Measurement",
    "measure",
    "measure_interleaved",
    "run",
    "sample",
    "table",
    "tool_arguments",
]

TURNS = (10, 100, 1000)
REPEATS = 5
FINAL_TEXT = "the sums are done"
SNAPSHOT_SIZES = (10, 1_000, 10_000)


def tool_arguments(turn: int) -> dict[str, int]:
    """The arguments of the call asked for on ``turn`` (1-based): different on every turn."""
    return {"a": turn, "b": 1}


class Counter:
    """How many times a tool body really ran (reset before every timed run)."""

    def __init__(self) -> None:
        self.n = 0


@dataclass
class Measurement:
    """Per-turn figures for one framework / variant at one ``T``."""

    turns: int
    runs_us_per_turn: list[float]
    tool_calls: int
    final_text: str
    cpu_runs_us_per_turn: list[float]

    @property
    def median_us(self) -> float:
        return statistics.median(self.runs_us_per_turn)

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "median_us_per_turn": round(self.median_us, 2),
            "min_us_per_turn": round(min(self.runs_us_per_turn), 2),
            "runs_us_per_turn": [round(x, 2) for x in self.runs_us_per_turn],
            "cpu_median_us_per_turn": round(statistics.median(self.cpu_runs_us_per_turn), 2),
            "cpu_runs_us_per_turn": [round(x, 2) for x in self.cpu_runs_us_per_turn],
            "tool_calls": self.tool_calls,
            "expected_tool_calls": self.turns - 1,
            "final_text": self.final_text,
        }


# One timed run: given T and the counter, build the subject (untimed) and return a coroutine
# factory whose awaited value is the final text.
Prepare = Callable[[int, Counter], Callable[[], Awaitable[str]]]


def sample(prepare: Prepare, turns: int) -> tuple[float, float, int, str]:
    """One timed run in a fresh event loop: (wall us per turn, CPU us per turn, tool executions,
    final text). CPU time is the process's (all threads): on a shared machine it leaves out the
    time the process waited for a core, which wall time does not.

    Asserts that the tool ran exactly ``turns - 1`` times and that the final text came back.
    The loop's default executor is started before the clock starts (a worker thread is
    spawned once per loop, not per turn).
    """

    async def main() -> tuple[float, float, int, str]:
        await asyncio.get_running_loop().run_in_executor(None, int)
        counter = Counter()
        go = prepare(turns, counter)
        gc.collect()
        cpu_started = time.process_time()
        started = time.perf_counter()
        text = await go()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        after = getattr(go, "after", None)
        if after is not None:  # a subject's own checks, after the clock stopped
            after()
        assert counter.n == turns - 1, f"tool ran {counter.n} times, expected {turns - 1}"
        assert text == FINAL_TEXT, f"final text {text!r}, expected {FINAL_TEXT!r}"
        return elapsed / turns * 1e6, cpu / turns * 1e6, counter.n, text

    return asyncio.run(main())


def measure_interleaved(
    prepares: dict[str, Prepare], turns: int, repeats: int, *, warmup: bool = True
) -> dict[str, Measurement]:
    """``repeats`` runs of every subject, round-robin (rotating the order every round).

    Interleaving spreads the load of a shared machine over all subjects alike, so their ratio
    means something even when the absolute figures drift. A warm-up run at T = min(T, 10) per
    subject comes first, so imports and first-call caches are not billed to a turn.
    """
    names = list(prepares)
    if warmup:
        for name in names:
            sample(prepares[name], min(turns, 10))
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    last: dict[str, tuple[int, str]] = {}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            us, cpu_us, calls, text = sample(prepares[name], turns)
            samples[name].append(us)
            cpu[name].append(cpu_us)
            last[name] = (calls, text)
    return {
        name: Measurement(turns, samples[name], last[name][0], last[name][1], cpu[name])
        for name in names
    }


def measure(prepare: Prepare, turns: int, repeats: int) -> Measurement:
    """``repeats`` timed runs of one subject (see ``measure_interleaved``)."""
    return measure_interleaved({"subject": prepare}, turns, repeats)["subject"]


# --- loopctl subjects --------------------------------------------------------------------------


def _reply(n: int, turns: int) -> Message:
    if n >= turns:
        return Message.assistant(FINAL_TEXT)
    return Message.assistant(
        tool_calls=[ToolCall(id=f"call_{n}", name="add", arguments=tool_arguments(n))]
    )


def _add_tools(counter: Counter, *, is_async: bool) -> list[Any]:
    if is_async:

        @tool(name="add")
        async def add_async(a: int, b: int) -> int:
            """Add two integers."""
            counter.n += 1
            return a + b

        return [add_async]

    @tool(name="add")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        counter.n += 1
        return a + b

    return [add]


def _check_messages(messages: tuple[Message, ...], turns: int) -> None:
    """The run's messages hold every call's right answer (outside the timed region)."""
    results = [p for m in messages for p in m.parts if isinstance(p, ToolResult)]
    assert len(results) == turns - 1
    for n, result in enumerate(results, start=1):
        assert not result.is_error and result.content == str(n + 1), result


def loopctl_prepare(*, is_async: bool = False, scripted: bool = False) -> Prepare:
    """loopctl's ``BareLoop`` with an instant model (``FunctionClient`` or ``ScriptedClient``)."""

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        if scripted:
            client: Any = ScriptedClient([_reply(n, turns) for n in range(1, turns + 1)])
        else:
            calls = [0]

            def fn(request: ModelRequest) -> Message:
                calls[0] += 1
                return _reply(calls[0], turns)

            client = FunctionClient(fn)
        loop = BareLoop(
            client,
            tools=_add_tools(counter, is_async=is_async),
            config=RunConfig(max_turns=turns + 5),
        )

        results: list[Any] = []

        async def go() -> str:
            result = await loop.run("add some numbers")
            results.append(result)
            return result.final_text or ""

        def after() -> None:
            [result] = results
            assert result.turns == turns, result.turns
            _check_messages(result.messages, turns)

        go.after = after  # type: ignore[attr-defined]  # checked by sample(), untimed
        return go

    return prepare


VARIANTS: dict[str, Prepare] = {
    "loopctl (FunctionClient, sync tool)": loopctl_prepare(),
    "loopctl (FunctionClient, async tool)": loopctl_prepare(is_async=True),
    "loopctl (ScriptedClient, sync tool)": loopctl_prepare(scripted=True),
}
MAIN_VARIANT = "loopctl (FunctionClient, sync tool)"


# --- snapshots ---------------------------------------------------------------------------------


def _history(n_messages: int) -> list[Message]:
    """A coherent history of ``n_messages`` messages: a user prompt, then exchanges, then text."""
    messages = [Message.user("add some numbers")]
    turn = 0
    while len(messages) < n_messages - 1:
        turn += 1
        call = ToolCall(id=f"call_{turn}", name="add", arguments=tool_arguments(turn))
        messages.append(Message.assistant(tool_calls=[call]))
        messages.append(
            Message.from_results([ToolResult(call_id=call.id, name="add", content=str(turn + 1))])
        )
    if len(messages) < n_messages:
        messages.append(Message.assistant(FINAL_TEXT))
    return messages


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _median_cold(make: Callable[[], Any], fn: Callable[[Any], Any], repeats: int) -> float:
    """Median time of ``fn(make())`` with ``make()`` untimed (a fresh object every repeat)."""
    samples = []
    for _ in range(repeats):
        subject = make()
        gc.collect()
        started = time.perf_counter()
        fn(subject)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def snapshot_sizes(sizes: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    """Snapshot size and save / restore / digest time of a brain holding ``n`` messages.

    The brain caches each message's JSON once it has been encoded, so a save is timed twice:
    ``save_cold_ms`` on a freshly built brain (nothing cached) and ``save_warm_ms`` on one that
    was saved before (what a trace pays after every feed). Likewise ``digest``.
    """
    rows = []
    for n in sizes:
        history = _history(n)
        machine = LoopMachine(history)
        text = machine.model_dump_json()
        restored = LoopMachine.model_validate_json(text)
        assert restored == machine and restored.history_len() == n
        fresh = lambda history=history: LoopMachine(history)  # noqa: E731
        save_cold = _median_cold(fresh, lambda m: m.model_dump_json(), repeats)
        save_warm = _median_time(machine.model_dump_json, repeats)
        restore = _median_time(partial(LoopMachine.model_validate_json, text), repeats)
        digest_cold = _median_cold(fresh, lambda m: m.digest(), repeats)
        digest_warm = _median_time(machine.digest, repeats)
        rows.append(
            {
                "messages": n,
                "bytes": len(text.encode()),
                "save_cold_ms": round(save_cold * 1e3, 3),
                "save_warm_ms": round(save_warm * 1e3, 3),
                "restore_ms": round(restore * 1e3, 3),
                "digest_cold_ms": round(digest_cold * 1e3, 3),
                "digest_warm_ms": round(digest_warm * 1e3, 3),
                "restore_us_per_message": round(restore * 1e6 / n, 3),
            }
        )
    return rows


# --- where the time goes ------------------------------------------------------------------------


def _per_call_us(fn: Callable[[], Any], n: int, repeats: int = 5) -> float:
    """The fastest of ``repeats`` batches of ``n`` calls, in us per call (timeit's rule: on a
    shared machine the minimum is the least disturbed estimate of a small piece's cost)."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return min(samples)


async def _per_await_us(make: Callable[[], Awaitable[Any]], n: int, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(n):
            await make()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return min(samples)


def breakdown(sizes: tuple[int, ...] = SNAPSHOT_SIZES, n: int = 2_000) -> dict[str, Any]:
    """The pieces of one tool-using turn, timed one by one (us per turn, best of 5 batches).

    Each piece is what the driver does once (or as often as noted) per tool-using turn, measured
    in isolation at several history sizes where it could depend on the history. Their sum is
    close to, but not exactly, the measured turn (the event loop's scheduling is not in it).
    """
    from loopctl.api import ModelReply, Usage, fold_events
    from loopctl.driver.cancel import CancelSignal
    from loopctl.driver.config import build_policy
    from loopctl.driver.estimate import CharEstimator
    from loopctl.observe import IoEvent
    from loopctl.testing import reply_events
    from loopctl.tools import ToolRegistry, dispatch

    counter = Counter()
    sync_add = _add_tools(counter, is_async=False)[0]
    async_add = _add_tools(counter, is_async=True)[0]
    call = ToolCall(id="call_1", name="add", arguments=tool_arguments(1))
    reply = Message.assistant(tool_calls=[call])
    result = ToolResult(call_id="call_1", name="add", content="2")
    results_message = Message.from_results([result])
    estimator = CharEstimator()
    session_config, run_config = BareLoop(FunctionClient(lambda r: reply)).session, RunConfig()
    registry_sync, registry_async = ToolRegistry([sync_add]), ToolRegistry([async_add])
    folded = ModelReply(message=reply)

    flat: dict[str, float] = {
        "build_policy (MachinePolicy, 2x per turn)": 2
        * _per_call_us(
            lambda: build_policy(session_config, run_config, tools=("add",), compact_now=False),
            n,
        ),
        "reply_events + fold_events (stream of one tool call)": _per_call_us(
            lambda: fold_events(list(reply_events(reply))), n
        ),
        "IoEvent model_reply (message + usage model_dump)": _per_call_us(
            lambda: IoEvent(
                kind="model_reply",
                turn=1,
                data={
                    "message": folded.message.model_dump(mode="json"),
                    "usage": folded.usage.model_dump(mode="json"),
                    "stop_reason": None,
                    "attempts": 1,
                },
                duration_s=0.0,
            ),
            n,
        ),
        "IoEvent tool_call + tool_result (dispatch)": _per_call_us(
            lambda: (
                IoEvent(kind="tool_call", turn=1, data={"id": "c", "name": "add", "arguments": {}}),
                IoEvent(
                    kind="tool_result",
                    turn=1,
                    data={"id": "c", "name": "add", "content": "2", "is_error": False},
                    duration_s=0.0,
                ),
            ),
            n,
        ),
        "Message.from_results + ToolResult": _per_call_us(
            lambda: Message.from_results([ToolResult(call_id="c", name="add", content="2")]), n
        ),
        "estimator.count (results message)": _per_call_us(
            lambda: estimator.count([results_message]), n
        ),
        "Usage + Usage (run total)": _per_call_us(lambda: Usage() + Usage(), n),
    }

    async def awaited() -> dict[str, float]:
        loop = BareLoop(FunctionClient(lambda r: reply))
        cancel = CancelSignal()

        async def nothing() -> None:
            return None

        base = await _per_await_us(nothing, n)
        out = {
            "_race (2 tasks + asyncio.wait), 2x per turn": 2
            * (await _per_await_us(lambda: loop._race(nothing(), cancel), n) - base),
            "asyncio.to_thread round trip (sync tool)": await _per_await_us(
                lambda: asyncio.to_thread(int), n // 4
            ),
            "dispatch, sync tool (incl. to_thread), no events": await _per_await_us(
                lambda: dispatch([call], registry_sync), n // 4
            ),
            "dispatch, async tool, no events": await _per_await_us(
                lambda: dispatch([call], registry_async), n
            ),
            "dispatch, async tool, with IoEvents": await _per_await_us(
                lambda: dispatch([call], registry_async, on_event=lambda e: None), n
            ),
        }
        return out

    flat.update(asyncio.run(awaited()))

    by_size: dict[str, dict[str, float]] = {}
    policy = build_policy(session_config, RunConfig(max_turns=10**9), tools=("add",))
    for size in sizes:
        machine = LoopMachine(_history(size))
        machine.accept_input(Message.user("go on"))
        machine.next_step(policy)
        request = ModelRequest.model_construct(
            messages=tuple(machine.messages()), tools=(), system=None, options={}, turn=1
        )
        row = {
            "request: tuple(machine.messages()) + ModelRequest": _per_call_us(
                lambda machine=machine: ModelRequest.model_construct(  # type: ignore[misc]
                    messages=tuple(machine.messages()),
                    tools=registry_sync.specs(),
                    system=None,
                    options={},
                    turn=1,
                ),
                max(n // max(size // 100, 1), 50),
            ),
            "IoEvent model_request (last message model_dump)": _per_call_us(
                lambda request=request: IoEvent(  # type: ignore[misc]
                    kind="model_request",
                    turn=1,
                    data={
                        "n_messages": len(request.messages),
                        "tools": ["add"],
                        "last": request.messages[-1].model_dump(mode="json"),
                    },
                ),
                n,
            ),
        }
        by_size[str(size)] = {k: round(v, 2) for k, v in row.items()}
    return {
        "per_turn_us": {k: round(v, 2) for k, v in flat.items()},
        "per_turn_us_by_history_size": by_size,
    }


# --- ablations: what a fix would gain ----------------------------------------------------------


class _NoEvent:
    """Stands in for ``IoEvent`` in an ablation: building it costs nothing."""

    def __init__(self, **kwargs: Any) -> None:
        pass


async def _one_call_dispatch(calls: Any, registry: Any, **kwargs: Any) -> list[ToolResult]:
    """``dispatch`` for the ablation: a wave of one call runs in the caller's task."""
    from loopctl.tools import dispatch as real_dispatch
    from loopctl.tools.dispatch import _Pipeline

    if len(calls) != 1 or kwargs.get("pre_hooks") or kwargs.get("post_hooks"):
        return await real_dispatch(calls, registry, **kwargs)
    pipeline = _Pipeline(registry, (), (), kwargs.get("middleware", ()), kwargs["default_timeout"])
    return [await pipeline.run(calls[0])]


def _patched(*, events: bool, taskgroup: bool = True) -> Any:
    from contextlib import ExitStack
    from unittest import mock

    stack = ExitStack()
    if not events:
        for module in ("loopctl.driver.loop", "loopctl.driver.model", "loopctl.observe"):
            stack.enter_context(mock.patch(f"{module}.IoEvent", _NoEvent))
    if not taskgroup:
        stack.enter_context(mock.patch("loopctl.driver.loop.dispatch", _one_call_dispatch))
    return stack


class _PrebuiltClient:
    """An instant client whose stream events were built before the clock started."""

    def __init__(self, events: list[list[Any]]) -> None:
        self.events = events
        self.n = 0

    async def stream(self, request: ModelRequest) -> Any:
        batch = self.events[self.n]
        self.n += 1
        for event in batch:
            yield event


def ablation_prepare(
    *,
    race: bool = True,
    events: bool = True,
    prebuilt: bool = False,
    cached_policy: bool = False,
    history: int = 0,
    taskgroup: bool = True,
    timeout: bool = True,
) -> Prepare:
    """loopctl (async tool) with one or more costs taken out by a subclass or a patch.

    ``race=False``: ``_race`` awaits the work directly (no cancel racing); ``events=False``:
    ``IoEvent`` construction patched out (the ``model_dump`` calls feeding it still run);
    ``prebuilt``: the model's stream events are built before the clock starts;
    ``cached_policy``: the ``MachinePolicy`` is built once; ``history``: the brain starts with
    a conversation of that many messages already in it; ``taskgroup=False``: a wave of one call
    is awaited directly instead of through ``dispatch``'s TaskGroup; ``timeout=False``:
    ``RunConfig(tool_timeout=None)`` (no ``asyncio.timeout`` around the tool). ``prebuilt``
    also means the client does not keep every request (``FunctionClient`` does).
    """
    from loopctl.testing import reply_events

    class Ablated(BareLoop):
        _cached: Any = None

        async def _race(self, work: Any, cancel: Any) -> Any:
            if race:
                return await super()._race(work, cancel)
            return await work

        def policy(self) -> Any:
            if not cached_policy:
                return super().policy()
            if self._cached is None:
                self._cached = super().policy()
            return self._cached

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        client: Any
        if prebuilt:
            client = _PrebuiltClient(
                [list(reply_events(_reply(n, turns))) for n in range(1, turns + 1)]
            )
        else:
            calls = [0]

            def fn(request: ModelRequest) -> Message:
                calls[0] += 1
                return _reply(calls[0], turns)

            client = FunctionClient(fn)
        machine = LoopMachine(_history(history)) if history else None
        loop = Ablated(
            client,
            tools=_add_tools(counter, is_async=True),
            config=RunConfig(max_turns=turns + 5, tool_timeout=60.0 if timeout else None),
            machine=machine,
        )

        async def go() -> str:
            with _patched(events=events, taskgroup=taskgroup):
                result = await loop.run("add some numbers")
            assert result.turns == turns, result.turns
            return result.final_text or ""

        return go

    return prepare


ABLATIONS: dict[str, dict[str, Any]] = {
    "baseline (async tool)": {},
    "no _race (await directly)": {"race": False},
    "no IoEvent objects": {"events": False},
    "stream events prebuilt": {"prebuilt": True},
    "policy cached": {"cached_policy": True},
    "one-call wave without TaskGroup": {"taskgroup": False},
    "no tool timeout": {"timeout": False},
    "all six": {
        "race": False,
        "events": False,
        "prebuilt": True,
        "cached_policy": True,
        "taskgroup": False,
        "timeout": False,
    },
}


def ablations(turns: int = 1000, repeats: int = REPEATS) -> dict[str, Any]:
    """Per-turn cost with each suspect taken out (interleaved), and the saving against baseline."""
    subjects = {name: ablation_prepare(**kw) for name, kw in ABLATIONS.items()}
    measured = measure_interleaved(subjects, turns, repeats)
    base = measured["baseline (async tool)"].median_us
    return {
        "turns": turns,
        "repeats": repeats,
        "rows": [
            {
                "variant": name,
                "median_us_per_turn": round(m.median_us, 1),
                "min_us_per_turn": round(min(m.runs_us_per_turn), 1),
                "cpu_median_us_per_turn": round(statistics.median(m.cpu_runs_us_per_turn), 1),
                "saving_us": round(base - m.median_us, 1),
                "saving_share": round(1 - m.median_us / base, 3),
            }
            for name, m in measured.items()
        ],
    }


def history_growth(
    turns: int = 100, sizes: tuple[int, ...] = (0, 10_000, 50_000), repeats: int = REPEATS
) -> list[dict[str, Any]]:
    """Per-turn cost of a ``turns``-turn run on a brain already holding ``size`` messages.

    Two clients: ``FunctionClient`` (keeps every request it receives, so every turn's copy of
    the conversation stays alive) and a client that keeps nothing.
    """
    subjects: dict[str, Prepare] = {}
    for size in sizes:
        subjects[f"FunctionClient|{size}"] = ablation_prepare(history=size)
        subjects[f"non-recording client|{size}"] = ablation_prepare(history=size, prebuilt=True)
    measured = measure_interleaved(subjects, turns, repeats)
    rows = []
    for key, m in measured.items():
        client, prefilled = key.split("|")
        rows.append(
            {
                "client": client,
                "history_messages": int(prefilled),
                "turns": turns,
                "median_us_per_turn": round(m.median_us, 1),
                "min_us_per_turn": round(min(m.runs_us_per_turn), 1),
                "cpu_median_us_per_turn": round(statistics.median(m.cpu_runs_us_per_turn), 1),
            }
        )
    return rows


# --- entry points ------------------------------------------------------------------------------


def table(
    prepares: dict[str, Prepare], turns: tuple[int, ...], repeats: int
) -> dict[str, dict[str, Any]]:
    """Rows per subject and T (subjects interleaved at every T), plus growth T_first -> T_last.

    ``growth`` is the ratio of the median per-turn cost at the largest T to that at the
    smallest: 1.0 means the per-turn cost does not depend on how long the history is.
    """
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in prepares}
    for t in turns:
        started = time.perf_counter()
        for name, m in measure_interleaved(prepares, t, repeats).items():
            rows[name].append(m.as_dict())
        took = time.perf_counter() - started
        print(
            f"  [measured T={t} for {', '.join(prepares)} in {took:.0f} s]",
            file=sys.stderr,
            flush=True,
        )
    out: dict[str, dict[str, Any]] = {}
    for name, r in rows.items():
        first, last = r[0]["median_us_per_turn"], r[-1]["median_us_per_turn"]
        cpu_first, cpu_last = r[0]["cpu_median_us_per_turn"], r[-1]["cpu_median_us_per_turn"]
        many = len(r) > 1
        out[name] = {
            "rows": r,
            "growth": round(last / first, 2) if many else None,
            "cpu_growth": round(cpu_last / cpu_first, 2) if many and cpu_first > 0 else None,
        }
    return out


def run(smoke: bool) -> dict[str, Any]:
    """Driver overhead per turn for every loopctl variant, plus snapshot figures.

    ``smoke``: T = 10 and one repeat (structure only, figures meaningless).
    """
    turns = (10,) if smoke else TURNS
    repeats = 1 if smoke else REPEATS
    variants = table(VARIANTS, turns, repeats)
    sizes = (10, 1_000) if smoke else SNAPSHOT_SIZES
    return {
        "turns": list(turns),
        "repeats": repeats,
        "main_variant": MAIN_VARIANT,
        "variants": variants,
        "snapshot": snapshot_sizes(sizes, 1 if smoke else REPEATS),
        "breakdown": breakdown(sizes, 200 if smoke else 2_000),
        "history": history_growth(
            10 if smoke else 100, (0, 1_000) if smoke else (0, 10_000, 50_000), repeats
        ),
        "ablations": ablations(10 if smoke else 1000, repeats),
    }


_GROUPS = (
    ("loopctl/core", "loopctl brain (loopctl/core)"),
    ("loopctl/driver", "loopctl driver (loopctl/driver)"),
    ("loopctl/tools", "loopctl tools (loopctl/tools)"),
    ("loopctl/api", "loopctl api: fold_events (loopctl/api.py)"),
    ("loopctl/testing", "fake model: FunctionClient, reply_events (loopctl/testing)"),
    ("pydantic", "pydantic / pydantic-core (validation, model_dump)"),
    ("SimpleQueue", "thread handoff (to_thread: queue, epoll, futures, threading)"),
    ("epoll", "thread handoff (to_thread: queue, epoll, futures, threading)"),
    ("concurrent/futures", "thread handoff (to_thread: queue, epoll, futures, threading)"),
    ("threading.py", "thread handoff (to_thread: queue, epoll, futures, threading)"),
    ("asyncio", "asyncio (tasks, event loop, wait)"),
    ("json", "json"),
)


def _group(filename: str, funcname: str) -> str:
    where = f"{filename}:{funcname}"
    for needle, label in _GROUPS:
        if needle in where:
            return label
    return "other (builtins, contextvars, benchmark)"


def profile_data(turns: int = 1000, *, is_async: bool = False, top: int = 20) -> dict[str, Any]:
    """cProfile of one run: share of own time by area, and the top functions by own time.

    cProfile inflates code that makes many small calls; read the shares as where calls pile
    up, and the ablations (which need no profiler) as what removing a cost really saves.
    """
    prepare = loopctl_prepare(is_async=is_async)
    go = prepare(turns, Counter())
    profiler = cProfile.Profile()

    async def main() -> None:
        await asyncio.get_running_loop().run_in_executor(None, int)
        profiler.enable()
        try:
            await go()
        finally:
            profiler.disable()

    asyncio.run(main())
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    groups: dict[str, float] = {}
    rows = []
    for (filename, line, funcname), (_cc, ncalls, tottime, cumtime, _callers) in raw.items():
        label = _group(filename, funcname)
        groups[label] = groups.get(label, 0.0) + tottime
        short = "/".join(filename.split("/")[-2:])
        rows.append((tottime, ncalls, cumtime, f"{short}:{line}({funcname})"))
    rows.sort(reverse=True)
    return {
        "turns": turns,
        "tool": "async" if is_async else "sync",
        "profiled_us_per_turn": round(total / turns * 1e6, 1),
        "share_by_area": {
            k: round(v / total, 3) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])
        },
        "top_functions": [
            {
                "function": name,
                "own_share": round(tt / total, 3),
                "calls_per_turn": round(n / turns, 2),
                "cum_us_per_turn": round(ct / turns * 1e6, 1),
            }
            for tt, n, ct, name in rows[:top]
        ],
    }


def profile(turns: int = 1000, *, is_async: bool = False, top: int = 25) -> str:
    """cProfile of one run of ``turns`` turns (tottime and cumulative views), as pstats text."""
    prepare = loopctl_prepare(is_async=is_async)
    go = prepare(turns, Counter())
    profiler = cProfile.Profile()

    async def main() -> str:
        profiler.enable()
        try:
            return await go()
        finally:
            profiler.disable()

    asyncio.run(main())
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_driver")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--profile", action="store_true", help="cProfile one run: shares")
    parser.add_argument("--raw-profile", action="store_true", help="cProfile one run: pstats")
    parser.add_argument("--async-tool", action="store_true", help="profile the async tool")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--breakdown", action="store_true", help="time the pieces of a turn")
    parser.add_argument("--ablations", action="store_true", help="take each suspect out")
    parser.add_argument("--history", action="store_true", help="per-turn cost vs prefilled history")
    args = parser.parse_args(argv)
    if args.profile:
        print(json.dumps(profile_data(args.turns, is_async=args.async_tool), indent=2))
        return
    if args.raw_profile:
        print(profile(args.turns, is_async=args.async_tool))
        return
    if args.breakdown:
        print(json.dumps(breakdown(), indent=2))
        return
    if args.ablations:
        print(json.dumps(ablations(args.turns), indent=2))
        return
    if args.history:
        print(json.dumps(history_growth(), indent=2))
        return
    from benchmarks.report import print_driver, render

    result = run(args.smoke)
    print_driver(result)
    print("  snapshot:")
    print("\n".join(render(result["snapshot"], "    ")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
