"""Records as driver-level replay reads them: a step, feed or ``io`` line decoded by ``msgspec``
into a plain view that the replay compares, its pydantic record built only for a report.

Driver-level replay (``loopctl_sim.replay``) reads every line of a trace, and what it does with
most of them is compare: the live step with the recorded one, the live feed's arguments with the
recorded ones, the live request's digest with the recorded one. Validating each line into its
pydantic record (a dozen small models through the discriminated unions) was about a fifth of an
agent replay. ``TraceReader.replay_lines`` gives such lines as views instead:

- ``StepView``: the policy as a ``MachinePolicy`` (the previous step's object when the policy's
  text is the same, as it nearly always is) and the step as msgspec decoded it, compared with the
  brain's by ``loopctl_sim.trace.fast.step_matches``;
- ``FeedView``: the arguments as msgspec decoded them, compared with the driver's live values by
  ``FeedView.matches`` (``fast_structs.args_match``: as the arguments' models compare, building
  none), and their text for a report;
- ``IoView``: the data as plain JSON data (the recorded reply, the request's digest).

A view is made by the fast path's rules (``loopctl_sim.trace.fast``): only when msgspec decoded
the line into the structs that mirror the records field for field (``fast_structs``), its ``seq``
is the expected one and its nesting is one pydantic reads; any other line is validated by
pydantic, so every error is the same ``TraceFormatError``. ``record()`` gives a view's
pydantic record (validated from the line's text, which the view keeps): where a comparison
finds a difference, the replay takes the record and reports from it as from any record, and a
feed's typed ``args`` (a recorded tool result, a compaction) come from it too.

Measured (cachegrind, 3 replays minus 1, PYTHONHASHSEED=0) on ``benchmarks.bench_agent_replay``'s
10,000-record trace of one run: 184,400 -> 150,500 instructions a record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, cast

import msgspec

from loopctl.core import MachinePolicy
from loopctl_sim.trace.fast_structs import ARG_READERS, CallLLMStruct, CallToolsStruct, args_match
from loopctl_sim.trace.feeds import FeedArgs
from loopctl_sim.trace.records import RECORD, FeedRecord, IoRecord, StepRecord

__all__ = ["FeedView", "IoView", "StepView", "View"]

_validate = RECORD.validator.validate_json


class IoView(NamedTuple):
    """An ``io`` line: what ``IoRecord`` holds but its duration, and the line's text."""

    seq: int
    kind: str
    turn: int | None
    data: dict[str, Any]
    scrubbed: bool
    raw: bytes
    type: Literal["io"] = "io"

    def record(self) -> IoRecord:
        return cast(IoRecord, _validate(self.raw))


class StepView(NamedTuple):
    """A ``step`` line: its policy, its step as decoded (``step_matches`` compares it)."""

    seq: int
    policy: MachinePolicy
    step: CallLLMStruct | CallToolsStruct
    scrubbed: bool
    raw: bytes
    type: Literal["step"] = "step"

    def record(self) -> StepRecord:
        return cast(StepRecord, _validate(self.raw))


class FeedView(NamedTuple):
    """A ``feed`` line: its name, digest, the arguments as decoded (``decoded``, compared by
    ``matches``) and as text (``args_json``, for a report)."""

    seq: int
    name: str
    digest: str
    scrubbed: bool
    decoded: msgspec.Struct
    args_json: msgspec.Raw
    raw: bytes
    type: Literal["feed"] = "feed"
    #: (v2) the brain's small fields after the feed, as msgspec decoded them (None: version 1)
    brain: msgspec.Struct | None = None

    def record(self) -> FeedRecord:
        return cast(FeedRecord, _validate(self.raw))

    @property
    def args(self) -> FeedArgs:
        """The typed arguments (from the record: for the few feeds whose values the replay
        hands on, such as a recorded tool result)."""
        return self.record().args

    def matches(self, live: Mapping[str, Any]) -> bool:
        """Whether the driver's live arguments are surely equal to these (False: compare the
        models to be sure)."""
        return args_match(self.decoded, live)

    def values(self) -> tuple[Any, ...]:
        """The arguments' values in field order (the machine method's), built from the decoded
        arguments as pydantic builds them from the same JSON (``fast_structs``, as machine
        replay hands them to the brain): what the replay hands on (a run's input, an injected
        message, a recorded tool result) without validating the line's record."""
        values: tuple[Any, ...] = ARG_READERS[self.name][1](self.decoded)
        return values


#: A line read as a view (``TraceReader.replay_lines``).
View = IoView | StepView | FeedView
