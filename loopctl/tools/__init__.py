"""The tool side of the hands: ``@tool``, the registry, hooks and middleware, and ``dispatch``.

``BareLoop`` advertises ``ToolRegistry.names()`` / ``specs()`` to the brain and the model, and
answers the brain's ``CallTools`` step with ``dispatch``. Everything here does IO (it runs
user code); nothing here decides what the loop does next.
"""

from loopctl.tools.decorator import Tool, ToolArgumentsError, ToolError, encode_result, tool
from loopctl.tools.dispatch import Dispatcher, dispatch, plan_waves
from loopctl.tools.hooks import (
    Allow,
    Deny,
    NextTool,
    PostToolHook,
    PreToolDecision,
    PreToolHook,
    Replace,
    ToolMiddleware,
)
from loopctl.tools.registry import ToolRegistry

__all__ = [
    "Allow",
    "Deny",
    "Dispatcher",
    "NextTool",
    "PostToolHook",
    "PreToolDecision",
    "PreToolHook",
    "Replace",
    "Tool",
    "ToolArgumentsError",
    "ToolError",
    "ToolMiddleware",
    "ToolRegistry",
    "dispatch",
    "encode_result",
    "plan_waves",
    "tool",
]
