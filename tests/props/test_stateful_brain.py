"""The brain under hypothesis: ``BrainMachine`` (see loopctl_sim/props/ and docs/testing.md).

Settings come from the profile named by ``HYPOTHESIS_PROFILE`` (dev by default, ci in CI,
nightly on a schedule). At the bottom: regressions found by these tests, kept as plain tests.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant

from loopctl import (
    CallLLM,
    Done,
    Failed,
    LoopMachine,
    MachinePolicy,
    Message,
    ProtocolError,
    ToolCall,
    ToolResult,
)
from loopctl.core import LoopAction
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_loops import (
    LoopProgram,
    loop_policies,
    loop_programs,
    run_loop_program,
)
from loopctl_sim.props.brain_machine import BrainMachine, run_program
from loopctl_sim.props.brain_strategies import compaction_of
from loopctl_sim.props.invariants.decisions import reference_call_key
from loopctl_sim.props.profiles import profile_settings

_PROFILE = profile_settings()

# --- the stateful test --------------------------------------------------------------------------

TestBrain = BrainMachine.TestCase
TestBrain.settings = _PROFILE


# --- the same machine under a mostly well-behaved driver ----------------------------------------


@settings(_PROFILE, max_examples=max(8, _PROFILE.max_examples // 4))
@given(data=st.data())
def test_weighted_programs_keep_every_invariant(data: st.DataObject) -> None:
    machine = BrainMachine()
    machine.setup_from(data)
    machine.check_all()
    run_program(machine, data, steps=_PROFILE.stateful_step_count * 2 // 3)
    machine.teardown()  # liveness: a healthy driver finishes the run


class _OneToolBrain(BrainMachine):
    """What a user does to test their own settings: override the policies strategy."""

    policies = st.builds(
        MachinePolicy,
        max_turns=st.integers(1, 4),
        context_window=st.just(1000),
        tools=st.just(("read",)),
        loop_action=st.just("fail"),
    )

    @invariant()
    def my_policies_are_used(self) -> None:
        assert self.policy.tools == ("read",) and self.policy.context_window == 1000


TestOneToolBrain = _OneToolBrain.TestCase
TestOneToolBrain.settings = settings(_PROFILE, max_examples=max(10, _PROFILE.max_examples // 5))


# --- the helpers the machine uses ---------------------------------------------------------------


@pytest.mark.parametrize(
    "mode", ["middle_out", "tail", "head_and_summary", "summary_only", "same_length"]
)
def test_compactions_are_provider_valid_and_no_longer(mode: str) -> None:
    a, b = ToolCall(id="a", name="read"), ToolCall(id="b", name="read")
    convo = [
        Message.user("q"),
        Message.assistant(tool_calls=[a]),
        Message.from_results([ToolResult(call_id="a", name="read", content="1")]),
        Message.assistant("mid"),
        Message.assistant(tool_calls=[b]),
        Message.from_results([ToolResult(call_id="b", name="read", content="2")]),
    ]
    compacted = compaction_of(convo, mode, history_len=4)
    assert inv.provider_problems(compacted) == []
    assert len(compacted) <= len(convo)
    if mode == "same_length":  # the length of the history it replaces, other messages
        assert len(compacted) == 4 and all(m not in convo for m in compacted)
    assert compaction_of(convo, "unchanged") == convo
    with pytest.raises(ValueError):
        compaction_of(convo, "bogus")


# --- regressions found by the property tests ----------------------------------------------------


def test_restore_keeps_tool_arguments_exactly() -> None:
    """Found by these tests (fixed in 6ea7cb8): non-finite floats in tool arguments (Python's
    json.loads parses NaN) were written as null, so a restored machine dispatched x=None."""
    policy = MachinePolicy(tools=("a",))
    m = LoopMachine()
    m.accept_input("x")
    m.next_step(policy)
    arguments = json.loads('{"x": NaN}')  # what a provider fold may hand the brain
    try:
        m.model_response(
            Message.assistant(tool_calls=[ToolCall(id="1", name="a", arguments=arguments)]), 1
        )
    except ProtocolError:  # refused at the door (the fix): nothing to restore
        return
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    assert restored.next_step(policy) == m.next_step(policy)
    assert restored == m


@pytest.mark.parametrize("count", [-1, 1.5])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_constructor_refuses_a_bad_context_count(count: object) -> None:
    """Found by these tests (fixed in 06e33fe): a negative or float count made a machine whose
    own snapshot did not restore."""
    try:
        m = LoopMachine([], count)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return
    assert inv.check_resume(m) == []


def test_loop_verdict_uses_the_policy_in_force() -> None:
    """Found by these tests (fixed in 6ea7cb8): the loop window was trimmed to the policy's
    loop_window after judging, so a later, wider window judged fewer calls than were recorded:
    here r, x, r, x under loop_window=12 is a ping-pong."""
    narrow = MachinePolicy(tools=("r", "x"), loop_window=2, loop_repeat_limit=3, loop_action="fail")
    wide = narrow.model_copy(update={"loop_window": 12})
    m = LoopMachine()
    m.accept_input("go")
    keys: list[str] = []
    for i, name in enumerate(["r", "x", "r", "x"]):
        assert m.next_step(narrow) == CallLLM(turn=i + 1)
        c = ToolCall(id=f"c{i}", name=name)
        m.model_response(Message.assistant(tool_calls=[c]), 1)
        m.next_step(narrow)
        m.tool_results(Message.from_results([ToolResult(call_id=c.id, name=name, content="")]))
        keys.append(reference_call_key(c))
    assert inv.reference_loop_verdict(keys, 1, wide) == "ping_pong"
    step = m.next_step(wide)
    assert isinstance(step, Done) and isinstance(step.outcome, Failed), step
    assert step.outcome.error.kind == "loop_detected"


# --- the profiles -------------------------------------------------------------------------------


def test_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis import settings as hsettings

    from loopctl_sim.props import profiles

    monkeypatch.delenv(profiles.ENV_VAR, raising=False)
    assert profiles.profile_name() == "dev"
    monkeypatch.setenv(profiles.ENV_VAR, "ci")
    assert profiles.profile_name() == "ci"
    ci = profiles.profile_settings()
    assert ci.derandomize and ci.print_blob and ci.deadline is None and ci.database is None
    assert ci.max_examples == 100
    for name in profiles.PROFILES:
        assert hsettings.get_profile(name).deadline is None
    assert profiles.PROFILES["nightly"].max_examples > profiles.PROFILES["ci"].max_examples
    assert profiles.PROFILES["dev"].max_examples < profiles.PROFILES["ci"].max_examples
    monkeypatch.setenv(profiles.ENV_VAR, "warp-speed")
    with pytest.raises(ValueError, match="warp-speed"):
        profiles.profile_name()


# --- looping programs: every loop verdict judged by the reference detector ---------------------


@settings(_PROFILE, max_examples=max(10, _PROFILE.max_examples // 3))
@given(policy=loop_policies(), program=loop_programs())
def test_looping_programs_agree_with_the_reference_loop_detector(
    policy: MachinePolicy, program: LoopProgram
) -> None:
    run_loop_program(BrainMachine(), policy, program)


@pytest.mark.parametrize(
    ("action", "kinds"), [("warn", ("warn", "fail after a warning")), ("fail", ("fail",))]
)
def test_looping_programs_reach_every_kind_of_verdict(
    action: LoopAction, kinds: tuple[str, ...]
) -> None:
    """The programs exercise what the loop detector decides: repeats and ping-pongs, each
    warned, failed at once, and failed after a warning (in a fixed set of examples)."""
    seen: Counter[str] = Counter()

    @settings(max_examples=20, derandomize=True, database=None, deadline=None)
    @given(policy=loop_policies(actions=(action,)), program=loop_programs())
    def tally(policy: MachinePolicy, program: LoopProgram) -> None:
        machine = BrainMachine()
        run_loop_program(machine, policy, program)
        seen.update(machine.ref.verdicts)

    tally()
    for verdict in ("repeat", "ping_pong"):
        for how in kinds:
            assert seen[f"{verdict} ({how})"], (verdict, how, seen)
