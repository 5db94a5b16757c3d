"""Looping programs: runs that loop on purpose, so that every loop verdict is judged.

``BrainMachine``'s own programs almost never loop (its policies cap ``max_turns`` at 8, its rules
are picked uniformly, and with a repeat limit of 2 an A, B, A, B is a repeat before it is a
ping-pong), so a detector that ignored ping-pongs, the window or its own warning would pass
them. Here a program is a run of exchanges built from loop patterns
(``loop_weights.PATTERNS``) under policies made for loops, the window or the limit changed
mid-run now and then; how often each is drawn is ``LoopWeights``, a table a user can change.

``run_loop_program`` drives a ``BrainMachine`` through a program, every decision in ``Start``
compared with the reference loop detector (the run's whole call record, never the brain's
window); ``BrainReference.verdicts`` shows that the programs reach every kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeAlias

from hypothesis import strategies as st

from loopctl.core import LoopAction, MachinePolicy
from loopctl_sim.props.brain_machine import BrainMachine
from loopctl_sim.props.brain_strategies import CallSpec
from loopctl_sim.props.loop_weights import LOOP_WEIGHTS, LoopWeights

#: The tools loop policies advertise.
_TOOLS: Final = ("read", "write", "search")
#: Two distinct calls (tool index, arguments) for the patterns; noise draws others.
_A: Final[CallSpec] = (True, 0, {})
_B: Final[CallSpec] = (True, 1, {"path": "a"})
#: A call of two arguments, and the same call with its arguments in the other order.
_AB: Final[CallSpec] = (True, 0, {"path": "a", "n": 1})
_BA: Final[CallSpec] = (True, 0, {"n": 1, "path": "a"})

#: One step of a program: the calls of one exchange, or a policy change
#: (``("policy", {field: value})``).
ProgramStep: TypeAlias = tuple[str, Any]
LoopProgram: TypeAlias = list[ProgramStep]


def _weighted(pairs: Sequence[tuple[Any, int]]) -> st.SearchStrategy[Any]:
    """A value of ``pairs`` drawn with its weight (repeated in a sample: shrinks to the first)."""
    return st.sampled_from([value for value, weight in pairs for _ in range(weight)])


@st.composite
def loop_policies(
    draw: st.DrawFn,
    actions: Sequence[LoopAction] | None = None,
    weights: LoopWeights = LOOP_WEIGHTS,
) -> MachinePolicy:
    """Policies for looping programs: small windows are common (a window narrower than a
    spaced repeat must not see it), limits of 3 and more are (a ping-pong needs one). The loop
    action is one of ``actions`` when given (uniformly), else drawn by ``weights.actions``."""
    action = draw(st.sampled_from(list(actions)) if actions else _weighted(weights.actions))
    return MachinePolicy(
        max_turns=40,
        context_window=128_000,
        tools=_TOOLS,
        loop_window=draw(_weighted(weights.windows)),
        loop_repeat_limit=draw(_weighted(weights.limits)),
        loop_action=action,
    )


@st.composite
def _segment(draw: st.DrawFn, noise: list[int], weights: LoopWeights) -> list[ProgramStep]:
    pattern = draw(_weighted(weights.patterns))
    a, b = draw(st.sampled_from([(_A, _B), (_B, _A), (_A, (True, 2, {"n": 1}))]))
    if pattern == "repeat":
        return [("calls", [a])] * draw(st.integers(2, 6))
    if pattern == "shuffled":  # one call, its arguments in either order: still one call
        orders = draw(st.lists(st.sampled_from([_AB, _BA]), min_size=2, max_size=6))
        return [("calls", [call]) for call in orders]
    if pattern == "ping_pong":  # a fresh pair: no earlier call of it makes a repeat first
        a, b = _noise(noise), _noise(noise)
        if draw(st.booleans()):  # the pair's arguments in shuffled order on the way back
            a = (True, 2, {"q": a[2]["q"], "p": 0})
            a_back: CallSpec = (True, 2, {"p": 0, "q": a[2]["q"]})
        else:
            a_back = a
        n = draw(st.integers(4, 8))
        return [("calls", [(a if i % 4 == 0 else a_back) if i % 2 == 0 else b]) for i in range(n)]
    if pattern == "parallel":
        return [("calls", draw(st.sampled_from([[a, a], [a, b], [a, a, b], [_AB, _BA]])))]
    if pattern == "spaced":
        gap = draw(st.integers(1, 3))
        out: list[ProgramStep] = []
        for _ in range(draw(st.integers(2, 4))):
            out.append(("calls", [a]))
            out += [("calls", [_noise(noise)]) for _ in range(gap)]
        return out
    return [("calls", [_noise(noise)]) for _ in range(draw(st.integers(1, 3)))]


def _noise(counter: list[int]) -> CallSpec:
    """A call unlike any other of the program (fresh arguments)."""
    counter[0] += 1
    return (True, 2, {"q": counter[0]})


@st.composite
def _change(draw: st.DrawFn, weights: LoopWeights) -> ProgramStep:
    """A policy change: a new window, a new limit, or both."""
    field = draw(st.sampled_from(["loop_window", "loop_repeat_limit", "both"]))
    change: dict[str, int] = {}
    if field in ("loop_window", "both"):
        change["loop_window"] = draw(_weighted(weights.windows))
    if field in ("loop_repeat_limit", "both"):
        change["loop_repeat_limit"] = draw(_weighted(weights.limits))
    return ("policy", change)


@st.composite
def loop_programs(draw: st.DrawFn, weights: LoopWeights = LOOP_WEIGHTS) -> LoopProgram:
    """A looping program: two to four segments (see the module docstring), long enough for a
    warning and the loop after it; after any exchange, with ``weights.change`` out of 8, a
    policy change of the window or the repeat limit (the next step is decided under it)."""
    noise = [0]
    program: LoopProgram = []
    for _ in range(draw(st.integers(2, 4))):
        for step in draw(_segment(noise, weights)):
            program.append(step)
            if weights.change and draw(st.integers(0, 7)) < weights.change:
                program.append(draw(_change(weights)))
    return program


def run_loop_program(machine: BrainMachine, policy: MachinePolicy, program: LoopProgram) -> None:
    """Run ``program`` on ``machine`` (set up here with ``policy`` and an empty history), every
    decision in ``Start`` judged by the reference as it is asked, every invariant checked after
    every exchange, then heal. Stops early when the run ends (a loop failure)."""
    machine._setup(policy, [], 0, True)
    for kind, value in program:
        if kind == "policy":
            machine.policy = machine.policy.model_copy(update=value)
            continue
        machine.next_step()  # in Start: judged by the reference loop detector
        if machine.kind != "awaiting_model":
            break
        machine.model_response("looking", value, 0.0)
        if machine.kind == "awaiting_tools":
            machine.next_step()
            machine.tool_results(0, [])
        machine.check_all()
    machine.check_all()
    machine.teardown()
