"""Problems: the ``"<code>: <text>"`` strings every checker returns, their codes and the error
that carries them. A checker returns problems rather than raising, so a harness can collect
what one step broke, tolerate a known issue by its code and fail on the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from loopctl_sim.errors import SimError


class InvariantCode(StrEnum):
    """The code of a problem: the part of ``"<code>: <text>"`` before the colon. A ``StrEnum``,
    so a code is the same string in a problem, a report, a trace or a saved failure, and
    compares equal to it; ``InvariantCode(text)`` reads one back (``ValueError`` if unknown)."""

    HISTORY_INVALID = "history-invalid"
    CONVERSATION_INVALID = "conversation-invalid"
    OPEN_TAIL = "open-tail"
    TURNS = "turns"
    DISPATCH = "dispatch"
    ANSWERED_TWICE = "answered-twice"
    SHAPE = "shape"
    STEP = "step"
    DECISION = "decision"
    SALVAGE = "salvage"
    COMMIT = "commit"
    COMPACTION = "compaction"
    TERMINAL_STICKY = "terminal-sticky"
    TABLE = "table"
    REFUSAL = "refusal"
    NEXT_RUN = "next-run"
    RESUME = "resume"
    #: A terminal machine whose pending still ends with unanswered calls (cancelled or failed
    #: while tools ran, before the exit door) does not restore: a code of its own, so that such
    #: a regression is named precisely.
    RESTORE_TERMINAL_OPEN_TAIL = "restore-terminal-open-tail"
    IDEMPOTENCE = "idempotence"
    LOOP = "loop"
    #: ``digest()`` is not the hash of a fresh canonical encoding (a stale digest cache).
    DIGEST = "digest"
    # The hands' promises around each step (``driver``; docs/testing.md tables them).
    RESULT_ORDER = "result-order"
    DISPATCH_ONCE = "dispatch-once"
    RETRY = "retry"
    RETRY_AFTER = "retry-after"
    OVERFLOW = "overflow"
    ESTIMATE = "estimate"
    POLICY = "policy"
    RUNAWAY = "runaway"
    #: ``RunResult.messages`` is not what the run said (a result lost, doubled or out of order).
    RUN_MESSAGES = "run-messages"


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


def problem(code: InvariantCode, text: str) -> str:
    """One problem: ``"<code>: <text>"`` (``problem_code`` reads the code back)."""
    return f"{code}: {text}"
