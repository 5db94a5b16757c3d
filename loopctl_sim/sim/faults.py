"""The fault catalogue: every kind of fault a simulated run can suffer, and where each strikes
(docs/testing.md tables them). One catalogue serves the simulators of a scripted ``World``
(``sim.world`` says what each fault does) and the fault layers around a user's own agent
(``sim.layers``). A fault is data (a scenario lists them, the fuzzer draws them, the shrinker
removes them), placed by exactly one coordinate: a model request (``model_call``, 1-based,
retries included) or a dispatched tool call (``tool_call``), and the ``times - 1`` after it; a
tool's first ``times`` calls (``tool``); or a step (``step``, before the N-th ``next_step``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

ModelFaultKind = Literal[
    "network",
    "timeout",
    "rate_limited",
    "server_error",
    "overloaded",
    "context_overflow",
    "malformed_stream",
    "invalid_tool_json",
    "unknown_tool",
    "duplicate_call_ids",
]
ToolFaultKind = Literal[
    "tool_exception", "tool_timeout", "tool_hang", "tool_oversized", "tool_non_json"
]
RunFaultKind = Literal["cancel", "crash", "compact_now", "inject"]
FaultKind = Literal[ModelFaultKind, ToolFaultKind, RunFaultKind]
MODEL_FAULTS: Final = frozenset(get_args(ModelFaultKind))
TOOL_FAULTS: Final = frozenset(get_args(ToolFaultKind))
RUN_FAULTS: Final = frozenset(get_args(RunFaultKind))

#: The name an ``unknown_tool`` fault gives the model's call.
UNKNOWN_TOOL: Final = "no_such_tool"


class Fault(BaseModel):
    """One scheduled fault. Exactly one place: ``model_call``, ``tool_call``/``tool``, ``step``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: FaultKind
    model_call: int | None = Field(None, ge=1)
    tool_call: int | None = Field(None, ge=1)
    tool: str | None = None
    step: int | None = Field(None, ge=1)
    times: int = Field(1, ge=1)
    status: int | None = None
    retry_after: float | None = Field(None, ge=0)
    message: str | None = None
    text: str | None = None
    size: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _placed(self) -> Fault:
        if self.kind in MODEL_FAULTS:
            if self.model_call is None:
                raise ValueError(f"a {self.kind} fault needs model_call (1-based request index)")
            if self.tool_call is not None or self.tool is not None or self.step is not None:
                raise ValueError(f"a {self.kind} fault is placed by model_call only")
        elif self.kind in TOOL_FAULTS:
            if (self.tool_call is None) == (self.tool is None):
                raise ValueError(f"a {self.kind} fault needs exactly one of tool_call or tool")
            if self.model_call is not None or self.step is not None:
                raise ValueError(f"a {self.kind} fault is placed by tool_call or tool only")
            if self.size is not None and self.kind != "tool_oversized":
                raise ValueError("size goes with a tool_oversized fault only")
        else:
            if self.step is None:
                raise ValueError(f"a {self.kind} fault needs step (1-based next_step index)")
            if self.model_call is not None or self.tool_call is not None or self.tool:
                raise ValueError(f"a {self.kind} fault is placed by step only")
            if self.kind == "inject" and not self.text:
                raise ValueError("an inject fault needs text")
        return self

    def hits(self, index: int, start: int | None) -> bool:
        return start is not None and start <= index < start + self.times


class FaultPlan:
    """Look up the fault scheduled at a model request, tool call or step (first listed wins)."""

    def __init__(self, faults: Sequence[Fault] = ()) -> None:
        self.faults = tuple(faults)
        # by place, in the listed order: a layer with nothing of its kind to do can tell at once
        self.tool_faults = tuple(f for f in self.faults if f.kind in TOOL_FAULTS)

    def model_fault(self, request: int) -> Fault | None:
        for f in self.faults:
            if f.kind in MODEL_FAULTS and f.hits(request, f.model_call):
                return f
        return None

    def tool_fault(self, index: int, name: str, nth_of_name: int) -> Fault | None:
        for f in self.tool_faults:
            if f.hits(index, f.tool_call) or (f.tool == name and nth_of_name <= f.times):
                return f
        return None

    def run_faults(self, step: int) -> list[Fault]:
        return [f for f in self.faults if f.kind in RUN_FAULTS and f.step == step]
