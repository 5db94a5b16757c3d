"""Every checker of ``loopctl_sim.props.invariants``, on hand-built good and bad cases.

A checker that never fires is worthless: each one is shown catching the violation it is for.
Broken machines are forged with ``LoopMachine.from_snapshot(MachineSnapshot(...))``,
which skips validation (the brain itself can never be fed into these states).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl import (
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    LoopError,
    LoopMachine,
    MachinePolicy,
    Message,
    ProtocolError,
    TextPart,
    ToolCall,
    ToolResult,
)
from loopctl.core import (
    AwaitingModel,
    MachineSnapshot,
    Start,
    Terminal,
    coherence_problem,
    coherent_prefix_length,
)
from loopctl.core.snapshot import Exchange
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.invariants.conversation import maximal_coherent_prefix, open_tail_allowed
from loopctl_sim.props.invariants.decisions import reference_call_key
from loopctl_sim.props.profiles import profile_settings

POLICY = MachinePolicy(tools=("read", "write"), context_window=1000, max_turns=5)


def call(id: str, name: str = "read", **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def ask(*calls: ToolCall, text: str = "") -> Message:
    return Message.assistant(text, tool_calls=list(calls))


def answer(*calls: ToolCall) -> Message:
    return Message.from_results(
        [ToolResult(call_id=c.id, name=c.name, content="ok") for c in calls]
    )


def codes(problems: list[str]) -> set[str]:
    return {inv.problem_code(p) for p in problems}


def forge(machine: LoopMachine, **changes: Any) -> LoopMachine:
    """``machine`` with some snapshot fields replaced, without any validation."""
    snap = machine.snapshot()
    fields = {name: getattr(snap, name) for name in MachineSnapshot.__struct_fields__}
    fields.update(changes)
    return LoopMachine.from_snapshot(MachineSnapshot(**fields))


# --- machines brought into each state by feeds -------------------------------------------------


def started() -> LoopMachine:
    m = LoopMachine([Message.system("sys")])
    m.accept_input("go")
    return m


def awaiting_model() -> LoopMachine:
    m = started()
    assert m.next_step(POLICY) == CallLLM(turn=1)
    return m


def awaiting_tools() -> LoopMachine:
    m = awaiting_model()
    m.model_response(ask(call("c1"), call("c2", "nope")), 10)
    return m


def after_one_exchange() -> LoopMachine:
    m = awaiting_tools()
    m.tool_results(answer(call("c1")))
    return m


def completed() -> LoopMachine:
    m = after_one_exchange()
    assert m.next_step(POLICY) == CallLLM(turn=2)
    m.model_response(Message.assistant("all done"), 20)
    return m


def cancelled_mid_tools() -> LoopMachine:
    m = after_one_exchange()
    m.next_step(POLICY)
    m.model_response(ask(call("c3")), 20)
    m.cancel()
    return m


def every_state() -> list[LoopMachine]:
    done = completed()
    done.commit_pending()
    salvaged = cancelled_mid_tools()
    salvaged.discard_pending()
    return [
        LoopMachine(),
        started(),
        awaiting_model(),
        awaiting_tools(),
        after_one_exchange(),
        completed(),
        cancelled_mid_tools(),
        done,
        salvaged,
    ]


# --- provider_problems: the independent reference ----------------------------------------------


def test_provider_problems_accepts_valid_conversations() -> None:
    c, d = call("a"), call("b", "write")
    convo = [
        Message.system("s"),
        Message.user("q"),
        ask(c, d),
        answer(d, c),
        Message.assistant("x"),
    ]
    assert inv.provider_problems(convo) == []
    assert inv.provider_problems([]) == []
    assert inv.provider_problems([Message.user("q"), ask(c)], open_tail=True) == []


@pytest.mark.parametrize(
    ("convo", "fragment"),
    [
        ([Message.user("q"), ask(call("a"))], "have no results"),
        ([Message.user("q"), answer(call("a"))], "for no call"),
        ([ask(call("a")), answer(call("b"))], "answers ['b']"),
        ([ask(call("a")), Message.from_results([])], "answers []"),
        ([ask(call("a")), Message.user("forgot"), answer(call("a"))], "answers []"),
        ([ask(call("a")), answer(call("a"), call("a"))], "answers ['a', 'a']"),
        ([Message(role="user", parts=(call("a"),))], "(user) holds tool calls"),
        (
            [ask(call("a")), Message(role="assistant", parts=answer(call("a")).parts)],
            "(assistant) holds tool results",
        ),
        ([ask(call("a"), call("a")), answer(call("a"), call("a"))], "repeats a call id"),
        ([ask(call("")), answer(call(""))], "empty one"),
    ],
)
def test_provider_problems_catches(convo: list[Message], fragment: str) -> None:
    problems = inv.provider_problems(convo)
    assert problems, convo
    assert any(fragment in p for p in problems), problems


_ALPHABET = [
    Message.user("u"),
    Message.assistant("a"),
    Message.system("s"),
    ask(call("x")),
    ask(call("x"), call("y", "write")),
    answer(call("x")),
    answer(call("y")),
    answer(call("y"), call("x")),
    Message(role="assistant", parts=(TextPart(text="t"), call("y"))),
    Message(role="user", parts=(call("x"),)),
    Message(role="assistant", parts=answer(call("x")).parts),
]


@given(convo=st.lists(st.sampled_from(_ALPHABET), max_size=6), open_tail=st.booleans())
def test_provider_problems_agrees_with_the_brain(convo: list[Message], open_tail: bool) -> None:
    """Differential: the reference and the brain's ``coherence_problem`` agree on validity."""
    mine = inv.provider_problems(convo, open_tail=open_tail)
    brain = coherence_problem(convo, open_tail=open_tail)
    assert (mine == []) == (brain is None), (mine, brain)


test_provider_problems_agrees_with_the_brain = profile_settings()(
    test_provider_problems_agrees_with_the_brain
)


# --- salvage reference --------------------------------------------------------------------------


def test_maximal_coherent_prefix() -> None:
    a, b = call("a"), call("b")
    pending = [Message.user("q"), ask(a), answer(a), Message.user("note"), ask(b)]
    assert maximal_coherent_prefix([], pending) == 3
    assert maximal_coherent_prefix([], pending[:2]) == 0
    assert maximal_coherent_prefix([], [*pending[:4], ask(b), answer(b)]) == 6
    assert maximal_coherent_prefix([], []) == 0


@given(
    exchanges=st.lists(st.sampled_from(["exchange", "note", "open"]), max_size=6),
)
def test_salvage_reference_agrees_with_the_brain(exchanges: list[str]) -> None:
    """On pendings the brain can build (input, exchanges, notes, maybe an open tail at the end),
    ``coherent_prefix_length`` is the maximal coherent prefix."""
    pending = [Message.user("input")]
    for i, what in enumerate(exchanges):
        c = call(f"c{i}")
        if what == "exchange":
            pending += [ask(c), answer(c)]
        elif what == "note":
            pending.append(Message.user(f"note {i}"))
    if exchanges and exchanges[-1] == "open":
        pending.append(ask(call("open")))
    assert coherent_prefix_length(pending) == maximal_coherent_prefix([], pending)


test_salvage_reference_agrees_with_the_brain = profile_settings()(
    test_salvage_reference_agrees_with_the_brain
)


# --- check_machine ------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", every_state(), ids=lambda m: repr(m))
def test_check_machine_passes_real_machines(machine: LoopMachine) -> None:
    assert inv.check_machine(machine, POLICY) == []
    inv.assert_machine(machine, POLICY)


def test_open_tail_allowed() -> None:
    assert open_tail_allowed(awaiting_tools())
    assert open_tail_allowed(cancelled_mid_tools())
    assert not open_tail_allowed(started())
    assert not open_tail_allowed(completed())
    discarded = cancelled_mid_tools()
    discarded.discard_pending()
    assert not open_tail_allowed(discarded)


def test_check_machine_catches_an_invalid_history() -> None:
    bad = forge(started(), history=(Message.user("q"), answer(call("a"))))
    assert inv.InvariantCode.HISTORY_INVALID in codes(inv.check_machine(bad))
    with pytest.raises(inv.InvariantViolation, match="history-invalid"):
        inv.assert_machine(bad)


def test_check_machine_catches_an_open_tail_outside_awaiting_tools() -> None:
    m = started()
    bad = forge(m, pending=(*m.pending, ask(call("x"))))
    assert inv.InvariantCode.CONVERSATION_INVALID in codes(inv.check_machine(bad))


def test_check_machine_catches_awaiting_tools_without_open_calls() -> None:
    m = awaiting_tools()
    bad = forge(m, pending=m.pending[:-1])
    found = codes(inv.check_machine(bad))
    assert inv.InvariantCode.OPEN_TAIL in found


def test_check_machine_catches_too_many_turns() -> None:
    m = forge(started(), turns_taken=6)
    assert inv.InvariantCode.TURNS in codes(inv.check_machine(m, POLICY))
    assert inv.InvariantCode.TURNS not in codes(inv.check_machine(m))  # no policy, no limit
    wrong_turn = forge(awaiting_model(), state=AwaitingModel(turn=3))
    assert inv.InvariantCode.TURNS in codes(inv.check_machine(wrong_turn))


def test_check_machine_catches_dispatch_of_an_unknown_tool() -> None:
    m = awaiting_tools()
    assert m.exchange is not None
    unknown = Exchange(turn=1, calls=m.exchange.calls, preanswered=())  # "nope" not pre-answered
    found = codes(inv.check_machine(forge(m, exchange=unknown)))
    assert inv.InvariantCode.DISPATCH in found
    known_preanswered = Exchange(
        turn=1,
        calls=m.exchange.calls,
        preanswered=(ToolResult(call_id="c1", name="read", content="", is_error=True),),
    )
    assert inv.InvariantCode.DISPATCH in codes(
        inv.check_machine(forge(m, exchange=known_preanswered))
    )


def test_check_machine_catches_a_call_answered_twice() -> None:
    a = call("same")
    history = (Message.user("q"), ask(a), answer(a), Message.user("q2"), ask(a), answer(a))
    assert inv.provider_problems(history) == []  # each exchange is locally fine
    bad = forge(started(), history=history)
    assert inv.InvariantCode.ANSWERED_TWICE in codes(inv.check_machine(bad))


def test_check_machine_catches_shape_errors() -> None:
    m = completed()
    wrong_text = forge(m, state=Terminal(outcome=Completed(final_text="something else")))
    assert inv.InvariantCode.SHAPE in codes(inv.check_machine(wrong_text))
    finalized_with_pending = forge(m, finalized=True)
    assert inv.InvariantCode.SHAPE in codes(inv.check_machine(finalized_with_pending))
    stray_exchange = forge(after_one_exchange(), exchange=awaiting_tools().exchange)
    assert inv.InvariantCode.SHAPE in codes(inv.check_machine(stray_exchange))
    no_exchange = forge(awaiting_tools(), exchange=None)
    assert inv.InvariantCode.SHAPE in codes(inv.check_machine(no_exchange))


# --- check_step and check_start_decision --------------------------------------------------------


def test_check_step_accepts_every_real_answer() -> None:
    for machine in every_state():
        if machine.state == Start() and not machine.started:
            continue
        step = machine.next_step(POLICY)
        assert inv.check_step(machine, step, POLICY) == [], (machine, step)


def test_check_step_catches_mismatches() -> None:
    m = awaiting_model()
    assert inv.InvariantCode.STEP in codes(inv.check_step(m, CallLLM(turn=2), POLICY))
    assert inv.InvariantCode.STEP in codes(
        inv.check_step(m, Compact(reason=CompactReason.MANUAL), POLICY)
    )
    assert inv.InvariantCode.STEP in codes(inv.check_step(m, Done(outcome=Cancelled()), POLICY))
    t = awaiting_tools()
    assert inv.InvariantCode.DISPATCH in codes(
        inv.check_step(t, CallTools(turn=1, calls=()), POLICY)
    )
    rogue = CallTools(turn=1, calls=(call("c2", "nope"),))
    found = codes(inv.check_step(t, rogue, POLICY))
    assert {inv.InvariantCode.DISPATCH, inv.InvariantCode.STEP} <= found


def test_check_start_decision() -> None:
    m = started()
    before = m.snapshot()
    assert inv.check_start_decision(before, POLICY, CallLLM(turn=1)) == []
    assert inv.InvariantCode.DECISION in codes(
        inv.check_start_decision(before, POLICY, Compact(reason=CompactReason.EMERGENCY))
    )
    hot = forge(m, context_tokens=960).snapshot()
    assert inv.check_start_decision(hot, POLICY, Compact(reason=CompactReason.EMERGENCY)) == []
    assert inv.check_start_decision(hot, POLICY, CallLLM(turn=1)) != []
    warm = forge(m, context_tokens=800).snapshot()
    threshold = Compact(reason=CompactReason.THRESHOLD_EXCEEDED)
    assert inv.check_start_decision(warm, POLICY, threshold) == []
    floored = forge(m, context_tokens=800, noop_floor=800).snapshot()
    assert inv.check_start_decision(floored, POLICY, CallLLM(turn=1)) == []
    manual = POLICY.model_copy(update={"compact_now": True})
    assert inv.check_start_decision(hot, manual, Compact(reason=CompactReason.MANUAL)) == []
    spent = forge(m, turns_taken=5).snapshot()
    assert inv.check_start_decision(spent, manual, CallLLM(turn=6)) != []
    # not applicable outside Start
    assert inv.check_start_decision(awaiting_model().snapshot(), POLICY, CallLLM(turn=9)) == []


# --- relational checks --------------------------------------------------------------------------


def test_check_salvage_passes_the_brain() -> None:
    for machine in [cancelled_mid_tools(), started()]:
        if not machine.is_terminal:
            machine.cancel()
        before = LoopMachine.model_validate_json(machine.model_dump_json())
        machine.discard_pending()
        assert inv.check_salvage(before, machine) == []


def test_check_salvage_catches_bad_salvage() -> None:
    before = cancelled_mid_tools()
    pending = before.pending
    # too little: the completed exchange dropped as well
    little = forge(before, history=before.history, pending=(), finalized=True)
    assert any("maximal prefix is" in p for p in inv.check_salvage(before, little))
    # too much: the open call kept
    much = forge(before, history=(*before.history, *pending), pending=(), finalized=True)
    assert inv.InvariantCode.SALVAGE in codes(inv.check_salvage(before, much))
    # not a prefix
    other = forge(before, history=(*before.history, Message.user("?")), pending=(), finalized=True)
    assert any("not a prefix" in p for p in inv.check_salvage(before, other))
    # the old history rewritten
    lost = forge(before, history=(), pending=(), finalized=True)
    assert any("old history" in p for p in inv.check_salvage(before, lost))
    # pending kept, not finalized
    kept = forge(before, history=(*before.history, *pending[:3]))
    assert any("not emptied" in p for p in inv.check_salvage(before, kept))


def test_check_commit() -> None:
    m = completed()
    before = LoopMachine.model_validate_json(m.model_dump_json())
    m.commit_pending()
    assert inv.check_commit(before, m) == []
    dropped = forge(m, history=before.history)
    assert inv.InvariantCode.COMMIT in codes(inv.check_commit(before, dropped))
    assert inv.InvariantCode.COMMIT in codes(inv.check_commit(before, before))


def test_check_compaction_commit() -> None:
    m = started()
    m.set_context_tokens(900)
    assert m.next_step(POLICY) == Compact(reason=CompactReason.THRESHOLD_EXCEEDED)
    before = LoopMachine.model_validate_json(m.model_dump_json())
    compacted = [Message.user("[summary]")]
    m.compaction_result(compacted, 900, 100)
    assert inv.check_compaction_commit(before, m, compacted, 100) == []
    assert inv.InvariantCode.COMPACTION in codes(
        inv.check_compaction_commit(before, m, compacted, 99)
    )
    assert inv.InvariantCode.COMPACTION in codes(inv.check_compaction_commit(before, m, [], 100))
    kept_pending = forge(m, pending=before.pending)
    assert inv.InvariantCode.COMPACTION in codes(
        inv.check_compaction_commit(before, kept_pending, compacted, 100)
    )
    wrong_state = forge(m, state=AwaitingModel(turn=1))
    assert inv.InvariantCode.COMPACTION in codes(
        inv.check_compaction_commit(before, wrong_state, compacted, 100)
    )


def test_check_terminal_sticky() -> None:
    done = completed()
    assert inv.check_terminal_sticky(done, done) == []
    assert inv.check_terminal_sticky(started(), completed()) == []  # not terminal before
    escaped = forge(done, state=Start())
    assert codes(inv.check_terminal_sticky(done, escaped)) == {inv.InvariantCode.TERMINAL_STICKY}
    other = forge(done, state=Terminal(outcome=Cancelled()))
    assert codes(inv.check_terminal_sticky(done, other)) == {inv.InvariantCode.TERMINAL_STICKY}


def test_check_transition() -> None:
    assert inv.check_transition("awaiting_model", "model_response", "awaiting_tools") == []
    assert inv.check_transition("start", "next_step", "awaiting_model") == []
    assert codes(inv.check_transition("start", "model_response", "start")) == {
        inv.InvariantCode.TABLE
    }
    assert codes(inv.check_transition("awaiting_tools", "tool_results", "terminal")) == {
        inv.InvariantCode.TABLE
    }
    assert codes(inv.check_transition("terminal", "next_step", "start")) == {
        inv.InvariantCode.TABLE
    }


def test_check_refused() -> None:
    assert inv.check_refused(started(), lambda m: m.tool_results(answer(call("x")))) == []
    assert inv.check_refused(LoopMachine(), lambda m: m.next_step(POLICY)) == []
    accepted = inv.check_refused(started(), lambda m: m.inject(Message.user("fine")))
    assert any("accepted" in p for p in accepted)
    wrong = inv.check_refused(started(), lambda m: m.fail("boom"))  # type: ignore[arg-type]
    assert wrong == []  # the brain refuses a non-error with ProtocolError

    def other_error(m: LoopMachine) -> None:
        raise KeyError("x")

    assert any("KeyError" in p for p in inv.check_refused(started(), other_error))

    def changes_then_raises(m: LoopMachine) -> None:
        m.inject(Message.user("sneaky"))
        raise ProtocolError("refused, but too late")

    assert any("changed" in p for p in inv.check_refused(started(), changes_then_raises))


def test_check_next_run() -> None:
    m = completed()
    m.commit_pending()
    fresh = m.next_run()
    assert inv.check_next_run(m, fresh) == []
    assert codes(inv.check_next_run(m, forge(fresh, history=()))) == {inv.InvariantCode.NEXT_RUN}
    assert codes(inv.check_next_run(m, forge(fresh, turns_taken=2))) == {inv.InvariantCode.NEXT_RUN}
    assert codes(inv.check_next_run(m, forge(fresh, state=Terminal(outcome=Cancelled())))) == {
        inv.InvariantCode.NEXT_RUN
    }


# --- check_resume -------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", every_state(), ids=lambda m: repr(m))
def test_check_resume_passes_real_machines(machine: LoopMachine) -> None:
    before = machine.model_dump_json()
    assert inv.check_resume(machine, POLICY) == []
    assert inv.check_resume(machine) == []
    assert machine.model_dump_json() == before, "check_resume must not touch the machine"


def test_check_resume_catches_a_snapshot_that_does_not_restore() -> None:
    bad = forge(started(), exchange=awaiting_tools().exchange)  # an exchange in Start
    assert codes(inv.check_resume(bad, POLICY)) == {inv.InvariantCode.RESUME}


def test_check_resume_catches_a_lossy_snapshot() -> None:
    """Arguments that JSON cannot carry exactly: the restored machine is not equal."""
    m = awaiting_model()
    m.model_response(ask(call("t", point=(1, 2))), 5)  # a tuple comes back as a list
    problems = inv.check_resume(m, POLICY)
    assert any("not equal" in p for p in problems), problems


class _Forgetful(LoopMachine):
    """A brain whose every other answer differs: not idempotent."""

    asked = 0

    def next_step(self, policy: MachinePolicy) -> Any:
        type(self).asked += 1
        step = super().next_step(policy)
        return step if type(self).asked % 2 else Done(outcome=Cancelled())


def test_check_resume_catches_a_non_idempotent_next_step() -> None:
    m = _Forgetful()
    m.accept_input("go")
    problems = inv.check_resume(m, POLICY)
    assert inv.InvariantCode.IDEMPOTENCE in codes(problems) or inv.InvariantCode.RESUME in codes(
        problems
    )


def test_problem_codes_are_listed() -> None:
    for code in inv.InvariantCode:
        assert inv.problem_code(f"{code}: something") == code
        assert inv.InvariantCode(inv.problem_code(f"{code}: something")) is code
    with pytest.raises(inv.InvariantViolation) as info:
        inv.assert_no_problems(["a: 1", "b: 2"], "ctx")
    assert info.value.problems == ["a: 1", "b: 2"]
    assert "ctx" in str(info.value)
    inv.assert_no_problems([])


def test_a_loop_error_is_not_a_problem_for_check_machine() -> None:
    m = started()
    m.fail(LoopError(kind="network", message="down"))
    assert inv.check_machine(m, POLICY) == []


# --- check_trace --------------------------------------------------------------------------------

TRACES = sorted((Path(__file__).parent.parent / "traces").rglob("*.jsonl"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_recorded_trace_keeps_the_invariants(path: Path) -> None:
    assert inv.check_trace(path) == []


def _edited_basic(tmp_path: Path, edit: Callable[[dict[str, Any]], None], which: str) -> Path:
    """tests/traces/basic.jsonl with ``edit`` applied to the second record of type ``which``
    (a feed name, or "step")."""
    lines = (Path(__file__).parent.parent / "traces" / "basic.jsonl").read_text().splitlines()
    seen = 0
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("name") == which or (which == "step" and record["type"] == "step"):
            seen += 1
            if seen == 2 or (which != "step" and seen == 1):
                edit(record)
                lines[i] = json.dumps(record)
                break
    out = tmp_path / "edited.jsonl"
    out.write_text("\n".join(lines) + "\n")
    return out


def test_check_trace_reports_a_refused_feed(tmp_path: Path) -> None:
    def wrong_id(record: dict[str, Any]) -> None:
        record["args"]["message"]["parts"][0]["call_id"] = "someone-else"

    problems = inv.check_trace(_edited_basic(tmp_path, wrong_id, "tool_results"))
    assert problems and inv.InvariantCode.REFUSAL in problems[-1], problems


def test_check_trace_reports_turns_over_the_limit(tmp_path: Path) -> None:
    def no_turns_left(record: dict[str, Any]) -> None:
        record["policy"]["max_turns"] = 0

    problems = inv.check_trace(_edited_basic(tmp_path, no_turns_left, "step"))
    assert any(f"{inv.InvariantCode.TURNS}:" in p for p in problems), problems


# --- the loop reference -------------------------------------------------------------------------

LOOPY = MachinePolicy(tools=("read", "write"), loop_window=6, loop_repeat_limit=3)


def test_reference_loop_verdict() -> None:
    r, w = reference_call_key(call("1")), reference_call_key(call("2", "write"))
    r2 = reference_call_key(call("3", path="b"))
    assert reference_call_key(call("x", a=1, b=2)) == reference_call_key(call("y", b=2, a=1))
    assert inv.reference_loop_verdict([r, r, r], 1, LOOPY) == "repeat"
    assert inv.reference_loop_verdict([r, r], 1, LOOPY) is None
    assert inv.reference_loop_verdict([r, r, r], 0, LOOPY) is None  # judged already
    assert inv.reference_loop_verdict([r, w, r, w], 1, LOOPY) == "ping_pong"
    assert inv.reference_loop_verdict([r, r2, r, r2], 1, LOOPY) == "ping_pong"  # args count
    assert inv.reference_loop_verdict([r, w, w, r], 1, LOOPY) is None
    assert inv.reference_loop_verdict([r, w, w, w, w, w, w, r, r], 1, LOOPY) is None  # window 6
    off = LOOPY.model_copy(update={"loop_action": "off"})
    assert inv.reference_loop_verdict([r, r, r], 1, off) is None


def _looping(action: str) -> tuple[LoopMachine, MachinePolicy]:
    """A started machine whose last three exchanges each called read() the same way."""
    policy = LOOPY.model_copy(update={"loop_action": action})
    m = started()
    for i in range(3):
        assert m.next_step(policy) == CallLLM(turn=i + 1)
        c = call(f"r{i}")
        m.model_response(ask(c), 1)
        m.next_step(policy)
        m.tool_results(answer(c))
    return m, policy


def test_check_loop_decision_on_the_brain() -> None:
    for action, warned in [("fail", False), ("warn", False), ("warn", True)]:
        m, policy = _looping(action)
        if warned:
            m = forge(m, loop=m.loop_window.model_copy(update={"warned": True}))
        before = m.snapshot()
        step = m.next_step(policy)
        assert inv.check_loop_decision(before, m, step, "repeat", warned, policy) == [], action


def test_check_loop_decision_catches_wrong_decisions() -> None:
    m, policy = _looping("fail")
    before = m.snapshot()
    step = m.next_step(policy)  # fails the run
    # the reference sees no loop: failing is wrong
    assert codes(inv.check_loop_decision(before, m, step, None, False, policy)) == {
        inv.InvariantCode.LOOP
    }
    # a loop the machine did not fail on
    m2, _ = _looping("fail")
    before2 = m2.snapshot()
    step2 = m2.next_step(policy.model_copy(update={"loop_action": "off"}))
    assert codes(inv.check_loop_decision(before2, m2, step2, "repeat", False, policy)) == {
        inv.InvariantCode.LOOP
    }
    # warn: no note appended
    warn = policy.model_copy(update={"loop_action": "warn"})
    m3, _ = _looping("off")
    before3 = m3.snapshot()
    step3 = m3.next_step(warn.model_copy(update={"loop_action": "off"}))
    assert codes(inv.check_loop_decision(before3, m3, step3, "repeat", False, warn)) == {
        inv.InvariantCode.LOOP
    }
    # a note without a verdict
    m4, _ = _looping("warn")
    before4 = m4.snapshot()
    step4 = m4.next_step(warn)
    assert codes(inv.check_loop_decision(before4, m4, step4, None, False, warn)) == {
        inv.InvariantCode.LOOP
    }


# --- AwaitingModel decisions and the digest -------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(949, CallLLM(turn=1)), (950, Compact(reason=CompactReason.EMERGENCY)), (5000, None)],
)
def test_check_awaiting_model_decision_passes_the_brain(tokens: int, expected: Any) -> None:
    m = awaiting_model()
    m.set_context_tokens(tokens)
    before = m.snapshot()
    step = m.next_step(POLICY)  # emergency line: 1000 * 0.95
    assert step == (expected or Compact(reason=CompactReason.EMERGENCY))
    assert inv.check_awaiting_model_decision(before, m, step, POLICY) == []


def test_check_awaiting_model_decision_catches_an_ignored_overflow() -> None:
    m = awaiting_model()
    m.set_context_tokens(990)
    before = m.snapshot()
    # the brain asked again instead of withdrawing the call (forged: the state left as it was)
    problems = inv.check_awaiting_model_decision(before, m, CallLLM(turn=1), POLICY)
    assert codes(problems) == {inv.InvariantCode.DECISION} and len(problems) == 2
    # and a withdrawal under the line
    m2 = awaiting_model()
    before2 = m2.snapshot()
    step = Compact(reason=CompactReason.EMERGENCY)
    assert codes(inv.check_awaiting_model_decision(before2, m2, step, POLICY)) == {
        inv.InvariantCode.DECISION
    }
    # not applicable elsewhere
    s = started()
    assert inv.check_awaiting_model_decision(s.snapshot(), s, CallLLM(turn=1), POLICY) == []


def test_check_digest_passes_real_machines_and_catches_a_stale_one() -> None:
    m = awaiting_tools()
    assert inv.check_digest(m) == []

    class Stale(LoopMachine):
        __slots__ = ()

        def digest(self) -> str:
            return "0" * 16

    stale = Stale.from_snapshot(m.snapshot())
    assert codes(inv.check_digest(stale)) == {inv.InvariantCode.DIGEST}


def test_the_docs_list_every_invariant_code() -> None:
    """docs/testing.md's table of codes is the enum: each code's string and member, in order."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    header = "| code | `InvariantCode` member | what is wrong |"
    assert header in doc
    rows = doc.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    listed = [tuple(cell.strip().strip("`") for cell in row.split("|")[1:3]) for row in rows]
    assert listed == [(code.value, code.name) for code in inv.InvariantCode]
