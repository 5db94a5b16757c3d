"""loopctl: a sans-IO agent-loop engine.

The brain (``LoopMachine``, in ``loopctl.core``) decides; the hands (``BareLoop``, in
``loopctl.driver``) do. Everything a user needs is importable from here; providers live in
``loopctl.providers`` and offline test clients in ``loopctl.testing``.
"""

from loopctl.api import (
    ApiClient,
    ApiError,
    ModelReply,
    ModelRequest,
    StreamEvent,
    ToolSpec,
    Usage,
    fold_events,
)
from loopctl.core import *  # noqa: F403
from loopctl.core import __all__ as _core_all
from loopctl.driver import *  # noqa: F403
from loopctl.driver import __all__ as _driver_all
from loopctl.tools import (
    Allow,
    Deny,
    Replace,
    Tool,
    ToolError,
    ToolRegistry,
    tool,
)

__version__ = "0.1.0"

__all__ = [
    *_core_all,
    *_driver_all,
    "Allow",
    "ApiClient",
    "ApiError",
    "Deny",
    "ModelReply",
    "ModelRequest",
    "Replace",
    "StreamEvent",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "ToolSpec",
    "Usage",
    "__version__",
    "fold_events",
    "tool",
]
