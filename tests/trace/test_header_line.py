"""Headers read lazily for driver-level replay (``loopctl_sim.trace.header_line``): the header of a
run that continues the replayed one is checked by the hash of its snapshot's text, never built;
every header the replay cannot settle so is read whole, and every divergence and every damaged
header is reported exactly as when each header is read whole."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from benchmarks.bench_agent_replay import _turns, build
from loopctl.core import Message
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceRecorder, replay_agent, replay_driver
from loopctl_sim.replay.report import ReplayResult
from loopctl_sim.trace import HeaderLine, HeaderRecord, TraceFormatError, TraceReader
from loopctl_sim.trace import header_line as header_line_module

RUNS = 4


def _record(path: Path) -> Path:
    """Four runs of a conversation whose history is soon bigger than ``LAZY_FROM``, every
    header with its snapshot (version 2's form, which a version 3 recorder writes on request)."""
    recorder = TraceRecorder(path, created="2026-12-01T00:00:00+00:00", snapshot_headers=True)
    replies: list[Message] = []
    for r in range(RUNS):
        replies += _turns(6, r * 6)

    async def go() -> None:
        loop = build(ScriptedClient(replies), [recorder])
        for r in range(RUNS):
            await loop.run(f"run {r} " + "x" * 400)

    asyncio.run(go())
    recorder.close()
    return path


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    return _record(tmp_path / "runs.jsonl")


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _headers(path: Path) -> list[int]:
    return [i for i, raw in enumerate(_lines(path)) if b'"type":"header"' in raw[:40]]


def _eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every header read whole, as before the lazy reading."""
    monkeypatch.setattr(header_line_module, "LAZY_FROM", 10**12)


def _view(result: ReplayResult) -> object:
    d = result.divergence
    return None if d is None else (d.seq, d.line, d.what, d.message, d.details)


def test_big_headers_come_as_header_lines_that_are_the_records(trace: Path) -> None:
    lazy = [r for _, r in TraceReader(trace).numbered(lazy_headers=True) if r.type == "header"]
    eager = [r for r in TraceReader(trace) if isinstance(r, HeaderRecord)]
    assert len(lazy) == len(eager) == RUNS
    assert isinstance(lazy[0], HeaderRecord)  # a fresh brain's snapshot is small
    assert all(isinstance(h, HeaderLine) for h in lazy[1:])
    for h, e in zip(lazy[1:], eager[1:], strict=True):
        assert isinstance(h, HeaderLine)
        assert h.record() == e and h.seq == e.seq
        assert h.fields.snapshot is None and h.fields.created == e.created
        assert h.holds(e.machine())
        assert not h.holds(eager[0].machine())


def test_continuing_headers_replay_without_their_brains_built(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[int] = []
    record = HeaderLine.record

    def counted(self: HeaderLine) -> HeaderRecord:
        built.append(self.line)
        return record(self)

    monkeypatch.setattr(HeaderLine, "record", counted)
    result = replay_agent(trace, build)
    assert result.ok and result.complete, result.summary()
    assert result.runs == RUNS and built == []
    assert replay_driver(trace).ok


def _edit_header(path: Path, index: int, edit: object) -> Path:
    lines = _lines(path)
    at = _headers(path)[index]
    data = json.loads(lines[at])
    edit(data)  # type: ignore[operator]
    lines[at] = json.dumps(data, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    return path


def _first_text(data: dict) -> None:  # type: ignore[type-arg]
    data["snapshot"]["history"][0]["parts"][0]["text"] = "run 0 changed"


def _bad_snapshot(data: dict) -> None:  # type: ignore[type-arg]
    data["snapshot"]["turns_taken"] = "many"


def _bad_version(data: dict) -> None:  # type: ignore[type-arg]
    data["version"] = 9


def _bad_created(data: dict) -> None:  # type: ignore[type-arg]
    data["created"] = 5


def test_a_header_that_does_not_continue_the_run_diverges_as_before(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _edit_header(trace, 2, _first_text)
    lazy = replay_agent(trace, build)
    _eager(monkeypatch)
    eager = replay_agent(trace, build)
    assert lazy.divergence is not None and lazy.divergence.what == "snapshot"
    assert _view(lazy) == _view(eager)
    assert lazy.divergence.line == _headers(trace)[2] + 1


@pytest.mark.parametrize("damage", [_bad_snapshot, _bad_version, _bad_created])
def test_a_damaged_header_is_refused_as_before(
    trace: Path, monkeypatch: pytest.MonkeyPatch, damage: object
) -> None:
    _edit_header(trace, 1, damage)
    with pytest.raises(TraceFormatError) as lazy:
        replay_agent(trace, build)
    _eager(monkeypatch)
    with pytest.raises(TraceFormatError) as eager:
        replay_agent(trace, build)
    assert str(lazy.value) == str(eager.value)
    assert lazy.value.line == _headers(trace)[1] + 1


def test_a_header_with_a_wrong_seq_or_cut_short_is_read_whole(trace: Path) -> None:
    lines = _lines(trace)
    at = _headers(trace)[1]
    text = lines[at].decode()
    assert HeaderLine is not None
    wrong = text.replace(f'"seq":{at}', f'"seq":{at + 1}', 1).encode()
    assert header_line_module.header_line(wrong, at + 1, _validate, _never) is None
    cut = lines[at].rstrip(b"\n")  # a last line without its newline: the reader decides
    assert header_line_module.header_line(cut, at + 1, _validate, _never) is None
    assert header_line_module.header_line(lines[at], at + 1, _validate, _never) is not None


def _validate(raw: bytes) -> object:
    from loopctl_sim.trace import RECORD

    return RECORD.validator.validate_json(raw)


def _never(raw: bytes, line: int) -> HeaderRecord:
    raise AssertionError("not read whole")


# --- the snapshot's text found by the writer's layout, or else by msgspec ------------------------


class _NoDecoding:
    def decode(self, raw: bytes) -> object:
        raise AssertionError("the snapshot's value was looked for with msgspec")


def test_a_header_as_written_is_cut_without_parsing_its_snapshot(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(header_line_module, "_SNAPSHOT_OF", _NoDecoding())
    lazy = [r for _, r in TraceReader(trace).numbered(lazy_headers=True) if r.type == "header"]
    eager = [r for r in TraceReader(trace) if isinstance(r, HeaderRecord)]
    for h, e in zip(lazy[1:], eager[1:], strict=True):
        assert isinstance(h, HeaderLine) and h.holds(e.machine()) and h.record() == e
    result = replay_agent(trace, build)
    assert result.ok and result.runs == RUNS


def _text_edit(old: bytes, new: bytes, *, last: bool = False) -> object:
    def edit(raw: bytes) -> bytes:
        at = raw.rfind(old) if last else raw.find(old)
        assert at >= 0, old
        return raw[:at] + new + raw[at + len(old) :]

    return edit


#: Headers another writer (or a hand) might write: each is read as its record says.
_LAYOUTS = {
    "nested snapshot key": _text_edit(b'"metadata":{}', b'"metadata":{"m":{"snapshot":1}}'),
    "nested metadata key": _text_edit(b'"metadata":{}', b'"metadata":{"a":{"x":1,"metadata":{}}}'),
    "escape in metadata": _text_edit(b'"metadata":{}', b'"metadata":{"note":"a\\"b"}'),
    "escape in created": _text_edit(b'"created":"', b'"created":"\\u0032'),
    "metadata first": _text_edit(b'"created":', b'"metadata":{"k":1},"created":'),
    "a second snapshot": _text_edit(b"}\n", b',"snapshot":null}\n', last=True),
    "a second snapshot, escaped": _text_edit(b"}\n", b',"snaps\\u0068ot":null}\n', last=True),
    "spaces": _text_edit(b'"snapshot":{', b'"snapshot": {'),
    "one metadata key": _text_edit(b'"metadata":{}', b'"metadata":{"tool_modes":{"add":"live"}}'),
}


@pytest.mark.parametrize("name", sorted(_LAYOUTS))
def test_a_header_in_another_layout_is_read_as_its_record_says(
    trace: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    lines = _lines(trace)
    at = _headers(trace)[2]
    lines[at] = _LAYOUTS[name](lines[at])  # type: ignore[operator]
    trace.write_bytes(b"".join(lines))
    record = _validate(lines[at])
    assert isinstance(record, HeaderRecord)
    seen = header_line_module.header_line(lines[at], at + 1, _validate, lambda r, n: record)
    expected = TraceReader(trace).numbered()
    machines = [r.machine() for _, r in expected if isinstance(r, HeaderRecord)]
    if seen is not None:  # it holds exactly the brain its record holds
        assert seen.fields == record.model_copy(update={"snapshot": None})
        for machine in machines:
            same = record.snapshot is not None and machine == record.machine()
            assert seen.holds(machine) == same
    lazy = replay_agent(trace, build)
    _eager(monkeypatch)
    eager = replay_agent(trace, build)
    assert _view(lazy) == _view(eager) and lazy.ok == eager.ok
