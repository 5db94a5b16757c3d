"""Commit points: what the brain's exits keep (``commit_pending``, ``discard_pending``'s salvage
of the largest provider-valid prefix, a compaction, ``next_run``). Each checker takes a copy of
the machine from just before the feed and the machine after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from loopctl.core import LoopMachine, Message, Start, coherent_prefix_length
from loopctl_sim.props.invariants.conversation import maximal_coherent_prefix, provider_problems
from loopctl_sim.props.invariants.problems import InvariantCode
from loopctl_sim.props.invariants.problems import problem as _p


def check_salvage(before: LoopMachine, after: LoopMachine) -> list[str]:
    """``before``: a copy taken just before ``after.discard_pending()``."""
    found = [f"salvaged history is invalid: {t}" for t in provider_problems(after.history)]
    if after.pending:
        found.append("pending not emptied")
    if not after.finalized:
        found.append("not marked finalized")
    if after.state != before.state:
        found.append(f"state changed: {before.state!r} -> {after.state!r}")
    old_history, old_pending = list(before.history), list(before.pending)
    new_history = list(after.history)
    k = len(new_history) - len(old_history)
    if new_history[: len(old_history)] != old_history or k < 0:
        found.append("the old history was not kept as it was")
    elif new_history[len(old_history) :] != old_pending[:k]:
        found.append("what was salvaged is not a prefix of pending")
    else:
        best = maximal_coherent_prefix(old_history, old_pending)
        brain = coherent_prefix_length(old_pending)
        if k != best:
            found.append(f"salvaged {k} of pending, the maximal prefix is {best}")
        if brain != best:
            found.append(f"coherent_prefix_length says {brain}, the reference says {best}")
    return [_p(InvariantCode.SALVAGE, text) for text in found]


def check_commit(before: LoopMachine, after: LoopMachine) -> list[str]:
    """``before``: a copy taken just before ``after.commit_pending()``."""
    found = []
    if list(after.history) != [*before.history, *before.pending]:
        found.append("history is not old history + pending")
    if after.pending or not after.finalized:
        found.append("pending not emptied or not marked finalized")
    if after.state != before.state:
        found.append("the state changed")
    return [_p(InvariantCode.COMMIT, text) for text in found]


def check_compaction_commit(
    before: LoopMachine, after: LoopMachine, compacted: Sequence[Message], tokens_after: int
) -> list[str]:
    """``before``: a copy taken just before ``after.compaction_result(compacted, ...)``."""
    found = []
    if list(after.history) != list(compacted):
        found.append("history is not the compacted conversation")
    if after.pending:
        found.append("pending not emptied (compaction is a commit point)")
    if after.context_tokens != tokens_after:
        found.append(f"context {after.context_tokens} != {tokens_after}")
    if not isinstance(after.state, Start):
        found.append(f"state {after.state!r} after a compaction")
    if after.turns_taken != before.turns_taken:
        found.append("the turn count changed")
    found += [f"compacted history is invalid: {t}" for t in provider_problems(after.history)]
    return [_p(InvariantCode.COMPACTION, text) for text in found]


def check_next_run(before: LoopMachine, fresh: LoopMachine) -> list[str]:
    """``fresh = before.next_run()``: Start, same history, nothing pending, counters reset."""
    found = []
    if not isinstance(fresh.state, Start):
        found.append(f"fresh machine in {fresh.state!r}")
    if fresh.history != before.history:
        found.append("history not carried over")
    if fresh.pending or fresh.turns_taken or fresh.exchange is not None or fresh.finalized:
        found.append("pending, turns, exchange or finalized not reset")
    if fresh.loop_window.calls or fresh.loop_window.warned:
        found.append("loop detector not reset")
    return [_p(InvariantCode.NEXT_RUN, text) for text in found]
