"""Looping programs: runs that loop on purpose, so that every loop verdict is judged.

``BrainMachine``'s own programs almost never loop (about one loop verdict in a hundred
examples, never a ping-pong): its policies cap ``max_turns`` at 8, its rules are picked
uniformly, and with a repeat limit of 2 an A, B, A, B is a repeat before it is a ping-pong. A
loop detector that ignored ping-pongs, the policy's window, or its own warning would pass them.

Here a program is a run of exchanges built from loop patterns (``loop_programs``):

==============  ===============================================================================
pattern         the exchanges
==============  ===============================================================================
``repeat``      one call, the same arguments, k times in a row
``spaced``      one call k times with other calls between (so a small window hides it)
``ping_pong``   A, B, A, B, ... (one call each)
``parallel``    one exchange holding the same call twice, or A and B together
``noise``       calls that differ from everything else
==============  ===============================================================================

under policies made for loops (``loop_policies``: windows of 2 to 12, repeat limits of 2 to 5,
warn or fail, turns enough for the program), with now and then a mid-run change of the window
or the limit. ``run_loop_program`` drives a ``BrainMachine`` through it with the machine's own
rules (ask, reply with the exchange's calls, answer them), so every decision in ``Start`` is
compared with the reference loop detector (``BrainReference``: the run's whole call record,
judged by ``reference_loop_verdict``, never the brain's window) and every invariant is checked
after every move; the run then heals (liveness). The reference counts the verdicts it saw
(``BrainReference.verdicts``), so a test can show that the programs reach every kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeAlias

from hypothesis import strategies as st

from loopctl.core import LoopAction, MachinePolicy
from loopctl_sim.props.brain_machine import BrainMachine
from loopctl_sim.props.brain_strategies import CallSpec

__all__ = [
    "PATTERNS",
    "LoopProgram",
    "loop_policies",
    "loop_programs",
    "run_loop_program",
]

#: The loop patterns a program is made of.
PATTERNS: Final = ("ping_pong", "spaced", "repeat", "parallel", "noise")
#: The tools loop policies advertise.
_TOOLS: Final = ("read", "write", "search")
#: Two distinct calls (tool index, arguments) for the patterns; noise draws others.
_A: Final[CallSpec] = (True, 0, {})
_B: Final[CallSpec] = (True, 1, {"path": "a"})

#: One step of a program: the calls of one exchange, or a policy change
#: (``("policy", {field: value})``).
ProgramStep: TypeAlias = tuple[str, Any]
LoopProgram: TypeAlias = list[ProgramStep]


@st.composite
def loop_policies(
    draw: st.DrawFn, actions: Sequence[LoopAction] = ("warn", "fail", "warn")
) -> MachinePolicy:
    """Policies for looping programs: small windows are common (a window narrower than a
    spaced repeat must not see it), limits of 3 and more are (a ping-pong needs one). The loop
    action is one of ``actions``: warn twice as often by default, since a warned run goes on,
    to be failed by its next loop."""
    return MachinePolicy(
        max_turns=40,
        context_window=128_000,
        tools=_TOOLS,
        loop_window=draw(st.sampled_from([4, 3, 6, 12, 2, 5, 8])),
        loop_repeat_limit=draw(st.sampled_from([3, 4, 3, 5, 2])),
        loop_action=draw(st.sampled_from(list(actions))),
    )


@st.composite
def _segment(draw: st.DrawFn, noise: list[int]) -> list[ProgramStep]:
    pattern = draw(st.sampled_from(PATTERNS))
    a, b = draw(st.sampled_from([(_A, _B), (_B, _A), (_A, (True, 2, {"n": 1}))]))
    if pattern == "repeat":
        return [("calls", [a])] * draw(st.integers(2, 6))
    if pattern == "ping_pong":  # a fresh pair: no earlier call of it makes a repeat first
        a, b = _noise(noise), _noise(noise)
        return [("calls", [a if i % 2 == 0 else b]) for i in range(draw(st.integers(4, 8)))]
    if pattern == "parallel":
        return [("calls", draw(st.sampled_from([[a, a], [a, b], [a, a, b]])))]
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
def loop_programs(draw: st.DrawFn) -> LoopProgram:
    """A looping program: two to four segments (see the module docstring), and at their
    boundaries now and then a policy change of the window or the repeat limit."""
    noise = [0]
    program: LoopProgram = []
    for _ in range(draw(st.integers(2, 4))):
        if program and draw(st.integers(0, 3)) == 0:
            change = draw(
                st.sampled_from([{"loop_window": 12}, {"loop_window": 3}, {"loop_repeat_limit": 2}])
            )
            program.append(("policy", change))
        program += draw(_segment(noise))
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
