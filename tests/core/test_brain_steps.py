"""States, steps, outcomes and errors: exact round trips through JSON, discriminated on ``kind``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from loopctl import (
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    LoopError,
    MachineStep,
    MaxTurnsExceeded,
    ToolCall,
)
from loopctl.core import (
    AwaitingCompaction,
    AwaitingModel,
    AwaitingTools,
    MachineOutcome,
    MachineState,
    Start,
    Terminal,
    to_json,
    to_jsonable,
)

ERROR = LoopError(
    kind="rate_limited", message="slow down", retryable=True, status=429, details={"retry_after": 2}
)
OUTCOMES: list[Any] = [
    Completed(final_text="done"),
    Cancelled(),
    MaxTurnsExceeded(),
    Failed(error=ERROR),
]
STATES: list[Any] = [
    Start(),
    AwaitingModel(turn=1),
    AwaitingTools(turn=2),
    *(AwaitingCompaction(reason=r) for r in CompactReason),
    *(Terminal(outcome=o) for o in OUTCOMES),
]
STEPS: list[Any] = [
    CallLLM(turn=3),
    CallTools(turn=3, calls=(ToolCall(id="a", name="read", arguments={"p": [1, {"q": None}]}),)),
    *(Compact(reason=r) for r in CompactReason),
    *(Done(outcome=o) for o in OUTCOMES),
]
ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "outcome": TypeAdapter(MachineOutcome),
    "state": TypeAdapter(MachineState),
    "step": TypeAdapter(MachineStep),
}
CASES = [
    *(("outcome", o) for o in OUTCOMES),
    *(("state", s) for s in STATES),
    *(("step", s) for s in STEPS),
]


@pytest.mark.parametrize(("union", "value"), CASES, ids=lambda v: getattr(v, "kind", v))
def test_round_trips_exactly_through_its_union(union: str, value: Any) -> None:
    adapter = ADAPTERS[union]
    restored = adapter.validate_json(adapter.dump_json(value))
    assert restored == value
    assert type(restored) is type(value)


@pytest.mark.parametrize("value", [*STATES, *STEPS], ids=lambda v: v.kind)
def test_states_and_steps_are_frozen(value: Any) -> None:
    with pytest.raises(AttributeError):
        value.kind = "other"


def test_they_write_the_bytes_a_snapshot_and_a_trace_hold() -> None:
    # kind first, then the fields in order: the shipped traces' digests depend on these bytes
    done = Done(outcome=Failed(error=ERROR))
    assert to_json(done) == (
        b'{"kind":"done","outcome":{"kind":"failed","error":{"kind":"rate_limited",'
        b'"message":"slow down","retryable":true,"status":429,"details":{"retry_after":2}}}}'
    )
    assert to_jsonable(Compact(reason=CompactReason.MANUAL)) == {
        "kind": "compact",
        "reason": "manual",
    }


def test_equal_values_are_equal_and_hash_alike_and_match_by_type() -> None:
    assert CallLLM(turn=2) == CallLLM(turn=2) != CallLLM(turn=3)
    assert hash(CallLLM(turn=2)) == hash(CallLLM(turn=2))
    other: object = AwaitingTools(turn=2)
    assert AwaitingModel(turn=2) != other  # same fields, other type
    match Done(outcome=Completed(final_text="hi")):
        case Done(outcome=Completed(final_text=text)):
            assert text == "hi"
        case _:
            pytest.fail("a Done did not match")


@pytest.mark.parametrize(
    ("union", "data"),
    [
        ("step", {"kind": "call_llm"}),
        ("step", {"kind": "sleep", "turn": 1}),
        ("step", {"kind": "compact", "reason": "boredom"}),
        ("state", {"kind": "awaiting_tools"}),
        ("outcome", {"kind": "failed", "error": {"kind": "gremlins", "message": "?"}}),
        ("outcome", {"kind": "completed", "final_text": "x", "extra": 1}),
    ],
)
def test_malformed_data_is_rejected(union: str, data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ADAPTERS[union].validate_python(data)


def test_compact_reasons_are_listed_in_the_order_they_are_checked() -> None:
    assert list(CompactReason) == [
        CompactReason.MANUAL,
        CompactReason.EMERGENCY,
        CompactReason.THRESHOLD_EXCEEDED,
    ]
    assert [r.value for r in CompactReason] == ["manual", "emergency", "threshold_exceeded"]


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (ERROR, "rate_limited (HTTP 429): slow down"),
        (LoopError(kind="loop_detected", message="again"), "loop_detected: again"),
    ],
)
def test_loop_error_reads_well(error: LoopError, text: str) -> None:
    assert str(error) == text


def test_loop_error_defaults() -> None:
    error = LoopError(kind="internal", message="x")
    assert (error.retryable, error.status, error.details) == (False, None, {})
