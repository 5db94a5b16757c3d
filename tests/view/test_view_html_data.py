"""The data the HTML timeline is drawn from: records placed in time, items on lanes, the
summary, and the page itself (self-contained, its blocks unpacking to that data)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from view_helpers import DRIVER, TRACES, invoke, lines, write_lines

from loopctl_sim.view.clock import Clock, Placed
from loopctl_sim.view.describe import LANES
from loopctl_sim.view.html import render_html
from loopctl_sim.view.timeline import build_timeline


def _io(kind: str, duration: float | None = None, **data: Any) -> dict[str, Any]:
    return {"type": "io", "kind": kind, "data": data, "duration_s": duration}


def test_clock_places_a_wave_of_overlapping_calls_and_what_follows() -> None:
    clock = Clock()
    placed = [
        clock.place(r)
        for r in [
            {"type": "step"},
            _io("model_error", 0.25),
            _io("retry", None, delay_s=1.0),
            _io("model_reply", 0.5),
            _io("tool_call", id="a"),
            _io("tool_call", id="b"),
            _io("tool_result", 0.2, id="a"),
            _io("tool_result", 0.5, id="b"),
            _io("tool_call", id="c"),  # a second wave starts when the first has ended
            _io("tool_result", 0.1, id="c"),
            {"type": "feed"},
            _io("compaction", 0.3),
            _io("something_new", 0.05),
        ]
    ]
    assert placed == [
        Placed(0.0, 0.0),
        Placed(0.0, 0.25),
        Placed(0.25, 1.25),
        Placed(1.25, 1.75),
        Placed(1.75, 1.75, 0),
        Placed(1.75, 1.75, 1),
        Placed(1.75, 1.95, 0),
        Placed(1.75, 2.25, 1),
        Placed(2.25, 2.25, 0),
        Placed(2.25, 2.35, 0),
        Placed(2.35, 2.35),
        Placed(2.35, 2.65),
        Placed(2.65, pytest.approx(2.7)),  # type: ignore[arg-type]  # compares equal to 2.7
    ]
    assert clock.timed


def test_a_machine_level_trace_takes_no_time() -> None:
    timeline = build_timeline(TRACES / "basic.jsonl")
    assert not timeline.timed and set(timeline.t1) == {0.0}
    assert all(a < b for a, b in zip(timeline.s0, timeline.s1, strict=True))
    assert timeline.s0 == sorted(timeline.s0)  # the page bisects on it


def _lane_items(timeline: Any, lane: str) -> list[int]:
    return [i for i, n in enumerate(timeline.lane) if n == LANES.index(lane)]


def test_a_tool_call_is_one_bar_from_its_call_to_its_result() -> None:
    timeline = build_timeline(DRIVER / "max_turns.jsonl")
    tools = _lane_items(timeline, "tools")
    assert len(tools) == 3 == timeline.summary()["tool_calls"]
    first, second, third = tools
    kinds = timeline.rec_kind
    assert [kinds[timeline.rec[i]] for i in tools] == ["tool_call"] * 3
    assert [kinds[timeline.rec2[i]] for i in tools] == ["tool_result"] * 3
    # the first wave's two calls overlap: same start, stacked rows
    assert timeline.t0[first] == timeline.t0[second] and timeline.row[:][second] == 1
    assert timeline.t1[first] > timeline.t0[first] and timeline.s1[second] > timeline.s0[first]
    assert timeline.row[third] == 0 and timeline.t0[third] >= timeline.t1[second]


def test_a_model_attempt_points_at_its_request() -> None:
    timeline = build_timeline(DRIVER / "rate_limited.jsonl")
    model = _lane_items(timeline, "model")
    attempts = [i for i in model if timeline.rec_kind[timeline.rec[i]] != "model_request"]
    assert {timeline.rec_kind[timeline.rec2[i]] for i in attempts if timeline.rec2[i] >= 0} == {
        "model_request"
    }
    summary = timeline.summary()
    assert summary["retries"] >= 1 and summary["model_errors"] == summary["retries"]


@pytest.mark.parametrize(
    ("trace", "expected"),
    [
        ("crash_restore", {"runs": 1, "resumes": 2, "crashes": 2, "outcome_kind": "completed"}),
        (
            "max_turns",
            {
                "tool_calls": 3,
                "tool_errors": 1,
                "model_calls": 2,
                "turns": 2,
                "outcome_kind": "max_turns_exceeded",
            },
        ),
        ("cancel", {"cancels": 1, "outcome_kind": "cancelled"}),
        ("threshold_compaction", {"compactions": 1}),
        ("network_retries_exhausted", {"outcome_kind": "failed", "model_calls": 2}),
    ],
)
def test_summary(trace: str, expected: dict[str, Any]) -> None:
    summary = build_timeline(DRIVER / f"{trace}.jsonl").summary()
    assert {k: summary[k] for k in expected} == expected


def test_kinds_it_does_not_know_go_on_the_other_lane(tmp_path: Path) -> None:
    records = lines(DRIVER / "basic.jsonl")
    records.insert(
        3,
        {
            "seq": 3,
            "type": "io",
            "kind": "provider_event",
            "turn": 1,
            "data": {"x": [1, 2]},
            "duration_s": 0.5,
        },
    )
    for i, r in enumerate(records):
        r["seq"] = i
    timeline = build_timeline(write_lines(tmp_path / "t.jsonl", records))
    [item] = _lane_items(timeline, "other")
    assert timeline.rec_label[timeline.rec[item]] == 'provider_event in 0.500s: {"x":[1,2]}'
    assert timeline.t1[item] - timeline.t0[item] == 0.5


def _blocks(page: str) -> tuple[dict[str, Any], list[str]]:
    def block(name: str) -> str:
        found = re.search(rf'id="data-{name}">([^<]*)</script>', page)
        assert found is not None
        return gzip.decompress(base64.b64decode(found.group(1))).decode()

    return json.loads(block("index")), block("records").split("\n")


def test_the_page_is_self_contained_and_unpacks_to_the_timeline(tmp_path: Path) -> None:
    records = lines(DRIVER / "tool_exception.jsonl")
    hostile = "</script><script>alert(1)</script> https://example.com/x.js"
    records[-1]["outcome"]["final_text"] = hostile
    path = write_lines(tmp_path / "odd <name>.jsonl", records)
    timeline = build_timeline(path)
    page = render_html(timeline)
    assert "<script src" not in page and "<link" not in page and "example.com" not in page
    assert "default-src 'none'" in page  # the browser itself refuses any fetch
    assert "odd &lt;name&gt;.jsonl" in page and "odd <name>" not in page
    index, recs = _blocks(page)
    assert index["items"] == timeline.to_json()["items"] and index["divergence"] is None
    assert [json.loads(r) for r in recs] == [json.loads(r) for r in timeline.records]
    assert json.loads(recs[-1])["outcome"]["final_text"] == hostile


def test_html_command_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    result = invoke(["html", str(DRIVER / "crash_restore.jsonl"), "-o", str(out)])
    assert result.exit_code == 0 and f"wrote {out} (29 records" in result.output
    index, _ = _blocks(out.read_text())
    assert index["summary"]["resumes"] == 2


def test_html_command_of_a_bad_trace_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n")
    result = invoke(["html", str(bad)])
    assert result.exit_code == 2 and "not valid JSON" in result.output
    assert not bad.with_suffix(".html").exists()


def test_replay_html_embeds_the_divergence(tmp_path: Path) -> None:
    records = lines(TRACES / "basic.jsonl")
    step = next(r for r in records if r["type"] == "step")
    step["policy"]["max_turns"] = 0
    edited = write_lines(tmp_path / "e.jsonl", records)
    out = tmp_path / "report.html"
    result = invoke(["replay", str(edited), "--html", str(out)])
    assert result.exit_code == 1 and f"wrote {out}" in result.output
    index, _ = _blocks(out.read_text())
    divergence = index["divergence"]
    assert divergence["seq"] == step["seq"] and divergence["what"] == "step"
    assert {
        "path": "kind",
        "where": "kind",
        "expected": "call_llm",
        "actual": "done",
        "expected_absent": False,
        "actual_absent": False,
        "expected_excerpt": "call_llm",
        "actual_excerpt": "done",
    } in divergence["fields"]
    assert divergence["policy"]["max_turns"] == 0
    ok = invoke(["replay", str(TRACES / "basic.jsonl"), "--html", str(tmp_path / "ok.html")])
    assert (
        ok.exit_code == 0 and _blocks((tmp_path / "ok.html").read_text())[0]["divergence"] is None
    )
    many = invoke(["replay", str(edited), str(edited), "--html", str(out)])
    assert many.exit_code == 2 and "--html needs exactly one trace" in many.output


@pytest.mark.parametrize("trace", sorted(p.name for p in DRIVER.glob("*.jsonl")))
def test_items_start_in_order_on_both_axes(trace: str) -> None:
    """The page finds the visible items by bisecting on their starts, lane by lane."""
    timeline = build_timeline(DRIVER / trace)
    for lane in LANES:
        items = _lane_items(timeline, lane)
        for axis in (timeline.t0, timeline.s0):
            starts = [axis[i] for i in items]
            assert starts == sorted(starts), (lane, axis is timeline.t0)
