"""The trace reader's fast path (``loopctl_sim.trace.fast``) against pydantic, its reference.

Whatever the fast path accepts must read to the record pydantic builds (equal, same repr, same
JSON, same fields set); whatever it does not accept goes to pydantic, so a reader with the fast
path and one without (``TraceReader(fast=False)``) give the same records and the same errors.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec
import pytest
from pydantic import BaseModel
from sim_helpers import TRACES, adding_world, lines, write_lines

from loopctl import MachinePolicy, Message, ToolCall
from loopctl.core import CallLLM, CallTools
from loopctl_sim.replay import machine as replay_module
from loopctl_sim.replay import replay_trace
from loopctl_sim.sim.machine import simulate
from loopctl_sim.sim.world import Fault
from loopctl_sim.trace import (
    READ_AHEAD,
    RECORD,
    FeedLine,
    Record,
    StepLine,
    StepRecord,
    TraceFormatError,
    TraceReader,
    feed_line,
)
from loopctl_sim.trace.fast import fast_path_problems, make_batch_decoder, step_matches

CORPUS = sorted(TRACES.glob("*.jsonl")) + sorted((TRACES / "driver").glob("*.jsonl"))


#: ``make_decoder``'s answer for a well-formed ``io`` line (taken, checked, never built).
IO_SEEN: Final = "io seen"


def make_decoder() -> Callable[[bytes, int], Any]:
    """The fast path a line at a time: ``decode(raw, seq)`` gives the line's replay form
    (``IO_SEEN`` for an io line), or None when it leaves the line to pydantic."""
    take = make_batch_decoder()
    assert take is not None, fast_path_problems()

    def decode(raw: bytes, expected_seq: int) -> Any:
        out: list[Any] = []
        if take([raw], 0, expected_seq, out) == 0:
            return None
        return IO_SEEN if out[0] is None else out[0]

    return decode


def _models(value: Any) -> Iterator[BaseModel]:
    """Every model inside ``value`` (itself included)."""
    if isinstance(value, BaseModel):
        yield value
        for name in type(value).model_fields:
            yield from _models(getattr(value, name))
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _models(item)


def assert_same_model(got: Any, expected: BaseModel) -> None:
    """``got`` is what pydantic built, down to field order and every model's fields set."""
    assert type(got) is type(expected)
    assert got == expected
    assert repr(got) == repr(expected)
    assert got.model_dump_json() == expected.model_dump_json()
    for a, b in zip(_models(got), _models(expected), strict=True):
        assert type(a) is type(b)
        assert a.model_fields_set == b.model_fields_set
        assert list(a.__dict__) == list(b.__dict__)
        assert a.__pydantic_extra__ == b.__pydantic_extra__
        assert a.__pydantic_private__ == b.__pydantic_private__


def assert_replay_form(item: Any, expected: Record) -> None:
    """``item`` is the replay form (``TraceReader.replay_records``) of ``expected``."""
    if expected.type == "io":
        assert item is IO_SEEN or item is None
    elif isinstance(expected, StepRecord):
        assert type(item) is StepLine
        assert item.policy == expected.policy
        assert step_matches(expected.step, item.step)
        if not isinstance(item.step, BaseModel):  # the fast path's: decoded, not built
            assert msgspec.to_builtins(item.step) == expected.step.model_dump(mode="json")
        else:
            assert item.step == expected.step
    else:
        reference = feed_line(expected)  # type: ignore[arg-type]
        assert type(item) is FeedLine
        assert (item.name, item.digest, item.scrubbed) == (
            reference.name,
            reference.digest,
            reference.scrubbed,
        )
        assert len(item.call) == len(reference.call)
        for got, want in zip(item.call, reference.call, strict=True):
            assert type(got) is type(want) and got == want
            for a, b in zip(_models(got), _models(want), strict=True):
                assert_same_model(a, b)
        if isinstance(item.args, BaseModel):
            args = item.args.model_dump(mode="json")
        else:  # the fast path's: their JSON text
            args = msgspec.json.decode(item.args)
        assert args == expected.args.model_dump(mode="json")  # type: ignore[union-attr]


def taken_as_pydantic_reads_it(raw: bytes, seq: int) -> bool:
    """Whether a fresh fast-path decoder takes ``raw`` as the line of ``seq``; if it does, it
    gives what pydantic builds from the line."""
    item = make_decoder()(raw, seq)
    if item is None:
        return False
    expected = RECORD.validate_json(raw)  # a line taken is one pydantic reads
    assert expected.seq == seq, raw
    assert_replay_form(item, expected)
    return True


def _kind(record: Record) -> str:
    if isinstance(record, StepRecord):
        return f"step/{record.step.kind}"
    return f"{record.type}/{getattr(record, 'name', None) or getattr(record, 'kind', '')}"


def test_the_fast_path_is_on() -> None:
    """If the models change under it, the fast path turns itself off: this says it did."""
    assert fast_path_problems() == []


def test_every_corpus_line_reads_to_what_pydantic_builds() -> None:
    assert CORPUS
    taken: Counter[str] = Counter()
    left: Counter[str] = Counter()
    for path in CORPUS:
        decode = make_decoder()
        for seq, raw in enumerate(path.read_bytes().splitlines(keepends=True)):
            expected = RECORD.validate_json(raw)
            item = decode(raw, seq)
            if item is None:
                left[_kind(expected)] += 1
                continue
            taken[_kind(expected)] += 1
            assert_replay_form(item, expected)
            assert make_decoder()(raw, seq + 1) is None  # another seq than expected: pydantic's
    # Only headers, ends, compact and done steps and fail feeds go to pydantic.
    assert {kind.split("/")[0] for kind in left} <= {"header", "end", "step", "feed"}
    assert {k for k in left if k.startswith(("step", "feed"))} <= {
        "step/compact",
        "step/done",
        "feed/fail",
    }
    for kind in (
        "step/call_llm",
        "step/call_tools",
        "feed/accept_input",
        "feed/model_response",
        "feed/tool_results",
        "feed/set_context_tokens",
        "feed/compaction_result",
        "feed/commit_pending",
        "feed/discard_pending",
        "feed/cancel",
        "io/model_request",
        "io/model_reply",
        "io/tool_call",
        "io/tool_result",
    ):
        assert taken[kind], kind


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_readers_with_and_without_the_fast_path_agree_on_the_corpus(path: Path) -> None:
    expected = list(TraceReader(path, fast=False).numbered())
    assert list(TraceReader(path).numbered()) == expected  # full records: pydantic's always
    fast, slow = TraceReader(path), TraceReader(path, fast=False)
    replayed, slow_replayed = list(fast.replay_records()), list(slow.replay_records())
    assert fast.header == slow.header and fast.line == slow.line
    assert [line for line, _ in replayed] == [line for line, _ in expected]
    assert [line for line, _ in slow_replayed] == [line for line, _ in expected]
    for (_, item), (_, slow_item), (_, record) in zip(
        replayed, slow_replayed, expected, strict=True
    ):
        if record.type in ("header", "end"):
            assert item == record == slow_item
        else:
            assert_replay_form(item, record)
            assert_replay_form(slow_item, record)


# --- mutations: the fast path takes a line only if pydantic reads it to the same record ---------

_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2,
    1.0,
    0.5,
    1e300,
    2**64 + 1,
    -(2**63) - 1,
    "x",
    "",
    "tool_call",
    [],
    [1],
    {},
    {"x": 1},
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutations(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """``data`` with one thing changed: a value replaced, a key dropped or added."""
    for path in _paths(data):
        if not path:
            continue
        parent_path, last = path[:-1], path[-1]
        for value in _VALUES:
            changed = copy.deepcopy(data)
            parent = changed
            for key in parent_path:
                parent = parent[key]
            parent[last] = value
            yield changed
        changed = copy.deepcopy(data)
        parent = changed
        for key in parent_path:
            parent = parent[key]
        if isinstance(parent, dict):
            del parent[last]
            yield changed
            extra = copy.deepcopy(data)
            target = extra
            for key in parent_path:
                target = target[key]
            target["extra"] = 1
            yield extra
        else:
            parent.pop(last)
            yield changed


def _samples() -> list[dict[str, Any]]:
    """One line of each kind the fast path takes, from the corpus."""
    seen: dict[str, dict[str, Any]] = {}
    for path in CORPUS:
        for raw in path.read_bytes().splitlines():
            record = RECORD.validate_json(raw)
            kind = _kind(record)
            if kind not in seen and make_decoder()(raw, record.seq) is not None:
                seen[kind] = json.loads(raw)
    return list(seen.values())


def _encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode() + b"\n"


def test_a_changed_line_is_taken_only_as_what_pydantic_builds() -> None:
    samples = _samples()
    assert len(samples) >= 12
    checked = taken = 0
    for sample in samples:
        seq = sample["seq"]
        for changed in _mutations(sample):
            checked += 1
            taken += taken_as_pydantic_reads_it(_encode(changed), seq)
    assert checked > 1000 and taken > 0


def _outcome(reader: TraceReader, replay: bool = True) -> Any:
    try:
        items = list(reader.replay_records() if replay else reader.numbered())
    except TraceFormatError as exc:
        return ("error", exc.path, exc.line, exc.reason)
    return ("ok", len(items), reader.warnings)


def test_a_changed_line_in_a_trace_gives_the_same_records_or_error_as_pydantic(
    tmp_path: Path,
) -> None:
    """The same file, line and reason as the reader without the fast path, for every change."""
    path = tmp_path / "changed.jsonl"
    header = next(r for r in lines(CORPUS[0]) if r["type"] == "header")
    errors = 0
    for sample in _samples():
        for changed in _mutations({**sample, "seq": 1}):
            path.write_bytes(_encode(header) + _encode(changed))
            slow = _outcome(TraceReader(path, fast=False))
            assert _outcome(TraceReader(path)) == slow
            assert _outcome(TraceReader(path), replay=False) == slow
            errors += slow[0] == "error"
            if slow[0] == "ok":
                records = list(TraceReader(path, fast=False))
                items = [item for _, item in TraceReader(path).replay_records()]
                assert items[0] == records[0]
                assert_replay_form(items[1], records[1])
    assert errors > 100


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json\n", "not valid JSON"),
        (b"[1, 2]\n", "invalid record"),
        (
            b'{"seq": 1, "type": "io", "kind": 5, "turn": null, "data": {}, "duration_s": null}\n',
            "",
        ),
        (
            b'{"seq": 1, "type": "io", "kind": "x", "turn": "soon", "data": {}, '
            b'"duration_s": null}\n',
            "",
        ),
        (b'{"seq": 1, "type": "io", "kind": "x", "turn": 2, "data": [], "duration_s": null}\n', ""),
        (b'{"seq": 1, "type": "io", "kind": "x", "data": {}, "extra": 1}\n', "extra"),
        (b'{"seq": 2, "type": "io", "kind": "x", "turn": 2, "data": {}, "duration_s": 1.5}\n', ""),
        (
            b'{"seq": 1, "type": "feed", "name": "set_context_tokens", "args": {"n": "many"}, '
            b'"digest": "d", "scrubbed": false}\n',
            "",
        ),
        (
            b'{"seq": 1, "type": "feed", "name": "set_context_tokens", "args": {"n": 3, "m": 1}, '
            b'"digest": "d", "scrubbed": false}\n',
            "",
        ),
        (
            b'{"seq": 1, "type": "feed", "name": "tool_results", "args": {"message": '
            b'{"role": "tool", "parts": []}}, "digest": "d", "scrubbed": false}\n',
            "",
        ),
        (
            b'{"seq": 1, "type": "step", "policy": {}, '
            b'"step": {"kind": "call_llm", "turn": 1.5}}\n',
            "",
        ),
        (
            b'{"seq": 1, "type": "step", "policy": {"max_turns": -1}, '
            b'"step": {"kind": "call_llm", "turn": 1}}\n',
            "",
        ),
        (
            b'{"seq": 1, "type": "step", "policy": {}, "step": {"kind": "call_llm", "turn": 1}, '
            b'"x": 0}\n',
            "extra",
        ),
        (
            b'{"seq": 1, "type": "feed", "name": "cancel", "args": {}, "digest": "d", '
            b'"scrubbed": fa',
            "",
        ),
    ],
)
def test_malformed_lines_give_the_errors_they_gave_before(
    tmp_path: Path, line: bytes, reason: str
) -> None:
    path = tmp_path / "bad.jsonl"
    header = next(r for r in lines(CORPUS[0]) if r["type"] == "header")
    path.write_bytes(_encode(header) + line)
    slow = _outcome(TraceReader(path, fast=False))
    assert _outcome(TraceReader(path)) == slow
    assert _outcome(TraceReader(path), replay=False) == slow
    if not line.endswith(b"\n"):  # a truncated last line: a warning, the rest is read
        assert slow[0] == "ok" and "truncated last line" in slow[2][0]
    else:
        assert slow[0] == "error" and reason.lower() in slow[3].lower()


def _feed_with(arguments: bytes = b'{"a":1}', text: bytes = b'"t"') -> bytes:
    """A model_response feed line holding these (JSON) tool call arguments and text."""
    return (
        b'{"seq":1,"type":"feed","digest":"d","scrubbed":false,"name":"model_response","args":'
        b'{"response":{"role":"assistant","parts":[{"kind":"text","text":' + text + b"},"
        b'{"kind":"tool_call","id":"c","name":"add","arguments":' + arguments + b"}]},"
        b'"context_tokens":3}}\n'
    )


def _io_with(data: bytes = b"{}", kind: bytes = b'"x"', duration: bytes = b"null") -> bytes:
    return (
        b'{"seq":1,"type":"io","kind":'
        + kind
        + b',"turn":2,"data":'
        + data
        + b',"duration_s":'
        + duration
        + b"}\n"
    )


def _step_with(arguments: bytes = b"{}", policy: bytes = b"{}") -> bytes:
    return (
        b'{"seq":1,"type":"step","policy":' + policy + b',"step":{"kind":"call_tools","turn":1,'
        b'"calls":[{"kind":"tool_call","id":"c","name":"add","arguments":' + arguments + b"}]}}\n"
    )


def _nested(depth: int, text: int = 0) -> bytes:
    """An object nested ``2 * depth + 1`` deep, after a text of ``text`` brackets."""
    return b'{"t":"' + b"{[" * text + b'","a":' + b'{"b":[' * depth + b"1" + b"]}" * depth + b"}"


#: Where a JSON reader might read differently from pydantic's: numbers beyond a float, NaN,
#: nesting, UTF-8 (valid, invalid, surrogates, overlong, beyond U+10FFFF), escapes, duplicate
#: keys, whitespace.
_TEXTS: list[bytes] = [
    b'"caf\xc3\xa9 \xf0\x9f\x98\x80"',
    b'"\xff"',
    b'"\xc0\xaf"',
    b'"\xed\xa0\x80"',
    b'"\xf4\x90\x80\x80"',
    rb'"\ud83d\ude00"',
    rb'"\ud800"',
    rb'"\udc00x"',
    rb'"\u00e9\/\b\f\n\r\t\u0000"',
    rb'"\a"',
    b'"\x1f"',
    b'"\x7f"',
]
_VALUES_JSON: list[bytes] = [
    b"18446744073709551617",
    b"-9223372036854775809",
    b"1" + b"0" * 400,
    b"1e400",
    b"-1e400",
    b"1.7976931348623157e308",
    b"5e-324",
    b"0.1",
    b"-0",
    b"-0.0",
    b"1E2",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"01",
    b"1.",
    b"+1",
    *_TEXTS,
]
_OBJECTS: list[bytes] = [
    *(b'{"a":' + v + b"}" for v in _VALUES_JSON),
    *(b"{" + t + b":1}" for t in _TEXTS),
    *(_nested(depth) for depth in (10, 95, 97, 99, 100, 101, 150, 300, 600)),
    # past _COUNT_UP_TO bytes, or with more brackets than _MAX_DEPTH in text: parsed to know
    *(_nested(depth, text) for depth in (10, 97, 98, 99, 100) for text in (100, 400)),
    b'{"a":1,"b":2,"a":3}',
    b'{ "a" : [ 1 , 2 ] }',
    b'{"a":1,}',
    b"[]",
    b"null",
]


def _edge_lines() -> Iterator[bytes]:
    for obj in _OBJECTS:
        yield _feed_with(arguments=obj)
        yield _io_with(data=obj)
        yield _step_with(arguments=obj)
    for text in _TEXTS:
        yield _feed_with(text=text)
        yield _io_with(kind=text)
        yield _step_with(policy=b'{"tools":[' + text + b"]}")
    for value in _VALUES_JSON:
        yield _io_with(duration=value)
        yield _step_with(policy=b'{"compact_threshold":' + value + b"}")
    line = _feed_with()
    yield line.replace(b'"digest":"d"', b'"digest":"d","digest":"e"')
    yield line.replace(b'"kind":"text","text":"t"', b'"kind":"text","text":"t","text":"u"')
    yield line.replace(b'"type":"feed"', b'"type":"f\\u0065ed"')
    yield line.replace(b'"seq":1', b'"s\\u0065q":1')
    yield line.replace(b'"seq":1', b'"seq":1,"seq":2')
    yield line.replace(b'"seq":1', b'"seq":2,"seq":1')
    yield line.replace(b'"type":"feed"', b'"type":"feed","type":"io"')
    yield line.replace(b",", b" ,\t").replace(b":", b"\r\n:")
    yield line.replace(b"\n", b"\r\n")
    yield b" \t" + line
    yield line[:-1]
    yield line[:-1] + b" x\n"
    yield b"\xef\xbb\xbf" + line


def test_json_edge_cases_read_as_pydantic_reads_them(tmp_path: Path) -> None:
    """Lines that JSON readers may read differently, each decoded alone and in a trace: taken
    only as pydantic reads them (big integers exactly, duplicate keys the last), and otherwise
    left to it (NaN, numbers beyond a float, nesting past its parser's limit, bad UTF-8)."""
    header = _encode(next(r for r in lines(CORPUS[0]) if r["type"] == "header"))
    path = tmp_path / "edge.jsonl"
    taken = 0
    for raw in _edge_lines():
        taken += taken_as_pydantic_reads_it(raw, 1)
        path.write_bytes(header + raw)
        slow = _outcome(TraceReader(path, fast=False))
        assert _outcome(TraceReader(path)) == slow, raw
    assert taken > 50
    big = make_decoder()(_feed_with(arguments=b'{"a":18446744073709551617}'), 1)
    assert big.call[0].parts[1].arguments == {"a": 2**64 + 1}
    for depth in (150, 300):  # pydantic's parser stops at about 200 levels, msgspec's later
        assert make_decoder()(_io_with(data=_nested(depth)), 1) is None
    for text in (0, 100, 400):  # brackets in text are not nesting
        assert make_decoder()(_io_with(data=_nested(90, text)), 1) is not None
        assert make_decoder()(_feed_with(arguments=_nested(90, text)), 1) is not None


def test_an_equal_policy_is_read_once() -> None:
    policy = MachinePolicy(tools=("add",), loop_action="off").model_dump(mode="json")
    decode = make_decoder()

    def step(seq: int, policy: dict[str, Any]) -> bytes:
        return _encode(
            {
                "seq": seq,
                "type": "step",
                "policy": policy,
                "step": CallLLM(turn=seq).model_dump(mode="json"),
            }
        )

    first = decode(step(1, policy), 1)
    again = decode(step(2, dict(policy)), 2)
    assert again.policy is first.policy
    # equal as Python values but not as JSON: pydantic reads both to the same policy
    loose = {**policy, "max_turns": float(policy["max_turns"]), "compact_now": 0}
    assert decode(step(3, loose), 3).policy is first.policy
    assert RECORD.validate_json(step(3, loose)).policy == first.policy  # type: ignore[union-attr]
    other = decode(step(4, {**policy, "max_turns": 7}), 4)
    assert other.policy.max_turns == 7 and other.policy is not first.policy


def test_step_matches_is_pydantic_equality() -> None:
    call = ToolCall(id="c1", name="add", arguments={"a": 1, "b": 2})
    steps: list[Any] = [
        CallLLM(turn=1),
        CallLLM(turn=2),
        CallTools(turn=1, calls=(call,)),
        CallTools(turn=2, calls=(call,)),
        CallTools(turn=1, calls=(call, call)),
        CallTools(turn=1, calls=(call.model_copy(update={"arguments": {"a": 1}}),)),
        CallTools(turn=1, calls=(call.model_copy(update={"id": "c2"}),)),
        CallTools(turn=1, calls=()),
    ]
    policy = MachinePolicy().model_dump(mode="json")
    for recorded in steps:
        line = _encode({"seq": 1, "type": "step", "policy": policy, "step": recorded.model_dump()})
        decoded = make_decoder()(line, 1).step  # as the fast path reads it
        assert not isinstance(decoded, BaseModel)
        for actual in steps:
            for expected in (decoded, recorded):
                assert step_matches(actual, expected) == (actual == recorded), (actual, recorded)
        assert not step_matches(Message.user("x"), decoded)


def test_replay_gives_the_same_result_with_and_without_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports (divergences, recent feeds, counts) are the same whichever path read the lines."""
    base = tmp_path / "run.jsonl"
    simulate(adding_world(Fault(kind="rate_limited", model_call=2)), base, created="t")
    records = lines(base)
    traces = [base, *CORPUS[:6]]
    step = next(i for i, r in enumerate(records) if r["type"] == "step" and i > 5)
    feed = next(
        i for i, r in enumerate(records) if r["name" if "name" in r else "type"] == "model_response"
    )
    for index, change in (
        (step, {"step": {"kind": "call_llm", "turn": 99}}),
        (feed, {"digest": "0" * 16}),
    ):
        changed = [dict(r) for r in records]
        changed[index].update(change)
        path = tmp_path / f"changed-{index}.jsonl"
        write_lines(path, changed)
        traces.append(path)
    fast = [replay_trace(p).to_json() for p in traces]
    fast += [replay_trace(p, until=7).to_json() for p in traces]
    monkeypatch.setattr(replay_module, "TraceReader", partial(TraceReader, fast=False))
    slow = [replay_trace(p).to_json() for p in traces]
    slow += [replay_trace(p, until=7).to_json() for p in traces]
    assert fast == slow
    assert sum(not r["ok"] for r in fast) >= 2


# --- reading ahead: what replay meets keeps its place -------------------------------------------


@pytest.fixture
def long_trace(tmp_path: Path) -> Path:
    path = tmp_path / "long.jsonl"
    path.write_bytes((TRACES / "long_run.jsonl").read_bytes())
    assert len(path.read_bytes().splitlines()) > 2 * READ_AHEAD
    return path


@pytest.mark.parametrize("bad", [3, READ_AHEAD - 1, READ_AHEAD, READ_AHEAD + 5])
def test_replay_records_hands_out_every_record_before_a_bad_line(
    long_trace: Path, bad: int
) -> None:
    text = long_trace.read_bytes().splitlines(keepends=True)
    text[bad] = b"{broken\n"
    long_trace.write_bytes(b"".join(text))
    items = TraceReader(long_trace).replay_records()
    got = [next(items)[0] for _ in range(bad)]
    assert got == list(range(1, bad + 1))
    with pytest.raises(TraceFormatError, match=f":{bad + 1}: not valid JSON"):
        next(items)


def test_a_divergence_before_a_bad_line_is_reported_first(long_trace: Path) -> None:
    records = lines(long_trace)
    step = next(i for i, r in enumerate(records) if r["type"] == "step" and i > 3)
    records[step]["step"] = {"kind": "call_llm", "turn": 999}
    write_lines(long_trace, records)
    text = long_trace.read_bytes().splitlines(keepends=True)
    text[step + 5] = b"{broken\n"  # within the lines read ahead of the divergence
    long_trace.write_bytes(b"".join(text))
    result = replay_trace(long_trace)
    assert result.divergence is not None and result.divergence.seq == step
    assert result.records == step + 1 and result.warnings == []


def test_a_truncated_last_line_is_a_warning_once_replay_gets_there(long_trace: Path) -> None:
    text = long_trace.read_bytes()
    long_trace.write_bytes(text[:-20])  # the end record loses its tail and its newline
    reader = TraceReader(long_trace)
    items = reader.replay_records()
    n = len(text.splitlines()) - 1
    for _ in range(n):
        next(items)
        assert reader.warnings == []
    with pytest.raises(StopIteration):
        next(items)
    assert len(reader.warnings) == 1 and "truncated last line" in reader.warnings[0]
    result = replay_trace(long_trace)
    assert result.ok and not result.complete and len(result.warnings) == 1
    # stopped before the end: no warning, as when every line was read one at a time
    assert replay_trace(long_trace, until=5).warnings == []


@pytest.mark.parametrize("bad", [3, READ_AHEAD - 1, READ_AHEAD, READ_AHEAD + 5])
def test_replay_batches_hand_out_every_record_before_a_bad_line(long_trace: Path, bad: int) -> None:
    text = long_trace.read_bytes().splitlines(keepends=True)
    text[bad] = b"{broken\n"
    long_trace.write_bytes(b"".join(text))
    handed: list[int] = []
    with pytest.raises(TraceFormatError, match=f":{bad + 1}: not valid JSON"):
        for batch in TraceReader(long_trace).replay_batches():
            handed.append(len(batch))
    assert sum(handed) == bad and all(0 < n <= READ_AHEAD for n in handed)


def test_replay_batches_are_the_records_in_order(long_trace: Path) -> None:
    batches = list(TraceReader(long_trace).replay_batches())
    assert all(len(batch) == READ_AHEAD for batch in batches[:-1])
    items = [item for batch in batches for item in batch]
    records = list(TraceReader(long_trace, fast=False))
    assert len(items) == len(records)
    for item, record in zip(items, records, strict=True):
        if record.type in ("header", "end"):
            assert item == record
        else:
            assert_replay_form(item, record)


@pytest.mark.parametrize(
    "until", [READ_AHEAD - 2, READ_AHEAD - 1, READ_AHEAD, READ_AHEAD + 3, 2 * READ_AHEAD]
)
def test_until_stops_in_any_batch(long_trace: Path, until: int) -> None:
    result = replay_trace(long_trace, until=until)
    assert result.ok and result.stopped_at == until and result.records == until + 1
    read = list(TraceReader(long_trace))[: until + 1]
    assert (result.steps, result.feeds, result.io) == tuple(
        sum(r.type == kind for r in read) for kind in ("step", "feed", "io")
    )


def test_a_line_changed_byte_by_byte_is_taken_only_as_pydantic_reads_it() -> None:
    """Random one-byte changes (deleted, inserted, replaced: JSON punctuation, escapes, digits,
    whitespace, bytes beyond ASCII) of one line of each kind: msgspec and pydantic read the
    same bytes, and the fast path takes a line only as pydantic reads it."""
    rng = random.Random(5)
    checked = taken = 0
    for sample in _samples():
        for changed in byte_changes(_encode(sample), rng, 300):
            checked += 1
            taken += taken_as_pydantic_reads_it(changed, sample["seq"])
    assert checked > 3000 and taken > 100


#: The bytes a one-byte change puts in: JSON punctuation, escapes, digits, whitespace, bytes
#: beyond ASCII.
_ALPHABET: Final = (
    b'{}[]:,"\\/ \t\r\n0123456789.eE+-tfnulUabx\x00\x1f\x7f\x80\xbf\xc3\xe2\xed\xf0\xff'
)


def byte_changes(raw: bytes, rng: random.Random, n: int) -> Iterator[bytes]:
    """``n`` random one-byte changes of the line ``raw`` (deleted, inserted, replaced; its
    newline stays)."""
    for _ in range(n):
        at = rng.randrange(len(raw) - 1)
        byte = bytes([rng.choice(_ALPHABET)])
        yield rng.choice(
            [raw[:at] + raw[at + 1 :], raw[:at] + byte + raw[at:], raw[:at] + byte + raw[at + 1 :]]
        )
