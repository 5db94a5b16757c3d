"""Printing the benchmark results: the driver's and the peers' tables, and a generic rendering
of other sections' dicts (lists of rows become tables)."""

from __future__ import annotations

from typing import Any

__all__ = ["breakdown_lines", "print_driver", "print_peers", "render"]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def render(obj: Any, indent: str = "  ") -> list[str]:
    """A generic rendering of a section's result dict: lists of rows become tables."""
    lines: list[str] = []
    if isinstance(obj, list) and obj and all(isinstance(v, dict) for v in obj):
        return _table(obj, indent)
    if isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                lines.append(f"{indent}{key}:")
                lines.extend(_table(value, indent + "  "))
            elif isinstance(value, dict):
                lines.append(f"{indent}{key}:")
                lines.extend(render(value, indent + "  "))
            else:
                lines.append(f"{indent}{key}: {_cell(value)}")
    else:
        lines.append(f"{indent}{_cell(obj)}")
    return lines


def _table(rows: list[dict[str, Any]], indent: str) -> list[str]:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys and not isinstance(row[k], dict | list))
    cells = [[_cell(row.get(k, "")) for k in keys] for row in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    out = [indent + "  ".join(k.rjust(w) for k, w in zip(keys, widths, strict=True))]
    out.extend(
        indent + "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells
    )
    return out


def print_driver(result: dict[str, Any]) -> None:
    print(
        f"  driver overhead, us per tool-using turn, median of {result['repeats']}: "
        "wall time | process CPU time"
    )
    header = "".join(f"{'T=' + str(t):>10}" for t in result["turns"])
    print(f"  {'variant':<38}{header}{'growth':>8}  |{header}")
    for name, v in result["variants"].items():
        wall = "".join(f"{r['median_us_per_turn']:>10.1f}" for r in v["rows"])
        cpu = "".join(f"{r['cpu_median_us_per_turn']:>10.1f}" for r in v["rows"])
        growth = "" if v["growth"] is None else f"{v['growth']:>7.2f}x"
        cpu_growth = "" if v.get("cpu_growth") is None else f"{v['cpu_growth']:>7.2f}x"
        print(f"  {name:<38}{wall}{growth:>8}  |{cpu}{cpu_growth:>8}")
    reference = result.get("machine_reference_ms")
    if reference:  # an older result has none
        print(
            "  the machine: a fixed pure-Python loop took "
            f"{_span(reference['before'])} ms before the rows above and "
            f"{_span(reference['after'])} ms after (more ms: the machine itself was slower then)"
        )
    if "history" in result:
        print("  history (async tool; messages already in the brain):")
        print("\n".join(render(result["history"], "    ")))
    if "breakdown" in result:
        print("\n".join(breakdown_lines(result["breakdown"])))


#: What each piece of ``bench_turn`` is, for the printed table.
PIECES = {
    "model": "fake model: FunctionClient's whole reply (fn + folded)",
    "stream of a watched reply": "a watched reply's stream (reply fn + reply_events)",
    "fold of a watched stream": "a watched reply's fold (fold_events)",
    "request": "request: the ModelRequest (10 messages)",
    "brain": "brain: 2 next_step + 2 feeds",
    "policy": "policy: BareLoop.policy(), twice",
    "dispatch": "dispatch: one call of the async tool",
    "results": "results message + 2 token estimates",
    "usage": "usage: the run's total, per turn",
    "request at 10,000 messages": "request at 10,000 messages",
    "validation": "argument validation (in dispatch)",
    "result encoding": "result encoding (in dispatch)",
    "dispatch, inline tool": "dispatch: one call, sync tool inline",
    "dispatch, thread tool": "dispatch: one call, sync tool in a thread",
    "thread hop: asyncio.to_thread": "thread hop: asyncio.to_thread",
    "thread hop: loopctl.tools.threads": "thread hop: loopctl.tools.threads",
    "observers": "observers: one no-op observer, per turn",
}


def breakdown_lines(b: dict[str, Any]) -> list[str]:
    """``bench_turn``'s result as a table: the pieces in the turn, the rest, the others."""
    out = [
        f"  where a turn's time goes (async tool, T={b['turns']}; us; pieces timed alone, "
        "best of 5 batches):",
        f"    {'measured turn (median, wall | CPU)':<58}{b['measured_us_per_turn']:>9.1f}"
        f" | {b['measured_cpu_us_per_turn']:.1f}",
    ]
    if "measured_best_us_per_turn" in b:  # an older result has only the median
        out.append(
            f"    {'measured turn, best run (what the pieces are set against)':<58}"
            f"{b['measured_best_us_per_turn']:>9.1f}"
        )
    pieces = b["pieces_us"]
    for key in b["in_the_turn"]:
        out.append(f"    {PIECES.get(key, key):<58}{_us(pieces.get(key)):>9}")
    out.append(f"    {'rest: driver glue (best run less the pieces)':<58}{b['rest_us']:>9.1f}")
    out.append("    not part of that turn:")
    for key, value in pieces.items():
        if key not in b["in_the_turn"]:
            out.append(f"      {PIECES.get(key, key):<56}{_us(value):>9}")
    return out


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.1f}" if low == high else f"{low:.1f}-{high:.1f}"


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def print_peers(result: dict[str, Any]) -> None:
    from benchmarks.bench_peers import GOALS  # bench_peers imports this module to print

    turns = result["turns"]
    for flavour, table in result["tables"].items():
        print(
            f"  engine overhead, us per tool-using turn, {flavour} tool, median of "
            f"{result['repeats']}: wall time | process CPU time"
        )
        header = "".join(f"{'T=' + str(t):>10}" for t in turns)
        print(f"  {'framework':<16}{header}{'growth':>8}  |{header}")
        for name, v in table.items():
            wall = "".join(f"{r['median_us_per_turn']:>10.1f}" for r in v["rows"])
            cpu = "".join(f"{r['cpu_median_us_per_turn']:>10.1f}" for r in v["rows"])
            growth = "" if v["growth"] is None else f"{v['growth']:>7.2f}x"
            cpu_growth = "" if v.get("cpu_growth") is None else f"{v['cpu_growth']:>7.2f}x"
            print(f"  {name:<16}{wall}{growth:>8}  |{cpu}{cpu_growth:>8}")
        for goal, judged in result.get("goals", {}).items():
            if GOALS.get(goal, ("",))[0] != flavour:
                continue
            ratios = [
                f"T={t}: {g['ratio']:.3f} of {g['fastest_peer']}"
                for t, g in judged.items()
                if isinstance(g, dict) and g.get("fastest_peer") is not None and "ratio" in g
            ]
            if ratios:
                print(f"  {goal} / the fastest peer, runs paired by round: {'; '.join(ratios)}")
        print()
    for name, why in result["skipped"].items():
        print(f"  note: {name} skipped: {why}")
