"""Driver-level simulation and fuzz throughput: runs of about 20 turns per second through the
real ``BareLoop`` (the goal: at least 300 per core with cheap tools), and where the
driver's time per turn goes.

    python -m benchmarks.bench_fuzz_driver            # full
    python -m benchmarks.bench_fuzz_driver --smoke    # seconds (CI); figures meaningless
    python -m benchmarks.bench_fuzz_driver --json

Rows (runs/s of 20 turns: 19 tool calls of ``add``, then a final text; one core):

- ``driver_floor``: ``BareLoop`` alone, nothing of the harness: an in-process client whose
  streams are built once, an async tool, no observer: what the driver and the brain cost;
- ``driver_sim``: ``simulate_driver(world)``, the built-in world through the fault layers (the
  harness's client hands each reply over whole, as nobody watches the stream; its middleware
  answers the calls), a fresh world each run;
- ``driver_sim_traced``: the same, with a trace written to memory; ``traced_cost_ratio`` is
  what the trace costs a run (``driver_sim`` / ``driver_sim_traced`` CPU rates, paired window by
  window), at most ``TRACED_COST_LIMIT``;
- ``agent_sim``: ``run_agent`` on an agent whose factory builds a loop with an async ``add``
  tool, the model scripted: the agent harness (the user's factory, ``build_agent``, the fault
  layers put in through ``BareLoop.replace``);
- ``fuzz_seed_driver``: one ``--level driver`` fuzz seed with every check (invariants after
  every step and feed from outside the driver, the determinism twin, the crash variant, heal);
- ``fuzz_seed_agent``: one seed of the sample support agent (``examples.support_agent``; its
  tools are sync, so every call goes through a worker thread) with every check.

Rates are per CPU second of this process (the per-core figure on a shared machine) and per wall
second. The four single-run rows are measured in turns, seven windows of half a second each,
and give the median window with the lowest and highest CPU rate: on this shared VM one row's
figure measured in one go varied by up to 1.5x from run to run, with the bursts of load of the
machine's other tenants. ``profile`` is cProfile's own time of ``driver_sim`` by package and
by function: where a simulated turn's time goes.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from benchmarks.bench_driver import paired_ratio
from loopctl import BareLoop, Message, RunConfig, ToolCall, tool
from loopctl.api import ApiClient, ModelRequest, StreamEvent, reply_events
from loopctl.observe import LoopObserver
from loopctl_sim import fuzz as fz
from loopctl_sim.fuzz.agent_case import case_for
from loopctl_sim.sim import AgentWorld, run_agent, simulate_driver
from loopctl_sim.sim.world import ModelScript, World

GOAL = 300
#: A traced simulated run costs at most this many untraced ones (``traced_cost_ratio``: the
#: trace writer should cost no more than the driver it records).
TRACED_COST_LIMIT = 2.0
TURNS = 20
SAMPLE_AGENT = "examples.support_agent.agent:build"


@tool
async def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def replies(turns: int = TURNS) -> list[Message]:
    """``turns`` model replies: each but the last one ``add`` call, the last a final text."""
    calls = [
        Message.assistant(
            f"step {i}", [ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": 1})]
        )
        for i in range(turns - 1)
    ]
    return [*calls, Message.assistant("done")]


def _add(args: dict[str, Any]) -> str:
    return str(args.get("a", 0) + args.get("b", 0))


def make_world(turns: int = TURNS) -> World:
    from loopctl.core import MachinePolicy

    return World(
        input="count",
        model=ModelScript(replies(turns)),
        tools={"add": _add},
        policy=MachinePolicy(max_turns=turns + 5),
        name="bench-driver",
    )


class _Prebuilt:
    """A client whose replies' streams were built once (the floor: no harness in the turn)."""

    def __init__(self, streams: Sequence[list[StreamEvent]]) -> None:
        self.streams = streams
        self.next = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        events = self.streams[self.next]
        self.next += 1
        for event in events:
            yield event


_STREAMS = [reply_events(m) for m in replies()]


def driver_floor() -> BareLoop:
    loop = BareLoop(_Prebuilt(_STREAMS), [add], RunConfig(max_turns=TURNS + 5))
    loop.run_sync("count")
    return loop


def bench_agent(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    """The agent of ``agent_sim``: a factory as a user writes one."""
    assert client is not None
    return BareLoop(client, [add], RunConfig(max_turns=TURNS + 5), observers=observers)


def _rate(fn: Callable[[], Any], seconds: float, min_runs: int) -> tuple[float, float, int]:
    from benchmarks.bench_fuzz import _rate as rate

    return rate(fn, seconds, min_runs)


def _interleaved(
    subjects: dict[str, Callable[[], Any]], windows: int, seconds: float, min_runs: int
) -> dict[str, dict[str, Any]]:
    """Each subject's rates over ``windows`` windows of ``seconds`` each (``min_runs`` calls at
    least), the subjects taking turns window by window (the order rotating every round): a
    burst of load from another tenant of a shared machine then falls on every subject alike
    and on a few windows of each, not on one subject's whole measurement. The figures are the
    medians of the windows, with the lowest and highest CPU rate beside them."""
    names = list(subjects)
    walls: dict[str, list[float]] = {n: [] for n in names}
    cpus: dict[str, list[float]] = {n: [] for n in names}
    counts: dict[str, int] = dict.fromkeys(names, 0)
    for window in range(windows):
        shift = window % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu, n = _rate(subjects[name], seconds, min_runs)
            walls[name].append(wall)
            cpus[name].append(cpu)
            counts[name] += n
    return {
        name: {
            "runs_per_s": round(statistics.median(walls[name]), 1),
            "runs_per_cpu_s": round(statistics.median(cpus[name]), 1),
            "cpu_low": round(min(cpus[name]), 1),
            "cpu_high": round(max(cpus[name]), 1),
            "windows": windows,
            "cpu_windows": [round(x, 1) for x in cpus[name]],
            "runs": counts[name],
        }
        for name in names
    }


def run(smoke: bool) -> dict[str, Any]:
    """Measure every row; ``smoke`` keeps it to a second or two."""
    from benchmarks.bench_fuzz import _profile

    seconds = 0.05 if smoke else 2.0
    min_runs = 3 if smoke else 40
    rows: list[dict[str, Any]] = []

    def row(name: str, fn: Callable[[], Any], min_n: int = min_runs) -> dict[str, Any]:
        rate, cpu_rate, n = _rate(fn, seconds, min_n)
        r = {"name": name, "runs_per_s": round(rate, 1), "runs_per_cpu_s": round(cpu_rate, 1)}
        rows.append({**r, "runs": n})
        return r

    floor = driver_floor()
    assert floor.machine.turns_taken == TURNS
    check = simulate_driver(make_world())
    assert check.tool_calls == TURNS - 1 and check.machine.turns_taken == TURNS
    world = AgentWorld(bench_agent, "count", script=replies())
    assert run_agent(world).tool_calls == TURNS - 1
    measured = _interleaved(
        {
            "driver_floor": driver_floor,
            "driver_sim": lambda: simulate_driver(make_world()),
            "driver_sim_traced": lambda: simulate_driver(make_world(), io.StringIO()),
            "agent_sim": lambda: run_agent(world),
        },
        windows=1 if smoke else 7,
        seconds=seconds if smoke else 0.5,
        min_runs=min_runs if smoke else 10,
    )
    rows.extend({"name": name, **figures} for name, figures in measured.items())
    sim = measured["driver_sim"]
    # what tracing costs a run: untraced rate / traced rate, paired window by window
    traced_cost = paired_ratio(sim["cpu_windows"], measured["driver_sim_traced"]["cpu_windows"])

    def seed_row(name: str, config: fz.FuzzConfig) -> None:
        """One fuzz seed per call, every check (seeds 0, 1, 2...; each must pass)."""
        seeds = iter(range(10**9))
        runs: list[int] = []

        def one_seed() -> None:
            result = fz.check(case_for(next(seeds), config), None, config)
            assert result.failure is None, result.failure
            runs.append(result.runs)

        r = row(name, one_seed, 3 if smoke else 20)
        rows[-1]["sim_runs_per_cpu_s"] = round(r["runs_per_cpu_s"] * sum(runs) / len(runs), 1)

    seed_row("fuzz_seed_driver", fz.FuzzConfig(level="driver"))
    seed_row("fuzz_seed_agent", fz.FuzzConfig(agent=SAMPLE_AGENT))
    profile = _profile(lambda: simulate_driver(make_world()), 10 if smoke else 150, top=14)
    floor_profile = _profile(driver_floor, 10 if smoke else 150, top=10)
    return {
        "goal_driver_runs_per_s_per_core": GOAL,
        "turns": TURNS,
        "python": sys.version.split()[0],
        "smoke": smoke,
        "rows": rows,
        "driver_runs_per_cpu_s": sim["runs_per_cpu_s"],
        "driver_runs_per_s": sim["runs_per_s"],
        "meets_driver_goal": sim["runs_per_cpu_s"] >= GOAL,
        "traced_cost_ratio": round(traced_cost, 2),
        "goal_traced_cost_ratio": TRACED_COST_LIMIT,
        "profile": profile,
        "floor_profile": floor_profile,
    }


def table(report: dict[str, Any]) -> str:
    out = [f"{'row':<22}{'runs/s':>10}{'runs/cpu-s':>12}{'cpu us/turn':>13}  notes"]
    for r in report["rows"]:
        us = 1e6 / r["runs_per_cpu_s"] / report["turns"] if r["runs_per_cpu_s"] else 0
        notes = ""
        if "sim_runs_per_cpu_s" in r:
            notes = f"= {r['sim_runs_per_cpu_s']} simulated runs/cpu-s (every check)"
            us = 0
        cell = f"{us:>13.0f}" if us else f"{'':>13}"
        if "cpu_low" in r and r["windows"] > 1:
            notes = f"median of {r['windows']} windows; cpu {r['cpu_low']}-{r['cpu_high']}"
        out.append(f"{r['name']:<22}{r['runs_per_s']:>10}{r['runs_per_cpu_s']:>12}{cell}  {notes}")
    verdict = "meets" if report["meets_driver_goal"] else "below"
    out.append(
        f"goal {report['goal_driver_runs_per_s_per_core']} driver-level runs/s per core "
        f"({report['turns']} turns): driver_sim {report['driver_runs_per_cpu_s']} per CPU "
        f"second, {verdict} the goal"
    )
    for title, key in (
        ("driver_sim", "profile"),
        ("driver_floor (no harness)", "floor_profile"),
    ):
        out.append(f"where a {title} run's time goes (cProfile, own time, by package):")
        for k, v in list(report[key]["by_package"].items())[:10]:
            out.append(f"  {k:<40}{v:>7.1%}")
    out.append("top functions of driver_sim:")
    for f in report["profile"]["top_functions"]:
        out.append(
            f"  {f['function']:<60}{f['tottime_share']:>7.1%}  {f['calls_per_run']} calls/run"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="seconds, meaningless figures")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.smoke)
    print(json.dumps(report, indent=2) if args.json else table(report))


if __name__ == "__main__":
    main()
