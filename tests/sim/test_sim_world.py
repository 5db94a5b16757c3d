"""The machine-level simulator against scripted worlds, faults and YAML scenarios."""

from __future__ import annotations

import dataclasses
import io
import typing
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from sim_helpers import CREATED, SCENARIOS, adding_world

from loopctl import (
    Cancelled,
    Completed,
    Failed,
    LoopMachine,
    MachinePolicy,
    Message,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)
from loopctl.api import ApiError, Usage, fold_events
from loopctl.driver.estimate import CharEstimator
from loopctl.tools import raised_message, timed_out_message
from loopctl_sim.replay import replay_trace
from loopctl_sim.sim.faults import MODEL_FAULTS, Fault, FaultKind
from loopctl_sim.sim.machine import SimulationError, simulate
from loopctl_sim.sim.scenario import ScenarioError, load_scenario
from loopctl_sim.sim.world import (
    ModelScript,
    World,
    delivered_reply,
    faulty_reply,
    message_chars,
    message_events,
    middle_out,
)
from loopctl_sim.trace import read_trace

SCENARIO_FILES = sorted(SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: p.stem)
def test_every_example_scenario_ends_as_it_expects_and_replays(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.expect is not None, "every example states its expected outcome"
    trace = tmp_path / "t.jsonl"
    result = simulate(scenario.world(), trace)
    assert result.outcome.kind == scenario.expect
    replayed = replay_trace(trace)
    assert replayed.ok, replayed.summary()
    assert replayed.final_digest == result.digest


def test_the_examples_cover_every_fault_kind() -> None:
    used = {f.kind for p in SCENARIO_FILES for f in load_scenario(p).faults}
    assert used == set(typing.get_args(FaultKind))


def test_the_same_world_gives_the_same_trace_byte_for_byte() -> None:
    a, b = io.StringIO(), io.StringIO()
    world = load_scenario(SCENARIOS / "crash_restore.yaml")
    simulate(world.world(), a, created=CREATED)
    simulate(world.world(), b, created=CREATED)
    assert a.getvalue() == b.getvalue()


def _io(trace: Path, kind: str) -> list[dict[str, object]]:
    return [r.data for r in read_trace(trace) if r.type == "io" and r.kind == kind]  # type: ignore[union-attr]


def _feeds(trace: Path, name: str) -> list[object]:
    return [r.args for r in read_trace(trace) if r.type == "feed" and r.name == name]  # type: ignore[union-attr]


def test_rate_limit_is_retried_after_the_servers_delay(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    result = simulate(
        adding_world(Fault(kind="rate_limited", model_call=1, retry_after=2.5)), trace
    )
    assert isinstance(result.outcome, Completed)
    assert result.retries == 1 and result.model_requests == 4
    assert _io(trace, "retry") == [{"attempt": 1, "delay_s": 2.5, "kind": "rate_limited"}]
    assert _io(trace, "model_error")[0]["error"]["status"] == 429  # type: ignore[index]


@pytest.mark.parametrize(
    ("kind", "error_kind", "status"),
    [
        ("network", "network", None),
        ("timeout", "timeout", None),
        ("rate_limited", "rate_limited", 429),
        ("server_error", "provider", 500),
        ("overloaded", "overloaded", 529),
    ],
)
def test_retryable_faults_fail_the_run_after_the_retry_limit(
    kind: FaultKind, error_kind: str, status: int | None
) -> None:
    world = adding_world(Fault(kind=kind, model_call=1, times=10), max_retries=2)
    result = simulate(world)
    assert isinstance(result.outcome, Failed)
    assert result.outcome.error.kind == error_kind and result.outcome.error.status == status
    assert result.retries == 2 and result.model_requests == 3
    assert result.machine.history == ()  # nothing completed, nothing salvaged


def test_context_overflow_becomes_an_emergency_compaction(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    world = adding_world(Fault(kind="context_overflow", model_call=3), keep_head=1, keep_tail=2)
    result = simulate(world, trace)
    assert isinstance(result.outcome, Completed) and result.compactions == 1
    line = int(world.policy.emergency_tokens)
    assert [a.n for a in _feeds(trace, "set_context_tokens")][-1] == line  # type: ignore[attr-defined]
    steps = [r.step for r in read_trace(trace) if r.type == "step"]  # type: ignore[union-attr]
    assert [s.kind for s in steps] == [
        "call_llm",
        "call_tools",
        "call_llm",
        "call_tools",
        "call_llm",
        "compact",
        "call_llm",
        "done",
    ]
    assert steps[5].reason.value == "emergency"
    assert steps[4].turn == steps[6].turn == 3  # the withdrawn call is issued again


def test_context_overflow_with_nothing_to_cut_fails_the_run() -> None:
    result = simulate(adding_world(Fault(kind="context_overflow", model_call=1)))
    assert isinstance(result.outcome, Failed)
    assert result.outcome.error.kind == "context_overflow"


def test_unknown_tool_is_preanswered_by_the_brain(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    result = simulate(adding_world(Fault(kind="unknown_tool", model_call=1)), trace)
    assert isinstance(result.outcome, Completed) and result.tool_calls == 1
    first_exchange = result.machine.history[2]
    assert first_exchange.tool_results[0].is_error
    assert "no_such_tool' is not available" in first_exchange.tool_results[0].content


@pytest.mark.parametrize(
    ("kind", "times", "outcome", "message"),
    [
        ("duplicate_call_ids", 1, "completed", None),
        ("duplicate_call_ids", 5, "failed", "duplicate tool call ids"),
        ("invalid_tool_json", 1, "completed", None),
        ("invalid_tool_json", 5, "failed", "invalid JSON arguments"),
        ("malformed_stream", 1, "failed", "before its start"),
    ],
)
def test_stream_shaped_faults(
    kind: FaultKind, times: int, outcome: str, message: str | None
) -> None:
    result = simulate(adding_world(Fault(kind=kind, model_call=2, times=times)))
    assert result.outcome.kind == outcome
    if message is not None:
        assert isinstance(result.outcome, Failed)
        assert result.outcome.error.kind == "provider"
        assert message in result.outcome.error.message


@pytest.mark.parametrize(
    ("fault", "timeout", "content"),
    [
        (
            Fault(kind="tool_exception", tool_call=1, message="disk full"),
            30.0,
            raised_message("add", RuntimeError("disk full")),
        ),
        (Fault(kind="tool_timeout", tool="add"), 30.0, timed_out_message("add", 30.0)),
        (Fault(kind="tool_hang", tool_call=1), 5.0, timed_out_message("add", 5.0)),
    ],
)
def test_tool_faults_become_error_results_with_the_drivers_texts(
    fault: Fault, timeout: float, content: str
) -> None:
    result = simulate(adding_world(fault, tool_timeout=timeout))
    assert isinstance(result.outcome, Completed)
    first = result.machine.history[2].tool_results[0]
    assert first.is_error and first.content == content


def test_a_hung_tool_without_timeout_can_only_be_cancelled() -> None:
    result = simulate(adding_world(Fault(kind="tool_hang", tool_call=2), tool_timeout=None))
    assert isinstance(result.outcome, Cancelled)
    assert len(result.machine.history) == 3  # the first exchange was salvaged


def test_a_scripted_tool_that_raises_is_an_error_result() -> None:
    def broken(args: dict[str, object]) -> str:
        raise ValueError("no")

    world = adding_world()
    world.tools = {"add": broken}
    result = simulate(world)
    assert result.machine.history[2].tool_results[0].content == raised_message(
        "add", ValueError("no")
    )


def test_cancel_at_a_step_salvages_the_completed_exchanges() -> None:
    result = simulate(adding_world(Fault(kind="cancel", step=4)))
    assert isinstance(result.outcome, Cancelled)
    assert [m.role for m in result.machine.history] == ["user", "assistant", "user"]


def test_crashes_restore_into_a_fresh_machine_and_change_nothing(tmp_path: Path) -> None:
    plain = simulate(adding_world())
    trace = tmp_path / "t.jsonl"
    crashed = simulate(adding_world(*(Fault(kind="crash", step=k) for k in range(1, 7))), trace)
    assert crashed.crashes == 6
    assert crashed.digest == plain.digest
    assert len(_io(trace, "crash")) == 6
    assert replay_trace(trace).ok


def test_manual_compaction_and_injection() -> None:
    world = adding_world(
        Fault(kind="compact_now", step=5),
        Fault(kind="inject", step=3, text="show your working"),
        keep_head=1,
        keep_tail=2,
    )
    result = simulate(world)
    assert isinstance(result.outcome, Completed) and result.compactions == 1
    texts = [m.text for m in result.machine.history]
    assert any("earlier messages were removed" in t for t in texts)


def test_a_function_model_sees_the_conversation() -> None:
    seen: list[int] = []

    def model(conversation: Sequence[Message], index: int) -> Message:
        seen.append(len(conversation))
        if index < 2:
            call = ToolCall(id=f"c{index}", name="add", arguments={"a": index, "b": 1})
            return Message.assistant("", [call])
        return Message.assistant("done")

    world = World(input="go", model=ModelScript(model), tools={"add": lambda a: "1"})
    result = simulate(world)
    assert result.final_text == "done" and seen == [1, 3, 5]


def test_an_exhausted_script_answers_a_final_text() -> None:
    result = simulate(World(input="hi"))
    assert result.final_text == "[the scripted model has nothing more to say]"


def test_a_runaway_world_is_stopped() -> None:
    def always_call(conversation: Sequence[Message], index: int) -> Message:
        return Message.assistant(
            "", [ToolCall(id=f"c{index}", name="add", arguments={"a": index, "b": 0})]
        )

    world = World(
        input="go",
        model=ModelScript(always_call),
        tools={"add": lambda a: "x"},
        policy=MachinePolicy(loop_action="off"),
        max_steps=20,
    )
    with pytest.raises(SimulationError, match="no Done after 20 steps"):
        simulate(world)


def test_middle_out_keeps_exchanges_whole() -> None:
    call = ToolCall(id="c", name="add", arguments={})
    from loopctl import ToolResult

    exchange = [
        Message.assistant("", [call]),
        Message.from_results([ToolResult(call_id="c", name="add", content="1")]),
    ]
    messages = [Message.user("q"), *exchange * 4]
    assert middle_out(messages[:3], 1, 2) is None
    cut = middle_out(messages, 1, 2)
    assert cut is not None and cut[0] == messages[0] and cut[-2:] == exchange


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "network"}, "needs model_call"),
        ({"kind": "network", "model_call": 1, "step": 2}, "placed by model_call only"),
        ({"kind": "tool_hang"}, "exactly one of tool_call or tool"),
        ({"kind": "tool_hang", "tool_call": 1, "tool": "x"}, "exactly one of tool_call or tool"),
        ({"kind": "crash"}, "needs step"),
        ({"kind": "inject", "step": 1}, "needs text"),
        ({"kind": "explode", "step": 1}, "kind"),
        ({"kind": "network", "model_call": 0}, "greater than or equal to 1"),
    ],
)
def test_fault_placement_is_validated(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Fault.model_validate(data)


# --- scenario files ----------------------------------------------------------------------------


def _scenario(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\n", "s.yaml: input: Field required"),
        ("name: x\ninput: hi\nfaults: [{kind: network}]\n", "s.yaml: faults.0: Value error"),
        ("name: x\ninput: hi\ntools: {t: {returns: a, raises: b}}\n", "s.yaml: tools.t: "),
        ("name: x\ninput: hi\npolicy: {max_turns: -1}\n", "s.yaml: policy.max_turns: "),
        (
            "name: x\ninput: hi\npolicy: {compact_threshold: 0.9, emergency_threshold: 0.5}\n",
            "compact_threshold must not exceed",
        ),
        ("name: x\ninput: hi\npolicy: {loop_window: 1}\n", "s.yaml: policy.loop_window: "),
        ("name: x\ninput: hi\npolicy: {tools: [t]}\n", "policy: tools: set by the scenario's"),
        ("name: x\ninput: hi\nmodel: [{txt: hi}]\n", "s.yaml: model.0.txt: Extra inputs"),
        ("name: x\ninput: [unclosed\n", "s.yaml:3: not valid YAML"),
        ("- a list\n", "a scenario is a mapping"),
    ],
)
def test_scenario_errors_name_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(_scenario(tmp_path, text))
    assert message in str(info.value)


def test_scenario_tools_and_replies(tmp_path: Path) -> None:
    path = _scenario(
        tmp_path,
        yaml.safe_dump(
            {
                "name": "tools",
                "input": "hi",
                "tools": {
                    "a": {"builtin": "add"},
                    "e": {"builtin": "echo"},
                    "c": {"builtin": "concat"},
                    "u": {"builtin": "upper"},
                    "n": {"builtin": "length"},
                    "r": {"returns": "42"},
                    "s": {"results": ["x", "y"]},
                },
                "model": [
                    {
                        "text": "t",
                        "calls": [
                            {"name": "a", "arguments": {"a": 1, "b": 2}},
                            {"name": "r", "id": "mine"},
                        ],
                    }
                ],
            }
        ),
    )
    world = load_scenario(path).world()
    t = world.tools
    assert t["a"]({"a": 1, "b": 2}) == "3" and t["e"]({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    assert t["c"]({"b": "y", "a": "x"}) == "xy" and t["u"]({"text": "ab"}) == "AB"
    assert t["n"]({"text": "abc"}) == "3" and t["r"]({}) == "42"
    assert [t["s"]({}) for _ in range(3)] == ["x", "y", "y"]
    reply = world.model.reply([], 0)
    assert [c.id for c in reply.tool_calls] == ["call_1_1", "mine"]
    assert set(world.run_policy().tools) == {"a", "e", "c", "u", "n", "r", "s"}


def test_missing_scenario_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(tmp_path / "nope.yaml")


def test_a_scenario_with_history_starts_from_it(tmp_path: Path) -> None:
    path = _scenario(
        tmp_path,
        "name: h\ninput: and now?\n"
        "history:\n"
        "  - {role: user, parts: [{kind: text, text: hello}]}\n"
        "  - {role: assistant, parts: [{kind: text, text: hi}]}\n"
        "model: [{text: done}]\n",
    )
    trace = tmp_path / "t.jsonl"
    result = simulate(load_scenario(path).world(), trace)
    assert [m.text for m in result.machine.history] == ["hello", "hi", "and now?", "done"]
    header = read_trace(trace)[0]
    assert header.snapshot is not None and len(header.snapshot.history) == 2  # type: ignore[union-attr]
    assert replay_trace(trace).ok


# --- the simulator's shortcuts agree with what they stand for ---------------------------------

_ODD_CALLS = [
    ToolCall(id="c1", name="add", arguments={"b": 1, "a": 2}),
    ToolCall(id="c2", name="søk", arguments={"q": "é ✓ \u2028", "n": [1.5e-7, 1e16, None, True]}),
    ToolCall(id="c3", name="nested", arguments={"z": {"y": {"x": [{"b": 0, "a": 1}]}}}),
    ToolCall(id="c4", name="empty"),
]
_REPLIES = [
    Message.assistant("plain text"),
    Message.assistant(""),
    Message.assistant("two calls", _ODD_CALLS[:2]),
    Message.assistant("", _ODD_CALLS),
    Message(role="assistant", parts=(TextPart(text="a"), TextPart(text="b"), _ODD_CALLS[2])),
    # flat arguments under sorted keys: the fold gives the message back as it is
    Message.assistant(
        "x", [ToolCall(id="c5", name="add", arguments={"a": 1, "b": "x", "c": None})]
    ),
    Message.assistant("", [ToolCall(id="c6", name="f", arguments={"a": True}), _ODD_CALLS[3]]),
    Message(role="user", parts=(TextPart(text="not an assistant"),)),
    Message(role="assistant", parts=(TextPart(text=""), _ODD_CALLS[3])),
    # nested arguments under sorted keys, and a reasoning part (this stream leaves it out)
    Message.assistant("", [ToolCall(id="c7", name="f", arguments={"a": {"c": [1], "d": 2}})]),
    Message(role="assistant", parts=(ThinkingPart(provider="x", text="t"), TextPart(text="a"))),
    Message(role="assistant", parts=(_ODD_CALLS[0], TextPart(text="text after a call"))),
    # the door refuses a number JSON cannot hold: the same error either way
    Message.assistant("", [ToolCall(id="c8", name="f", arguments={"x": float("nan")})]),
]


def test_the_incremental_estimate_is_char_estimator_count() -> None:
    """``ModelScript`` counts only what is new since the last request: the figure must be what
    ``CharEstimator`` says of the whole conversation, as it grows, is replaced and alternates."""
    script = ModelScript()
    growing: list[Message] = [Message.user("héllo ✓")]
    other = [Message.system("sys"), Message.user("another conversation")]
    results = Message.from_results([ToolResult(call_id="c1", name="add", content="3" * 37)])
    for i, reply in enumerate(_REPLIES * 3):
        for conversation in (growing, other, growing[: len(growing) // 2], growing):
            expected = CharEstimator().count([*conversation, reply])
            assert script.context_tokens(conversation, reply, i) == expected
        growing = [*growing, reply, results]
        if i % 4 == 3:
            growing = [Message.user("compacted"), *growing[-3:]]  # a compaction replaces it
    for message in [*_REPLIES, results, *other]:
        assert CharEstimator().count([message]) == int(message_chars(message) / 4) + 4


@pytest.mark.parametrize(
    "fault",
    [None, *[Fault(kind=k, model_call=1) for k in sorted(MODEL_FAULTS)]],
    ids=lambda f: "none" if f is None else f.kind,
)
@pytest.mark.parametrize("reply", _REPLIES, ids=range(len(_REPLIES)))
def test_the_delivered_reply_is_the_fold_of_the_stream(fault: Fault | None, reply: Message) -> None:
    """The simulator skips building the stream unless the fault is in it; what it delivers must
    be what folding the stream gives (the same message, JSON key order included, usage, stop
    reason), or the same error."""
    usage = Usage(context_tokens=42)
    try:
        expected: object = fold_events(faulty_reply(fault, reply, usage))
    except ApiError as exc:
        with pytest.raises(ApiError) as got:
            delivered_reply(fault, reply, usage)
        assert got.value.error == exc.error
        return
    got_reply = delivered_reply(fault, reply, usage)
    assert got_reply == expected
    assert got_reply.model_dump_json() == expected.model_dump_json()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "message",
    [
        Message.assistant("hello there"),
        Message.assistant(
            "two calls",
            [
                ToolCall(id="c1", name="add", arguments={"b": 2, "a": [1, {"x": None}]}),
                ToolCall(id="c2", name="noargs"),
            ],
        ),
    ],
)
def test_the_worlds_events_are_what_their_constructors_build(message: Message) -> None:
    """Each event the world streams is the one its constructor builds, and the stream folds
    back to the message's text."""
    events = message_events(message, Usage(input_tokens=3))
    for event in events:
        fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}
        reference = type(event)(**fields)
        assert event == reference and repr(event) == repr(reference)
    assert fold_events(events).message.text == message.text


def test_unknown_tool_faults_on_replies_without_calls_add_calls_with_fresh_ids() -> None:
    """Two unknown_tool faults on text replies: each adds a call of its own id (the request's
    number), so the conversation never answers one id twice."""
    text = Message.assistant("no calls here")
    fault = Fault(kind="unknown_tool", model_call=1, times=2)
    first = delivered_reply(fault, text, Usage(), 1).message.tool_calls
    second = delivered_reply(fault, text, Usage(), 2).message.tool_calls
    assert [c.id for c in first] == ["call_unknown_1"]
    assert [c.id for c in second] == ["call_unknown_2"]
    assert fold_events(faulty_reply(fault, text, None, 2)).message.tool_calls == second


def test_the_incremental_estimate_follows_the_brains_own_views() -> None:
    """The brain's conversation views (``extends``: what was counted is known in O(1) to be
    their prefix) as runs grow, compact mid-run, commit and go on in the next run: each figure
    is still ``CharEstimator``'s count of the whole conversation."""
    script = ModelScript()
    policy = MachinePolicy(tools=("add",), max_turns=50)
    machine = LoopMachine([Message.user("before"), Message.assistant("earlier")])
    index = 0

    def answer(reply: Message) -> None:
        nonlocal index
        assert machine.next_step(policy).kind == "call_llm"
        view = machine.conversation()
        expected = CharEstimator().count([*view, reply])
        assert script.context_tokens(view, reply, index) == expected
        index += 1
        machine.model_response(reply, 10)

    for run in range(3):
        machine.accept_input(f"run {run}")
        for turn in range(4):
            call = ToolCall(id=f"r{run}t{turn}", name="add", arguments={"a": turn})
            answer(Message.assistant(f"turn {turn}", [call]))
            assert machine.next_step(policy).kind == "call_tools"
            result = ToolResult(call_id=call.id, name="add", content=str(turn))
            machine.tool_results(Message.from_results([result]))
            if turn == 2 and run == 1:  # a compaction replaces the lists by shorter ones
                step = machine.next_step(policy.model_copy(update={"compact_now": True}))
                assert step.kind == "compact"
                kept = [Message.user("compacted"), *machine.messages()[-2:]]
                machine.compaction_result(kept, 100, 10)
        answer(Message.assistant("done"))
        assert machine.next_step(policy).kind == "done"
        machine.commit_pending()
        machine = machine.next_run()
