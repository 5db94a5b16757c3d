"""A lazy restore checks a sealed text's conversation at the door (``message_shapes.py``).

A forgery sealed again (a new sha256 over edited content) verifies, so the checksum cannot
vouch for it: an invalid message or an incoherent conversation must be refused at restore with
the error the eager restore gives, and the msgspec mirror must never accept a message the
pydantic models refuse (pinned here by a hypothesis property over generated and mutated JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from brain_helpers import awaiting_tools, exchange_messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from loopctl import LoopMachine, Message
from loopctl.core.adopted import sealed_parts
from loopctl.core.encoding import message_json
from loopctl.core.lazy import LazyMessages
from loopctl.core.message_shapes import PARSER_DEPTH, message_shape
from loopctl.core.seal import sealed_text
from loopctl.core.snapshot import MachineSnapshot

Edit = Callable[[bytes], bytes]

ASK = b'{"role":"assistant","parts":[{"kind":"tool_call","id":"h0","name":"read","arguments":'
ANSWER = (
    b'{"role":"user","parts":[{"kind":"tool_result","call_id":"h0","name":"read",'
    b'"content":"ok:h0","is_error":false}]}'
)


def _between_runs() -> LoopMachine:
    return LoopMachine(exchange_messages(3))


def _forged(machine: LoopMachine, edit: Edit) -> bytes:
    """``machine``'s content edited and sealed again: its checksum verifies."""
    content = machine.canonical_json()
    edited = edit(content)
    assert edited != content, "the edit did not apply"
    return sealed_text(edited)


def _eager_error(text: bytes, *, as_data: bool = True) -> str:
    """The eager restore's error for ``text`` (the whole snapshot validated, every model);
    ``as_data``: refused as ``json.loads`` data too (a depth limit is the JSON parser's own)."""
    with pytest.raises(ValidationError) as eager:
        MachineSnapshot.model_validate_json(text)
    if as_data:
        with pytest.raises(ValidationError):
            LoopMachine.model_validate(json.loads(text))
    return str(eager.value)


def _nested(depth: int) -> bytes:
    """Arguments nested ``depth`` deep (``{}`` is 1)."""
    return b'{"x":' + b"[" * (depth - 1) + b"1" + b"]" * (depth - 1) + b"}"


#: Forgeries of a brain between runs (history ``exchange_messages(3)``).
INCOHERENT: dict[str, Edit] = {
    "a result answering another id": lambda b: b.replace(b'"call_id":"h0"', b'"call_id":"zz"'),
    "a call without its result": lambda b: b.replace(b"," + ANSWER, b""),
    "results for no call": lambda b: b.replace(
        b'{"kind":"tool_call","id":"h0","name":"read","arguments":{"path":"/h/0"}}',
        b'{"kind":"text","text":"no call"}',
    ),
    "a call in a user message": lambda b: b.replace(ASK, ASK.replace(b"assistant", b"user")),
    "a result in an assistant message": lambda b: b.replace(
        ANSWER, ANSWER.replace(b'"user"', b'"assistant"')
    ),
    "duplicate call ids": lambda b: b.replace(
        b'{"kind":"tool_call","id":"h1","name":"read","arguments":{"path":"/h/1"}}',
        b'{"kind":"tool_call","id":"h1","name":"read","arguments":{"path":"/h/1"}},'
        b'{"kind":"tool_call","id":"h1","name":"read","arguments":{}}',
    ),
    "an empty call id": lambda b: b.replace(b'"id":"h2"', b'"id":""').replace(
        b'"call_id":"h2"', b'"call_id":""'
    ),
}
INVALID: dict[str, Edit] = {
    "a bad role": lambda b: b.replace(b'{"role":"user"', b'{"role":"robot"', 1),
    "an unknown part kind": lambda b: b.replace(b'"kind":"text"', b'"kind":"image"', 1),
    "a part without its kind": lambda b: b.replace(b'{"kind":"text",', b"{", 1),
    "a text that is a number": lambda b: b.replace(b'"text":"q0"', b'"text":7'),
    "a result's flag that is null": lambda b: b.replace(b'"is_error":false', b'"is_error":null', 1),
    "a result without its name": lambda b: b.replace(
        b'"call_id":"h1","name":"read",', b'"call_id":"h1",'
    ),
    "an extra field in a part": lambda b: b.replace(
        b'"content":"ok:h0"', b'"content":"ok:h0","x":1'
    ),
    "an extra field in a message": lambda b: b.replace(
        b'{"role":"user",', b'{"role":"user","x":1,', 1
    ),
    "arguments that are a list": lambda b: b.replace(b'{"path":"/h/0"}', b"[1]"),
    "parts that are an object": lambda b: b.replace(
        b'"parts":[{"kind":"text","text":"q0"}]', b'"parts":{"kind":"text","text":"q0"}'
    ),
    "NaN in arguments": lambda b: b.replace(b'{"path":"/h/0"}', b'{"path":NaN}'),
    "an infinity in arguments": lambda b: b.replace(b'{"path":"/h/0"}', b'{"path":-Infinity}'),
    "a number past a double": lambda b: b.replace(b'{"path":"/h/0"}', b'{"path":1e999}'),
    "400 digits before a point": lambda b: b.replace(
        b'{"path":"/h/0"}', b'{"x":' + b"9" * 400 + b".5}"
    ),
    "arguments nested past the parser": lambda b: b.replace(
        b'{"path":"/h/0"}', _nested(PARSER_DEPTH - 4)
    ),
}


#: Not JSON to msgspec: the text is not even cut at its messages, and is validated whole.
NOT_JSON = {"NaN in arguments", "an infinity in arguments"}


@pytest.mark.parametrize("name", [*INCOHERENT, *INVALID])
def test_a_forgery_sealed_again_is_refused_at_restore_as_the_eager_restore_refuses_it(
    name: str,
) -> None:
    forged = _forged(_between_runs(), {**INCOHERENT, **INVALID}[name])
    # verified, and in the writer's layout: the lazy restore is tried (and must refuse it)
    assert (sealed_parts(forged) is None) == (name in NOT_JSON)
    expected = _eager_error(forged, as_data=name != "arguments nested past the parser")
    with pytest.raises(ValidationError) as lazy:
        LoopMachine.model_validate_json(forged)
    assert str(lazy.value) == expected
    assert "MachineSnapshot" in expected


MID_RUN: dict[str, Edit] = {  # awaiting_tools: pending [go, ask c1, answer c1, ask k1 u1 k2]
    "a result answering another id": lambda b: b.replace(b'"call_id":"c1"', b'"call_id":"zz"'),
    "a bad role": lambda b: b.replace(b'"role":"user"', b'"role":"robot"', 1),
    "duplicate ids in flight": lambda b: b.replace(b'"id":"k2"', b'"id":"k1"'),
    "a call's name that is null": lambda b: b.replace(b'"name":"read"', b'"name":null', 1),
}


@pytest.mark.parametrize("name", list(MID_RUN))
def test_a_forged_mid_run_text_is_refused_too(name: str) -> None:
    forged = _forged(awaiting_tools(), MID_RUN[name])
    assert sealed_parts(forged) is not None
    expected = _eager_error(forged)
    with pytest.raises(ValidationError) as lazy:
        LoopMachine.model_validate_json(forged)
    assert str(lazy.value) == expected


def test_arguments_as_deep_as_the_eager_parse_reads_restore_lazily() -> None:
    """The depth the mirror admits is the eager parser's, to the level (a deeper value is
    refused by both, above)."""
    deepest = _forged(
        _between_runs(), lambda b: b.replace(b'{"path":"/h/0"}', _nested(PARSER_DEPTH - 5))
    )
    eager = MachineSnapshot.model_validate_json(deepest)  # read by the eager parse
    restored = LoopMachine.model_validate_json(deepest)
    assert isinstance(restored._history, LazyMessages)
    assert restored.history == eager.history
    too_deep = _forged(
        _between_runs(), lambda b: b.replace(b'{"path":"/h/0"}', _nested(PARSER_DEPTH - 4))
    )
    _eager_error(too_deep, as_data=False)


@pytest.mark.parametrize(
    "edit",
    [
        lambda b: b.replace(b'"is_error":false', b'"is_error":0', 1),
        lambda b: b.replace(b'"is_error":false', b'"is_error":"no"', 1),
    ],
    ids=["a flag spelled 0", "a flag spelled no"],
)
def test_what_only_pydantic_accepts_is_restored_as_the_eager_restore_restores_it(
    edit: Edit,
) -> None:
    """The mirror is stricter than pydantic's lax mode (or a span is spelled otherwise than
    msgspec takes): such a text is validated whole, and restores as the eager restore does."""
    forged = _forged(_between_runs(), edit)
    eager = LoopMachine.from_snapshot(MachineSnapshot.model_validate_json(forged))
    restored = LoopMachine.model_validate_json(forged)
    assert not isinstance(restored._history, LazyMessages)
    assert restored == eager and restored.model_dump_json() == eager.model_dump_json()


def test_a_valid_message_spelled_otherwise_restores_lazily_as_spelled() -> None:
    """Valid to both, spelled otherwise than the writer spells it: restored lazily, the same
    messages as the eager restore's, and saved again as the text spells it (the brain's JSON
    is the text's bytes; the eager restore would write the writer's spelling)."""
    forged = _forged(
        _between_runs(),
        lambda b: b.replace(b'{"kind":"text","text":"q0"}', b'{"text":"q0","kind":"text"}'),
    )
    eager = MachineSnapshot.model_validate_json(forged)
    restored = LoopMachine.model_validate_json(forged)
    assert isinstance(restored._history, LazyMessages)
    assert restored.history == eager.history
    assert restored.model_dump_json().encode() == forged


# --- the mirror against the models: a property over generated and mutated message JSON -------

TEXT = st.text(max_size=8)
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
OBJECT = st.dictionaries(TEXT, JSON_VALUE, max_size=3)


def _part(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, st.SearchStrategy[Any]] = {
        "text": st.fixed_dictionaries({"text": TEXT}),
        "tool_call": st.fixed_dictionaries(
            {"id": TEXT, "name": TEXT}, optional={"arguments": OBJECT}
        ),
        "tool_result": st.fixed_dictionaries(
            {"call_id": TEXT, "name": TEXT, "content": TEXT},
            optional={"is_error": st.booleans()},
        ),
        "thinking": st.fixed_dictionaries(
            {},
            optional={
                "provider": TEXT,
                "text": TEXT,
                "signature": st.none() | TEXT,
                "redacted": st.none() | TEXT,
                "data": st.none() | OBJECT,
            },
        ),
        "provider": st.fixed_dictionaries({"provider": TEXT, "data": OBJECT}),
    }[kind]
    return fields.map(lambda d: {"kind": kind, **d})


PART = st.sampled_from(["text", "tool_call", "tool_result", "thinking", "provider"]).flatmap(_part)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant"])},
    optional={"parts": st.lists(PART, max_size=3)},
)
ODD = (
    JSON_VALUE
    | st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e308, 2**70, -(2**64)])
    | st.sampled_from(["robot", "image", "USER", "", "text "])
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A generated message, changed in one place: a value replaced by another of any type, a
    field dropped or added, at the message or at one of its parts."""
    message: dict[str, Any] = draw(MESSAGE)
    parts = message.get("parts") or []
    target = draw(st.sampled_from([message, *parts]))
    how = draw(st.sampled_from(["replace", "drop", "add"]))
    if how == "add" or not target:
        target[draw(st.sampled_from(["x", "kind", "role", "parts", "id", "data"]))] = draw(ODD)
    elif how == "drop":
        del target[draw(st.sampled_from(sorted(target)))]
    else:
        target[draw(st.sampled_from(sorted(target)))] = draw(ODD)
    return message


def _verdicts(raw: bytes) -> tuple[Any, Any]:
    shape = message_shape(raw)
    try:
        model: Message | None = Message.model_validate_json(raw)
    except ValidationError:
        model = None
    return shape, model


def _same(shape: Any, model: Message) -> None:
    """The mirror holds what the model holds (the tag is the model's ``kind``)."""
    assert shape.role == model.role and len(shape.parts) == len(model.parts)
    for mine, theirs in zip(shape.parts, model.parts, strict=True):
        assert mine.kind == theirs.kind
        assert {f: getattr(mine, f) for f in mine.__struct_fields__} == theirs.model_dump(
            exclude={"kind"}
        )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(MESSAGE, mutated()), st.booleans())
def test_the_mirror_accepts_only_what_message_validation_accepts(
    message: dict[str, Any], canonical: bool
) -> None:
    """Never laxer: what the mirror accepts validates, to the same values. Where pydantic's lax
    mode accepts more (a bool spelled 0), the restore hands the text to the whole validation."""
    raw = json.dumps(message, allow_nan=True).encode()
    shape, model = _verdicts(raw)
    if shape is not None:
        assert model is not None, raw
        _same(shape, model)
    if model is not None and canonical:
        written = message_json(model)  # what the writer writes is always accepted
        again = message_shape(written)
        assert again is not None, written
        _same(again, Message.model_validate_json(written))  # (an infinity is written null)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(MESSAGE, mutated()), min_size=1, max_size=3))
def test_a_restore_of_any_forged_conversation_gives_the_eager_verdict(
    messages: list[dict[str, Any]],
) -> None:
    """Generated (and mutated) messages sealed into a brain's history: the lazy restore accepts
    exactly what the eager restore accepts, and refuses the rest with the same error."""
    content = json.loads(LoopMachine().canonical_json())
    content["history"] = messages
    if any(
        p.get("kind") in ("thinking", "provider")
        for m in messages
        for p in (m.get("parts") if isinstance(m.get("parts"), list) else [])
        if isinstance(p, dict)
    ):
        content["version"] = 2
    forged = sealed_text(json.dumps(content, separators=(",", ":"), allow_nan=True).encode())
    try:
        eager: MachineSnapshot | str = MachineSnapshot.model_validate_json(forged)
    except ValidationError as exc:
        eager = str(exc)
    try:
        restored: LoopMachine | str = LoopMachine.model_validate_json(forged)
    except ValidationError as exc:
        restored = str(exc)
    if isinstance(eager, str):
        assert restored == eager
    else:
        assert isinstance(restored, LoopMachine)
        assert restored.history == eager.history and restored.pending == eager.pending
