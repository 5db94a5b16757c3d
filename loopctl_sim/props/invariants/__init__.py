"""Invariant checkers for the brain and the hands, usable after every step. Every checker is
pure: it reads machines and returns a list of problems (``"<code>: <text>"``, [] when all is
well); where a check has to ask a question (``check_resume``), it asks a restored copy.

Import the package, not its modules (``from loopctl_sim.props import invariants as inv``). It
imports ``loopctl`` and, for ``check_trace``, the trace format; no hypothesis.
"""

from __future__ import annotations

from loopctl_sim.props.invariants.along_trace import check_trace
from loopctl_sim.props.invariants.commits import (
    check_commit,
    check_compaction_commit,
    check_next_run,
    check_salvage,
)
from loopctl_sim.props.invariants.conversation import provider_problems
from loopctl_sim.props.invariants.decisions import (
    check_awaiting_model_decision,
    check_loop_decision,
    check_start_decision,
    reference_loop_verdict,
)
from loopctl_sim.props.invariants.driver import (
    check_after_overflow,
    check_compact_now,
    check_dispatched_once,
    check_estimate,
    check_model_call,
    check_policy,
    check_result_order,
    check_run_messages,
)
from loopctl_sim.props.invariants.problems import (
    InvariantCode,
    InvariantViolation,
    assert_no_problems,
    problem_code,
)
from loopctl_sim.props.invariants.resume import check_digest, check_resume
from loopctl_sim.props.invariants.state import (
    assert_machine,
    check_machine,
    check_refused,
    check_step,
    check_terminal_sticky,
    check_transition,
)

__all__ = [
    "InvariantCode",
    "InvariantViolation",
    "assert_machine",
    "assert_no_problems",
    "check_after_overflow",
    "check_awaiting_model_decision",
    "check_commit",
    "check_compact_now",
    "check_compaction_commit",
    "check_digest",
    "check_dispatched_once",
    "check_estimate",
    "check_loop_decision",
    "check_machine",
    "check_model_call",
    "check_next_run",
    "check_policy",
    "check_refused",
    "check_result_order",
    "check_resume",
    "check_run_messages",
    "check_salvage",
    "check_start_decision",
    "check_step",
    "check_terminal_sticky",
    "check_trace",
    "check_transition",
    "problem_code",
    "provider_problems",
    "reference_loop_verdict",
]
