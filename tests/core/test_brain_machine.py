"""``LoopMachine``: the one question, the turn ledger, tool classification, the exit door."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from brain_helpers import (
    POLICY,
    SCENARIOS,
    after_exchange,
    answer,
    ask,
    awaiting_model,
    awaiting_tools,
    call,
    exchange_messages,
    respond,
    started,
)

from loopctl import (
    CallLLM,
    CallTools,
    Cancelled,
    Completed,
    Done,
    Failed,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MaxTurnsExceeded,
    Message,
    ProtocolError,
    ToolResult,
)
from loopctl.core import AwaitingTools, Start, Terminal, coherence_problem

RUNNABLE = {k: v for k, v in SCENARIOS.items() if k != "fresh"}


# --- next_step is idempotent ------------------------------------------------------------------


@pytest.mark.parametrize("build", RUNNABLE.values(), ids=RUNNABLE.keys())
def test_asking_twice_gives_the_same_step_and_machine(build: Callable[[], LoopMachine]) -> None:
    m = build()
    first = m.next_step(POLICY)
    after_first = m.model_dump_json()
    second = m.next_step(POLICY)
    assert second == first
    assert m.model_dump_json() == after_first


@pytest.mark.parametrize(
    "policy",
    [
        POLICY,
        POLICY.model_copy(update={"compact_now": True}),
        POLICY.model_copy(update={"max_turns": 0}),
    ],
    ids=["call", "manual-compact", "no-turns"],
)
def test_the_first_ask_advances_and_the_second_repeats(policy: MachinePolicy) -> None:
    m = started()
    before = m.model_dump_json()
    step = m.next_step(policy)
    assert m.model_dump_json() != before  # asking may advance the state ...
    snapshot = m.model_dump_json()
    assert m.next_step(policy) == step  # ... but asking again changes nothing
    assert m.model_dump_json() == snapshot


def test_asking_before_any_input_is_a_protocol_error() -> None:
    m = LoopMachine()
    with pytest.raises(ProtocolError) as raised:
        m.next_step(POLICY)
    assert raised.value.state == "start"
    assert m == LoopMachine()


# --- the turn ledger -------------------------------------------------------------------------


def test_the_brain_numbers_the_turns() -> None:
    m = started()
    for turn in (1, 2, 3):
        assert m.next_step(POLICY) == CallLLM(turn=turn)
        assert m.turns_taken == turn - 1
        c = call(f"c{turn}", n=turn)
        m.model_response(ask(c), 10)
        assert m.turns_taken == turn
        step = m.next_step(POLICY)
        assert isinstance(step, CallTools) and step.turn == turn
        m.tool_results(answer(c))
    m.next_step(POLICY)
    m.model_response(Message.assistant("end"), 10)
    assert m.turns_taken == 4
    assert m.state == Terminal(outcome=Completed(final_text="end"))


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_max_turns_ends_the_run_before_the_extra_call(limit: int) -> None:
    policy = POLICY.model_copy(update={"max_turns": limit})
    m = started()
    steps = []
    for i in range(limit + 1):
        step = m.next_step(policy)
        steps.append(step)
        if isinstance(step, Done):
            break
        c = call(f"c{i}", n=i)
        m.model_response(ask(c), 10)
        m.next_step(policy)
        m.tool_results(answer(c))
    assert steps[:-1] == [CallLLM(turn=t) for t in range(1, limit + 1)]
    assert steps[-1] == Done(outcome=MaxTurnsExceeded())
    assert m.turns_taken == limit


def test_max_turns_zero_allows_no_model_call() -> None:
    m = started()
    assert m.next_step(MachinePolicy(max_turns=0)) == Done(outcome=MaxTurnsExceeded())
    assert m.turns_taken == 0


def test_a_final_answer_on_the_last_turn_completes() -> None:
    policy = POLICY.model_copy(update={"max_turns": 1})
    m = started()
    m.next_step(policy)
    m.model_response(Message.assistant("just in time"), 10)
    assert m.next_step(policy) == Done(outcome=Completed(final_text="just in time"))


def test_a_raised_max_turns_lets_the_run_go_on() -> None:
    """The policy is handed in on every step: a limit raised mid-run takes effect at once."""
    m = after_exchange()
    assert m.next_step(POLICY.model_copy(update={"max_turns": 5})) == CallLLM(turn=2)


# --- classification of tool calls ------------------------------------------------------------


def test_unknown_tools_are_preanswered_and_never_dispatched() -> None:
    m = awaiting_tools()
    step = m.next_step(POLICY)
    assert isinstance(step, CallTools)
    assert [c.id for c in step.calls] == ["k1", "k2"]
    assert m.state == AwaitingTools(turn=2)
    exchange = m.exchange
    assert exchange is not None
    (pre,) = exchange.preanswered
    assert pre.call_id == "u1" and pre.is_error
    assert pre.content.startswith("tool 'nope' is not available")
    assert "read, write" in pre.content


def test_results_are_merged_in_call_order() -> None:
    m = awaiting_tools()
    k1, k2 = m.exchange.dispatch  # type: ignore[union-attr]
    m.tool_results(answer(k2, k1))  # the driver may answer in any order
    merged = m.pending[-1]
    assert [r.call_id for r in merged.tool_results] == ["k1", "u1", "k2"]
    assert [r.is_error for r in merged.tool_results] == [False, True, False]
    assert m.state == Start()
    assert m.exchange is None


def test_results_in_call_order_are_kept_as_given() -> None:
    m = after_exchange()
    m.next_step(POLICY)
    a, b = call("a", x=1), call("b", "write")
    m.model_response(ask(a, b), 10)
    results = answer(a, b)
    m.tool_results(results)
    assert m.pending[-1] is results


def test_when_every_call_is_unknown_the_exchange_completes_at_once() -> None:
    m = awaiting_model()
    m.model_response(ask(call("x", "ghost"), call("y", "phantom")), 50)
    assert m.state == Start()
    assert m.exchange is None
    results = m.pending[-1].tool_results
    assert [(r.call_id, r.is_error) for r in results] == [("x", True), ("y", True)]
    assert m.next_step(POLICY) == CallLLM(turn=2)  # no CallTools, ever


def test_classification_uses_the_tools_advertised_with_the_call() -> None:
    """A call is judged against the names sent to the model, not a later policy's."""
    m = started()
    m.next_step(POLICY.model_copy(update={"tools": ("only",)}))
    m.model_response(ask(call("a", "only"), call("b", "read")), 10)
    step = m.next_step(POLICY)  # this policy advertises read and write, but too late
    assert isinstance(step, CallTools)
    assert [c.id for c in step.calls] == ["a"]


def test_no_tools_advertised_says_so() -> None:
    m = started()
    m.next_step(MachinePolicy())
    m.model_response(ask(call("a")), 10)
    assert m.pending[-1].tool_results[0].content.endswith("available tools: none")


# --- terminal is sticky ----------------------------------------------------------------------

TERMINAL = {
    k: v
    for k, v in SCENARIOS.items()
    if k
    in {
        "completed",
        "committed",
        "cancelled_mid_tools",
        "failed_mid_model",
        "failed_mid_tools_discarded",
        "max_turns",
    }
}


@pytest.mark.parametrize("restore", [False, True], ids=["live", "restored"])
@pytest.mark.parametrize("build", TERMINAL.values(), ids=TERMINAL.keys())
def test_terminal_is_sticky(build: Callable[[], LoopMachine], restore: bool) -> None:
    m = build()
    if restore:
        m = LoopMachine.model_validate_json(m.model_dump_json())
    assert m.is_terminal
    assert isinstance(m.state, Terminal)
    done = Done(outcome=m.state.outcome)
    snapshot = m.model_dump_json()
    m.cancel()
    m.fail(LoopError(kind="internal", message="late"))
    assert m.model_dump_json() == snapshot
    refused: list[tuple[str, tuple[object, ...]]] = [
        ("accept_input", ("again",)),
        ("model_response", (Message.assistant("x"), 1)),
        ("tool_results", (answer(call("z")),)),
        ("compaction_result", ([], 1, 0)),
        ("compaction_noop", (1, 1)),
        ("set_context_tokens", (5,)),
        ("inject", (Message.user("hey"),)),
    ]
    for feed, args in refused:
        with pytest.raises(ProtocolError):
            getattr(m, feed)(*args)
    assert m.next_step(POLICY) == done
    assert m.model_dump_json() == snapshot


# --- the exit door and the next run ----------------------------------------------------------


def test_commit_glues_pending_onto_history() -> None:
    history = exchange_messages(1)
    m = started(history)
    m.next_step(POLICY)
    m.model_response(Message.assistant("answer"), 10)
    run = list(m.pending)
    m.commit_pending()
    assert list(m.history) == history + run
    assert m.pending == ()
    assert m.finalized


@pytest.mark.parametrize(
    ("build", "wrong", "right"),
    [
        (lambda: _completed(), "discard_pending", "commit_pending"),
        (lambda: _cancelled(), "commit_pending", "discard_pending"),
    ],
    ids=["completed", "cancelled"],
)
def test_each_outcome_has_one_exit(
    build: Callable[[], LoopMachine], wrong: str, right: str
) -> None:
    m = build()
    with pytest.raises(ProtocolError, match=rf"use {right}\(\)") as raised:
        getattr(m, wrong)()
    assert raised.value.feed == wrong
    getattr(m, right)()
    with pytest.raises(ProtocolError, match="already committed or discarded"):
        getattr(m, right)()  # once only


def _completed() -> LoopMachine:
    m = awaiting_model()
    m.model_response(Message.assistant("x"), 1)
    return m


def _cancelled() -> LoopMachine:
    m = awaiting_model()
    m.cancel()
    return m


def test_next_run_starts_fresh_with_the_same_history() -> None:
    m = after_exchange()
    m.next_step(POLICY)
    m.model_response(Message.assistant("done"), 400)
    with pytest.raises(ProtocolError):
        m.next_run()  # not through the exit door yet
    m.commit_pending()
    fresh = m.next_run()
    assert fresh.state == Start()
    assert fresh.history == m.history
    assert fresh.pending == ()
    assert (fresh.turns_taken, fresh.started, fresh.finalized) == (0, False, False)
    assert fresh.context_tokens == 400
    assert fresh.loop_window.calls == ()
    fresh.accept_input("and now?")
    assert fresh.next_step(POLICY) == CallLLM(turn=1)


def test_cancel_before_any_input_ends_an_empty_run() -> None:
    m = LoopMachine()
    m.cancel()
    assert m.state == Terminal(outcome=Cancelled())
    m.discard_pending()
    assert m.next_run().history == ()


# --- salvage ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "end", "kept"),
    [
        (awaiting_model, "cancel", 0),  # no exchange completed: nothing salvaged
        (awaiting_model, "fail", 0),
        (after_exchange, "cancel", 3),  # input, call, results
        (awaiting_tools, "cancel", 3),  # the second exchange is in flight: dropped
        (awaiting_tools, "fail", 3),
    ],
)
def test_discard_salvages_the_coherent_prefix(
    build: Callable[[], LoopMachine], end: str, kept: int
) -> None:
    history = exchange_messages(2)
    m = build()
    m = LoopMachine.model_validate({**m.model_dump(), "history": [x.model_dump() for x in history]})
    pending = list(m.pending)
    if end == "cancel":
        m.cancel()
    else:
        m.fail(LoopError(kind="network", message="down"))
    m.discard_pending()
    assert list(m.history) == history + pending[:kept]
    assert m.pending == ()
    assert m.next_run().history == m.history


def test_salvage_after_a_loop_warning_drops_the_note() -> None:
    m = SCENARIOS["warned"]()
    m.cancel()
    m.discard_pending()
    assert m.history[-1].tool_results  # ends right after the last complete exchange
    assert not any("Loop warning" in msg.text for msg in m.history)


# --- inject and set_context_tokens ------------------------------------------------------------


def test_inject_appends_to_pending() -> None:
    m = after_exchange()
    steer = Message.user("try the other file")
    m.inject(steer)
    assert m.pending[-1] == steer
    assert m.next_step(POLICY) == CallLLM(turn=2)


def test_set_context_tokens_records_the_count() -> None:
    m = awaiting_tools()
    m.set_context_tokens(321)
    assert m.context_tokens == 321
    assert isinstance(m.next_step(POLICY), CallTools)


def test_fail_stores_the_error_at_once() -> None:
    error = LoopError(kind="auth", message="bad key", status=401)
    m = awaiting_model()
    m.fail(error)
    assert m.state == Terminal(outcome=Failed(error=error))
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    assert restored.state == Terminal(outcome=Failed(error=error))


def test_preanswered_results_keep_their_content_through_the_merge() -> None:
    m = awaiting_tools()
    k1, k2 = m.exchange.dispatch  # type: ignore[union-attr]
    m.tool_results(answer(k1, k2))
    (u1,) = [r for r in m.pending[-1].tool_results if r.call_id == "u1"]
    assert isinstance(u1, ToolResult) and u1.name == "nope"


# --- the conversation stays provider-valid ----------------------------------------------------


@pytest.mark.parametrize("build", RUNNABLE.values(), ids=RUNNABLE.keys())
def test_history_never_holds_an_open_call_or_a_stray_result(
    build: Callable[[], LoopMachine],
) -> None:
    """After every step and feed of a run to its end, history is provider-valid, and so is the
    conversation the model would be shown next (open calls only while tools are in flight)."""
    m = build()
    for _ in range(12):
        step = m.next_step(POLICY)
        respond(m, step)
        assert coherence_problem(m.history) is None
        in_flight = m.state.kind == "awaiting_tools" or (m.is_terminal and not m.finalized)
        assert coherence_problem(m.messages(), open_tail=in_flight) is None
        if m.finalized:
            break
    assert m.finalized


@pytest.mark.parametrize(
    ("history", "tokens"),
    [
        ([Message.user("q"), ask(call("open"))], 0),
        ([answer(call("stray"))], 0),
        ([], -1),
        ([], True),
    ],
    ids=["open-call", "stray-result", "negative-tokens", "bool-tokens"],
)
def test_the_constructor_refuses_what_a_provider_would(history: list[Message], tokens: int) -> None:
    with pytest.raises(ValueError):
        LoopMachine(history, tokens)
