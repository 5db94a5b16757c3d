"""The pieces the views are built from: a record in words (known and unknown kinds), field-level
differences, turn ranges, and the whole-trace comparison against ``diff_traces``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from view_helpers import DRIVER, TRACES, lines, write_lines

from loopctl_sim.replay import diff_traces
from loopctl_sim.view import ABSENT, compare_traces, describe, leaf_diff, parse_turns
from loopctl_sim.view.reports import policy_in_force


@pytest.mark.parametrize(
    ("record", "lane", "kind", "tone", "text"),
    [
        (
            {"type": "step", "step": {"kind": "call_llm", "turn": 2}},
            "brain",
            "call_llm",
            "",
            "turn 2: call the model",
        ),
        (
            {
                "type": "step",
                "step": {
                    "kind": "done",
                    "outcome": {
                        "kind": "failed",
                        "error": {"kind": "network", "message": "reset", "status": None},
                    },
                },
            },
            "brain",
            "done",
            "error",
            "done: failed: network: reset",
        ),
        (
            {
                "type": "feed",
                "name": "fail",
                "args": {"error": {"kind": "timeout", "message": "m", "status": 504}},
            },
            "brain",
            "fail",
            "error",
            "ERROR: timeout (HTTP 504): m",
        ),
        (
            {
                "type": "io",
                "kind": "retry",
                "turn": 1,
                "data": {"attempt": 2, "delay_s": 1.5, "kind": "rate_limited"},
            },
            "model",
            "retry",
            "warn",
            "retry 2 after 1.5s (rate_limited)",
        ),
        (
            {"type": "io", "kind": "crash", "data": {"step": 3, "snapshot_bytes": 10}},
            "run",
            "crash",
            "error",
            "crash at step 3; restored from a 10-byte snapshot",
        ),
        # what this view does not know is still shown, from its data
        (
            {"type": "io", "kind": "provider_event", "data": {"x": 1}, "duration_s": 0.5},
            "other",
            "provider_event",
            "",
            'provider_event in 0.500s: {"x":1}',
        ),
        (
            {"type": "feed", "name": "new_feed", "args": {"a": [1]}},
            "brain",
            "new_feed",
            "",
            'new_feed {"a":[1]}',
        ),
        (
            {"type": "step", "step": {"kind": "ask_human", "turn": 4, "q": "?"}},
            "brain",
            "ask_human",
            "",
            'step ask_human {"q":"?","turn":4}',
        ),
        (
            {"type": "checkpoint", "seq": 5, "note": "n"},
            "other",
            "checkpoint",
            "",
            'checkpoint {"note":"n"}',
        ),
        (
            {
                "type": "feed",
                "name": "model_response",
                "args": {
                    "context_tokens": 9,
                    "response": {
                        "role": "assistant",
                        "parts": [
                            {"kind": "thinking", "text": "hmm", "signature": "s"},
                            {
                                "kind": "provider",
                                "provider": "anthropic",
                                "data": {"t": "redacted"},
                            },
                            {"kind": "text", "text": "hi"},
                        ],
                    },
                },
            },
            "brain",
            "model_response",
            "",
            'assistant: (thinking: hmm); [provider] {"data":{"t":"redacted"},"provider":'
            '"anthropic"}; "hi" (context 9 tokens)',
        ),
    ],
)
def test_describe(record: dict[str, Any], lane: str, kind: str, tone: str, text: str) -> None:
    found = describe(record)
    assert (found.lane, found.kind, found.tone, found.lines[0]) == (lane, kind, tone, text)


def test_describe_clips_unless_full() -> None:
    record = {
        "type": "feed",
        "name": "inject",
        "args": {"message": {"role": "user", "parts": [{"kind": "text", "text": "a\nb" * 80}]}},
    }
    assert len(describe(record).lines[0]) < 120 and "\n" not in describe(record).lines[0]
    whole = describe(record, clip=None).lines[0]
    assert whole.count("a\nb") == 80


def test_every_shipped_record_is_described() -> None:
    for path in [*TRACES.glob("*.jsonl"), *DRIVER.glob("*.jsonl")]:
        for record in lines(path):
            found = describe(record)
            assert found.lines and all(found.lines), (path, record["seq"])
            assert found.lane != "other", (path, record["seq"])


@pytest.mark.parametrize(
    ("a", "b", "diffs"),
    [
        ({"x": 1}, {"x": 1}, []),
        (
            {"x": 1, "y": {"z": [1, 2]}},
            {"x": 1, "y": {"z": [1, 3, 4]}},
            [("y.z[1]", 2, 3), ("y.z[2]", ABSENT, 4)],
        ),
        ({"k": "a"}, {}, [("k", "a", ABSENT)]),
        ({"k": None}, {"k": {"a": 1}}, [("k", None, {"a": 1})]),
        ({"n": 1}, {"n": 1.0}, []),
        ({"n": True}, {"n": 1}, [("n", True, 1)]),
        ("s", "t", [("", "s", "t")]),
    ],
)
def test_leaf_diff(a: Any, b: Any, diffs: list[tuple[str, Any, Any]]) -> None:
    assert [(d.path, d.expected, d.actual) for d in leaf_diff(a, b)] == diffs


def test_leaf_diff_is_bounded() -> None:
    assert len(leaf_diff(list(range(500)), [], limit=10)) == 10


@pytest.mark.parametrize(("text", "span"), [("3", (3, 3)), ("2-4", (2, 4)), ("0:1", (0, 1))])
def test_parse_turns(text: str, span: tuple[int, int]) -> None:
    assert parse_turns(text) == span


@pytest.mark.parametrize("text", ["", "x", "3-1", "-2"])
def test_parse_turns_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_turns(text)


@pytest.mark.parametrize(
    ("a", "b", "options"),
    [
        ("basic", "tool_exception", {}),
        ("basic", "basic", {}),
        ("crash_restore", "driver/crash_restore", {"brain_only": True}),
        ("crash_restore", "driver/crash_restore", {"ignore_io": True}),
        ("driver/long_run", "driver/basic", {}),
    ],
)
def test_compare_agrees_with_diff_traces(a: str, b: str, options: dict[str, bool]) -> None:
    pa, pb = TRACES / f"{a}.jsonl", TRACES / f"{b}.jsonl"
    whole = compare_traces(pa, pb, **options)
    assert whole.first == diff_traces(pa, pb, **options)
    assert whole.same == (whole.differing == 0)
    assert len(whole.outcomes_a) == 1 and len(whole.outcomes_b) == 1


def test_compare_counts_and_runs(tmp_path: Path) -> None:
    records = lines(DRIVER / "basic.jsonl")
    edited = [dict(r) for r in records]
    edited[3] = {**edited[3], "turn": 9}
    edited[4] = {**edited[4], "turn": 9}
    shorter = write_lines(tmp_path / "b.jsonl", edited[:-2])
    found = compare_traces(DRIVER / "basic.jsonl", shorter)
    assert (found.differing, found.only_a, found.only_b) == (4, 2, 0)
    assert found.compared == len(records)
    assert found.outcomes_a[0]["kind"] == "completed" and found.outcomes_b == [None]


def test_policy_in_force_is_the_last_step_policy_before() -> None:
    path = DRIVER / "basic.jsonl"
    assert policy_in_force(path, 0) is None
    assert policy_in_force(path, 99)["tools"] == ["add"]  # type: ignore[index]
