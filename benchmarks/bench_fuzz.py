"""Simulation and fuzz throughput: simulated runs of about 20 turns per second, at machine level
here and at driver level in ``benchmarks.bench_fuzz_driver`` (whose rows this report includes).

    python -m benchmarks.bench_fuzz            # full
    python -m benchmarks.bench_fuzz --smoke    # seconds (CI); figures meaningless
    python -m benchmarks.bench_fuzz --json

Rows, all on one core unless said otherwise (runs/s = simulated runs of 20 turns per second):

- ``brain_only``: the same 20 turns fed straight to a ``LoopMachine`` (prebuilt replies and
  results): the floor any simulator pays;
- ``sim_scripted_tokens``: ``simulate(world)``, the model's context counts scripted;
- ``sim``: ``simulate(world)``, the counts estimated from the conversation (the default);
- ``sim_traced``: ``sim`` plus a trace written to memory;
- ``fuzz_seed``: one fuzz seed with every check (invariants after every step and feed, the
  determinism twin, the crash variant, the heal run): seeds/s and simulated runs/s;
- ``campaign``: ``run_campaign`` over all cores (not in smoke mode).

Rates are given per wall second and per CPU second of the benchmark process; the goal is judged
on the CPU rate, which other load on a shared machine does not depress.

The goals are 500 machine-level simulated runs/s per core (``sim``) and 300 driver-level ones
(``driver_sim``); ``meets_goal`` is both. ``profile`` lists where a ``sim`` run spends
its time (cProfile, by function and by package), so a figure below the goal says why.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import bench_fuzz_driver
from loopctl.core import LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
from loopctl_sim import fuzz as fz
from loopctl_sim.fuzz.checks import CREATED
from loopctl_sim.sim.machine import simulate
from loopctl_sim.sim.world import ModelScript, World

GOAL = 500
TURNS = 20


def _add(args: dict[str, Any]) -> str:
    return str(args.get("a", 0) + args.get("b", 0))


def _replies(turns: int) -> list[Message]:
    out = [
        Message.assistant(
            f"step {i}", [ToolCall(id=f"c{i}", name="add", arguments={"a": i, "b": 1})]
        )
        for i in range(turns - 1)
    ]
    return [*out, Message.assistant("done")]


def make_world(turns: int = TURNS, *, scripted_tokens: bool = False) -> World:
    """``turns`` model calls: each but the last one ``add`` call, the last a final text."""
    tokens = [100 + 20 * i for i in range(turns)] if scripted_tokens else []
    return World(
        input="count",
        model=ModelScript(_replies(turns), tokens=tokens),
        tools={"add": _add},
        policy=MachinePolicy(max_turns=turns + 5),
        name="bench-fuzz",
    )


def brain_only(turns: int = TURNS) -> LoopMachine:
    """The same run fed straight to the brain."""
    replies = _replies(turns)
    results = [
        Message.from_results([ToolResult(call_id=f"c{i}", name="add", content=str(i + 1))])
        for i in range(turns - 1)
    ]
    policy = MachinePolicy(max_turns=turns + 5, tools=("add",))
    m = LoopMachine()
    m.accept_input("count")
    i = 0
    while True:
        step = m.next_step(policy)
        if step.kind == "call_llm":
            m.model_response(replies[i], 100 + 20 * i)
        elif step.kind == "call_tools":
            m.tool_results(results[i])
            i += 1
        else:
            m.commit_pending()
            return m


def _rate(fn: Callable[[], Any], seconds: float, min_runs: int) -> tuple[float, float, int]:
    """Calls of ``fn`` per second of wall time and per second of this process's CPU time,
    over at least ``seconds`` and ``min_runs`` calls. The CPU rate is the per-core figure on
    a shared machine (other processes do not slow it down)."""
    fn()  # warm up
    n = 0
    started = time.perf_counter()
    cpu_started = time.process_time()
    elapsed = 0.0
    while n < min_runs or elapsed < seconds:
        fn()
        n += 1
        elapsed = time.perf_counter() - started
    cpu = max(time.process_time() - cpu_started, 1e-9)
    return n / elapsed, n / cpu, n


def _profile(fn: Callable[[], Any], runs: int, top: int = 12) -> dict[str, Any]:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(runs):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values()) or 1.0
    rows = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    functions = [
        {
            "function": f"{_short(path)}:{line}({name})",
            "tottime_share": round(v[2] / total, 3),
            "calls_per_run": round(v[1] / runs, 1),
        }
        for (path, line, name), v in rows
    ]
    by_package: dict[str, float] = defaultdict(float)
    for (path, _, name), v in raw.items():
        by_package[_package(path, name)] += v[2]
    packages = {
        k: round(t / total, 3) for k, t in sorted(by_package.items(), key=lambda kv: -kv[1])
    }
    return {"runs": runs, "top_functions": functions, "by_package": packages}


def _short(path: str) -> str:
    for marker in ("site-packages/", "/loopctl_sim/", "/loopctl/", "lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1] if marker.endswith("/") else path.rsplit("/", 1)[-1]
    return path.rsplit("/", 1)[-1]


def _package(path: str, name: str = "") -> str:
    if "pydantic_core" in name:
        return "pydantic-core (validate, serialize)"
    if "hashlib" in name or "sha256" in name:
        return "hashlib"
    if "pydantic" in path:
        return "pydantic"
    if "/loopctl_sim/" in path:
        return "loopctl_sim." + path.rsplit("/", 1)[-1].removesuffix(".py")
    if "/loopctl/" in path:
        return "loopctl." + path.split("/loopctl/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "pydantic" in path:
        return "pydantic"
    if "/json/" in path:
        return "json"
    if path.startswith("~") or path == "<built-in>":
        return "builtins"
    return "other"


def run(smoke: bool) -> dict[str, Any]:
    """Measure every row; ``smoke`` keeps it to a second or two."""
    seconds = 0.05 if smoke else 2.0
    min_runs = 3 if smoke else 50
    world_plain = make_world()
    rows: list[dict[str, Any]] = []

    def row(name: str, fn: Callable[[], Any], **extra: Any) -> dict[str, Any]:
        rate, cpu_rate, n = _rate(fn, seconds, min_runs)
        r = {
            "name": name,
            "runs_per_s": round(rate, 1),
            "runs_per_cpu_s": round(cpu_rate, 1),
            "runs": n,
            **extra,
        }
        rows.append(r)
        return r

    check = simulate(make_world())
    expected = {"turns": check.machine.turns_taken, "tool_calls": check.tool_calls}
    row("brain_only", brain_only)
    row("sim_scripted_tokens", lambda: simulate(make_world(scripted_tokens=True)))
    sim_row = row("sim", lambda: simulate(make_world()))
    row("sim_traced", lambda: simulate(make_world(), io.StringIO(), created=CREATED))

    seeds = iter(range(10**9))
    sims_per_seed: list[int] = []

    def one_seed() -> None:
        r = fz.check_case(fz.make_case(next(seeds)))
        sims_per_seed.append(r.runs)

    seed_row = row("fuzz_seed", one_seed)
    seed_row["sims_per_seed"] = round(sum(sims_per_seed) / max(len(sims_per_seed), 1), 2)
    seed_row["sim_runs_per_s"] = round(seed_row["runs_per_s"] * seed_row["sims_per_seed"], 1)
    seed_row["sim_runs_per_cpu_s"] = round(
        seed_row["runs_per_cpu_s"] * seed_row["sims_per_seed"], 1
    )

    campaign: dict[str, Any] | None = None
    workers = os.cpu_count() or 1
    if not smoke:
        n_seeds = 400 * workers
        started = time.perf_counter()
        summary = fz.run_campaign(range(n_seeds), workers=workers)
        elapsed = time.perf_counter() - started
        campaign = {
            "workers": workers,
            "seeds": n_seeds,
            "seconds": round(elapsed, 2),
            "seeds_per_s": round(n_seeds / elapsed, 1),
            "simulated_runs_per_s": round(summary.runs / elapsed, 1),
            "failures": len(summary.failures),
        }
    driver = bench_fuzz_driver.run(smoke)
    profile = _profile(lambda: simulate(world_plain), 20 if smoke else 200)
    cases = iter([fz.make_case(s) for s in range(3 if smoke else 60)])
    fuzz_profile = _profile(lambda: fz.check_case(next(cases)), 3 if smoke else 60)
    return {
        "goal_runs_per_s_per_core": GOAL,
        "turns": TURNS,
        "python": sys.version.split()[0],
        "smoke": smoke,
        "expected": expected,
        "rows": rows,
        "sim_runs_per_s": sim_row["runs_per_s"],
        "sim_runs_per_cpu_s": sim_row["runs_per_cpu_s"],
        "goal_driver_runs_per_s_per_core": bench_fuzz_driver.GOAL,
        "driver_runs_per_cpu_s": driver["driver_runs_per_cpu_s"],
        "driver_runs_per_s": driver["driver_runs_per_s"],
        "meets_goal": sim_row["runs_per_cpu_s"] >= GOAL and driver["meets_driver_goal"],
        "driver": driver,
        "campaign": campaign,
        "profile": profile,
        "fuzz_profile": fuzz_profile,
    }


def _table(report: dict[str, Any]) -> str:
    out = [f"{'row':<22}{'runs/s':>10}{'runs/cpu-s':>12}{'cpu us/run':>12}  notes"]
    for r in report["rows"]:
        notes = ""
        if r["name"] == "fuzz_seed":
            notes = f"{r['sims_per_seed']} sims/seed = {r['sim_runs_per_cpu_s']} sim runs/cpu-s"
        us = 1e6 / r["runs_per_cpu_s"] if r["runs_per_cpu_s"] else 0
        out.append(
            f"{r['name']:<22}{r['runs_per_s']:>10}{r['runs_per_cpu_s']:>12}{us:>12.0f}  {notes}"
        )
    c = report["campaign"]
    if c:
        out.append(
            f"campaign: {c['seeds']} seeds on {c['workers']} workers in {c['seconds']} s = "
            f"{c['seeds_per_s']} seeds/s, {c['simulated_runs_per_s']} simulated runs/s, "
            f"{c['failures']} failing"
        )
    verdict = "meets" if report["meets_goal"] else "below"
    out.append(
        f"goal {report['goal_runs_per_s_per_core']} runs/s per core ({report['turns']} turns): "
        f"sim {report['sim_runs_per_cpu_s']} runs per CPU second "
        f"({report['sim_runs_per_s']} per wall second), {verdict} the goal"
    )
    out.append("where a sim run's time goes (cProfile, own time):")
    for k, v in list(report["profile"]["by_package"].items())[:8]:
        out.append(f"  {k:<32}{v:>7.1%}")
    for f in report["profile"]["top_functions"][:8]:
        out.append(
            f"  {f['function']:<60}{f['tottime_share']:>7.1%}  {f['calls_per_run']} calls/run"
        )
    out.append("where a fuzz seed's time goes (cProfile, own time):")
    for k, v in list(report["fuzz_profile"]["by_package"].items())[:8]:
        out.append(f"  {k:<32}{v:>7.1%}")
    out.append("")
    out.append("driver level (benchmarks.bench_fuzz_driver):")
    out.append(bench_fuzz_driver.table(report["driver"]))
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="seconds, meaningless figures")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = run(args.smoke)
    print(json.dumps(report, indent=2) if args.json else _table(report))


if __name__ == "__main__":
    main()
