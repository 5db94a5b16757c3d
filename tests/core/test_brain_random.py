"""Random programs of steps and feeds, right and wrong: the brain's invariants hold after each.

The hand-written tables cover each behaviour once; this covers their interleavings. Each action
is drawn from a fixed menu (valid and invalid feeds alike); after every action:
- a refused feed (``ProtocolError``) left the machine exactly as it was;
- the digest's cached fast path equals the hash of the snapshot model's own JSON;
- a save/restore round trip gives an equal machine;
- history is provider-valid, and so is what the model would be shown next.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from brain_helpers import POLICY, answer, ask, call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl import CompactReason, LoopError, LoopMachine, Message, ProtocolError
from loopctl.core import coherence_problem

POLICIES = [
    POLICY,
    POLICY.model_copy(update={"compact_now": True}),
    POLICY.model_copy(update={"max_turns": 3}),
    POLICY.model_copy(update={"loop_action": "fail"}),
]


def _answer_dispatched(m: LoopMachine) -> None:
    exchange = m.exchange
    m.tool_results(answer(*(exchange.dispatch if exchange else (call("none"),))))


def _compact(m: LoopMachine) -> None:
    m.compaction_result([Message.user("summary")], m.context_tokens, m.context_tokens // 2)


ACTIONS: list[tuple[str, Callable[[LoopMachine], object]]] = [
    *((f"next_step[{i}]", lambda m, p=p: m.next_step(p)) for i, p in enumerate(POLICIES)),
    ("accept_input", lambda m: m.accept_input("go")),
    ("reply:text", lambda m: m.model_response(Message.assistant("done"), 100)),
    ("reply:same-call", lambda m: m.model_response(ask(call(f"s{m.turns_taken}", p=1)), 300)),
    (
        "reply:new-call",
        lambda m: m.model_response(ask(call(f"n{m.turns_taken}", n=m.turns_taken)), 500),
    ),
    (
        "reply:mixed",
        lambda m: m.model_response(
            ask(call(f"a{m.turns_taken}", "write"), call(f"b{m.turns_taken}", "ghost")), 700
        ),
    ),
    ("reply:unknown", lambda m: m.model_response(ask(call(f"u{m.turns_taken}", "ghost")), 200)),
    ("reply:duplicate-ids", lambda m: m.model_response(ask(call("d"), call("d", x=2)), 1)),
    ("results", _answer_dispatched),
    ("results:wrong", lambda m: m.tool_results(answer(call("nobody")))),
    ("compact", _compact),
    ("compact:incoherent", lambda m: m.compaction_result([ask(call("open"))], 1, 1)),
    ("noop", lambda m: m.compaction_noop(m.context_tokens, m.context_tokens)),
    ("tokens:threshold", lambda m: m.set_context_tokens(850)),
    ("tokens:emergency", lambda m: m.set_context_tokens(990)),
    ("tokens:low", lambda m: m.set_context_tokens(10)),
    ("inject", lambda m: m.inject(Message.user("steer"))),
    ("cancel", lambda m: m.cancel()),
    ("fail", lambda m: m.fail(LoopError(kind="network", message="down"))),
    ("commit", lambda m: m.commit_pending()),
    ("discard", lambda m: m.discard_pending()),
    ("next_run", lambda m: m.next_run()),
]


def _slow_digest(m: LoopMachine) -> str:
    return hashlib.sha256(m.snapshot().model_dump_json().encode()).hexdigest()[:16]


def _check(m: LoopMachine) -> None:
    assert m.digest() == _slow_digest(m)
    assert LoopMachine.model_validate_json(m.model_dump_json()) == m
    assert coherence_problem(m.history) is None
    in_flight = m.state.kind == "awaiting_tools" or (m.is_terminal and not m.finalized)
    assert coherence_problem(m.messages(), open_tail=in_flight) is None


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(range(len(ACTIONS))), st.booleans()), max_size=40))
def test_random_programs_keep_the_invariants(program: list[tuple[int, bool]]) -> None:
    """``check`` is drawn too: the digest's cache must also survive changes it did not see."""
    m = LoopMachine([Message.user("earlier"), Message.assistant("answer")])
    for index, check in program:
        name, action = ACTIONS[index]
        before = m.model_dump_json()
        try:
            result = action(m)
        except ProtocolError:
            assert m.model_dump_json() == before, name
        else:
            if isinstance(result, LoopMachine):  # next_run: carry on with the next run's brain
                assert result.history == m.history
                m = result
        if check:
            _check(m)
    _check(m)


def test_the_menu_reaches_every_state_and_reason() -> None:
    """The menu is rich enough to matter: a fixed program walks through every state."""
    m = LoopMachine()
    seen: set[object] = set()
    script = [
        "accept_input",
        "tokens:threshold",
        "next_step[0]",
        "noop",
        "next_step[1]",
        "compact",
        "next_step[0]",
        "reply:mixed",
        "next_step[0]",
        "results",
        "tokens:emergency",
        "next_step[0]",
        "noop",
        "discard",
        "next_run",
    ]
    names = dict(ACTIONS)
    for name in script:
        result = names[name](m)
        seen.add(m.state.kind)
        if hasattr(m.state, "reason"):
            seen.add(m.state.reason)
        if isinstance(result, LoopMachine):
            m = result
    assert {"start", "awaiting_model", "awaiting_tools", "awaiting_compaction", "terminal"} <= seen
    assert {CompactReason.THRESHOLD_EXCEEDED, CompactReason.MANUAL} <= seen
