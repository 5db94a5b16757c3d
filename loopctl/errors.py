"""Every exception loopctl raises, in one tree (as httpx's ``_exceptions.py`` draws its own).

``except LoopctlError`` catches anything loopctl raises and nothing else. The classes live
beside the code that raises them (the brain may import only ``loopctl.core``, so the root is
``loopctl.core.errors.LoopctlError``); this module draws the tree and imports every class, so
that one import reaches them all::

    LoopctlError                          the root (loopctl.core)
     +-- ProtocolError                    the driver fed the brain what its state cannot take;
     |                                    the machine is unchanged (loopctl.core)
     +-- ApiError                         a provider call failed; ``error`` is the ``LoopError``
     |    |                               that classifies it (loopctl.api)
     |    +-- MissingApiKeyError          no API key passed and its variable unset
     |                                    (loopctl.providers)
     +-- ToolError                        raised in a tool: the model gets exactly this message
     |    |                               as the call's error result (loopctl.tools)
     |    +-- McpError                    an MCP server could not answer (loopctl.tools.mcp)
     +-- ToolArgumentsError  (ValueError) the model's arguments do not fit the tool's signature
     |                                    (loopctl.tools)
     +-- NetworkBlockedError  (RuntimeError)  a test reached past 127.0.0.1 (loopctl.testing)
     +-- CancelFired                      the cancel signal fired while the driver waited on the
                                          world; the driver catches it and the run ends
                                          ``Cancelled`` (loopctl.driver.cancel)

A name in parentheses is a second, built-in base, kept where callers catch that too (a tool's
argument check is a ``ValueError``).

``LoopError`` is not an exception: it is the record a failed run carries
(``Failed(error=LoopError)``), plain data so that a saved failed machine restores as failed with
the same error. ``ApiError.error`` is one.

The harness's tree, rooted in ``loopctl_sim.errors.SimError`` (a ``LoopctlError``), is drawn in
``loopctl_sim.errors``.
"""

from __future__ import annotations

from loopctl.api import ApiError
from loopctl.core.errors import LoopctlError, LoopError, ProtocolError
from loopctl.driver.cancel import CancelFired
from loopctl.providers import MissingApiKeyError
from loopctl.testing.guard import NetworkBlockedError
from loopctl.tools import ToolArgumentsError, ToolError
from loopctl.tools.mcp import McpError

__all__ = [
    "ApiError",
    "CancelFired",
    "LoopError",
    "LoopctlError",
    "McpError",
    "MissingApiKeyError",
    "NetworkBlockedError",
    "ProtocolError",
    "ToolArgumentsError",
    "ToolError",
]
