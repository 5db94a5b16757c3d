"""loopctl: a sans-IO agent-loop engine.

The brain (``LoopMachine``, in ``loopctl.core``) decides; the hands (``BareLoop``, in
``loopctl.driver``) do. Everything a user needs is importable from here; providers live in
``loopctl.providers`` and offline test clients in ``loopctl.testing``.
"""

import logging as _logging

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

# Library code logs to the "loopctl" logger family and never picks a destination: without this
# handler, a program that configured no logging would get every warning (a failing tool's whole
# traceback, whose frames may hold secrets) on stderr from Python's last-resort handler. The
# application (the ``loopctl`` CLI, or the user's own logging setup) decides what is shown.
_logging.getLogger("loopctl").addHandler(_logging.NullHandler())

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
