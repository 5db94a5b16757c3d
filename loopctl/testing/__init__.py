"""Offline helpers for tests: scripted model clients, a model that explores an agent from its
tool schemas, and a network guard.

Hypothesis strategies for the same moves are in ``loopctl.testing.strategies`` (imported on its
own: it needs hypothesis, the ``sim`` extra).
"""

from loopctl.testing.explore import (
    DEFAULT_WEIGHTS,
    MOVES,
    ExploreConfig,
    Explorer,
    ExploringClient,
    Move,
)
from loopctl.testing.guard import NetworkBlockedError, block_network
from loopctl.testing.schema_values import (
    Chooser,
    RandomChooser,
    Vocabulary,
    broken_arguments,
    missing_arguments,
    schema_value,
    valid_arguments,
)
from loopctl.testing.scripted import FunctionClient, Reply, ScriptedClient, reply_events

__all__ = [
    "DEFAULT_WEIGHTS",
    "MOVES",
    "Chooser",
    "ExploreConfig",
    "Explorer",
    "ExploringClient",
    "FunctionClient",
    "Move",
    "NetworkBlockedError",
    "RandomChooser",
    "Reply",
    "ScriptedClient",
    "Vocabulary",
    "block_network",
    "broken_arguments",
    "missing_arguments",
    "reply_events",
    "schema_value",
    "valid_arguments",
]
