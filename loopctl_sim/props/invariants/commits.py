"""Commit points: what the brain's exits keep. The exit doors (``commit_pending`` after a
completed run, ``discard_pending`` after any other, which salvages the largest provider-valid
prefix), a compaction (which commits the compacted conversation) and ``next_run`` (which
carries the history into a fresh run).

Each checker takes a copy of the machine from just before the feed and the machine after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopctl.core import LoopMachine, Message, Start, coherent_prefix_length
from loopctl_sim.props.invariants.conversation import maximal_coherent_prefix, provider_problems
from loopctl_sim.props.invariants.problems import (
    InvariantCode,
)
from loopctl_sim.props.invariants.problems import problem as _p


def check_salvage(before: LoopMachine, after: LoopMachine) -> list[str]:
    """``before``: a copy taken just before ``after.discard_pending()``."""
    problems: list[str] = []
    old_history, old_pending = list(before.history), list(before.pending)
    new_history = list(after.history)
    for text in provider_problems(new_history):
        problems.append(_p(InvariantCode.SALVAGE, f"salvaged history is invalid: {text}"))
    if after.pending:
        problems.append(_p(InvariantCode.SALVAGE, "pending not emptied"))
    if not after.finalized:
        problems.append(_p(InvariantCode.SALVAGE, "not marked finalized"))
    if after.state != before.state:
        problems.append(
            _p(InvariantCode.SALVAGE, f"state changed: {before.state!r} -> {after.state!r}")
        )
    k = len(new_history) - len(old_history)
    if new_history[: len(old_history)] != old_history or k < 0:
        problems.append(_p(InvariantCode.SALVAGE, "the old history was not kept as it was"))
        return problems
    if new_history[len(old_history) :] != old_pending[:k]:
        problems.append(_p(InvariantCode.SALVAGE, "what was salvaged is not a prefix of pending"))
        return problems
    best = maximal_coherent_prefix(old_history, old_pending)
    if k != best:
        problems.append(
            _p(InvariantCode.SALVAGE, f"salvaged {k} of pending, the maximal prefix is {best}")
        )
    brain = coherent_prefix_length(old_pending)
    if brain != best:
        problems.append(
            _p(
                InvariantCode.SALVAGE,
                f"coherent_prefix_length says {brain}, the reference says {best}",
            )
        )
    return problems


def check_commit(before: LoopMachine, after: LoopMachine) -> list[str]:
    """``before``: a copy taken just before ``after.commit_pending()``."""
    problems: list[str] = []
    if list(after.history) != [*before.history, *before.pending]:
        problems.append(_p(InvariantCode.COMMIT, "history is not old history + pending"))
    if after.pending or not after.finalized:
        problems.append(_p(InvariantCode.COMMIT, "pending not emptied or not marked finalized"))
    if after.state != before.state:
        problems.append(_p(InvariantCode.COMMIT, "the state changed"))
    return problems


def check_compaction_commit(
    before: LoopMachine, after: LoopMachine, compacted: Sequence[Message], tokens_after: int
) -> list[str]:
    """``before``: a copy taken just before ``after.compaction_result(compacted, ...)``."""
    problems: list[str] = []
    if list(after.history) != list(compacted):
        problems.append(_p(InvariantCode.COMPACTION, "history is not the compacted conversation"))
    if after.pending:
        problems.append(
            _p(InvariantCode.COMPACTION, "pending not emptied (compaction is a commit point)")
        )
    if after.context_tokens != tokens_after:
        problems.append(
            _p(InvariantCode.COMPACTION, f"context {after.context_tokens} != {tokens_after}")
        )
    if not isinstance(after.state, Start):
        problems.append(_p(InvariantCode.COMPACTION, f"state {after.state!r} after a compaction"))
    if after.turns_taken != before.turns_taken:
        problems.append(_p(InvariantCode.COMPACTION, "the turn count changed"))
    for text in provider_problems(list(after.history)):
        problems.append(_p(InvariantCode.COMPACTION, f"compacted history is invalid: {text}"))
    return problems


def check_next_run(before: LoopMachine, fresh: LoopMachine) -> list[str]:
    """``fresh = before.next_run()``: Start, same history, nothing pending, counters reset."""
    problems: list[str] = []
    if not isinstance(fresh.state, Start):
        problems.append(_p(InvariantCode.NEXT_RUN, f"fresh machine in {fresh.state!r}"))
    if fresh.history != before.history:
        problems.append(_p(InvariantCode.NEXT_RUN, "history not carried over"))
    if fresh.pending or fresh.turns_taken or fresh.exchange is not None or fresh.finalized:
        problems.append(
            _p(InvariantCode.NEXT_RUN, "pending, turns, exchange or finalized not reset")
        )
    if fresh.loop_window.calls or fresh.loop_window.warned:
        problems.append(_p(InvariantCode.NEXT_RUN, "loop detector not reset"))
    return problems
