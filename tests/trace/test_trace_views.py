"""Driver-level replay's views of trace lines (``loopctl_sim.trace.views``) against pydantic, their
reference: a view is made only of a line pydantic reads, holds what the record holds, and compares
with the driver's live values as the record does; every other line is read as before.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sim_helpers import lines
from test_tracefast import CORPUS, _edge_lines, _encode, _kind, _mutations, _samples, byte_changes

from loopctl.core import Message, TextPart, ToolCall, ToolResult
from loopctl_sim.trace import (
    RECORD,
    FeedView,
    IoView,
    Record,
    StepView,
    TraceFormatError,
    TraceReader,
    encode_feed_args,
    step_matches,
)
from loopctl_sim.trace import reader as reader_module
from loopctl_sim.trace.fast import fast_path_problems, make_view_decoder
from loopctl_sim.trace.fast_structs import ARG_READERS, args_match, message_matches
from loopctl_sim.trace.views import View


def _same_json(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (``1`` is not ``1.0``, nor ``True``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same_json, a, b))
    return bool(a == b) or (a != a and b != b)  # (NaN is never read into a view)


def assert_view_of(view: View, record: Record) -> None:
    """``view`` holds what ``record`` holds, and compares with live values as it does."""
    assert view.record() == record and view.seq == record.seq and view.type == record.type
    assert view.scrubbed == record.scrubbed
    if isinstance(view, IoView):
        assert record.type == "io"
        assert (view.kind, view.turn) == (record.kind, record.turn)
        assert _same_json(view.data, record.data)
    elif isinstance(view, StepView):
        assert record.type == "step"
        assert view.policy == record.policy
        assert step_matches(record.step, view.step)
        assert msgspec.to_builtins(view.step) == record.step.model_dump(mode="json")
    else:
        assert record.type == "feed"
        assert (view.name, view.digest) == (record.name, record.digest)
        assert view.matches(record.args.__dict__)  # the record's own values are equal
        assert msgspec.json.decode(view.args_json) == record.args.model_dump(mode="json")
        assert view.args == record.args
        # the values handed on without the record: the record's arguments, in field order
        fields = type(record.args).model_fields
        assert view.values() == tuple(getattr(record.args, name) for name in fields)


def view_taken_as_pydantic_reads_it(raw: bytes, seq: int) -> bool:
    decode = make_view_decoder()
    assert decode is not None, fast_path_problems()
    view = decode(raw, seq)
    if view is None:
        return False
    assert_view_of(view, RECORD.validate_json(raw))  # a line taken is one pydantic reads
    return True


def test_every_corpus_line_in_a_run_reads_to_a_view_of_its_record() -> None:
    taken: Counter[str] = Counter()
    for path in CORPUS:
        decode = make_view_decoder()
        assert decode is not None
        for seq, raw in enumerate(path.read_bytes().splitlines(keepends=True)):
            record = RECORD.validate_json(raw)
            view = decode(raw, seq)
            if view is None:
                assert _kind(record).split("/")[0] in {"header", "end", "step", "feed"}
                continue
            taken[_kind(record)] += 1
            assert_view_of(view, record)
            assert decode(raw, seq + 1) is None  # another seq than expected: pydantic's
    for kind in (
        "step/call_llm",
        "step/call_tools",
        "feed/model_response",
        "feed/tool_results",
        "feed/set_context_tokens",
        "feed/cancel",
        "io/model_request",
        "io/model_reply",
        "io/tool_result",
    ):
        assert taken[kind], kind


def test_a_changed_line_is_a_view_only_as_pydantic_reads_it() -> None:
    checked = taken = 0
    rng = random.Random(7)
    for sample in _samples():
        seq = sample["seq"]
        for changed in _mutations(sample):
            checked += 1
            taken += view_taken_as_pydantic_reads_it(_encode(changed), seq)
        for changed_raw in byte_changes(_encode(sample), rng, 200):
            checked += 1
            taken += view_taken_as_pydantic_reads_it(changed_raw, seq)
    for raw in _edge_lines():  # numbers, texts and nesting JSON readers read differently
        checked += 1
        taken += view_taken_as_pydantic_reads_it(raw, 1)
    assert checked > 3000 and taken > 200


def _read(reader: TraceReader, views: bool) -> Any:
    try:
        items = list(reader.replay_lines() if views else reader.numbered(lazy_headers=True))
    except TraceFormatError as exc:
        return ("error", exc.line, exc.reason)
    return (
        "ok",
        [(line, item.record() if hasattr(item, "record") else item) for line, item in items],
        reader.warnings,
    )


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_replay_lines_are_the_records_numbered_gives(path: Path) -> None:
    expected = _read(TraceReader(path, fast=False), views=False)
    assert _read(TraceReader(path), views=True) == expected
    assert _read(TraceReader(path, fast=False), views=True) == expected  # no views: records
    assert not any(
        isinstance(item, IoView | StepView | FeedView)
        for _, item in TraceReader(path, fast=False).replay_lines()
    )


def test_a_changed_line_in_a_trace_gives_the_same_records_or_error(tmp_path: Path) -> None:
    path = tmp_path / "changed.jsonl"
    header = next(r for r in lines(CORPUS[0]) if r["type"] == "header")
    errors = oks = 0
    for sample in _samples():
        for changed in _mutations({**sample, "seq": 1}):
            path.write_bytes(_encode(header) + _encode(changed))
            slow = _read(TraceReader(path, fast=False), views=False)
            assert _read(TraceReader(path), views=True) == slow
            errors += slow[0] == "error"
            oks += slow[0] == "ok"
    assert errors > 100 and oks > 100


def test_a_line_outside_a_run_is_never_a_view(tmp_path: Path) -> None:
    """Before the first header (or after an end) pydantic's path words the error."""
    body = next(r for r in lines(CORPUS[0]) if r["type"] == "io")
    path = tmp_path / "headless.jsonl"
    path.write_bytes(_encode({**body, "seq": 0}))
    with pytest.raises(TraceFormatError, match="starts with a header record"):
        list(TraceReader(path).replay_lines())


# --- comparing live values with the decoded ones, as the models compare ---------------------------

_CALL = ToolCall(id="c1", name="add", arguments={"a": 1, "b": [2, {"c": None}]})
_RESULT = ToolResult(call_id="c1", name="add", content="3", is_error=False)
_MESSAGES = [
    Message.user("hi"),
    Message.user("hello"),
    Message.assistant("hi"),
    Message.assistant("", [_CALL]),
    Message.assistant(
        "", [_CALL.model_copy(update={"arguments": {"a": 1.0, "b": [2, {"c": None}]}})]
    ),
    Message.assistant(
        "", [_CALL.model_copy(update={"arguments": {"a": True, "b": [2, {"c": None}]}})]
    ),
    Message.assistant("", [_CALL.model_copy(update={"id": "c2"})]),
    Message.assistant("t", [_CALL]),
    Message(role="user", parts=(_RESULT,)),
    Message(role="user", parts=(_RESULT.model_copy(update={"is_error": True}),)),
    Message(role="user", parts=(_RESULT.model_copy(update={"content": "4"}),)),
    Message(role="user", parts=(_RESULT, _RESULT)),
    Message(role="user", parts=(TextPart(text="3"),)),
]


def _decoded(name: str, args: dict[str, Any]) -> msgspec.Struct:
    data = encode_feed_args(name, args)
    decoded: msgspec.Struct = ARG_READERS[name][0](msgspec.json.encode(data))
    return decoded


def test_message_matches_is_pydantic_equality() -> None:
    for recorded in _MESSAGES:
        decoded = _decoded("tool_results", {"message": recorded})
        for live in _MESSAGES:
            assert message_matches(live, decoded.message) == (live == recorded), (live, recorded)  # type: ignore[attr-defined]

    class Mine(Message):
        pass

    decoded = _decoded("tool_results", {"message": _MESSAGES[0]})
    assert not message_matches(Mine.user("hi"), decoded.message)  # type: ignore[attr-defined]
    assert not message_matches({"role": "user", "parts": []}, decoded.message)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "recorded", "live", "same"),
    [
        ("set_context_tokens", {"n": 3}, {"n": 3}, True),
        ("set_context_tokens", {"n": 3}, {"n": 3.0}, True),  # as the record's __dict__ compares
        ("set_context_tokens", {"n": 3}, {"n": 4}, False),
        ("set_context_tokens", {"n": 3}, {"n": "3"}, False),  # not sure: the models decide
        ("set_context_tokens", {"n": 3}, {}, False),
        ("set_context_tokens", {"n": 3}, {"m": 3}, False),
        ("set_context_tokens", {"n": 3}, {"n": 3, "m": 1}, False),
        (
            "model_response",
            {"response": _MESSAGES[3], "context_tokens": 8},
            {"response": _MESSAGES[3], "context_tokens": 8},
            True,
        ),
        (
            "model_response",
            {"response": _MESSAGES[3], "context_tokens": 8},
            {"response": _MESSAGES[6], "context_tokens": 8},
            False,
        ),
        (
            "model_response",
            {"response": _MESSAGES[3], "context_tokens": 8},
            {"context_tokens": 8, "response": _MESSAGES[3]},
            True,
        ),
        (
            "model_response",
            {"response": _MESSAGES[3], "context_tokens": 8},
            {"response": _MESSAGES[3].model_dump(), "context_tokens": 8},
            False,
        ),
        (
            "compaction_result",
            {"compacted": _MESSAGES[:2], "before": 9, "after": 2},
            {"compacted": tuple(_MESSAGES[:2]), "before": 9, "after": 2},
            True,
        ),
        (
            "compaction_result",
            {"compacted": _MESSAGES[:2], "before": 9, "after": 2},
            {"compacted": _MESSAGES[:1], "before": 9, "after": 2},
            False,
        ),
        (
            "compaction_result",
            {"compacted": _MESSAGES[:2], "before": 9, "after": 2},
            {"compacted": _MESSAGES[1::-1], "before": 9, "after": 2},
            False,
        ),
        (
            "compaction_result",
            {"compacted": _MESSAGES[:2], "before": 9, "after": 2},
            {"compacted": "no", "before": 9, "after": 2},
            False,
        ),
        ("cancel", {}, {}, True),
        ("cancel", {}, {"x": 1}, False),
    ],
)
def test_args_match(name: str, recorded: dict[str, Any], live: dict[str, Any], same: bool) -> None:
    assert args_match(_decoded(name, recorded), live) is same


# --- what it saves: an agent replay validates no step, feed or io line with pydantic ------------


class _Counting:
    """``RECORD`` with its line validations counted."""

    def __init__(self) -> None:
        self.lines = 0
        self.validator = self

    def validate_json(self, raw: bytes) -> Any:
        self.lines += 1
        return RECORD.validator.validate_json(raw)


def test_an_agent_replay_validates_only_its_headers_and_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.bench_agent_replay import build, record
    from loopctl_sim import replay_agent

    path = tmp_path / "t.jsonl"
    held = record(path, 500, "runs")
    kinds = Counter(r.type for r in TraceReader(path))
    counting = _Counting()
    monkeypatch.setattr(reader_module, "RECORD", counting)
    result = replay_agent(path, build)
    assert result.ok and result.complete and result.records == held
    # a header is read twice (its snapshot cut out, then checked by its hash), an end once
    assert kinds["header"] >= 2 and counting.lines <= 2 * kinds["header"] + kinds["end"]


# --- a changed agent: the same divergence, read through views or records --------------------------

_EDITS = [
    ('"amount": 800', '"amount": 900'),  # a tool's output: a feed's arguments
    ("Look orders up before", "Always look orders up before"),  # a request's context
    ("REFUND_LIMIT = 1000", "REFUND_LIMIT = 500"),  # a hook: a tool result
    ("RunConfig(max_turns=12)", "RunConfig(max_turns=20)"),  # the policy of a step
    ("RunConfig(max_turns=12)", "RunConfig(max_turns=1)"),  # the run ends another way
]


@pytest.mark.parametrize(("old", "new"), _EDITS)
@pytest.mark.parametrize("tools", ["live", "recorded"])
def test_a_divergence_is_reported_alike_through_views_and_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, tools: str
) -> None:
    from shop_project import AGENT, edit, make_project

    from loopctl_sim import replay_agent
    from loopctl_sim.replay import driver as driver_module

    for project in make_project(tmp_path, monkeypatch):
        edit(project, old, new)
        path = project / "shop" / "traces" / "refund.jsonl"
        with_views = replay_agent(path, AGENT, tools=tools)
        monkeypatch.setattr(driver_module, "TraceReader", partial(TraceReader, fast=False))
        with_records = replay_agent(path, AGENT, tools=tools)
        monkeypatch.undo()
        assert with_views.summary() == with_records.summary()
        a, b = with_views.divergence, with_records.divergence
        if a is not None and b is not None:  # recent feeds: args as JSON text or typed, alike
            assert [(f.seq, f.line, f.name, f.args) for f in a.recent_feeds] == [
                (f.seq, f.line, f.name, f.args) for f in b.recent_feeds
            ]
            a, b = replace(a, recent_feeds=[]), replace(b, recent_feeds=[])
        assert a == b
        assert (with_views.records, with_views.steps, with_views.feeds) == (
            with_records.records,
            with_records.steps,
            with_records.feeds,
        )
        if tools == "live":
            assert with_views.divergence is not None
