"""Planted brain bugs, one at a time: the brain's property layer must find each.

The bugs of this file once survived every generated program and were caught only by
hand-written tables: a loop detector that ignores ping-pongs, ignores the policy's window or
never escalates a warning (the programs of ``BrainMachine`` almost never loop; the looping
programs of ``brain_loops`` do); a brain that answers ``AwaitingModel`` without looking at an
overflow count (``check_awaiting_model_decision``); a digest cache that misses a history replaced
by another list of the same length (``check_digest``, asked before anything saves the machine).

Each fixture patches the real brain for the one test; the property runs under fixed settings
(derandomized, a bounded number of examples, no shrinking) and the test asserts that it fails
with the code of the property that caught the bug. Every plant counts how often it fired, so a
plant that stops matching the brain fails loudly instead of passing for the wrong reason.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis.stateful import run_state_machine_as_test
from planting import HUNT, NEVER_FIRED, Plant, plant_function, without_local_constants

import loopctl.core.machine as brain
import loopctl.core.values as values
from loopctl.core import (
    MAX_LOOP_WINDOW,
    CallLLM,
    LoopMachine,
    LoopWindow,
    MachinePolicy,
    ToolCall,
    _saved,
)
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_loops import (
    LoopProgram,
    loop_policies,
    loop_programs,
    run_loop_program,
)
from loopctl_sim.props.brain_machine import BrainMachine

#: The brain's hunts: the CI profile's budget, as the driver's.
BRAIN_HUNT = HUNT


@settings(BRAIN_HUNT)
@given(policy=loop_policies(), program=loop_programs())
def _looping(policy: MachinePolicy, program: LoopProgram) -> None:
    run_loop_program(BrainMachine(), policy, program)


def _stateful() -> None:
    run_state_machine_as_test(BrainMachine, settings=settings(BRAIN_HUNT, stateful_step_count=30))


@pytest.fixture(autouse=True)
def _same_examples_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    without_local_constants(monkeypatch)


# --- the loop detector ---------------------------------------------------------------------------


@pytest.fixture
def no_ping_pong(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The loop detector never reports a ping-pong."""

    def change(real: Any, window: LoopWindow, policy: MachinePolicy) -> Any:
        verdict = real(window, policy)
        return None if verdict is not None and verdict.pattern == "ping_pong" else verdict

    return plant_function(monkeypatch, LoopWindow, "judge", change)


@pytest.fixture
def window_ignored(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The loop detector looks at the whole record it keeps, not the policy's window."""

    def change(real: Any, window: LoopWindow, policy: MachinePolicy) -> Any:
        return real(window, policy.model_copy(update={"loop_window": MAX_LOOP_WINDOW}))

    return plant_function(monkeypatch, LoopWindow, "judge", change)


@pytest.fixture
def never_escalates(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """A warned run is warned again instead of failed (the flag is kept, but not consulted)."""
    plant = Plant()
    real = brain._STEP_HANDLERS["start"]

    def step_start(machine: LoopMachine, policy: MachinePolicy) -> Any:
        warned = machine._loop.warned
        machine._loop = machine._loop.model_copy(update={"warned": False})
        notes = machine.pending_len()
        step = real(machine, policy)
        if warned and machine.pending_len() > notes:
            plant.fired += 1  # a second warning note where a failure was due
        machine._loop = machine._loop.model_copy(update={"warned": machine._loop.warned or warned})
        return step

    monkeypatch.setitem(brain._STEP_HANDLERS, "start", step_start)
    yield plant


@pytest.fixture
def window_constant(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The loop window is the default constant (12), not the policy's ``loop_window``."""

    def change(real: Any, window: LoopWindow, policy: MachinePolicy) -> Any:
        return real(window, policy.model_copy(update={"loop_window": 12}))

    return plant_function(monkeypatch, LoopWindow, "judge", change)


@pytest.fixture
def limit_constant(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The repeat limit is the default constant (3), not the policy's ``loop_repeat_limit``."""

    def change(real: Any, window: LoopWindow, policy: MachinePolicy) -> Any:
        return real(window, policy.model_copy(update={"loop_repeat_limit": 3}))

    return plant_function(monkeypatch, LoopWindow, "judge", change)


@pytest.fixture
def off_ignored(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """``loop_action="off"`` is read as ``"warn"``: a run that asked for no detection is warned."""

    def change(real: Any, window: LoopWindow, policy: MachinePolicy) -> Any:
        if policy.loop_action == "off":
            policy = policy.model_copy(update={"loop_action": "warn"})
        return real(window, policy)

    return plant_function(monkeypatch, LoopWindow, "judge", change)


@pytest.fixture
def argument_order_counts(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """A call's key hashes its arguments in the order the model wrote them (no sorting): the
    same call with its arguments shuffled is another call, and its repeats go unseen."""
    plant = Plant()
    real: Callable[[ToolCall], str] = vars(brain)["call_key"]

    def call_key(call: ToolCall) -> str:
        arguments = call.arguments
        if list(arguments) == sorted(arguments):
            return real(call)
        plant.fired += 1
        text = json.dumps(arguments, separators=(",", ":"))
        return call.name + "#" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()

    monkeypatch.setattr(brain, "call_key", call_key)
    return plant


# --- compaction ----------------------------------------------------------------------------------


def _lax_coherence(monkeypatch: pytest.MonkeyPatch, overlooked: str) -> Plant:
    """The brain's check of a compacted history overlooks problems whose text holds
    ``overlooked`` (``values.history_problem`` calls it; the real check, ``coherence_problem``,
    still guards restores)."""

    def change(real: Any, messages: Any, **kwargs: Any) -> Any:
        problem = real(messages, **kwargs)
        return None if problem is not None and overlooked in problem else problem

    return plant_function(monkeypatch, values, "coherence_problem", change)


@pytest.fixture
def compaction_orphans_accepted(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """A compaction whose tool results answer no call before them is accepted."""
    return _lax_coherence(monkeypatch, "for no tool call")


@pytest.fixture
def compaction_open_calls_accepted(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """A compaction whose last calls have no results is accepted."""
    return _lax_coherence(monkeypatch, "have no results")


# --- AwaitingModel -------------------------------------------------------------------------------


@pytest.fixture
def overflow_count_ignored(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """Asked in AwaitingModel, the brain asks the model again whatever the count says."""
    plant = Plant()
    real = brain._STEP_HANDLERS["awaiting_model"]

    def step_awaiting_model(machine: LoopMachine, policy: MachinePolicy) -> Any:
        state = machine.state
        if machine.context_tokens >= policy.emergency_tokens:
            plant.fired += 1
            return CallLLM(turn=state.turn)  # type: ignore[union-attr]
        return real(machine, policy)

    monkeypatch.setitem(brain._STEP_HANDLERS, "awaiting_model", step_awaiting_model)
    yield plant


# --- the digest ----------------------------------------------------------------------------------


@pytest.fixture
def stale_digest(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """The saved form's cache trusts a list's length, not its messages: a list of the length it
    encoded (a same-length compaction) keeps the old messages' JSON and hash."""
    plant = Plant()
    real = _saved._Encoded.follow

    def follow(self: Any, messages: Any) -> None:
        done = len(self.messages)
        if done and len(messages) == done:
            if not all(map(operator.is_, self.messages, messages)):
                plant.fired += 1
            return
        real(self, messages)

    monkeypatch.setattr(_saved._Encoded, "follow", follow)
    yield plant


#: Each planted bug (its fixture), the property run that hunts it, and the code it must fail with.
PLANTED: list[tuple[str, Callable[[], None], set[str]]] = [
    ("no_ping_pong", _looping, {inv.InvariantCode.LOOP}),
    ("window_ignored", _looping, {inv.InvariantCode.LOOP}),
    ("window_constant", _looping, {inv.InvariantCode.LOOP}),
    ("limit_constant", _looping, {inv.InvariantCode.LOOP}),
    ("never_escalates", _looping, {inv.InvariantCode.LOOP}),
    ("off_ignored", _looping, {inv.InvariantCode.LOOP}),
    ("argument_order_counts", _looping, {inv.InvariantCode.LOOP}),
    ("overflow_count_ignored", _stateful, {inv.InvariantCode.DECISION}),
    ("stale_digest", _stateful, {inv.InvariantCode.DIGEST}),
    # refused by the rule that hands it over, or seen in the history right after
    (
        "compaction_orphans_accepted",
        _stateful,
        {inv.InvariantCode.REFUSAL, inv.InvariantCode.HISTORY_INVALID},
    ),
    (
        "compaction_open_calls_accepted",
        _stateful,
        {inv.InvariantCode.REFUSAL, inv.InvariantCode.HISTORY_INVALID},
    ),
]


@pytest.mark.parametrize(("bug", "run", "codes"), PLANTED, ids=[bug for bug, _, _ in PLANTED])
def test_the_property_layer_finds_the_planted_bug(
    bug: str, run: Callable[[], None], codes: set[str], request: pytest.FixtureRequest
) -> None:
    plant: Plant = request.getfixturevalue(bug)
    with pytest.raises(AssertionError) as info:
        run()
    assert plant.fired, NEVER_FIRED
    assert any(f"{code}:" in str(info.value) for code in codes), str(info.value)


def test_the_unpatched_brain_passes_the_same_hunts() -> None:
    _looping()
    _stateful()
