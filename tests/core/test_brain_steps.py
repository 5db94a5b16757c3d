"""States, steps, outcomes and errors: exact round trips through JSON, discriminated on ``kind``."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

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
)

ERROR = LoopError(
    kind="rate_limited", message="slow down", retryable=True, status=429, details={"retry_after": 2}
)
OUTCOMES: list[BaseModel] = [
    Completed(final_text="done"),
    Cancelled(),
    MaxTurnsExceeded(),
    Failed(error=ERROR),
]
STATES: list[BaseModel] = [
    Start(),
    AwaitingModel(turn=1),
    AwaitingTools(turn=2),
    *(AwaitingCompaction(reason=r) for r in CompactReason),
    *(Terminal(outcome=o) for o in OUTCOMES),
]
STEPS: list[BaseModel] = [
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
def test_round_trips_exactly_through_its_union(union: str, value: BaseModel) -> None:
    adapter = ADAPTERS[union]
    restored = adapter.validate_json(adapter.dump_json(value))
    assert restored == value
    assert type(restored) is type(value)


@pytest.mark.parametrize("value", [*STATES, *STEPS], ids=lambda v: v.kind)
def test_states_and_steps_are_frozen(value: BaseModel) -> None:
    with pytest.raises(ValidationError):
        value.kind = "other"  # type: ignore[attr-defined]


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
