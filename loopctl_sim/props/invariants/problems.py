"""Problems: the ``"<code>: <text>"`` strings every checker returns, their codes and the error
that carries them.

A checker returns a list of problems (empty: all good) rather than raising, so that a harness
can collect what one step broke, tolerate a known issue by its code (``problem_code``) and fail
on the rest. The codes are plain constants here, apart from the checkers, so that a harness can
name them without importing what it does not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from loopctl_sim.errors import SimError

__all__ = [
    "ANSWERED_TWICE_CODE",
    "CODES",
    "COMMIT_CODE",
    "COMPACTION_CODE",
    "CONVERSATION_CODE",
    "DECISION_CODE",
    "DIGEST_CODE",
    "DISPATCH_CODE",
    "DISPATCH_ONCE_CODE",
    "ESTIMATE_CODE",
    "HISTORY_CODE",
    "IDEMPOTENCE_CODE",
    "LOOP_CODE",
    "NEXT_RUN_CODE",
    "OPEN_TAIL_CODE",
    "OVERFLOW_CODE",
    "POLICY_CODE",
    "REFUSAL_CODE",
    "RESTORE_OPEN_TAIL_CODE",
    "RESULT_ORDER_CODE",
    "RESUME_CODE",
    "RETRY_AFTER_CODE",
    "RETRY_CODE",
    "RUNAWAY_CODE",
    "RUN_MESSAGES_CODE",
    "SALVAGE_CODE",
    "SHAPE_CODE",
    "STEP_CODE",
    "STICKY_CODE",
    "TABLE_CODE",
    "TURNS_CODE",
    "InvariantViolation",
    "assert_no_problems",
    "problem",
    "problem_code",
]

# --- problem codes ---------------------------------------------------------------------------
HISTORY_CODE: Final = "history-invalid"
CONVERSATION_CODE: Final = "conversation-invalid"
OPEN_TAIL_CODE: Final = "open-tail"
TURNS_CODE: Final = "turns"
DISPATCH_CODE: Final = "dispatch"
ANSWERED_TWICE_CODE: Final = "answered-twice"
SHAPE_CODE: Final = "shape"
STEP_CODE: Final = "step"
DECISION_CODE: Final = "decision"
SALVAGE_CODE: Final = "salvage"
COMMIT_CODE: Final = "commit"
COMPACTION_CODE: Final = "compaction"
STICKY_CODE: Final = "terminal-sticky"
TABLE_CODE: Final = "table"
REFUSAL_CODE: Final = "refusal"
NEXT_RUN_CODE: Final = "next-run"
RESUME_CODE: Final = "resume"
#: A terminal machine whose pending still ends with unanswered calls (cancelled or failed while
#: tools ran, before the exit door) does not restore: a code of its own, so that such a
#: regression is named precisely.
RESTORE_OPEN_TAIL_CODE: Final = "restore-terminal-open-tail"
IDEMPOTENCE_CODE: Final = "idempotence"
LOOP_CODE: Final = "loop"
#: ``digest()`` is not the hash of a fresh canonical encoding (a stale digest cache).
DIGEST_CODE: Final = "digest"
# The hands' promises around each step (``driver``): results in call order, every dispatched
# call run exactly once per body, retries as configured, the server's retry-after kept, a
# context overflow turned into an emergency compaction, the estimate grown after tool results,
# a config change in force at the next step, and a run that ends within a bound.
RESULT_ORDER_CODE: Final = "result-order"
DISPATCH_ONCE_CODE: Final = "dispatch-once"
RETRY_CODE: Final = "retry"
RETRY_AFTER_CODE: Final = "retry-after"
OVERFLOW_CODE: Final = "overflow"
ESTIMATE_CODE: Final = "estimate"
POLICY_CODE: Final = "policy"
RUNAWAY_CODE: Final = "runaway"
#: ``RunResult.messages`` is not what the run said (a result lost, doubled or out of order).
RUN_MESSAGES_CODE: Final = "run-messages"

CODES: Final = (
    HISTORY_CODE,
    CONVERSATION_CODE,
    OPEN_TAIL_CODE,
    TURNS_CODE,
    DISPATCH_CODE,
    ANSWERED_TWICE_CODE,
    SHAPE_CODE,
    STEP_CODE,
    DECISION_CODE,
    SALVAGE_CODE,
    COMMIT_CODE,
    COMPACTION_CODE,
    STICKY_CODE,
    TABLE_CODE,
    REFUSAL_CODE,
    NEXT_RUN_CODE,
    RESUME_CODE,
    RESTORE_OPEN_TAIL_CODE,
    IDEMPOTENCE_CODE,
    LOOP_CODE,
    DIGEST_CODE,
    RESULT_ORDER_CODE,
    DISPATCH_ONCE_CODE,
    RETRY_CODE,
    RETRY_AFTER_CODE,
    OVERFLOW_CODE,
    ESTIMATE_CODE,
    POLICY_CODE,
    RUNAWAY_CODE,
    RUN_MESSAGES_CODE,
)


class InvariantViolation(AssertionError, SimError):
    """One or more invariants do not hold; ``problems`` lists them."""

    def __init__(self, problems: Sequence[str], context: str = "") -> None:
        self.problems = list(problems)
        head = f"{context}: " if context else ""
        super().__init__(head + "; ".join(self.problems))


def problem_code(problem: str) -> str:
    """The code of a problem string (the part before the first colon)."""
    return problem.split(":", 1)[0]


def assert_no_problems(problems: Sequence[str], context: str = "") -> None:
    """Raise ``InvariantViolation`` (with ``context`` ahead of the problems) if there are any."""
    if problems:
        raise InvariantViolation(problems, context)


def problem(code: str, text: str) -> str:
    """One problem: ``"<code>: <text>"`` (``problem_code`` reads the code back)."""
    return f"{code}: {text}"
