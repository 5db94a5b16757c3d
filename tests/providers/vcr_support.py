"""The provider tests' cassettes: loopctl's exported cassette machinery over ``cassettes/``.

The rules (method, path and JSON body matched; secrets scrubbed from what is written; streams
replayed event by event; a miss raised loudly) are ``loopctl_sim.plugin.cassettes``, the ones
users get. The record mode is the plugin's ``--loopctl-record-mode`` (``none`` by default: replay
only). ``--loopctl-record-mode=new_episodes`` records what a cassette lacks, ``once`` a cassette
that does not exist yet, ``all`` every request again, ``rewrite`` a cassette afresh; recording
needs real keys in ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` (or a running Ollama) and lifts the
network guard (tests/providers/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

from loopctl_sim.plugin.cassette_rules import SECRET_REQUEST_HEADERS
from loopctl_sim.plugin.cassettes import CassetteSession, use_cassette
from loopctl_sim.plugin.modes import current_record_mode

__all__ = ["CASSETTES", "SECRET_REQUEST_HEADERS", "cassette", "record_mode"]

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"


def record_mode() -> str:
    """The session's ``--loopctl-record-mode``."""
    return current_record_mode()


def cassette(provider: str, name: str) -> CassetteSession:
    """``with cassette("openai", "plain_answer") as tape:`` (every interaction played once)."""
    return use_cassette(CASSETTES / provider / f"{name}.yaml")
