"""``BrainReference``: the tiny reference model ``BrainMachine`` compares the brain with.

It keeps what a driver can know from outside: turns taken, the last context count, the threshold
no-op floor, the advertised tools, the outcome, and every call of the run. It judges each
decision taken in ``Start`` with the independent references of the invariants, never with the
brain's own window: a reference that reuses the code under test cannot catch it. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from loopctl.core import (
    CallLLM,
    CompactReason,
    LoopMachine,
    LoopWindow,
    MachineOutcome,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    Start,
    ToolCall,
)
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.invariants.decisions import reference_call_key


@dataclass
class BrainReference:
    """What the brain should hold, kept independently; per run but ``tokens``, ``advertised``
    and ``verdicts``."""

    turns: int = 0
    tokens: int = 0
    outcome: MachineOutcome | None = None
    #: every call of the run, oldest first (``reference_call_key``)
    loop_keys: list[str] = field(default_factory=list)
    #: calls of the latest exchange not judged yet
    loop_unjudged: int = 0
    loop_warned: bool = False
    noop_floor: int | None = None
    #: ``policy.tools`` of the last ``CallLLM`` asked in ``Start``
    advertised: tuple[str, ...] = ()
    #: how often each loop verdict was seen (``"ping_pong (warn)"``), over every run: what a
    #: test reads to show that its programs exercise the loop detector
    verdicts: Counter[str] = field(default_factory=Counter)

    def next_run(self) -> None:
        self.turns = 0
        self.outcome = None
        self.loop_keys = []
        self.loop_unjudged = 0
        self.loop_warned = False
        self.noop_floor = None

    def replied(self, count: int) -> None:
        """``model_response`` with a context of ``count``: a turn was taken."""
        self.turns += 1
        self.tokens = count

    def counted(self, count: int) -> None:
        """``set_context_tokens(count)``, or ``tool_results`` with ``count``."""
        self.tokens = count

    def compacted(self, count: int) -> None:
        """``compaction_result`` to ``count``: the conversation changed, so the floor goes."""
        self.tokens = count
        self.noop_floor = None

    def compaction_noop(self, reason: CompactReason, count: int) -> None:
        """``compaction_noop`` at ``count`` after asking for ``reason``: a threshold compaction
        that changed nothing sets the floor (an emergency one fails the run instead)."""
        self.tokens = count
        if reason is CompactReason.THRESHOLD_EXCEEDED:
            self.noop_floor = count

    def record_calls(self, calls: Sequence[ToolCall]) -> None:
        """An exchange completed with ``calls``: record them, to be judged at the next ask."""
        self.loop_keys += [reference_call_key(c) for c in calls]
        self.loop_unjudged = len(calls)

    def asked(
        self, before: MachineSnapshot, after: LoopMachine, step: MachineStep, policy: MachinePolicy
    ) -> tuple[list[str], str | None]:
        """``step = machine.next_step(policy)`` was asked of ``before`` and left ``after``: a
        decision in ``Start`` is judged by the reference loop detector and decision order.
        Returns the problems and, when the reference sees a loop, a label for statistics."""
        if isinstance(step, CallLLM) and isinstance(before.state, Start):
            self.advertised = policy.tools
        if not (isinstance(before.state, Start) and before.started):
            return [], None
        verdict = inv.reference_loop_verdict(self.loop_keys, self.loop_unjudged, policy)
        problems = inv.check_loop_decision(before, after, step, verdict, self.loop_warned, policy)
        failed = verdict is not None and (policy.loop_action == "fail" or self.loop_warned)
        if not failed:
            judged = before.model_copy(update={"loop": LoopWindow()})
            problems += inv.check_start_decision(judged, policy, step)
        if verdict is not None and not failed:
            self.loop_warned = True
        self.loop_unjudged = 0
        if verdict is None:
            return problems, None
        how = "fail" if policy.loop_action == "fail" else "fail after a warning"
        if not failed:
            how = "warn"
        label = f"{verdict} ({how})"
        self.verdicts[label] += 1
        return problems, f"loop verdict {label}"
