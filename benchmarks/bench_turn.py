"""Where a loopctl turn's time goes: its pieces, each timed alone, beside the turn as measured.

The turn is one tool-using turn of ``bench_driver``'s run (``FunctionClient``, one ``add`` call,
async tool, T = 100). Each piece is what the driver does once per such turn (or as noted), run
alone in a loop on the same objects, best of 5 batches (timeit's rule: on a shared machine the
least disturbed figure): the fake model's reply (whole, as the driver asks for it when nobody
watches the stream; a loopctl without ``whole_reply`` streams it and folds the events), the
request, the brain's feeds and steps, the policy, dispatch (and within it argument validation),
the results message and token estimates, the run's usage, and the observers (one no-op
observer's cost per turn: the median difference of whole runs with and without it, paired by
round). ``rest`` is the measured turn's best run less the pieces that make it up (best set
against best): the driver's own glue (its frames, the feeds' calls, the awaits).

The pieces are timed through loopctl's public seams (``fold_events``, ``dispatch``, the
brain's feeds, ``BareLoop.policy``), so this module also measures an older loopctl: where a
piece is done differently (the request, the results message, the usage) each version is
timed the way it does it, and a piece it lacks (``inline``, the worker threads) is ``None``.

    python -m benchmarks.bench_turn            # full
    python -m benchmarks.bench_turn --smoke    # seconds (CI); figures meaningless
    python -m benchmarks.bench_turn --profile  # cProfile of one T = 1000 run: shares by area
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from benchmarks.bench_driver import (
    Counter,
    _reply,
    add_tool,
    loopctl_prepare,
    measure_interleaved,
    paired_difference,
    prefilled,
    tool_arguments,
)
from loopctl import BareLoop, LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
from loopctl.api import ModelRequest, Usage, fold_events
from loopctl.driver.estimate import CharEstimator
from loopctl.testing import FunctionClient, reply_events
from loopctl.tools import ToolRegistry, dispatch
from loopctl.tools.decorator import encode_result

__all__ = [
    "BRAIN_POLICY",
    "IN_THE_TURN",
    "brain_inputs",
    "brain_turns",
    "pieces",
    "profile_data",
    "run",
]

TURNS = 100
#: The pieces that make up the measured turn (``rest`` is the turn less these).
IN_THE_TURN = (
    "model",
    "request",
    "brain",
    "policy",
    "dispatch",
    "results",
    "usage",
)


def _best_us(fn: Callable[[], Any], n: int, repeats: int = 5) -> float:
    """The fastest of ``repeats`` batches of ``n`` calls, in us per call."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return min(samples)


async def _best_await_us(make: Callable[[], Awaitable[Any]], n: int, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(n):
            await make()
        samples.append((time.perf_counter() - started) / n * 1e6)
    return min(samples)


def _request(machine: LoopMachine, loop: BareLoop) -> Callable[[], Any]:
    """How this loopctl builds a request: ``model_request`` (the conversation as a view), an
    older loop's ``_request``, or the old copy of the conversation."""
    try:
        from loopctl.driver.model import model_request
    except ImportError:  # an older loopctl
        build = getattr(loop, "_request", None)
        if build is not None:
            loop._machine = machine
            return lambda: build(1)
    else:
        registry, session = loop.registry, loop.session
        return lambda: model_request(machine, registry, session, 1)
    return lambda: ModelRequest.model_construct(
        messages=tuple(machine.messages()),  # type: ignore[arg-type]
        tools=loop.registry.specs(),
        system=None,
        options=dict(loop.session.options),
        turn=1,
    )


def _results_message(results: list[ToolResult]) -> Callable[[], Any]:
    """How the driver makes an exchange's results message."""
    return lambda: Message.from_results(results)


def _usage(turns: int) -> Callable[[], Any]:
    """The run's usage, per turn: a sum once at the end (``Usage.total``) or a ``+`` a turn."""
    one = Usage()
    total = getattr(Usage, "total", None)
    if total is None:
        return lambda: one + one
    usages = [one] * turns
    return lambda: total(usages)  # timed per run below: divided by the turns


#: The policy of the brain's benchmark turns: the ``add`` tool, no turn limit in reach.
BRAIN_POLICY = MachinePolicy(tools=("add",), max_turns=10**9)


def brain_inputs(n: int) -> list[tuple[Message, Message]]:
    """The replies and results messages of ``n`` brain turns (call ``call_i`` of ``add``)."""
    return [
        (
            _reply(i, 10**9),
            Message.from_results([ToolResult(call_id=f"call_{i}", name="add", content=str(i + 1))]),
        )
        for i in range(1, n + 1)
    ]


def brain_turns(machine: LoopMachine, inputs: Iterable[tuple[Message, Message]]) -> None:
    """The brain's part of a tool-using turn, once per input, as the driver feeds it:
    next_step, model_response, next_step, tool_results with the context count."""
    for reply, result in inputs:
        machine.next_step(BRAIN_POLICY)
        machine.model_response(reply, 100)
        machine.next_step(BRAIN_POLICY)
        machine.tool_results(result, 120)


def _brain_turn(n: int) -> float:
    """The brain's part of a turn (``brain_turns``), every message built beforehand (us per
    turn)."""
    inputs = brain_inputs(n)
    best = float("inf")
    for _ in range(5):
        machine = LoopMachine()
        machine.accept_input("add some numbers")
        started = time.perf_counter()
        brain_turns(machine, inputs)
        best = min(best, (time.perf_counter() - started) / n * 1e6)
    return best


def pieces(n: int = 2_000) -> dict[str, float | None]:
    """Each piece of a tool-using turn, timed alone (us per turn); ``None``: not in this
    loopctl."""
    counter = Counter()
    loop = BareLoop(FunctionClient(lambda r: Message.assistant("")), [add_tool(counter, "async")])
    call = ToolCall(id="call_1", name="add", arguments=tool_arguments(1))
    reply = Message.assistant(tool_calls=[call])
    result = ToolResult(call_id="call_1", name="add", content="2")
    results_message = Message.from_results([result])
    events = list(reply_events(reply))
    add = loop.registry.get("add")
    assert add is not None
    estimator = CharEstimator()
    registries: dict[str, ToolRegistry | None] = {}
    for kind in ("async", "inline", "thread"):
        try:
            registries[kind] = ToolRegistry([add_tool(counter, kind)])
        except TypeError:  # a loopctl without inline tools
            registries[kind] = None
    small, large = LoopMachine(prefilled(10)), LoopMachine(prefilled(10_000))
    usage_per_run = _usage(TURNS)
    whole = hasattr(FunctionClient, "whole_reply")  # this loopctl hands a reply over whole
    out: dict[str, float | None] = {
        # a watched stream is folded; a reply taken whole (``whole_reply``) is not
        "fold of a watched stream": _best_us(lambda: fold_events(events), n),
        "request": _best_us(_request(small, loop), n),
        "request at 10,000 messages": _best_us(_request(large, loop), n // 4),
        "brain": _brain_turn(n),
        "policy": 2 * _best_us(loop.policy, n),
        "validation": _best_us(lambda: add.parse_arguments(call.arguments), n),
        "result encoding": _best_us(lambda: encode_result("add", 2), n),
        "results": _best_us(_results_message([result]), n)
        + _best_us(lambda: estimator.count([reply]), n)
        + _best_us(lambda: estimator.count([results_message]), n),
        "usage": _best_us(usage_per_run, n // 10) / (TURNS if getattr(Usage, "total", None) else 1),
    }

    async def awaited() -> dict[str, float | None]:
        client = FunctionClient(lambda r: _reply(1, 10))
        request = ModelRequest(messages=(Message.user("go"),))

        async def stream() -> None:
            async for _ in client.stream(request):
                pass

        async def reply() -> None:
            if whole:
                await client.whole_reply(request)  # type: ignore[attr-defined,unused-ignore]
            else:  # an older loopctl: streamed and folded
                fold_events([event async for event in client.stream(request)])

        timed: dict[str, float | None] = {"model": await _best_await_us(reply, n)}
        timed["stream of a watched reply"] = await _best_await_us(stream, n)
        for kind, registry in registries.items():
            key = "dispatch" if kind == "async" else f"dispatch, {kind} tool"
            if registry is None:
                timed[key] = None
                continue
            timed[key] = await _best_await_us(
                lambda r=registry: dispatch([call], r, default_timeout=60.0),  # type: ignore[misc]
                n if kind != "thread" else n // 10,
            )
        timed["thread hop: asyncio.to_thread"] = await _best_await_us(
            lambda: asyncio.to_thread(int), n // 10
        )
        try:
            from loopctl.tools.threads import run_in_worker
        except ImportError:
            timed["thread hop: loopctl.tools.threads"] = None
        else:
            timed["thread hop: loopctl.tools.threads"] = await _best_await_us(
                lambda: run_in_worker(int), n // 10
            )
        return timed

    out.update(asyncio.run(awaited()))
    return {k: None if v is None else round(v, 2) for k, v in out.items()}


def run(smoke: bool) -> dict[str, Any]:
    """The pieces, the turn as measured (async tool, T = 100, and with one observer), and
    ``rest``: the measured turn less the pieces that make it up."""
    turns = 10 if smoke else TURNS
    repeats = 1 if smoke else 5
    measured = measure_interleaved(
        {
            "turn": loopctl_prepare(kind="async"),
            "turn with one observer": loopctl_prepare(kind="async", observers=1),
        },
        turns,
        repeats,
    )
    plain, observed = measured["turn"], measured["turn with one observer"]
    turn = plain.median_us
    best = min(plain.runs_us_per_turn)
    parts = pieces(200 if smoke else 2_000)
    parts["observers"] = round(
        paired_difference(observed.runs_us_per_turn, plain.runs_us_per_turn), 2
    )
    known = sum(v for k, v in parts.items() if k in IN_THE_TURN and v is not None)
    return {
        "turns": turns,
        "repeats": repeats,
        "measured_us_per_turn": round(turn, 1),
        "measured_best_us_per_turn": round(best, 1),
        "measured_cpu_us_per_turn": round(statistics.median(plain.cpu_runs_us_per_turn), 1),
        "pieces_us": parts,
        "in_the_turn": list(IN_THE_TURN),
        # The pieces are each the best of 5 batches, so they are set against the turn's best
        # run: against its median, a slow phase of the machine during the runs (up to 2x here)
        # would be billed to the glue (28.7 us of a 56.1 us turn in one such run).
        "rest_us": round(best - known, 1),
    }


_GROUPS = (
    ("loopctl/core", "brain (loopctl/core)"),
    ("loopctl/driver", "driver (loopctl/driver)"),
    ("loopctl/tools", "tools (loopctl/tools)"),
    ("loopctl/api", "api: fold_events (loopctl/api.py)"),
    ("loopctl/testing", "fake model: FunctionClient, reply_events (loopctl/testing)"),
    ("pydantic", "pydantic / pydantic-core (validation, model_dump)"),
    ("queue", "thread hop (queue, futures, threading)"),
    ("concurrent/futures", "thread hop (queue, futures, threading)"),
    ("threading.py", "thread hop (queue, futures, threading)"),
    ("asyncio", "asyncio (tasks, event loop)"),
    ("json", "json"),
)


def _group(filename: str, funcname: str) -> str:
    where = f"{filename}:{funcname}"
    for needle, label in _GROUPS:
        if needle in where:
            return label
    return "other (builtins, benchmark)"


def profile_data(turns: int = 1000, *, kind: str = "async", top: int = 20) -> dict[str, Any]:
    """cProfile of one run: share of own time by area, and the top functions by own time.
    cProfile inflates code made of many small calls: read the shares as where calls pile up,
    and ``pieces`` as what each piece costs."""
    go = loopctl_prepare(kind=kind)(turns, Counter())
    profiler = cProfile.Profile()

    async def main() -> None:
        profiler.enable()
        try:
            await go()
        finally:
            profiler.disable()

    asyncio.run(main())
    raw: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    groups: dict[str, float] = {}
    rows = []
    for (filename, line, funcname), (_cc, ncalls, tottime, cumtime, _callers) in raw.items():
        label = _group(filename, funcname)
        groups[label] = groups.get(label, 0.0) + tottime
        rows.append((tottime, ncalls, cumtime, f"{'/'.join(filename.split('/')[-2:])}:{line}"))
    rows.sort(reverse=True)
    return {
        "turns": turns,
        "tool": kind,
        "profiled_us_per_turn": round(total / turns * 1e6, 1),
        "share_by_area": {
            k: round(v / total, 3) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])
        },
        "top_functions": [
            {
                "function": name,
                "own_share": round(tt / total, 3),
                "calls_per_turn": round(n / turns, 2),
            }
            for tt, n, _ct, name in rows[:top]
        ],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_turn")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", help="also write the result here")
    parser.add_argument("--profile", action="store_true", help="cProfile one run: shares")
    parser.add_argument("--kind", default="async", choices=("async", "inline", "thread"))
    args = parser.parse_args(argv)
    result = profile_data(kind=args.kind) if args.profile else run(args.smoke)
    from benchmarks.report import render

    print("\n".join(render(result)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
