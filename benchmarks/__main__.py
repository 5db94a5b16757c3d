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
versions; the printed goals compare against the project's targets: loopctl's overhead per turn
at most a tenth of the fastest peer's, per-turn cost flat in history length, replay at least
100,000 records/s; the driver at most 50 us a turn with an async tool and 60 us
with an inline sync tool at T = 100 (and at most 1/20 of the fastest peer), growth at most 1.1x
from T = 100 to 1000 and from 0 to 10,000 messages, save + restore of 10,000 messages at most
40 ms in both shapes (the first restore in a process included), 300 driver-level simulated runs
per CPU second.

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

# the project's targets
OVERHEAD_SHARE = 0.1  # loopctl's per-turn overhead at most this share of the fastest peer's
FLAT_GROWTH = 1.5  # per-turn cost T=10 -> T=1000 at most this factor counts as flat
REPLAY_RECORDS_PER_S = 100_000
# the driver at the brain's speed (T = 100, wall-time medians)
DRIVER_ASYNC_US = 50.0  # async tool, per turn
DRIVER_INLINE_US = 60.0  # sync tool run inline, per turn
PEER_SHARE_ASYNC = 0.05  # async tool: at most 1/20 of the fastest peer
GROWTH_LIMIT = 1.1  # T = 100 -> 1000, and 0 -> 10,000 messages already in the brain


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
    return out


def _row_at(rows: list[dict[str, Any]], turns: int) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("turns") == turns), None)


def _target(name: str, value: float | None, limit: float, unit: str, below: bool = True) -> Any:
    if value is None:
        return {"target": f"{name} {'<=' if below else '>='} {limit:g}{unit}", "met": None}
    met = value <= limit if below else value >= limit
    sign = "<=" if below else ">="
    return {"target": f"{name} {sign} {limit:g}{unit}", "detail": f"{value:g}{unit}", "met": met}


def judge_driver(sections: dict[str, Any]) -> dict[str, Any]:
    """The driver's targets, from the driver, peers, snapshot and fuzz sections that ran."""
    out: dict[str, Any] = {}
    driver = sections.get("driver", {})
    if driver.get("status") == "ok":
        variants = driver["result"]["variants"]
        for key, name, limit in (
            ("driver_async", "async tool", DRIVER_ASYNC_US),
            ("driver_inline", "sync tool, inline", DRIVER_INLINE_US),
        ):
            rows = variants.get(name, {}).get("rows", [])
            at100, at1000 = _row_at(rows, 100), _row_at(rows, 1000)
            value = at100["median_us_per_turn"] if at100 else None
            out[key] = _target(f"{name}, T=100, us per turn", value, limit, " us")
            if at100 and "min_us_per_turn" in at100:
                # Judged on the median; the fastest run beside it tells a slow phase of the
                # machine that lasted the whole row (both slow) from one that began or ended
                # during it (the fastest run quick), and the machine's reference loop says how
                # fast the machine itself was: docs/performance.md, "How to read the figures".
                beside = f"fastest run {at100['min_us_per_turn']:g} us"
                reference = driver["result"].get("machine_reference_ms")
                if reference:
                    beside += (
                        f"; reference loop {min(reference['before']):g} ms before the rows, "
                        f"{min(reference['after']):g} ms after"
                    )
                out[key]["detail"] += f" ({beside})"
            if at100 and at1000:
                growth = round(at1000["median_us_per_turn"] / at100["median_us_per_turn"], 2)
                out[key + "_growth"] = _target(f"{name}, T=100 -> 1000", growth, GROWTH_LIMIT, "x")
        history = driver["result"].get("history", [])
        if len(history) > 1 and history[-1]["history_messages"] >= 10_000:
            out["driver_history_growth"] = _target(
                f"async tool, 0 -> {history[-1]['history_messages']:,} messages",
                history[-1]["growth"],
                GROWTH_LIMIT,
                "x",
            )
    peers = sections.get("peers", {})
    if peers.get("status") == "ok":
        judged = peers["result"]["goals"]["async"].get("100")
        ratio = judged.get("ratio") if judged and judged.get("fastest_peer") else None
        out["driver_async_vs_peer"] = _target(
            "async tool, T=100, loopctl / fastest peer", ratio, PEER_SHARE_ASYNC, ""
        )
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
    fuzz = sections.get("fuzz", {})
    if fuzz.get("status") == "ok" and "driver_runs_per_cpu_s" in fuzz["result"]:
        result = fuzz["result"]
        out["sim_driver"] = _target(
            "driver-level simulated runs per CPU second",
            result["driver_runs_per_cpu_s"],
            result.get("goal_driver_runs_per_s_per_core", 300),
            "",
            below=False,
        )
    return out


def judge_brain(result: dict[str, Any]) -> dict[str, Any]:
    """The brain's own goals as ``bench_brain`` states them (skipped if its keys changed)."""
    out: dict[str, Any] = {}
    targets = result.get("goals", {})
    turn_us = result.get("turn_us")
    if isinstance(turn_us, dict) and "turn_us" in targets:
        worst = max(float(v) for v in turn_us.values())
        out["brain_turn"] = {
            "target": f"brain <= {targets['turn_us']} us per turn at every history size",
            "detail": ", ".join(f"{k} msgs: {float(v):.1f} us" for k, v in turn_us.items()),
            "met": worst <= targets["turn_us"],
        }
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


def evaluate_goals(sections: dict[str, Any]) -> dict[str, Any]:
    """The project's three targets, judged from whatever sections ran."""
    goals: dict[str, Any] = {}
    peers = sections.get("peers", {})
    if peers.get("status") == "ok":
        result = peers["result"]
        for flavour, table in result["tables"].items():
            judged = result["goals"][flavour]
            rows = {k: v for k, v in judged.items() if k != "loopctl_growth"}
            if all(v.get("fastest_peer") is None for v in rows.values()):
                goals[f"overhead_{flavour}_tool"] = {"met": None, "note": "no peer installed"}
                continue
            goals[f"overhead_{flavour}_tool"] = {
                "target": f"loopctl <= {OVERHEAD_SHARE} x fastest peer",
                "per_T": rows,
                "met": all(v["met"] for v in rows.values()),
            }
            growth = table["loopctl"]["growth"]
            goals[f"flat_{flavour}_tool"] = {
                "target": f"loopctl per-turn growth T=10 -> T=1000 <= {FLAT_GROWTH}x",
                "loopctl_growth": growth,
                "loopctl_cpu_growth": table["loopctl"].get("cpu_growth"),
                "peer_growth": {k: v["growth"] for k, v in table.items() if k != "loopctl"},
                "met": None if growth is None else growth <= FLAT_GROWTH,
            }
    driver = sections.get("driver", {})
    if driver.get("status") == "ok" and "flat_sync_tool" not in goals:
        main = driver["result"]["variants"][driver["result"]["main_variant"]]
        growth = main["growth"]
        goals["flat_driver"] = {
            "target": f"loopctl per-turn growth T=10 -> T=1000 <= {FLAT_GROWTH}x",
            "loopctl_growth": growth,
            "met": None if growth is None else growth <= FLAT_GROWTH,
        }
    goals.update(judge_driver(sections))
    brain = sections.get("brain", {})
    if brain.get("status") == "ok":
        goals.update(judge_brain(brain["result"]))
    replay = sections.get("replay", {})
    if replay.get("status") == "ok":
        goals["replay"] = judge_replay(replay["result"])
    fuzz = sections.get("fuzz", {})
    if fuzz.get("status") == "ok":
        goals["fuzz"] = judge_fuzz(fuzz["result"])
    return goals


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
    print()
    print("== goals ==")
    for name, goal in out["goals"].items():
        met = {True: "MET", False: "NOT MET", None: "n/a"}[goal["met"]]
        detail = ""
        if "per_T" in goal:
            detail = ", ".join(
                f"T={t}: {v['loopctl_us']:.0f} / {v['fastest_peer_us']:.0f} us "
                f"({v['fastest_peer']}) = {v['ratio']:.3f}"
                for t, v in goal["per_T"].items()
            )
        elif "loopctl_growth" in goal:
            growth = goal["loopctl_growth"]
            detail = "one T only" if growth is None else f"loopctl growth {growth}x"
            if goal.get("loopctl_cpu_growth") is not None:
                detail += f" (CPU {goal['loopctl_cpu_growth']}x)"
            peer_growth = {k: v for k, v in goal.get("peer_growth", {}).items() if v is not None}
            if peer_growth:
                detail += "; peers " + ", ".join(f"{k} {v}x" for k, v in peer_growth.items())
        elif "detail" in goal:
            detail = goal["detail"]
        elif "slowest_by_shape" in goal:
            detail = "slowest: " + ", ".join(
                f"{k} {v:,.0f}/s" for k, v in goal["slowest_by_shape"].items()
            )
        elif "slowest_records_per_s" in goal:
            detail = f"slowest {goal['slowest_records_per_s']} records/s"
        print(f"  {name:<20} {met:<8} {goal.get('target', '')}  {detail}")


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
