"""Fuzzing sessions: many seeded conversations of the user's agent, checked across their runs.

A seed becomes a session (``session_case``): the user (an ``ExploringUser`` of that seed, or the
user's own ``make_user(seed, turns)``), the model explored from the same seed run by run, and a
swarm of fault kinds drawn per run as a single-run campaign draws them. ``random.Random(seed)``
alone decides.

The checks (``SESSION_CHECKS``, in order): nothing escapes the agent; the history stays coherent
and restores to the same digest; each run sees the runs before it; salvage keeps earlier runs;
a cancelled run resumes; the same seed gives the same brains; then the user's checks
(``check(session, records)``). A failing seed is shrunk (``fuzz.session_shrink``). ``repeat``
runs each seed K times and reports pass^k per check, so a flaky agent is measured, not guessed.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopctl.core import LoopMachine, Message, coherence_problem
from loopctl.testing import ExploreConfig
from loopctl_sim.fuzz.agent_case import agent_profile
from loopctl_sim.fuzz.case import draw_fault
from loopctl_sim.fuzz.user_checks import load_function, run_user_checks
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.session import SessionRun, SessionWorld, run_session
from loopctl_sim.sim.users import ExploringUser, SimUser

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
    """The user factory ``module:function`` names (``make_user(seed, turns)``), imported as the
    agent is (``load_function``)."""
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


def run_session_seed(
    seed: int, config: SessionFuzzConfig, out: str | None = None
) -> SessionSeedResult:
    """Seed ``seed``, ``config.repeat`` times; its last session's trace written to ``out``
    (a file), else to a temporary file that is removed."""
    result = SessionSeedResult(seed)
    with tempfile.TemporaryDirectory(prefix="loopctl-session-") as tmp:
        trace = out if out is not None else os.path.join(tmp, f"session-{seed}.jsonl")
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
