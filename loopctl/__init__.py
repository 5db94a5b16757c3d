"""loopctl: a sans-IO agent-loop engine.

The brain (``LoopMachine``, in ``loopctl.core``) decides; the hands (``BareLoop``, in
``loopctl.driver``) do. The names here are what an agent needs on its first day: the brain,
its policy and the ``Feed`` it takes, the steps it asks for and the outcomes it ends with, the
messages, the driver and its configuration, the ``@tool`` decorator, the model client protocol,
and the errors to catch (``tests/test_exports.py`` pins the list; docs/api.md lists every public
name). Everything else is importable from its subpackage: ``loopctl.core`` (states, the feed
types, snapshots, the loop detector), ``loopctl.driver`` (compactors, reflectors, retries, step
control), ``loopctl.tools`` (hooks, the registry, MCP), ``loopctl.api`` (requests, replies,
stream events), ``loopctl.providers`` (the HTTP clients), ``loopctl.testing`` (offline clients),
``loopctl.errors`` (the whole exception tree).
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

# Library code logs to the "loopctl" logger family and never picks a destination: without this
# handler, a program that configured no logging would get every warning (a failing tool's whole
# traceback, whose frames may hold secrets) on stderr from Python's last-resort handler. The
# application (the ``loopctl`` CLI, or the user's own logging setup) decides what is shown.
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
