"""A replayed run that raised: the same failure as the trace's is its recorded end, any other
a divergence.

A trace records an exception that escaped a run in its end record (``EndRecord.error``). When the
replayed agent raises the same one (type and message, scrubbed alike) where the trace's next
record is that end, the failure reproduced and the run is complete, its brain checked by the
digest; any other exception, or one where the recorded run went on, is a divergence naming both.
"""

from __future__ import annotations

from loopctl.core import LoopMachine, to_jsonable
from loopctl_sim.replay.checker import Checker, brain_view
from loopctl_sim.replay.cursor import Cursor
from loopctl_sim.trace import EndRecord, RunError, end_outcome


class RaisedAsRecorded(BaseException):
    """Raised by a part that answers from the trace (the recorded compactor) where the trace's
    run raised instead of taking its answer: the recorded exception (``error``, an exception of
    the recorded type's name and message) is then the replayed run's end. A ``BaseException``,
    so that the driver's recovery (a compactor's exception becomes a failed run) lets it by."""

    def __init__(self, error: RunError) -> None:
        super().__init__(str(error))
        name = error.type if error.type.isidentifier() else "RuntimeError"
        self.error: Exception = type(name, (Exception,), {})(error.message)


def raised(cursor: Cursor, checker: Checker, machine: LoopMachine, exc: Exception) -> None:
    """``exc`` escaped the replayed run: its recorded end, or a divergence (module docstring)."""
    live = RunError.of(exc)
    item = cursor.next_brain()
    if item is None:
        where = (cursor.line, max(cursor.line - 1, 0))
        went = "the trace ends there"
    else:
        where = (item[0], item[1].seq)
        rec = item[1]
        if isinstance(rec, EndRecord) and rec.error is not None:
            recorded = rec.error.model_dump(mode="json")
            if checker.same(recorded, live.model_dump(mode="json"), rec.scrubbed):
                _ended_raising(cursor, checker, machine, rec)
                return
            checker.fail(
                *where,
                "exception",
                f"the agent raised {live} out of the run; the trace's run raised {rec.error}",
                recorded,
                live.model_dump(mode="json"),
            )
        went = "the recorded run " + (
            "ended through the exit door" if rec.type == "end" else "went on"
        )
    checker.fail(
        *where,
        "exception",
        f"the agent raised {live} out of the run ({went})",
        None if item is None else brain_view(item[1]),
        {"exception": str(live)},
    )


def _ended_raising(cursor: Cursor, checker: Checker, machine: LoopMachine, rec: EndRecord) -> None:
    """The trace's end record of a run that raised, met by the replay raising the same: the
    replayed brain must be the recorded one (its digest), and the run is complete."""
    (line, _), _ = cursor.take_brain()
    digest = machine.digest()
    if checker.digests and digest != rec.digest:
        checker.fail(
            line,
            rec.seq,
            "digest",
            f"{rec.error} escaped the run as it did in the trace, but the brain differs",
            {"digest": rec.digest},
            {"digest": digest},
        )
    checker.in_run = False
    result = checker.result
    result.complete = True
    outcome = end_outcome(machine)
    result.outcome = None if outcome is None else to_jsonable(outcome)
    result.notes.append(
        f"the run ended as the trace's did (line {line}): {rec.error} escaped it again"
    )
