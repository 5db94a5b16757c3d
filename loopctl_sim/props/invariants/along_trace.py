"""Checking along a recorded trace: replay asks whether the brain still makes the recorded
decisions; ``check_trace`` asks whether those decisions keep the brain's promises, so a trace
from production (or a fuzz campaign) tests the invariants as well as determinism.
"""

from __future__ import annotations

import os

from loopctl.core import LoopMachine, MachinePolicy, ProtocolError
from loopctl_sim.props.invariants.commits import (
    check_commit,
    check_compaction_commit,
    check_salvage,
)
from loopctl_sim.props.invariants.decisions import check_start_decision
from loopctl_sim.props.invariants.problems import InvariantCode
from loopctl_sim.props.invariants.problems import problem as _p
from loopctl_sim.props.invariants.resume import check_resume
from loopctl_sim.props.invariants.state import (
    check_machine,
    check_step,
    check_terminal_sticky,
    check_transition,
)
from loopctl_sim.trace import ContinuationError, HeaderRecord, StepRecord, TraceReader


def check_trace(path: str | os.PathLike[str]) -> list[str]:
    """Walk a recorded trace on a bare brain, checking every applicable invariant after every
    step and feed, and ``check_resume`` after every feed. Problems are prefixed with the
    record's ``seq``; a move the brain refuses ends the walk."""
    problems: list[str] = []
    machine: LoopMachine | None = None
    policy: MachinePolicy | None = None
    for record in TraceReader(path):
        seq = record.seq
        found: list[str] = []
        if isinstance(record, HeaderRecord):
            try:
                machine = record.machine(machine)  # (v3: the previous brain's next_run())
            except ContinuationError as exc:
                problems.append(f"seq {seq}: {_p(InvariantCode.REFUSAL, str(exc))}")
                return problems
            named = record.continues
            if named is not None and not record.scrubbed and machine.digest() != named:
                found.append(
                    _p(InvariantCode.REFUSAL, "next_run() is not the brain the header names")
                )
            found += check_machine(machine)
        elif machine is None:
            continue
        elif isinstance(record, StepRecord):
            policy = record.policy
            before = machine.snapshot()
            try:
                step = machine.next_step(policy)
            except ProtocolError as exc:
                problems.append(
                    f"seq {seq}: {_p(InvariantCode.REFUSAL, f'next_step refused: {exc}')}"
                )
                return problems
            found += check_step(machine, step, policy)
            found += check_start_decision(before, policy, step)
            found += check_transition(before.state.kind, "next_step", machine.state.kind)
            found += check_machine(machine, policy)
        elif record.type == "feed":
            name = record.name
            before_machine = LoopMachine.from_snapshot(machine.snapshot())
            try:
                machine.feed(record.args)
            except ProtocolError as exc:
                problems.append(f"seq {seq}: {_p(InvariantCode.REFUSAL, f'{name} refused: {exc}')}")
                return problems
            found += check_transition(before_machine.state.kind, name, machine.state.kind)
            found += check_terminal_sticky(before_machine, machine)
            if name == "discard_pending":
                found += check_salvage(before_machine, machine)
            elif name == "commit_pending":
                found += check_commit(before_machine, machine)
            elif name == "compaction_result":
                found += check_compaction_commit(
                    before_machine, machine, list(machine.history), machine.context_tokens
                )
            found += check_machine(machine, policy)
            found += check_resume(machine, policy)
        problems += [f"seq {seq}: {p}" for p in found]
    return problems
