"""The HTML timeline on a long trace: file size and time to first paint.

    python -m benchmarks.bench_html                 # 100,000 records (about a minute)
    python -m benchmarks.bench_html --records 20000
    python -m benchmarks.bench_html --smoke         # 2,000 records, no browser needed (CI)
    python -m benchmarks.bench_html --json

The trace is a driver-level run of the simulator (``simulate_driver``): every turn the model asks
for two tools at once (one wave of two overlapping calls), and a small context window makes
threshold compaction come round, so every lane has items. Figures: the trace's records and
bytes; the time ``write_html`` takes (read, describe, place, compress, write); the page's bytes
(and the two compressed blocks'); then, in headless Chromium (Debian's ``/usr/bin/chromium``
driven by Playwright, when both are there), from navigation start: the first contentful paint
(the page's skeleton), the first render of the timeline (``performance.mark`` after the data is
unpacked and the visible window drawn: the figure that matters), and the time to open a
record's details (the records' block is unpacked on that first click). The best of
``--repeats`` page loads (the machine is shared).

Figures, with their date and machine: docs/viewing.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loopctl import Message, ToolCall
from loopctl.core import MachinePolicy
from loopctl_sim.sim.driver import simulate_driver
from loopctl_sim.sim.world import ModelScript, World
from loopctl_sim.view.html import HEADLESS_CHROMIUM_ARGS, write_html

RECORDS_PER_TURN = 10  # a two-call turn: 2 steps, 2 feeds, 6 io; a compaction now and then
CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = list(HEADLESS_CHROMIUM_ARGS)


def make_world(records: int) -> World:
    turns = max(records // RECORDS_PER_TURN, 1)

    def model(conversation: Sequence[Message], index: int) -> Message:
        if index >= turns:
            return Message.assistant("done")
        calls = [
            ToolCall(id=f"a{index}", name="add", arguments={"a": index, "b": 1}),
            ToolCall(id=f"m{index}", name="mul", arguments={"a": index, "b": 2}),
        ]
        return Message.assistant(f"step {index}", calls)

    return World(
        input="count",
        model=ModelScript(model),
        tools={
            "add": lambda a: str(a["a"] + a["b"]),
            "mul": lambda a: str(a["a"] * a["b"]),
        },
        policy=MachinePolicy(max_turns=turns + 10, context_window=3_000, loop_action="off"),
        keep_head=2,
        keep_tail=6,
        max_steps=12 * turns + 100,
        name="bench-html",
    )


def page_timings(page_path: Path, repeats: int) -> dict[str, Any] | None:
    """First paint, first render and first details of the page, best of ``repeats`` loads
    (None when Playwright or Chromium is missing)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).exists():
        return None
    runs: list[dict[str, float]] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(page_path.resolve().as_uri())
            page.wait_for_function("document.body.dataset.ready === '1'", timeout=120_000)
            marks = page.evaluate(
                """() => ({
                    fcp: (performance.getEntriesByName('first-contentful-paint')[0] || {})
                        .startTime || null,
                    render: performance.getEntriesByName('loopctl-first-render')[0].startTime,
                    ...window.loopctlTimings,
                })"""
            )
            clicked = time.perf_counter()
            page.click("#list .row >> nth=3")
            page.wait_for_selector("[data-testid=record-json]")
            marks["details_ms"] = (time.perf_counter() - clicked) * 1000
            runs.append(marks)
            page.close()
        browser.close()
    best = min(runs, key=lambda m: m["render"])
    return {"runs": runs, "best": best}


def measure(records: int, browser: bool, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "long.jsonl"
        simulate_driver(make_world(records), trace, created="bench")
        n = sum(1 for _ in trace.open("rb"))
        page = Path(tmp) / "long.html"
        started = time.perf_counter()
        timeline = write_html(trace, page)
        build_s = time.perf_counter() - started
        text = page.read_text()
        blocks = {
            name: len(text.split(f'id="data-{name}">', 1)[1].split("</script>", 1)[0])
            for name in ("index", "records")
        }
        report: dict[str, Any] = {
            "records": n,
            "items": timeline.items,
            "tool_calls": timeline.summary()["tool_calls"],
            "trace_bytes": trace.stat().st_size,
            "page_bytes": page.stat().st_size,
            "index_block_bytes": blocks["index"],
            "records_block_bytes": blocks["records"],
            "write_html_s": build_s,
            "browser": page_timings(page, repeats) if browser else None,
        }
    return report


def _table(r: dict[str, Any]) -> str:
    mib = 1024 * 1024
    out = [
        f"trace: {r['records']:,} records, {r['trace_bytes'] / mib:.1f} MiB "
        f"({r['items']:,} items, {r['tool_calls']:,} tool calls)",
        f"write_html: {r['write_html_s']:.2f} s",
        f"page: {r['page_bytes'] / mib:.2f} MiB (index block {r['index_block_bytes'] / mib:.2f}"
        f" MiB, records block {r['records_block_bytes'] / mib:.2f} MiB; gzip + base64)",
    ]
    b = r["browser"]
    if b is None:
        out.append("browser: not measured (no Playwright or no /usr/bin/chromium, or --smoke)")
    else:
        best = b["best"]
        fcp = "n/a" if best["fcp"] is None else f"{best['fcp']:.0f} ms"
        out.append(
            f"chromium (best of {len(b['runs'])}): first contentful paint {fcp}; first render "
            f"of the timeline {best['render']:.0f} ms (unpack+parse {best['unpack_ms']:.0f} ms, "
            f"draw {best['render_ms']:.0f} ms); first record's details {best['details_ms']:.0f}"
            f" ms"
        )
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="2,000 records, no browser")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    records = 2_000 if args.smoke else args.records
    report = measure(records, browser=not args.smoke, repeats=args.repeats)
    print(json.dumps(report, indent=2) if args.json else _table(report))
    assert report["tool_calls"] > 0 and report["page_bytes"] > 0


if __name__ == "__main__":
    sys.exit(main())
