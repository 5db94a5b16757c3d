"""``python -m benchmarks [--smoke] [--json out.json] [--only NAME ...]``: all benchmarks.

Sections (``--only`` takes these names):

- ``brain``    the brain's cost per turn against history size (``benchmarks.bench_brain``);
- ``driver``   loopctl's driver overhead per tool-using turn, three variants, its growth with the
               history, and where a turn's time goes (``bench_driver``, ``bench_turn``);
- ``peers``    loopctl beside pydantic-ai, the OpenAI Agents SDK and LangGraph, same workload, one
               invocation (``bench_peers``); peers that are not installed are skipped with a note;
- ``snapshot`` snapshot size and save / restore time against history size, and save + restore
               of 10,000 messages in both shapes, first in a process included (``bench_snapshot``);
- ``replay``   replay throughput and memory (``benchmarks.bench_replay``);
- ``fuzz``     simulation / fuzz throughput (``benchmarks.bench_fuzz``).

A section whose module is missing is skipped with a printed note. A section that raises is
reported (its error goes into the JSON) and the exit status is 1. The JSON (default
``benchmarks/out/results.json``) holds every section's full result, the machine and the package
versions. The printed goals are ratios measured side by side in one run, never figures in us
(those move with the phase of a shared machine): a driver turn at most 1/20 of the fastest
peer's with the default (worker-thread) sync tool and at most 1/40 with an async or inline sync
tool (T = 100, runs paired by round), the turn flat to 10,000 messages (paired growth at most
1.1x), a traced simulated run at most twice the untraced one (``bench_fuzz_driver``). The
budgets the other sections state are printed beside them: save + restore of 10,000 messages
(40 ms, the first restore in a process included), the brain's flatness and save + restore,
replay at least 100,000 records/s, and the simulated runs per CPU second of ``bench_fuzz``.

``--smoke`` runs everything at its smallest size (T = 10, one repeat) in a few seconds, for CI:
the figures are meaningless then, only the structure is checked.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import platform
import sys
import sysconfig
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import bench_driver, bench_peers, bench_snapshot
from benchmarks.report import print_driver, print_peers, render

SECTIONS = ("brain", "driver", "peers", "snapshot", "replay", "fuzz")
DEFAULT_JSON = Path(__file__).parent / "out" / "results.json"

# The project's speed goals are ratios measured side by side in one run (docs/performance.md,
# "Goals"): against the fastest peer (``bench_peers.GOALS``, judged at T = 100), the turn against
# itself on a long history, and a traced simulated run against an untraced one
# (``bench_fuzz_driver.TRACED_COST_LIMIT``). A figure in us depends on the phase of a shared
# machine; a ratio of two runs taken side by side does not.
PEER_GOAL_TURNS = 100
HISTORY_MESSAGES = 10_000
HISTORY_GROWTH_LIMIT = 1.1  # a turn on 10,000 messages against one on none, paired by round
# the budgets the other sections state (not speed goals of the driver)
REPLAY_RECORDS_PER_S = 100_000


class Skipped(Exception):
    """A section cannot run here (its module is missing); not an error."""


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise Skipped(f"{module} does not exist here") from None
        raise


def _external(module: str) -> Callable[[bool], dict[str, Any]]:
    def section(smoke: bool) -> dict[str, Any]:
        mod = _optional(module)
        fn = getattr(mod, "run", None)
        if fn is None:
            raise Skipped(f"{module} has no run(smoke) function")
        result = fn(smoke)
        return result if isinstance(result, dict) else {"result": result}

    return section


RUNNERS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "brain": _external("benchmarks.bench_brain"),
    "driver": bench_driver.run,
    "peers": bench_peers.run,
    "snapshot": bench_snapshot.run,
    "replay": _external("benchmarks.bench_replay"),
    "fuzz": _external("benchmarks.bench_fuzz"),
}


# --- the machine -------------------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        # Which build of the interpreter ran: the same version built with and without PGO and
        # LTO differed by about 20 % a turn here (docs/performance.md, "The machine"). A build's own
        # config variables do not say reliably whether it was optimised (Debian's do not show
        # its PGO), so the path and configure arguments are kept for the reader to judge.
        "python_executable": os.path.realpath(sys.executable),
        "python_configure": sysconfig.get_config_var("CONFIG_ARGS"),
        "platform": platform.platform(),
        "load_avg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "versions": bench_peers.versions(),
    }


# --- running -----------------------------------------------------------------------------------


def run_all(
    smoke: bool,
    only: list[str] | None = None,
    on_section: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the chosen sections; every section's result (or skip note, or error) in one dict.

    ``on_section`` receives the partial result after every section (the entry point writes the
    JSON each time, so a long run that is interrupted keeps what it measured).
    """
    chosen = only or list(SECTIONS)
    unknown = [name for name in chosen if name not in RUNNERS]
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    out: dict[str, Any] = {"smoke": smoke, "machine": machine_info(), "sections": {}}
    for name in chosen:
        started = time.perf_counter()
        entry: dict[str, Any]
        try:
            entry = {"status": "ok", "result": RUNNERS[name](smoke)}
        except Skipped as exc:
            entry = {"status": "skipped", "note": str(exc)}
        except Exception as exc:
            entry = {
                "status": "error",
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(),
            }
        entry["seconds"] = round(time.perf_counter() - started, 2)
        out["sections"][name] = entry
        print(f"  [{name}: {entry['status']} in {entry['seconds']} s]", file=sys.stderr, flush=True)
        if on_section is not None:
            on_section(out)
    out["goals"] = evaluate_goals(out["sections"])
    out["budgets"] = evaluate_budgets(out["sections"])
    return out


def _target(
    name: str, value: float | None, limit: float, unit: str, below: bool = True
) -> dict[str, Any]:
    sign = "<=" if below else ">="
    if value is None:
        return {"target": f"{name} {sign} {limit:g}{unit}", "met": None}
    met = value <= limit if below else value >= limit
    return {"target": f"{name} {sign} {limit:g}{unit}", "detail": f"{value:g}{unit}", "met": met}


def _fraction(limit: float) -> str:
    return f"1/{round(1 / limit)}"


def judge_peers(peers: dict[str, Any]) -> dict[str, Any]:
    """A driver turn against the fastest peer's, for each of ``bench_peers.GOALS``: judged at
    T = 100, or at the largest T that ran (a smoke run has T = 10 only, and says so)."""
    out: dict[str, Any] = {}
    for name, (flavour, subject, limit) in bench_peers.GOALS.items():
        key = f"driver_{name}_vs_peer"
        target = f"{subject}, {flavour} tool: turn / fastest peer's <= {_fraction(limit)}"
        judged = {t: v for t, v in peers["result"]["goals"].get(name, {}).items() if t.isdigit()}
        if not judged or all(v.get("fastest_peer") is None for v in judged.values()):
            out[key] = {"target": target, "met": None, "detail": "no peer installed"}
            continue
        turns = str(PEER_GOAL_TURNS) if str(PEER_GOAL_TURNS) in judged else max(judged, key=int)
        row = judged[turns]
        out[key] = {
            "target": f"{target} (T = {turns})",
            "ratio": row["ratio"],
            "detail": (
                f"{row['ratio']:.3f} of {row['fastest_peer']} "
                f"({row['loopctl_us']:.1f} / {row['fastest_peer_us']:.1f} us, paired by round)"
            ),
            "met": row["ratio"] <= limit,
        }
    return out


def judge_history(driver: dict[str, Any]) -> dict[str, Any]:
    """The turn flat in the history: a turn on a brain holding 10,000 messages against one on
    an empty brain, paired by round (``bench_driver.history_growth``); n/a when the run did not
    reach 10,000 messages (``--smoke``)."""
    history = driver["result"].get("history", [])
    last = history[-1] if len(history) > 1 else None
    reached = last is not None and last["history_messages"] >= HISTORY_MESSAGES
    target = f"turn on {HISTORY_MESSAGES:,} messages / on none (paired)"
    judged = _target(
        target, last["growth"] if last and reached else None, HISTORY_GROWTH_LIMIT, "x"
    )
    if last is not None and not reached:
        judged["detail"] = f"measured to {last['history_messages']:,} messages only"
    return judged


def judge_traced(fuzz: dict[str, Any]) -> dict[str, Any]:
    """What a trace costs a simulated run: ``driver_sim`` / ``driver_sim_traced`` CPU rates of
    ``bench_fuzz_driver``, paired window by window."""
    driver = fuzz["result"].get("driver", {})
    limit = driver.get("goal_traced_cost_ratio", 2.0)
    return _target("traced simulated run / untraced", driver.get("traced_cost_ratio"), limit, "x")


def evaluate_goals(sections: dict[str, Any]) -> dict[str, Any]:
    """The project's speed goals, every one a ratio, judged from whatever sections ran."""
    goals: dict[str, Any] = {}
    if sections.get("peers", {}).get("status") == "ok":
        goals.update(judge_peers(sections["peers"]))
    if sections.get("driver", {}).get("status") == "ok":
        goals["driver_flat"] = judge_history(sections["driver"])
    if sections.get("fuzz", {}).get("status") == "ok":
        goals["traced_run"] = judge_traced(sections["fuzz"])
    return goals


def evaluate_budgets(sections: dict[str, Any]) -> dict[str, Any]:
    """The budgets the other sections state (save + restore, replay and simulation rates),
    judged beside the goals."""
    out: dict[str, Any] = {}
    snapshot = sections.get("snapshot", {})
    if snapshot.get("status") == "ok":
        for row in snapshot["result"].get("save_restore", []):
            if row["messages"] < 10_000:
                continue
            worst = max(row["first_total_ms"], row["total_ms"])
            out[f"save_restore_{row['shape'].replace(' ', '_').replace('-', '_')}"] = _target(
                f"save + restore, {row['shape']}, first in a process or not",
                worst,
                row["goal_ms"],
                " ms",
            )
    brain = sections.get("brain", {})
    if brain.get("status") == "ok":
        out.update(judge_brain(brain["result"]))
    replay = sections.get("replay", {})
    if replay.get("status") == "ok":
        out["replay"] = judge_replay(replay["result"])
    fuzz = sections.get("fuzz", {})
    if fuzz.get("status") == "ok":
        out["fuzz"] = judge_fuzz(fuzz["result"])
    return out


def judge_brain(result: dict[str, Any]) -> dict[str, Any]:
    """The brain's own goals as ``bench_brain`` states them (skipped if its keys changed)."""
    out: dict[str, Any] = {}
    targets = result.get("goals", {})
    ratio = result.get("turn_ratio_10k_10")
    if ratio is not None and "turn_ratio_10k_10" in targets:
        out["brain_flat"] = {
            "target": f"brain turn 10k / 10 messages <= {targets['turn_ratio_10k_10']}",
            "detail": f"ratio {ratio:.2f}",
            "met": ratio <= targets["turn_ratio_10k_10"],
        }
    total = result.get("save_restore_ms")
    if total is not None and "save_restore_ms" in targets:
        out["brain_save_restore"] = {
            "target": f"save + restore 10k messages <= {targets['save_restore_ms']} ms",
            "detail": f"{total:.1f} ms",
            "met": total <= targets["save_restore_ms"],
        }
    return out


_RATE_KEYS = ("replay_rate", "records_per_s")


def _row_rate(row: dict[str, Any]) -> float | None:
    for key in _RATE_KEYS:
        value = row.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def judge_replay(result: dict[str, Any]) -> dict[str, Any]:
    """Replay throughput against the goal, per trace shape (slowest size of each shape).

    ``bench_replay`` rows carry ``shape`` and the end-to-end rate in records/s (``replay_rate``
    or ``records_per_s``). The goal is judged on the ``compacting`` shape (a bounded history, a
    long-lived agent) when present; other shapes are shown beside it.
    """
    rows = [r for r in result.get("rows", []) if isinstance(r, dict) and _row_rate(r) is not None]
    target = f">= {REPLAY_RECORDS_PER_S:,} records/s"
    if not rows:
        return {"target": target, "met": None, "detail": "no replay rate found in the result"}
    by_shape: dict[str, float] = {}
    for r in rows:
        shape = str(r.get("shape", "all"))
        rate = _row_rate(r)
        assert rate is not None
        by_shape[shape] = min(by_shape.get(shape, float("inf")), rate)
    judged = by_shape.get("compacting", min(by_shape.values()))
    return {
        "target": f"{target} (compacting traces, slowest size)",
        "slowest_records_per_s": judged,
        "slowest_by_shape": by_shape,
        "met": judged >= REPLAY_RECORDS_PER_S,
    }


def judge_fuzz(result: dict[str, Any]) -> dict[str, Any]:
    """The fuzz bench's own verdict (``meets_goal``) with its figures, if it states one."""
    goal = {k: v for k, v in result.items() if k.startswith("goal")}
    rate = {k: v for k, v in result.items() if k.endswith("per_s") and not k.startswith("goal")}
    met = result.get("meets_goal")
    return {
        "target": ", ".join(f"{k} {v}" for k, v in goal.items()) or "(stated by bench_fuzz)",
        "detail": ", ".join(f"{k} {v}" for k, v in rate.items()),
        "met": met if isinstance(met, bool) else None,
    }


# --- printing ----------------------------------------------------------------------------------


def print_report(out: dict[str, Any]) -> None:
    m = out["machine"]
    smoke = " (SMOKE: sizes minimal, figures meaningless)" if out["smoke"] else ""
    print(f"loopctl benchmarks{smoke}")
    print(f"  {m['cpu']}, {m['nproc']} CPUs, Python {m['python']}, load {m['load_avg']}")
    print("  " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()))
    for name, entry in out["sections"].items():
        print()
        print(f"== {name} ({entry['seconds']} s) ==")
        if entry["status"] == "skipped":
            print(f"  note: skipped: {entry['note']}")
            continue
        if entry["status"] == "error":
            print(f"  ERROR: {entry['error']}")
            continue
        result = entry["result"]
        if name == "driver":
            print_driver(result)
        elif name == "peers":
            print_peers(result)
        else:
            print("\n".join(render(result)))
    for title, key in (("goals (ratios, side by side)", "goals"), ("budgets", "budgets")):
        print()
        print(f"== {title} ==")
        for name, goal in out[key].items():
            print(f"  {name:<24} {_verdict(goal)}")


def _verdict(goal: dict[str, Any]) -> str:
    met = {True: "MET", False: "NOT MET", None: "n/a"}[goal["met"]]
    detail = goal.get("detail", "")
    if not detail and "slowest_by_shape" in goal:
        detail = "slowest: " + ", ".join(
            f"{k} {v:,.0f}/s" for k, v in goal["slowest_by_shape"].items()
        )
    return f"{met:<8} {goal.get('target', '')}  {detail}".rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--smoke", action="store_true", help="smallest sizes, one repeat (CI)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"default {DEFAULT_JSON}")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, metavar="NAME", help=str(SECTIONS))
    args = parser.parse_args(argv)
    args.json.parent.mkdir(parents=True, exist_ok=True)

    def save(partial: dict[str, Any]) -> None:
        args.json.write_text(json.dumps(partial, indent=2, default=str))

    out = run_all(args.smoke, args.only, save)
    print_report(out)
    save(out)
    print(f"\nwrote {args.json}")
    return 1 if any(e["status"] == "error" for e in out["sections"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
