"""Machine-level replay: re-ask every recorded step, re-apply every feed, compare everything.

The brain is deterministic, so a trace is a complete explanation of a run: a fresh machine from
the header's snapshot, asked the recorded steps with the recorded policies and given the recorded
feeds, must answer the same steps and reach the same digests. The first record where it does not
is a *divergence*: a change in the engine's decisions (or a damaged trace). IO records are not
replayed (a replayer that re-runs effects is not a replayer).

A feed record (v2) also carries the brain's small fields after it (``BrainSummary``), and so does
a header that continues the previous run (v3). They are compared with the replayed brain's after
every feed, not only shown when a digest differs: a summary that does not describe the brain the
digest names is a divergence (``what`` is ``summary``, naming the fields), so an edited or
damaged summary never passes unnoticed and no reader can trust one that replay did not check.
Like digests, they are compared up to a run's first scrubbed record (the loop window's last key
hashes the arguments, which then hold placeholders).
"""

from __future__ import annotations

import gc
import os
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

import msgspec
from pydantic import BaseModel

from loopctl.core import LoopMachine, MachineStep, ProtocolError
from loopctl_sim.replay.explain import brain_changes, continuation_divergence
from loopctl_sim.replay.report import Divergence, RecentFeed, ReplayResult
from loopctl_sim.trace import (
    BrainSummary,
    ContinuationError,
    EndRecord,
    FeedLine,
    HeaderRecord,
    StepLine,
    TraceFormatError,
    TraceReader,
    brain_fields,
    end_outcome,
    step_matches,
)

__all__ = ["DIGEST_EVERY", "replay_trace", "summary_divergence"]


#: The default: the digest is compared after every feed (see ``replay_trace``).
DIGEST_EVERY: Final = 1


def replay_trace(
    path: str | os.PathLike[str],
    *,
    until: int | None = None,
    recent: int = 3,
    digest_every: int = DIGEST_EVERY,
) -> ReplayResult:
    """Replay the trace at ``path`` against the brain. Raises ``TraceFormatError`` when the trace
    cannot be read; a divergence is reported in the result, not raised.

    By default the brain's digest is compared after every feed. ``digest_every=N`` (N > 1)
    asks for a faster first pass that compares it only at checkpoints: every N feeds and at the
    last feed before a header, an end record, ``until`` and the end of the trace (steps,
    refused feeds and outcomes are still checked at every record). If that pass finds
    nothing, it is the result; if it finds anything (a divergence, or a line it cannot read),
    the trace is replayed again from the start with a digest after every feed, so the report
    names the first divergent record exactly, as the default does. What the first pass cannot
    see: a difference that heals between two checkpoints (the brain differs after one feed and
    agrees again after a later one), or a damaged digest in a record between them. The
    default sees both, which is why it is the default.
    """
    if digest_every > 1:
        try:
            fast = _replay(path, until, recent, digest_every)
        except TraceFormatError:
            fast = None  # the exact pass raises it again, or finds a divergence before it
        if fast is not None and fast.divergence is None:
            return fast
    return _replay(path, until, recent, 1)


def _step_json(step: MachineStep | msgspec.Struct) -> dict[str, Any]:
    if isinstance(step, BaseModel):
        return step.model_dump(mode="json")
    data: dict[str, Any] = msgspec.to_builtins(step)  # the fast path's decoded step
    return data


class _Diverged(Exception):
    """Raised inside the replay loop at a divergence; its arguments are ``Divergence``'s first
    six. (An exception rather than a call, so that the loop's variables stay plain locals.)"""


def _digest_check(
    machine: LoopMachine,
    seq: int,
    line: int,
    name: str,
    recorded: str,
    brain: BrainSummary | msgspec.Struct | None = None,
) -> None:
    """Raise ``_Diverged`` if the machine's digest is not the one recorded after feed ``name``;
    the report names the brain's fields that differ (from the feed's brain summary, v2)."""
    digest = machine.digest()
    if digest != recorded:
        expected_brain = brain_fields(brain)
        actual_brain = BrainSummary.of(machine).model_dump(mode="json")
        changes = brain_changes(expected_brain, actual_brain)
        how = (
            ": " + ", ".join(changes)
            if changes
            else " inside its messages or loop window"
            if expected_brain is not None
            else f" (state now {machine.state.kind}, turns {machine.turns_taken}, "
            f"context {machine.context_tokens})"
        )
        raise _Diverged(
            seq,
            line,
            "digest",
            f"the machine after {name}() is not the recorded one{how}",
            {"digest": recorded, "brain": expected_brain},
            {"digest": digest, "brain": actual_brain},
        )


def summary_divergence(
    brain: BrainSummary | msgspec.Struct, machine: LoopMachine, where: str, digest: str | None
) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """None when ``brain``, a summary the trace recorded (``where``: ``after tool_results()``,
    ``in the header``, with the ``digest`` beside it), describes ``machine``; else the sentence
    naming the fields that differ, and both sides for the report. Cheap when they agree: two
    tuples compared, no model built (machine and driver replay ask after every feed)."""
    actual = machine.summary_values()
    if type(brain) is BrainSummary:
        recorded = tuple(getattr(brain, f) for f in _SUMMARY_FIELDS)
    else:  # the fast path's struct, with the same fields in the same order
        recorded = msgspec.structs.astuple(brain)  # type: ignore[arg-type]
    if recorded == actual:
        return None
    expected_brain = brain_fields(brain)
    actual_brain = dict(zip(_SUMMARY_FIELDS, actual, strict=True))
    changes = ", ".join(brain_changes(expected_brain, actual_brain))
    live = machine.digest()
    return (
        f"the brain summary recorded {where} does not describe the replayed brain: {changes}"
        + ("; the digest matches, so the record's summary was altered" if live == digest else ""),
        {"digest": digest, "brain": expected_brain},
        {"digest": live, "brain": actual_brain},
    )


def _summary_check(
    machine: LoopMachine,
    seq: int,
    line: int,
    name: str,
    digest: str | None,
    brain: BrainSummary | msgspec.Struct,
) -> None:
    """Raise ``_Diverged`` if ``brain``, recorded after feed ``name`` (in the header: ``""``),
    is not the replayed brain's summary."""
    found = summary_divergence(
        brain, machine, f"after {name}()" if name else "in the header", digest
    )
    if found is not None:
        raise _Diverged(seq, line, "summary", *found)


#: ``BrainSummary``'s fields, in the order ``LoopMachine.summary_values()`` gives them.
_SUMMARY_FIELDS: Final = tuple(BrainSummary.model_fields)


#: Batches of records (``READ_AHEAD`` each) between two ``gc.freeze()`` calls of a replay.
FREEZE_EVERY: Final = 16


@contextmanager
def _collector_spared() -> Iterator[Callable[[], None]]:
    """Keep the cyclic garbage collector's full passes off what a replay keeps alive.

    A replay holds the brain's conversation (a long run's whole pending) and allocates as it
    goes: the collector's full passes traversed every live object again (the imports' too),
    10% of a 200,000-record replay of one long run, 4% of a bounded one. ``gc.freeze()`` files
    everything alive under the permanent generation, which no pass traverses; the replay calls
    the function it is given every ``FREEZE_EVERY`` batches, so passes see only what is younger.
    Reference counting frees memory as usual (a frozen object that dies is freed); only cyclic
    garbage frozen before a young pass found it would wait for the end. ``gc.unfreeze()`` on
    the way out gives everything back to the oldest generation. Skipped when the process keeps
    frozen objects of its own or the collector is off. The permanent generation is the
    process's: objects another thread froze while a replay ran are unfrozen with the replay's.
    """
    if gc.get_freeze_count() or not gc.isenabled():
        yield _nothing
        return
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def _nothing() -> None:
    return None


def _replay(
    path: str | os.PathLike[str], until: int | None, recent: int, digest_every: int
) -> ReplayResult:
    with _collector_spared() as freeze:
        return _replay_spared(path, until, recent, digest_every, freeze)


def _replay_spared(
    path: str | os.PathLike[str],
    until: int | None,
    recent: int,
    digest_every: int,
    freeze: Callable[[], None],
) -> ReplayResult:
    # The hot loop: millions of records, so it reads them in replay form (io records as None,
    # steps and feeds as tuples) and in lists (see TraceReader.replay_batches: a record's line
    # is its count), keeps its state in plain locals (no closure reads them: a divergence is
    # raised and reported after the loop), counts no io records (they are what is left of
    # ``records``), dispatches on exact types and calls the feed's machine method directly.
    reader = TraceReader(path)
    result = ReplayResult(path=reader.path)
    machine: LoopMachine | None = None
    # (line, feed) of the last feeds, made RecentFeed only for a report
    feeds: deque[tuple[int, FeedLine]] = deque(maxlen=recent)
    scrubbed_at: int | None = None
    # False from a run's first scrubbed record on: the brain replayed holds placeholders where
    # the recorded one held secrets, so its digests can no longer be the recorded ones.
    exact = True
    # The last feed whose digest was not compared yet (fast pass): seq, line, name, digest,
    # brain summary.
    unchecked: tuple[int, int, str, str, Any] | None = None
    since_check = 0
    line = 0  # the records read so far: seq is always line - 1
    steps = n_feeds = headers = ends = 0
    # --until N stops after the record with seq N, on line N + 1.
    last_line = max(until, 0) + 1 if until is not None else -1
    try:
        for batches, batch in enumerate(reader.replay_batches(), 1):
            if batches % FREEZE_EVERY == 0:
                freeze()
            first = line + 1
            for line, record in enumerate(batch, first):
                if record is None:  # an io record: not replayed
                    pass
                elif type(record) is FeedLine:
                    n_feeds += 1
                    if record.scrubbed:
                        exact = False
                        if scrubbed_at is None:
                            scrubbed_at = line - 1
                    feeds.append((line, record))
                    try:
                        # the machine method named like the feed, given the feed's arguments
                        getattr(machine, record.name)(*record.call)
                    except ProtocolError as exc:
                        raise _Diverged(
                            line - 1,
                            line,
                            "protocol_error",
                            f"{record.name}() was refused: {exc}",
                            {"digest": record.digest},
                            {"ProtocolError": str(exc)},
                        ) from None
                    since_check += 1
                    if not exact:
                        unchecked = None
                    elif since_check >= digest_every:
                        since_check = 0
                        unchecked = None
                        if machine.digest() != record.digest:  # type: ignore[union-attr]
                            _digest_check(
                                machine,  # type: ignore[arg-type]
                                line - 1,
                                line,
                                record.name,
                                record.digest,
                                record.brain,
                            )
                    else:
                        unchecked = (line - 1, line, record.name, record.digest, record.brain)
                    brain = record.brain
                    if exact and brain is not None:  # after the digest: it names a real change
                        _summary_check(
                            machine,  # type: ignore[arg-type]
                            line - 1,
                            line,
                            record.name,
                            record.digest,
                            brain,
                        )
                elif type(record) is StepLine:
                    steps += 1
                    try:
                        actual = machine.next_step(record.policy)  # type: ignore[union-attr]
                    except ProtocolError as exc:
                        raise _Diverged(
                            line - 1,
                            line,
                            "protocol_error",
                            f"next_step() raised: {exc}",
                            _step_json(record.step),
                            {"ProtocolError": str(exc)},
                        ) from None
                    expected = record.step
                    # the fast path's steps are compared without building them
                    if not step_matches(actual, expected):
                        data = _step_json(expected)
                        raise _Diverged(
                            line - 1,
                            line,
                            "step",
                            f"the brain answered {actual.kind}, the trace says {data['kind']}",
                            data,
                            actual.model_dump(mode="json"),
                        )
                elif type(record) is HeaderRecord:
                    headers += 1
                    if unchecked is not None:
                        _digest_check(machine, *unchecked)  # type: ignore[arg-type]
                        unchecked = None
                    if record.snapshot is not None and record.snapshot.started:
                        result.resumes += 1
                    else:
                        result.runs += 1
                    result.complete = False
                    feeds.clear()
                    exact = not record.scrubbed
                    if record.scrubbed and scrubbed_at is None:
                        scrubbed_at = line - 1
                    previous = machine
                    try:
                        machine = record.machine(previous)
                    except ContinuationError as exc:
                        raise TraceFormatError(reader.path, line, str(exc)) from None
                    except ValueError as exc:  # a damaged trace, not a decision of the brain
                        raise TraceFormatError(
                            reader.path, line, f"the header's snapshot does not restore: {exc}"
                        ) from None
                    if record.continues is not None:  # (v3) the previous brain's next_run()
                        if exact and machine.digest() != record.continues:
                            why, named, found = continuation_divergence(
                                record.continues, record.brain, machine
                            )
                            raise _Diverged(line - 1, line, "snapshot", why, named, found)
                        if exact and record.brain is not None:
                            _summary_check(
                                machine, line - 1, line, "", record.continues, record.brain
                            )
                    elif previous is not None:
                        # After an end: the next run's brain. In the middle of a run: a resume
                        # after a crash, which must restore the brain exactly as it was.
                        nxt = previous.is_terminal and previous.finalized
                        expected_next = previous.next_run() if nxt else previous
                        if expected_next != machine:
                            what = "previous run's next_run()" if nxt else "brain it resumes"
                            raise _Diverged(
                                line - 1,
                                line,
                                "snapshot",
                                f"the header's snapshot is not the {what}",
                                expected_next.model_dump(),
                                machine.model_dump(),
                            )
                elif type(record) is EndRecord:
                    ends += 1
                    assert machine is not None  # the reader guarantees a header first
                    if unchecked is not None:
                        _digest_check(machine, *unchecked)
                        unchecked = None
                    outcome = end_outcome(machine)
                    actual_outcome = None if outcome is None else outcome.model_dump(mode="json")
                    expected_outcome = (
                        None if record.outcome is None else record.outcome.model_dump(mode="json")
                    )
                    if actual_outcome != expected_outcome:
                        raise _Diverged(
                            line - 1,
                            line,
                            "outcome",
                            "the run ended with another outcome",
                            expected_outcome,
                            actual_outcome,
                        )
                    digest = machine.digest()
                    if exact and digest != record.digest:
                        raise _Diverged(
                            line - 1,
                            line,
                            "digest",
                            "the final machine is not the recorded one",
                            {"digest": record.digest},
                            {"digest": digest},
                        )
                    result.complete = True
                    result.outcome = actual_outcome
                if line == last_line:
                    result.stopped_at = line - 1
                    break
            else:
                continue
            break  # --until: out of both loops
        if unchecked is not None:
            _digest_check(machine, *unchecked)  # type: ignore[arg-type]
    except _Diverged as found:
        note = None
        if scrubbed_at is not None:
            note = (
                f"secrets were scrubbed from this trace at seq {scrubbed_at}: the digests of a "
                "run are compared up to its first scrubbed record"
            )
        recent_feeds = [RecentFeed(at - 1, at, f.name, f.args) for at, f in feeds]
        seq, at, what, message, expected, actual = found.args
        result.divergence = Divergence(
            seq, at, what, message, expected, actual, recent_feeds, note=note
        )
    if scrubbed_at is not None and result.divergence is None:
        result.notes.append(
            f"digests compared up to seq {scrubbed_at} in its run: the trace holds scrubbed "
            "secrets from there on (steps and outcomes are still compared)"
        )
    result.records = line
    result.steps = steps
    result.feeds = n_feeds
    result.io = line - steps - n_feeds - headers - ends
    result.warnings = reader.warnings
    result.machine = machine
    if machine is not None and result.divergence is None:
        result.final_digest = machine.digest()
        if result.outcome is None:
            outcome = end_outcome(machine)
            result.outcome = None if outcome is None else outcome.model_dump(mode="json")
    return result
