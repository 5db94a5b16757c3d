"""The tool side of the hands: ``@tool``, the registry, hooks and middleware, and ``dispatch``.

``BareLoop`` advertises ``ToolRegistry.names()`` / ``specs()`` to the brain and the model, and
answers the brain's ``CallTools`` step with ``dispatch``. Everything here does IO (it runs
user code); nothing here decides what the loop does next.
"""

from loopctl.tools.decorator import Tool, ToolArgumentsError, ToolError, tool
from loopctl.tools.dispatch import (
    Allow,
    Deny,
    Dispatcher,
    NextTool,
    PostToolHook,
    PreToolHook,
    Replace,
    ToolMiddleware,
    dispatch,
    raised_message,
    timed_out_message,
)
from loopctl.tools.registry import ToolRegistry

__all__ = [
    "Allow",
    "Deny",
    "Dispatcher",
    "NextTool",
    "PostToolHook",
    "PreToolHook",
    "Replace",
    "Tool",
    "ToolArgumentsError",
    "ToolError",
    "ToolMiddleware",
    "ToolRegistry",
    "dispatch",
    "raised_message",
    "timed_out_message",
    "tool",
]
