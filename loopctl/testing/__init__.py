"""Offline helpers for tests: scripted model clients and a network guard."""

from loopctl.testing.guard import NetworkBlockedError, block_network
from loopctl.testing.scripted import FunctionClient, Reply, ScriptedClient, reply_events

__all__ = [
    "FunctionClient",
    "NetworkBlockedError",
    "Reply",
    "ScriptedClient",
    "block_network",
    "reply_events",
]
