"""Shrinking a failing session, and the session scenario file that holds one.

A failing session is fixed first (``loopctl_sim.sim.session.replayed_world``), then made smaller
while the same check still fails, in the order that keeps a reproducer readable: whole user
turns removed, each remaining turn shortened, then each run's model replies, then the faults. A
conversation of two short turns explains itself better than one of five with fewer replies.

A session scenario (YAML) holds the agent, the exploring seed, and the turns, each with its text
and optional ``kind``, ``cancel_at``, ``interject``, ``replies`` and ``faults``::

    name: three customers
    agent: examples.support_agent.agent:build
    explore: 0
    turns:
      - text: My order A-1001 arrived broken. Can I get my money back?
      - text: What does it cost to ship 2 kg to France?
        cancel_at: 2
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from loopctl.core import Message
from loopctl_sim.errors import SimError
from loopctl_sim.fuzz.sessions import SessionFuzzConfig, check_session
from loopctl_sim.fuzz.shrink import ddmin
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.session import SessionRun, SessionWorld, replayed_world
from loopctl_sim.sim.users import RecordedUser, UserTurn
from loopctl_sim.trace import scrub


class SessionScenarioError(ValueError, SimError):
    """A session scenario file that cannot be read: which file, and what is wrong."""


@dataclasses.dataclass
class _Repro:
    turns: list[UserTurn]
    scripts: list[list[Message]]
    faults: list[list[Fault]]

    def world(self, base: SessionWorld) -> SessionWorld:
        return dataclasses.replace(
            base,
            user=RecordedUser(self.turns),
            scripts=[list(s) for s in self.scripts],
            faults={i: list(f) for i, f in enumerate(self.faults) if f},
        )


def shrink_session(
    world: SessionWorld,
    session: SessionRun,
    check: str,
    config: SessionFuzzConfig,
    trace: str,
) -> SessionWorld:
    """The smallest session found that still fails ``check`` (see the module docstring);
    ``trace`` is a scratch file every try is written to."""
    fixed = replayed_world(world, session)
    n = len(session.turns)
    scripts = list(fixed.scripts or [])
    repro = _Repro(
        list(session.turns),
        [list(scripts[i]) if i < len(scripts) else [] for i in range(n)],
        [list(world.faults.get(i, ())) for i in range(n)],
    )
    tries = [config.max_shrink_tests]
    determinism = check == "deterministic"
    run_config = dataclasses.replace(config, check_determinism=determinism)

    def fails(candidate: _Repro) -> bool:
        if tries[0] <= 0 or not candidate.turns:
            return False
        tries[0] -= 1
        _, failures = check_session(candidate.world(world), run_config, trace)
        return any(f.check == check for f in failures)

    if not fails(repro):  # the fixed session must fail as the explored one did
        return fixed
    # 1. whole user turns (with their runs' replies and faults)
    kept = ddmin(
        list(range(n)),
        lambda idx: fails(_pick(repro, idx)),
        max_tests=max(1, tries[0]),
    )
    repro = _pick(repro, kept)
    # 2. each turn shorter: no cancel, no interjection, an empty or halved text
    for i in range(len(repro.turns)):
        for smaller in _shorter(repro.turns[i]):
            candidate = dataclasses.replace(repro, turns=_put(repro.turns, i, smaller))
            if fails(candidate):
                repro = candidate
    # 3. the model's replies, run by run
    for i in range(len(repro.scripts)):
        repro = _shrink_replies(repro, i, fails, tries)
    # 4. the faults
    placed = [(i, f) for i, faults in enumerate(repro.faults) for f in faults]
    if placed:
        chosen = ddmin(placed, lambda p: fails(_with_faults(repro, p)), max_tests=max(1, tries[0]))
        repro = _with_faults(repro, chosen)
    return repro.world(world)


def _shrink_replies(
    repro: _Repro, i: int, fails: Callable[[_Repro], bool], tries: list[int]
) -> _Repro:
    def without(replies: list[Message]) -> bool:
        return fails(dataclasses.replace(repro, scripts=_put(repro.scripts, i, replies)))

    replies = ddmin(repro.scripts[i], without, max_tests=max(1, tries[0]))
    return dataclasses.replace(repro, scripts=_put(repro.scripts, i, replies))


def _pick(repro: _Repro, indices: Sequence[int]) -> _Repro:
    return _Repro(
        [repro.turns[i] for i in indices],
        [repro.scripts[i] for i in indices],
        [repro.faults[i] for i in indices],
    )


T = TypeVar("T")


def _put(items: Sequence[T], i: int, value: T) -> list[T]:
    return [*items[:i], value, *items[i + 1 :]]


def _with_faults(repro: _Repro, placed: Sequence[tuple[int, Fault]]) -> _Repro:
    faults: list[list[Fault]] = [[] for _ in repro.turns]
    for i, fault in placed:
        faults[i].append(fault)
    return dataclasses.replace(repro, faults=faults)


def _shorter(turn: UserTurn) -> list[UserTurn]:
    """Smaller versions of ``turn``, the smallest first within each kind of cut."""
    out: list[UserTurn] = []
    if turn.cancel_at is not None:
        out.append(dataclasses.replace(turn, cancel_at=None))
    if turn.interject is not None:
        out.append(dataclasses.replace(turn, interject=None))
    text = turn.text
    if text:
        out.append(dataclasses.replace(turn, text=""))
        size = len(text) // 2
        while size > 0:
            out.append(dataclasses.replace(turn, text=text[:size]))
            size //= 2
    return out


def save_session_scenario(
    world: SessionWorld, turns: Sequence[UserTurn], path: str | os.PathLike[str]
) -> None:
    """Write the session scenario of ``world`` and ``turns`` to ``path`` (YAML, secrets
    scrubbed)."""
    entries: list[dict[str, Any]] = []
    for i, turn in enumerate(turns):
        entry = turn.to_json()
        if world.scripts is not None:
            script = world.scripts[i] if i < len(world.scripts) else []
            entry["replies"] = [m.model_dump(mode="json") for m in script]
        faults = world.faults.get(i, ())
        if faults:
            entry["faults"] = [f.model_dump(mode="json", exclude_none=True) for f in faults]
        entries.append(entry)
    data: dict[str, Any] = {"name": world.name, "agent": _agent_name(world)}
    if world.scripts is None:
        data["explore"] = world.explore
    data["turns"] = entries
    text = yaml.safe_dump(scrub(data), sort_keys=False, allow_unicode=True)
    Path(path).write_text(text, encoding="utf-8")


def _agent_name(world: SessionWorld) -> str:
    agent = world.agent
    return agent if isinstance(agent, str) else str(getattr(agent, "__qualname__", agent))


def load_session_scenario(path: str | os.PathLike[str], *, cwd: str | None = None) -> SessionWorld:
    """The session a scenario file describes (see the module docstring)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SessionScenarioError(f"{path}: cannot read the session scenario: {exc}") from None
    try:
        return _world_of(data, cwd)
    except (ValueError, TypeError, ValidationError) as exc:
        raise SessionScenarioError(f"{path}: {exc}") from None


_TURN_FIELDS = frozenset({"text", "kind", "cancel_at", "interject", "calls", "replies", "faults"})


def _world_of(data: object, cwd: str | None) -> SessionWorld:
    if not isinstance(data, Mapping):
        raise ValueError("a session scenario is a mapping with agent and turns")
    agent, entries = data.get("agent"), data.get("turns")
    if not isinstance(agent, str) or ":" not in agent:
        raise ValueError(f"agent: expected 'module:factory', got {agent!r}")
    if not isinstance(entries, list) or not entries:
        raise ValueError("turns: expected a list of at least one turn")
    turns: list[UserTurn] = []
    scripts: list[list[Message]] = []
    faults: dict[int, list[Fault]] = {}
    scripted = any(isinstance(e, Mapping) and "replies" in e for e in entries)
    for i, entry in enumerate(entries, start=1):
        if isinstance(entry, str):
            entry = {"text": entry}
        if not isinstance(entry, Mapping):
            raise ValueError(f"turn {i}: expected a text or a mapping, got {entry!r}")
        unknown = set(entry) - _TURN_FIELDS
        if unknown:
            raise ValueError(f"turn {i}: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            turns.append(UserTurn.from_json(entry))
        except ValueError as exc:
            raise ValueError(f"turn {i}: {exc}") from None
        scripts.append([Message.model_validate(m) for m in entry.get("replies") or []])
        placed = [Fault.model_validate(f) for f in entry.get("faults") or []]
        if placed:
            faults[i - 1] = placed
    explore = data.get("explore", 0)
    if not isinstance(explore, int):
        raise ValueError(f"explore: expected a seed (an integer), got {explore!r}")
    return SessionWorld(
        agent=agent,
        user=RecordedUser(turns),
        explore=explore,
        scripts=scripts if scripted else None,
        faults=faults,
        name=str(data.get("name", "session")),
        cwd=cwd,
    )
