"""The settings a fork changed at its branch point, applied to a loop: the fork's own run and
every replay of the fork's trace build the agent the same way from there on.

A fork's header (``fork``) holds in its ``fork`` metadata the ``settings`` it changed,
cumulatively along a chain of forks: ``max_turns`` and ``options`` (merged over the agent's).
Replay reads them back here, so a fork still replays against the unchanged agent: the changes
are the trace's, not the agent's code.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any, Final

from loopctl.driver import BareLoop
from loopctl_sim.trace import HeaderRecord

#: The header metadata key that marks a fork's branch point.
FORK_KEY: Final = "fork"


def trace_sha256(path: str | os.PathLike[str]) -> str:
    """A trace's identity as a fork names its parent: the SHA-256 of the file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fork_metadata(header: HeaderRecord) -> Mapping[str, Any] | None:
    """The ``fork`` metadata of a header, None for any other header."""
    found = header.metadata.get(FORK_KEY)
    return found if isinstance(found, Mapping) else None


def with_settings(loop: BareLoop, settings: Mapping[str, Any] | None) -> BareLoop:
    """``loop`` with a fork's settings applied (the same loop when there are none)."""
    if not settings:
        return loop
    changes: dict[str, Any] = {}
    max_turns = settings.get("max_turns")
    if isinstance(max_turns, int) and not isinstance(max_turns, bool):
        changes["config"] = loop.config.model_copy(update={"max_turns": max_turns})
    options = settings.get("options")
    if isinstance(options, Mapping) and options:
        merged = {**loop.session.options, **options}
        changes["session"] = loop.session.model_copy(update={"options": merged})
    return loop.replace(**changes) if changes else loop
