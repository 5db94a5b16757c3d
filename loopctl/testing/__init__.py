"""Offline helpers for tests: scripted model clients, a model that explores an agent from its
tool schemas, and a network guard.

Hypothesis strategies for the same moves are in ``loopctl.testing.strategies`` (imported on its
own: it needs hypothesis, the ``sim`` extra).
"""

from loopctl.testing.explore import MOVES, ExploreConfig, Explorer, ExploringClient
from loopctl.testing.guard import NetworkBlockedError, block_network
from loopctl.testing.scripted import FunctionClient, Reply, ScriptedClient, reply_events

__all__ = [
    "MOVES",
    "ExploreConfig",
    "Explorer",
    "ExploringClient",
    "FunctionClient",
    "NetworkBlockedError",
    "Reply",
    "ScriptedClient",
    "block_network",
    "reply_events",
]
