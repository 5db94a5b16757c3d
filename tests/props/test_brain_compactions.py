"""Misbehaving compactors (``loopctl_sim.props.brain_compactions``) against the real brain, and
the readable weights of the looping programs (``loopctl_sim.props.brain_loops.LoopWeights``)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.core import (
    AwaitingCompaction,
    CompactReason,
    LoopMachine,
    MachinePolicy,
    Message,
    ProtocolError,
    Start,
    ToolCall,
    ToolResult,
)
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_compactions import MISBEHAVIOURS, REFUSED, misbehaving_compaction
from loopctl_sim.props.brain_loops import (
    LOOP_WEIGHTS,
    LoopProgram,
    LoopWeights,
    loop_policies,
    loop_programs,
    run_loop_program,
)
from loopctl_sim.props.brain_machine import BrainMachine

POLICY = MachinePolicy(tools=("read",), context_window=1000, compact_now=True)


def _awaiting_compaction(with_exchange: bool) -> LoopMachine:
    """A brain asked for a manual compaction, after one exchange (or none)."""
    history = [Message.system("be brief"), Message.user("q")]
    if with_exchange:
        call = ToolCall(id="c1", name="read", arguments={"path": "a"})
        history += [
            Message.assistant(tool_calls=[call]),
            Message.from_results([ToolResult(call_id="c1", name="read", content="text")]),
            Message.assistant("done"),
        ]
    machine = LoopMachine(history)
    machine.accept_input("go on")
    machine.next_step(POLICY)
    assert machine.state == AwaitingCompaction(reason=CompactReason.MANUAL)
    return machine


@pytest.mark.parametrize("with_exchange", [True, False])
@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_a_compaction_that_separates_a_call_from_its_result_is_refused(
    kind: str, with_exchange: bool
) -> None:
    machine = _awaiting_compaction(with_exchange)
    compacted = misbehaving_compaction(machine.messages(), kind)
    assert inv.check_refused(machine, lambda m: m.compaction_result(compacted, 50, 10)) == []
    with pytest.raises(ProtocolError, match="compacted history is not valid"):
        machine.compaction_result(compacted, 50, 10)
    assert isinstance(machine.state, AwaitingCompaction)  # still waiting, nothing lost
    assert machine.history_len() == (5 if with_exchange else 2)


@pytest.mark.parametrize("kind", sorted(set(MISBEHAVIOURS) - REFUSED))
def test_a_compaction_that_drops_system_messages_or_grows_is_a_commit(kind: str) -> None:
    machine = _awaiting_compaction(True)
    compacted = misbehaving_compaction(machine.messages(), kind)
    machine.compaction_result(compacted, 50, 60)
    assert machine.state == Start() and list(machine.history) == compacted
    assert not machine.pending and machine.context_tokens == 60
    assert inv.check_machine(machine) == []


def test_an_unknown_misbehaviour_is_a_value_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="orphan_results"):
        misbehaving_compaction([], "sideways")


def test_loop_weights_refuse_what_cannot_be_drawn() -> None:
    with pytest.raises(ValueError, match="patterns"):
        LoopWeights(patterns=(("ping_pong", 0),))
    with pytest.raises(ValueError, match="unknown loop patterns"):
        LoopWeights(patterns=(("zigzag", 1),))
    with pytest.raises(ValueError, match="out of 8"):
        LoopWeights(change=9)


def test_weights_steer_the_programs() -> None:
    """Only ping-pongs, no policy changes: every program alternates calls and nothing else."""
    only = LoopWeights(patterns=(("ping_pong", 1),), change=0)

    @settings(max_examples=10, derandomize=True, database=None, deadline=None)
    @given(program=loop_programs(weights=only))
    def check(program: LoopProgram) -> None:
        assert all(kind == "calls" and len(calls) == 1 for kind, calls in program)

    check()


def test_the_default_programs_reach_shuffled_arguments_off_and_policy_changes() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=40, derandomize=True, database=None, deadline=None)
    @given(policy=loop_policies(), program=loop_programs(), data=st.data())
    def tally(policy: MachinePolicy, program: LoopProgram, data: st.DataObject) -> None:
        seen[f"action {policy.loop_action}"] += 1
        for kind, value in program:
            if kind == "policy":
                seen["policy change"] += 1
            elif any(list(args) == ["n", "path"] for _, _, args in value):
                seen["shuffled arguments"] += 1
        machine = BrainMachine()
        run_loop_program(machine, policy, program)
        seen.update(machine.ref.verdicts)

    tally()
    for what in ("action off", "action warn", "action fail", "policy change"):
        assert seen[what], (what, seen)
    assert seen["shuffled arguments"], seen
    assert seen["repeat (fail after a warning)"] and seen["ping_pong (warn)"], seen
    assert LOOP_WEIGHTS.change > 0
