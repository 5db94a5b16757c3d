"""The hands: ``BareLoop`` and what it uses to do the brain's bidding.

Tools, retries, cancel, compaction: everything that does IO for the brain lives here or in
``loopctl.tools`` and ``loopctl.providers``; nothing here decides what happens next.
"""

from loopctl.driver.cancel import CancelSignal
from loopctl.driver.compaction import (
    ContextCompactor,
    MiddleOutCompactor,
    SummarizingCompactor,
    plan_cut,
)
from loopctl.driver.config import RetryConfig, RunConfig, SessionConfig, build_policy
from loopctl.driver.control import BeforeStep, StepPoint
from loopctl.driver.estimate import CharEstimator, TokenEstimator, message_chars
from loopctl.driver.loop import BareLoop
from loopctl.driver.model import ModelMiddleware, check_call_ids
from loopctl.driver.reflect import NoReflector, ReflectionContext, Reflector
from loopctl.driver.result import Hooks, RunResult
from loopctl.driver.retry import retry_delay

__all__ = [
    "BareLoop",
    "BeforeStep",
    "CancelSignal",
    "CharEstimator",
    "ContextCompactor",
    "Hooks",
    "MiddleOutCompactor",
    "ModelMiddleware",
    "NoReflector",
    "ReflectionContext",
    "Reflector",
    "RetryConfig",
    "RunConfig",
    "RunResult",
    "SessionConfig",
    "StepPoint",
    "SummarizingCompactor",
    "TokenEstimator",
    "build_policy",
    "check_call_ids",
    "message_chars",
    "plan_cut",
    "retry_delay",
]
