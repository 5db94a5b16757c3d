"""Loop detection: the pure verdict (``LoopWindow.judge``) and what the brain does with it."""

from __future__ import annotations

from typing import Any

import pytest
from brain_helpers import POLICY, answer, ask, call, started

from loopctl import CallLLM, Done, Failed, LoopMachine, MachinePolicy, ProtocolError, ToolCall
from loopctl.core import MAX_LOOP_WINDOW, LoopAction, LoopWindow
from loopctl.core.loopdetect import call_key


def test_call_key_is_canonical_in_argument_order() -> None:
    a = ToolCall(id="1", name="read", arguments={"path": "/a", "opts": {"x": 1, "y": [2, 3]}})
    b = ToolCall(id="2", name="read", arguments={"opts": {"y": [2, 3], "x": 1}, "path": "/a"})
    assert call_key(a) == call_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (ToolCall(id="1", name="read"), ToolCall(id="1", name="write")),
        (
            ToolCall(id="1", name="read", arguments={"p": 1}),
            ToolCall(id="1", name="read", arguments={"p": 2}),
        ),
        (
            ToolCall(id="1", name="read", arguments={"p": 1}),
            ToolCall(id="1", name="read", arguments={"p": "1"}),
        ),
        (ToolCall(id="1", name="read"), ToolCall(id="1", name="read", arguments={"p": None})),
    ],
    ids=["name", "value", "type", "missing-argument"],
)
def test_call_key_tells_different_calls_apart(a: ToolCall, b: ToolCall) -> None:
    assert call_key(a) != call_key(b)


def _deeply_nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _window(*names: str, unjudged: int = 1) -> LoopWindow:
    return LoopWindow(
        calls=tuple(call_key(ToolCall(id="x", name=n)) for n in names), unjudged=unjudged
    )


@pytest.mark.parametrize(
    ("names", "unjudged", "settings", "expected"),
    [
        (("a", "a", "a"), 1, {}, ("repeat", "a", 3)),
        (("a", "a"), 1, {}, None),
        (("a", "a"), 1, {"loop_repeat_limit": 2}, ("repeat", "a", 2)),
        (("a", "b", "a", "c", "a"), 1, {}, ("repeat", "a", 3)),
        # the third "a" is outside a window of 4 recorded calls
        (("a", "b", "c", "a", "d", "a"), 1, {"loop_window": 4}, None),
        # only the latest exchange is judged: "a" repeated earlier, the model moved on
        (("a", "a", "a", "b"), 1, {}, None),
        # one exchange of three identical calls is a repeat
        (("x", "a", "a", "a"), 3, {}, ("repeat", "a", 3)),
        (("a", "b", "a", "b"), 1, {}, ("ping_pong", "a <-> b", 2)),
        (("c", "a", "b", "a", "b"), 1, {}, ("ping_pong", "a <-> b", 2)),
        (("a", "a", "b", "b"), 1, {}, None),
        (("a", "b", "c", "a", "b"), 1, {}, None),
        # a ping-pong needs four calls inside the policy's window
        (("a", "b", "a", "b"), 1, {"loop_window": 3}, None),
        (("a", "a", "a"), 0, {}, None),
        (("a", "a", "a"), 1, {"loop_action": "off"}, None),
        (("a", "b", "a", "b"), 1, {"loop_action": "off"}, None),
    ],
)
def test_judge(
    names: tuple[str, ...],
    unjudged: int,
    settings: dict[str, Any],
    expected: tuple[str, str, int] | None,
) -> None:
    window = _window(*names, unjudged=unjudged)
    verdict = window.judge(MachinePolicy(**settings))
    if expected is None:
        assert verdict is None
    else:
        assert verdict is not None
        assert (verdict.pattern, verdict.tool, verdict.count) == expected
        assert verdict.tool.split(" ")[0] in verdict.describe()


# --- what the brain does with a verdict ------------------------------------------------------


def _exchange(m: LoopMachine, policy: MachinePolicy, *calls: ToolCall) -> object:
    """One turn asking ``calls``; returns the step the brain answers after the results."""
    step = m.next_step(policy)
    assert isinstance(step, CallLLM)
    m.model_response(ask(*calls), 10)
    m.next_step(policy)
    m.tool_results(answer(*calls))
    return m.next_step(policy)


def _same(i: int) -> ToolCall:
    return call(f"s{i}", path="/same")


@pytest.mark.parametrize("action", ["warn", "fail", "off"])
def test_two_repeats_are_not_a_loop(action: LoopAction) -> None:
    policy = POLICY.model_copy(update={"loop_action": action})
    m = started()
    _exchange(m, policy, _same(0))
    assert isinstance(_exchange(m, policy, _same(1)), CallLLM)
    assert not m.loop_window.warned


def test_warn_appends_a_note_then_a_further_repeat_fails() -> None:
    m = started()
    _exchange(m, POLICY, _same(0))
    _exchange(m, POLICY, _same(1))
    step = _exchange(m, POLICY, _same(2))
    assert step == CallLLM(turn=4)  # the run goes on, with a note for the model
    note = m.pending[-1]
    assert note.role == "user"
    assert "Loop warning" in note.text and "'read'" in note.text
    assert m.loop_window.warned
    step = _exchange(m, POLICY, _same(3))
    assert isinstance(step, Done) and isinstance(step.outcome, Failed)
    assert step.outcome.error.kind == "loop_detected"
    assert step.outcome.error.details["pattern"] == "repeat"


def test_after_a_warning_a_change_of_course_is_not_failed() -> None:
    m = started()
    for i in range(3):
        _exchange(m, POLICY, _same(i))
    assert m.loop_window.warned
    assert _exchange(m, POLICY, call("other", path="/elsewhere")) == CallLLM(turn=5)
    assert _exchange(m, POLICY, call("more", path="/more")) == CallLLM(turn=6)


def test_fail_ends_the_run_at_the_first_verdict() -> None:
    policy = POLICY.model_copy(update={"loop_action": "fail"})
    m = started()
    _exchange(m, policy, _same(0))
    _exchange(m, policy, _same(1))
    step = _exchange(m, policy, _same(2))
    assert isinstance(step, Done) and isinstance(step.outcome, Failed)
    assert step.outcome.error.kind == "loop_detected"
    assert not any("Loop warning" in msg.text for msg in m.pending)


def test_off_never_judges() -> None:
    policy = POLICY.model_copy(update={"loop_action": "off"})
    m = started()
    for i in range(6):
        assert _exchange(m, policy, _same(i)) == CallLLM(turn=i + 2)


@pytest.mark.parametrize(
    ("action", "limit", "fails_at", "pattern"),
    [
        ("fail", 3, 4, "ping_pong"),  # A,B,A,B
        ("warn", 5, 5, "ping_pong"),  # warned at A,B,A,B; B,A,B,A fails
        ("warn", 3, 5, "repeat"),  # warned at A,B,A,B; the third A is a repeat
    ],
)
def test_ping_pong_is_detected(action: LoopAction, limit: int, fails_at: int, pattern: str) -> None:
    policy = POLICY.model_copy(update={"loop_action": action, "loop_repeat_limit": limit})
    m = started()
    for i in range(1, 10):
        step = _exchange(m, policy, call(f"p{i}", path="/a" if i % 2 else "/b"))
        if isinstance(step, Done):
            break
        assert m.loop_window.warned == (i >= 4)
    assert i == fails_at
    assert isinstance(step, Done) and isinstance(step.outcome, Failed)
    assert step.outcome.error.details["pattern"] == pattern


def test_unknown_tool_calls_count_for_loops_too() -> None:
    """A model that keeps calling a tool that does not exist is looping as well."""
    m = started()
    for i in range(3):
        m.next_step(POLICY)
        m.model_response(ask(call(f"u{i}", "ghost")), 10)
    step = m.next_step(POLICY)
    assert step == CallLLM(turn=4)
    assert m.loop_window.warned


def test_the_verdict_is_taken_once_per_exchange() -> None:
    """A compaction between the verdict and the model call does not judge (or warn) again."""
    m = started()
    for i in range(2):
        _exchange(m, POLICY, _same(i))
    m.next_step(POLICY)
    m.model_response(ask(_same(2)), 10)
    m.next_step(POLICY)
    m.tool_results(answer(_same(2)))
    m.set_context_tokens(850)
    step = m.next_step(POLICY)  # the warning is appended, then the threshold asks to compact
    assert step.kind == "compact"
    notes = sum("Loop warning" in msg.text for msg in m.pending)
    m.compaction_result(list(m.history) + list(m.pending), 850, 100)
    assert m.next_step(POLICY) == CallLLM(turn=4)
    assert notes == 1
    assert sum("Loop warning" in msg.text for msg in m.history) == 1


def test_the_verdict_uses_the_policy_in_force_not_earlier_ones() -> None:
    """Calls recorded under a narrow window are all judged when a wider window is handed in."""
    narrow = POLICY.model_copy(update={"loop_window": 2, "loop_action": "fail"})
    wide = narrow.model_copy(update={"loop_window": 12})
    m = started()
    for i, path in enumerate(["/a", "/b", "/a"]):
        assert isinstance(_exchange(m, narrow, call(f"p{i}", path=path)), CallLLM)
    step = _exchange(m, wide, call("p3", path="/b"))  # A, B, A, B: seen through the wide window
    assert isinstance(step, Done) and isinstance(step.outcome, Failed)
    assert step.outcome.error.details["pattern"] == "ping_pong"


def test_the_machine_keeps_the_last_max_window_keys() -> None:
    policy = POLICY.model_copy(update={"loop_action": "off", "max_turns": 1000})
    m = started()
    for i in range(MAX_LOOP_WINDOW // 2 + 5):
        m.next_step(policy)
        calls = [call(f"a{i}", n=i), call(f"b{i}", "write", n=i)]
        m.model_response(ask(*calls), 10)
        m.next_step(policy)
        m.tool_results(answer(*calls))
    window = m.loop_window
    assert len(window.calls) == MAX_LOOP_WINDOW
    assert window.calls[-1] == call_key(call("x", "write", n=MAX_LOOP_WINDOW // 2 + 4))
    assert LoopMachine.model_validate_json(m.model_dump_json()) == m


def test_call_key_is_the_name_and_a_fixed_size_hash_of_the_arguments() -> None:
    """The window rides every snapshot and every digest: its keys stay small whatever the calls
    carry, and the tool's name stays readable (verdicts name it, even with a ``#`` in it)."""
    small = call_key(ToolCall(id="1", name="write", arguments={"text": "x"}))
    big = call_key(ToolCall(id="1", name="write", arguments={"text": "x" * 100_000}))
    assert small.startswith("write#") and big.startswith("write#")
    assert len(small) == len(big) == len("write#") + 16
    assert int(small[-16:], 16) >= 0  # hex
    odd = ToolCall(id="1", name="ns#tool", arguments={"a": 1})
    window = LoopWindow(calls=(call_key(odd),) * 3, unjudged=1)
    verdict = window.judge(POLICY.model_copy(update={"loop_repeat_limit": 3}))
    assert verdict is not None and verdict.tool == "ns#tool"


@pytest.mark.parametrize(
    "arguments",
    [{"x": float("nan")}, {"x": [float("inf")]}, {"deep": _deeply_nested(5_000)}],
    ids=["nan", "infinity", "too-deep"],
)
def test_call_key_refuses_what_json_cannot_hold(arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        call_key(ToolCall(id="1", name="t", arguments=arguments))


def test_a_call_the_key_cannot_hold_is_refused_at_the_door() -> None:
    m = started()
    m.next_step(POLICY)
    bad = ToolCall(id="1", name="read", arguments={"deep": _deeply_nested(5_000)})
    before = m.model_dump_json()
    with pytest.raises(ProtocolError):
        m.model_response(ask(bad), 10)
    assert m.model_dump_json() == before
