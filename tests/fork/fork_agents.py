"""Variants of the sample travel agent and a scripted client, named by the fork tests as
``MODULE:FACTORY`` (``--agent``, ``--client``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from examples.travel_agent.agent import Settings, build
from loopctl import ApiClient, BareLoop, LoopObserver, Message
from loopctl.api import ModelRequest
from loopctl.testing import FunctionClient

#: The repository (the CLI runs there) and the key the local model server asks for.
ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-fork-tests-key-0123456789abcdef"


def changed_prompt(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    """The travel agent with another system prompt: a recorded trip no longer replays."""
    return build(client, observers, Settings(system_prompt="You are a terse travel agent."))


def wrap_up(request: ModelRequest) -> Message:
    return Message.assistant("Scripted: that is all I can do for now.")


def scripted() -> FunctionClient:
    """A client that ends the run with a fixed text, whatever it is asked."""
    return FunctionClient(wrap_up)
