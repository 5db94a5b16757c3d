"""loopctl: a sans-IO agent-loop engine.

The brain (``LoopMachine``, in ``loopctl.core``) decides; the hands (``BareLoop``, in
``loopctl.driver``) do. The names here are what an agent needs on its first day; everything else
is importable from its subpackage (docs/api.md lists every public name).
"""

import logging as _logging

from loopctl.api import ApiClient, ApiError
from loopctl.core import (
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    Feed,
    LoopctlError,
    LoopError,
    LoopMachine,
    MachinePolicy,
    MachineStep,
    MaxTurnsExceeded,
    Message,
    ProtocolError,
    ProviderPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)
from loopctl.driver import BareLoop, Hooks, RunConfig, RunResult, SessionConfig
from loopctl.observe import LoopObserver
from loopctl.tools import ToolError, tool

__version__ = "0.1.0"

# Without this handler, a program that configured no logging would get every warning (a failing
# tool's whole traceback, whose frames may hold secrets) on stderr from Python's last resort:
# the application decides what is shown.
_logging.getLogger("loopctl").addHandler(_logging.NullHandler())

__all__ = [
    "ApiClient",
    "ApiError",
    "BareLoop",
    "CallLLM",
    "CallTools",
    "Cancelled",
    "Compact",
    "CompactReason",
    "Completed",
    "Done",
    "Failed",
    "Feed",
    "Hooks",
    "LoopError",
    "LoopMachine",
    "LoopObserver",
    "LoopctlError",
    "MachinePolicy",
    "MachineStep",
    "MaxTurnsExceeded",
    "Message",
    "ProtocolError",
    "ProviderPart",
    "RunConfig",
    "RunResult",
    "SessionConfig",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "tool",
]
