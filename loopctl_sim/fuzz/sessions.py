"""Fuzzing sessions: many seeded conversations of the user's agent, checked across their runs.

A seed becomes a session (``session_case``): the user (an ``ExploringUser`` of that seed, or the
user's own ``make_user(seed, turns)``), the model explored from the same seed run by run, and a
swarm of fault kinds drawn per run as a single-run campaign draws them. ``random.Random(seed)``
alone decides.

The checks (``SESSION_CHECKS``, in order): nothing escapes the agent; the history stays coherent
and restores to the same digest; each run sees the runs before it; salvage keeps earlier runs;
a cancelled run resumes; the same seed gives the same brains; then the user's checks
(``check(session, records)``). ``repeat`` runs each seed K times and reports pass^k per check,
so a flaky agent is measured, not guessed.

A failing session is fixed (``loopctl_sim.sim.session.replayed_world``), then shrunk while the
same check still fails, in the order that keeps a reproducer readable: whole user turns, each
turn shortened, each run's model replies, then the faults (two short turns explain themselves
better than five with fewer replies). A session scenario (YAML, docs/testing.md) holds the
agent, the exploring seed, and the turns, each with its text and optional ``kind``,
``cancel_at``, ``interject``, ``replies`` and ``faults``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from loopctl.core import LoopMachine, Message, coherence_problem
from loopctl.testing import ExploreConfig
from loopctl_sim.errors import SimError
from loopctl_sim.fuzz.agent_case import agent_profile
from loopctl_sim.fuzz.case import draw_fault
from loopctl_sim.fuzz.shrink import ddmin
from loopctl_sim.fuzz.user_checks import load_function, run_user_checks
from loopctl_sim.sim.agent import agent_name
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.scenario import safe_yaml
from loopctl_sim.sim.session import SessionRun, SessionWorld, replayed_world, run_session
from loopctl_sim.sim.users import ExploringUser, RecordedUser, SimUser, UserTurn
from loopctl_sim.trace import scrub

SESSION_CHECKS = (
    "agent_error",
    "history_coherent",
    "sees_previous_runs",
    "salvage_keeps_runs",
    "cancel_resumable",
    "deterministic",
)

#: ``make_user(seed, turns)``: the user of a seed's session.
UserFactory = Callable[[int, int], SimUser]


@dataclass(frozen=True)
class SessionFuzzConfig:
    """What a session campaign runs. Plain data."""

    agent: str
    #: the user's ``module:make_user`` (None: the seeded exploring user)
    user: str | None = None
    user_turns: int = 3
    #: the fault kinds drawn for the runs (the single-run campaign's; empty: none)
    faults: tuple[str, ...] = ()
    #: the exploring model's turns per run (each run ends by then)
    turns: int = 6
    checks: tuple[str, ...] = ()
    check_determinism: bool = True
    repeat: int = 1
    shrink: bool = True
    max_shrink_tests: int = 200
    tools: str = "live"
    exempt: tuple[str, ...] = ()
    cwd: str | None = None


@dataclass
class SessionFailure:
    """A check that did not hold: its name and what it said."""

    check: str
    message: str
    run: int | None = None

    def __str__(self) -> str:
        where = f" (run {self.run + 1})" if self.run is not None else ""
        return f"{self.check}{where}: {self.message}"


@dataclass
class SessionSeedResult:
    """One seed's verdict: the failures of each of its K repeats, and the session it ran."""

    seed: int
    repeats: list[list[SessionFailure]] = field(default_factory=list)
    session: SessionRun | None = None
    world: SessionWorld | None = None

    @property
    def ok(self) -> bool:
        return all(not failures for failures in self.repeats)

    def held(self, check: str) -> int:
        """How many of the repeats the check held in."""
        return sum(1 for failures in self.repeats if all(f.check != check for f in failures))


def load_user(spec: str, cwd: str | None = None) -> UserFactory:
    """The user factory ``make_user(seed, turns)`` that ``module:function`` names."""
    return load_function(spec, cwd, what="user", form="module:make_user")


def _user(seed: int, config: SessionFuzzConfig) -> SimUser:
    if config.user is None:
        return ExploringUser(seed, turns=config.user_turns)
    user = load_user(config.user, config.cwd)(seed, config.user_turns)
    if not callable(getattr(user, "next_turn", None)):
        raise ValueError(
            f"user {config.user!r}: make_user(seed, turns) returned {type(user).__name__}, "
            "which has no next_turn(conversation, index)"
        )
    return user


def session_case(seed: int, config: SessionFuzzConfig) -> SessionWorld:
    """The session ``seed`` determines: see the module docstring."""
    if config.user_turns < 1:
        raise ValueError(f"a session has at least one user turn, got {config.user_turns}")
    rng = random.Random(seed)
    faults: dict[int, list[Fault]] = {}
    if config.faults:
        profile = agent_profile(config.agent, config.cwd)
        faultable = [t for t in profile.tools if t not in config.exempt]
        enabled = [k for k in config.faults if rng.random() < 0.5]  # swarm testing
        reach = max(2, config.turns // 2)
        for run in range(config.user_turns):
            if enabled and rng.random() < 0.5:
                kind = rng.choice(enabled)
                faults[run] = [draw_fault(rng, kind, reach, faultable, run, profile.context_window)]
    return SessionWorld(
        agent=config.agent,
        user=_user(seed, config),
        explore=seed,
        explore_config=ExploreConfig(turns=config.turns),
        faults=faults,
        tools=config.tools,
        exempt=frozenset(config.exempt),
        name=f"session-{seed}",
        cwd=config.cwd,
    )


def _starts_with(longer: Sequence[Message], prefix: Sequence[Message]) -> bool:
    return len(longer) >= len(prefix) and tuple(longer[: len(prefix)]) == tuple(prefix)


def session_failures(session: SessionRun) -> list[SessionFailure]:
    """The built-in checks but ``deterministic`` and the user's (see the module docstring)."""
    failures: list[SessionFailure] = []
    if session.error is not None:
        failures.append(SessionFailure("agent_error", str(session.error), len(session.runs)))
    previous: tuple[Message, ...] = ()
    for i, (run, history) in enumerate(zip(session.runs, session.histories, strict=True)):
        problem = coherence_problem(history)
        restored = LoopMachine.model_validate_json(run.machine.model_dump_json())
        if problem is None and restored.digest() != run.machine.digest():
            problem = "the saved brain restores to another digest"
        if problem is not None:
            failures.append(SessionFailure("history_coherent", problem, i))
        compacted = run.compactions > 0
        seen = session.first_requests[i]
        if i > 0 and seen is not None and not compacted and not _starts_with(seen, previous):
            failures.append(
                SessionFailure(
                    "sees_previous_runs",
                    f"its first model request holds {len(seen)} messages, not starting with "
                    f"the {len(previous)} of the history the runs before left",
                    i,
                )
            )
        if not compacted and not _starts_with(history, previous):
            outcome = getattr(run.outcome, "kind", run.outcome)
            failures.append(
                SessionFailure(
                    "salvage_keeps_runs",
                    f"the run ({outcome}) left {len(history)} messages that do not start with "
                    f"the {len(previous)} it was given",
                    i,
                )
            )
        if i in session.cancelled:
            try:
                LoopMachine.model_validate_json(run.machine.model_dump_json()).next_run()
            except Exception as exc:
                failures.append(
                    SessionFailure("cancel_resumable", f"{type(exc).__name__}: {exc}", i)
                )
        previous = history
    return failures


def check_session(
    world: SessionWorld, config: SessionFuzzConfig, trace: str
) -> tuple[SessionRun, list[SessionFailure]]:
    """Run ``world`` into ``trace`` and check it (every check of the module docstring)."""
    session = run_session(world, trace)
    failures = session_failures(session)
    if config.check_determinism and session.error is None:
        again = run_session(world, None)
        mine = [r.machine.digest() for r in session.runs]
        theirs = [r.machine.digest() for r in again.runs]
        if mine != theirs:
            at = next(
                (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), len(mine)
            )
            failures.append(
                SessionFailure(
                    "deterministic",
                    f"the same seed ran again gives other brains: {mine} then {theirs}",
                    at,
                )
            )
    if config.checks:
        text = Path(trace).read_text(encoding="utf-8")
        failed = run_user_checks(config.checks, session, text, config.cwd)
        if failed is not None:
            failures.append(SessionFailure(failed[0], failed[1].removeprefix(f"{failed[0]}: ")))
    return session, failures


def run_session_seed(seed: int, config: SessionFuzzConfig) -> SessionSeedResult:
    """Seed ``seed``, ``config.repeat`` times (each session's trace a scratch file)."""
    result = SessionSeedResult(seed)
    with tempfile.TemporaryDirectory(prefix="loopctl-session-") as tmp:
        trace = os.path.join(tmp, f"session-{seed}.jsonl")
        for _ in range(max(1, config.repeat)):
            world = session_case(seed, config)  # a fresh user each time (it may keep state)
            session, failures = check_session(world, config, trace)
            result.repeats.append(failures)
            result.session, result.world = session, world
    return result


def pass_k(results: Sequence[SessionSeedResult], checks: Sequence[str]) -> dict[str, Any]:
    """Per check: how many repeats held in all (``held``, of ``runs``) and pass^k (the share of
    seeds where the check held in every one of their K repeats)."""
    table: dict[str, Any] = {}
    for check in checks:
        held = sum(r.held(check) for r in results)
        runs = sum(len(r.repeats) for r in results)
        every = sum(1 for r in results if r.held(check) == len(r.repeats))
        table[check] = {
            "held": held,
            "runs": runs,
            "pass_k": every / len(results) if results else 1.0,
        }
    return table


# --- shrinking a failing session, and its scenario file --------------------------------------


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
    world: SessionWorld, session: SessionRun, check: str, config: SessionFuzzConfig, trace: str
) -> SessionWorld:
    """The smallest session found that still fails ``check`` (each try written to ``trace``)."""
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
    """Write the session scenario of ``world`` and ``turns`` to ``path`` (YAML, scrubbed)."""
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
    data: dict[str, Any] = {"name": world.name, "agent": agent_name(world.agent)}
    if world.scripts is None:
        data["explore"] = world.explore
    data["turns"] = entries
    text = yaml.safe_dump(scrub(data), sort_keys=False, allow_unicode=True)
    Path(path).write_text(text, encoding="utf-8")


def load_session_scenario(path: str | os.PathLike[str], *, cwd: str | None = None) -> SessionWorld:
    """The session a scenario file describes (see the module docstring)."""
    try:
        data = safe_yaml(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise SessionScenarioError(f"{path}: cannot read the session scenario: {why}") from None
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
