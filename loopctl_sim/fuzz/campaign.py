"""Fault-injection campaigns: many seeded worlds through the machine-level simulator.

Every seed fully determines one case (``random.Random(seed)`` only: no global randomness, no
clock): a scenario of about 20 turns with scripted replies and builtin tools, and, swarm-style, a
random subset of the enabled fault kinds placed at random model requests, tool calls and steps.
Each case is checked five ways:

1. **invariants**: the brain is checked after every step and every feed
   (``loopctl_sim.props.invariants``: provider-valid conversation, step/state agreement, decision order in ``Start``, the transition
   tables, terminal stickiness, salvage, commit, compaction commits; a tool call id is dispatched
   at most once; exact resume at every crash);
2. **determinism**: the case runs twice and both traces (with a fixed creation time) must be equal
   byte for byte;
3. **crash/restore**: the case runs again with a crash (snapshot, drop, restore) at a random step
   boundary; outcome, history and final digest must equal the uninterrupted run's;
4. **liveness**: the faulted run must end within a bound of steps (no endless compaction or
   retries), and then a *heal* run (the next run on the same history, no faults) must complete;
5. nothing raises: a ``ProtocolError`` or any other exception out of the sim is a failure.

A failing case is saved (its trace and scenario) and shrunk with ``loopctl_sim.fuzz.shrink`` to a
minimal scenario whose trace ``loopctl-sim replay`` replays and whose YAML ``loopctl-sim run``
runs. ``run_campaign`` spreads seeds over processes in chunks.
"""

from __future__ import annotations

import dataclasses
import io
import os
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from loopctl.core import (
    CallTools,
    Completed,
    Failed,
    LoopError,
    LoopMachine,
    MachineOutcome,
    MachinePolicy,
    MachineStep,
    Message,
    ProtocolError,
    Terminal,
    ToolCall,
)
from loopctl_sim.fuzz.shrink import ShrinkResult, shrink_scenario
from loopctl_sim.props import invariants as inv
from loopctl_sim.sim.machine import SimError, SimResult, _Run
from loopctl_sim.sim.scenario import (
    BUILTINS,
    CallScenario,
    PolicyScenario,
    ReplyScenario,
    Scenario,
    ToolScenario,
)
from loopctl_sim.sim.world import (
    MODEL_FAULTS,
    RUN_FAULTS,
    TOOL_FAULTS,
    Fault,
    FaultKind,
    FaultPlan,
    ModelScript,
    World,
)
from loopctl_sim.trace.recorder import RecordingMachine
from loopctl_sim.trace.records import TraceWriter

__all__ = [
    "ALL_FAULTS",
    "CREATED",
    "CampaignSummary",
    "CaseResult",
    "Failure",
    "FuzzCase",
    "FuzzConfig",
    "check_case",
    "make_case",
    "parse_faults",
    "parse_seeds",
    "run_campaign",
    "run_seed",
    "scenario_yaml",
]

#: Every fault kind of ``loopctl_sim.sim.world``, in a fixed order.
ALL_FAULTS: Final[tuple[str, ...]] = tuple(
    sorted(MODEL_FAULTS) + sorted(TOOL_FAULTS) + sorted(RUN_FAULTS)
)
#: The fixed creation time written into fuzz traces, so that two runs compare byte for byte.
CREATED: Final = "2026-01-01T00:00:00+00:00"
_RETRYABLE: Final = frozenset({"network", "timeout", "rate_limited", "server_error", "overloaded"})
_TOOLS: Final = tuple(sorted(BUILTINS))
_HEAL_INPUT: Final = "Please wrap up."
_HEAL_TEXT: Final = "healed"


@dataclass(frozen=True)
class FuzzConfig:
    """What a campaign injects and checks."""

    faults: tuple[str, ...] = ALL_FAULTS
    turns: int = 20
    check_invariants: bool = True
    check_determinism: bool = True
    check_crash: bool = True
    check_heal: bool = True
    shrink: bool = True
    max_shrink_tests: int = 400


@dataclass(frozen=True)
class FuzzCase:
    """One seed's world: the scenario and where the crash check strikes (a fraction of the run)."""

    seed: int
    scenario: Scenario
    crash_at: float
    enabled: tuple[str, ...]


@dataclass(frozen=True)
class Failure:
    """What went wrong in a case. ``kind``: invariant, nondeterminism, crash-restore, livelock,
    heal, exception. ``code``: the invariant's code or the exception's type (for shrinking)."""

    kind: str
    code: str
    message: str

    @property
    def signature(self) -> tuple[str, str]:
        return (self.kind, self.code)

    def __str__(self) -> str:
        return f"{self.kind} ({self.code}): {self.message}"


@dataclass
class CaseResult:
    seed: int
    runs: int = 0
    steps: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    enabled: tuple[str, ...] = ()
    outcome: str = ""
    failure: Failure | None = None
    trace: str = ""  # the trace text of the checked run (faulted run, then the heal run)
    files: list[str] = field(default_factory=list)
    shrunk: str | None = None


# --- parsing the command line's ranges -------------------------------------------------------


def parse_seeds(text: str) -> range | list[int]:
    """``"0:10000"`` (half-open), ``"7"``, or ``"1,5,9"``."""
    text = text.strip()
    try:
        if ":" in text:
            start, _, stop = text.partition(":")
            a, b = int(start or 0), int(stop)
            if b < a:
                raise ValueError
            return range(a, b)
        if "," in text:
            return [int(x) for x in text.split(",") if x.strip()]
        return [int(text)]
    except ValueError:
        raise ValueError(f"bad seed range {text!r}: use START:STOP, N or N,M,...") from None


def parse_faults(text: str) -> tuple[str, ...]:
    """``"all"``, ``"none"`` or a comma list of fault kinds."""
    text = text.strip()
    if text == "all":
        return ALL_FAULTS
    if text in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in ALL_FAULTS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(ALL_FAULTS)}")
    return tuple(k for k in ALL_FAULTS if k in kinds)


# --- a case from a seed ----------------------------------------------------------------------


def _arguments(rng: random.Random, tool: str, spread: int) -> dict[str, Any]:
    # A small spread makes identical calls likely, so loop detection gets exercised.
    if tool == "add":
        return {"a": rng.randint(0, spread), "b": rng.randint(0, 2)}
    if tool in ("upper", "length"):
        return {"text": f"t{rng.randint(0, spread)}"}
    return {"x": rng.randint(0, spread)}


def _fault(rng: random.Random, kind: str, replies: int, tools: Sequence[str], i: int) -> Fault:
    k: FaultKind = kind  # type: ignore[assignment]
    if kind in MODEL_FAULTS:
        times = rng.choice([1, 1, 1, 2, 3, 5]) if kind in _RETRYABLE else 1
        retry_after = rng.choice([None, 0.5, 2.0]) if kind == "rate_limited" else None
        return Fault(
            kind=k, model_call=rng.randint(1, replies + 3), times=times, retry_after=retry_after
        )
    if kind in TOOL_FAULTS:
        if rng.random() < 0.75:
            return Fault(kind=k, tool_call=rng.randint(1, 2 * replies), times=rng.randint(1, 2))
        return Fault(kind=k, tool=rng.choice(list(tools)), times=rng.randint(1, 2))
    text = f"steering note {i}" if kind == "inject" else None
    return Fault(kind=k, step=rng.randint(1, 3 * replies), text=text)


def make_case(seed: int, config: FuzzConfig = FuzzConfig()) -> FuzzCase:
    """The case ``seed`` determines (under ``config``'s fault kinds and turn count)."""
    rng = random.Random(seed)
    tools = sorted(rng.sample(_TOOLS, rng.randint(1, 4)))
    n = max(1, rng.randint(config.turns - 5, config.turns + 5))
    window = rng.choice([1000, 2500, 128_000])
    spread = 2 if rng.random() < 0.15 else 1000
    replies: list[ReplyScenario] = []
    for _ in range(n - 1):
        calls = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            tool = rng.choice(tools)
            calls.append(CallScenario(name=tool, arguments=_arguments(rng, tool, spread)))
        spike = int(window * rng.uniform(0.7, 1.1)) if rng.random() < 0.08 else None
        text = rng.choice(["", "Let me check.", "Working on it."])
        replies.append(ReplyScenario(text=text, calls=calls, context_tokens=spike))
    replies.append(ReplyScenario(text=f"All done ({seed})."))
    max_turns = n + 5 if rng.random() < 0.8 else rng.randint(2, n)
    policy = PolicyScenario(
        max_turns=max_turns,
        context_window=window,
        compact_threshold=rng.choice([0.6, 0.8]),
        emergency_threshold=0.95,
        loop_action=rng.choice(["warn", "warn", "fail", "off"]),
        loop_repeat_limit=rng.choice([3, 4]),
    )
    enabled = tuple(k for k in config.faults if rng.random() < 0.5)  # swarm testing
    faults = []
    if enabled:
        for i in range(rng.randint(1, 5)):
            faults.append(_fault(rng, rng.choice(enabled), n, tools, i))
    scenario = Scenario(
        name=f"fuzz-{seed}",
        description=f"fuzz seed {seed}; enabled fault kinds: {', '.join(enabled) or 'none'}",
        input=f"Task {seed}: use the tools, then answer.",
        policy=policy,
        tools={t: ToolScenario(builtin=t) for t in tools},
        model=replies,
        faults=faults,
        max_retries=rng.choice([0, 1, 2, 3]),
        tool_timeout=rng.choice([30.0, 30.0, 30.0, None]),
    )
    return FuzzCase(seed=seed, scenario=scenario, crash_at=rng.random(), enabled=enabled)


def scenario_yaml(scenario: Scenario) -> str:
    """The scenario as a YAML file ``loopctl-sim run`` reads."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data.setdefault("input", scenario.input)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# --- running one world with checks -------------------------------------------------------------


class _CountingPlan(FaultPlan):
    """A fault plan that counts the faults that actually struck, by kind."""

    def __init__(self, faults: Sequence[Fault]) -> None:
        super().__init__(faults)
        self.fired: Counter[str] = Counter()

    def model_fault(self, request: int) -> Fault | None:
        f = super().model_fault(request)
        if f is not None:
            self.fired[f.kind] += 1
        return f

    def tool_fault(self, index: int, name: str, nth_of_name: int) -> Fault | None:
        f = super().tool_fault(index, name, nth_of_name)
        if f is not None:
            self.fired[f.kind] += 1
        return f

    def run_faults(self, step: int) -> list[Fault]:
        found = super().run_faults(step)
        for f in found:
            self.fired[f.kind] += 1
        return found


class _Violation(Exception):
    def __init__(self, problems: Sequence[str], where: str) -> None:
        super().__init__(f"{where}: {'; '.join(problems)}")
        self.problems = list(problems)
        self.where = where


class CheckingMachine(RecordingMachine):
    """A ``RecordingMachine`` that checks the invariants before every step and after every feed.

    Raises ``_Violation`` (caught by the campaign) at the first problem.
    """

    tolerated: frozenset[str] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy: MachinePolicy | None = None
        self.steps = 0
        self.dispatched: set[str] = set()

    def _raise(self, problems: Sequence[str], where: str) -> None:
        real = [p for p in problems if inv.problem_code(p) not in self.tolerated]
        if real:
            raise _Violation(real, where)

    def next_step(self, policy: MachinePolicy) -> MachineStep:
        self.steps += 1
        where = f"step {self.steps}"
        self._raise(inv.check_machine(self.machine, policy), f"before {where}")
        before = self.machine.snapshot()
        step = super().next_step(policy)
        machine = self.machine
        problems = inv.check_step(machine, step, policy)
        problems += inv.check_transition(before.state.kind, "next_step", machine.state.kind)
        problems += inv.check_start_decision(before, policy, step)
        if isinstance(before.state, Terminal) and machine.state != before.state:
            problems.append(f"{inv.STICKY_CODE}: next_step left {before.state!r}")
        if isinstance(step, CallTools):
            again = [c.id for c in step.calls if c.id in self.dispatched]
            if again:
                problems.append(f"{inv.DISPATCH_CODE}: call ids dispatched twice: {again}")
            self.dispatched.update(c.id for c in step.calls)
        self._raise(problems, f"{where} ({step!r})")
        self.policy = policy
        return step

    def _around(self, name: str, feed: Callable[[], None]) -> None:
        before_state = self.machine.state
        copy_needed = name in ("commit_pending", "discard_pending", "compaction_result")
        before = LoopMachine.from_snapshot(self.machine.snapshot()) if copy_needed else None
        feed()
        machine = self.machine
        problems = inv.check_transition(before_state.kind, name, machine.state.kind)
        if isinstance(before_state, Terminal) and machine.state != before_state:
            problems.append(f"{inv.STICKY_CODE}: {name} left {before_state!r}")
        if before is not None and name == "commit_pending":
            problems += inv.check_commit(before, machine)
        elif before is not None and name == "discard_pending":
            problems += inv.check_salvage(before, machine)
        self._raise(problems, f"step {self.steps}: feed {name}")

    def accept_input(self, input: str | Message) -> None:
        self._around("accept_input", lambda: RecordingMachine.accept_input(self, input))

    def model_response(self, response: Message, context_tokens: int) -> None:
        self._around(
            "model_response",
            lambda: RecordingMachine.model_response(self, response, context_tokens),
        )

    def tool_results(self, message: Message) -> None:
        self._around("tool_results", lambda: RecordingMachine.tool_results(self, message))

    def compaction_result(self, compacted: list[Message], before: int, after: int) -> None:
        copy = LoopMachine.from_snapshot(self.machine.snapshot())
        self._around(
            "compaction_result",
            lambda: RecordingMachine.compaction_result(self, compacted, before, after),
        )
        self._raise(
            inv.check_compaction_commit(copy, self.machine, compacted, after),
            f"step {self.steps}: feed compaction_result",
        )

    def compaction_noop(self, before: int, after: int) -> None:
        self._around(
            "compaction_noop", lambda: RecordingMachine.compaction_noop(self, before, after)
        )

    def set_context_tokens(self, n: int) -> None:
        self._around("set_context_tokens", lambda: RecordingMachine.set_context_tokens(self, n))

    def inject(self, message: Message) -> None:
        self._around("inject", lambda: RecordingMachine.inject(self, message))

    def cancel(self) -> None:
        self._around("cancel", lambda: RecordingMachine.cancel(self))

    def fail(self, error: LoopError) -> None:
        self._around("fail", lambda: RecordingMachine.fail(self, error))

    def commit_pending(self) -> None:
        self._around("commit_pending", lambda: RecordingMachine.commit_pending(self))
        self._raise(inv.check_machine(self.machine, self.policy), "after commit_pending")

    def discard_pending(self) -> None:
        self._around("discard_pending", lambda: RecordingMachine.discard_pending(self))
        self._raise(inv.check_machine(self.machine, self.policy), "after discard_pending")

    def replace(self, machine: LoopMachine) -> None:
        # the sim restored the brain from its snapshot: it must resume exactly
        self._raise(inv.check_resume(machine, self.policy), f"crash before step {self.steps + 1}")
        super().replace(machine)


def _bound(world: World) -> int:
    """Steps a run may take before it counts as a livelock."""
    turns = min(world.policy.max_turns, len(world.model.replies) + 2)
    return 6 * (turns + 2) + 4 * len(world.faults) + 10


def _sim(
    world: World,
    *,
    machine: LoopMachine | None,
    writer: TraceWriter | None,
    checked: bool,
    metadata: dict[str, Any],
) -> tuple[SimResult, Counter[str]]:
    cls = CheckingMachine if checked else RecordingMachine
    meta = {"world": world.name, "simulated": True, **world.metadata, **metadata}
    rec = cls(
        machine if machine is not None else LoopMachine(world.history),
        writer,
        metadata=meta,
        created=CREATED,
    )
    run = _Run(dataclasses.replace(world, max_steps=_bound(world)), rec)
    plan = _CountingPlan(world.faults)
    run.plan = plan
    return run.go(), plan.fired


def _heal_world(scenario: Scenario, world: World) -> World:
    tool = next(iter(world.tools)) if world.tools else "none"
    replies = [
        Message.assistant("One last check.", [ToolCall(id="heal_1", name=tool, arguments={})]),
        Message.assistant(_HEAL_TEXT),
    ]
    policy = world.policy.model_copy(update={"max_turns": max(world.policy.max_turns, 4)})
    return dataclasses.replace(
        world, input=_HEAL_INPUT, model=ModelScript(replies), faults=(), policy=policy
    )


def _failure_of(exc: BaseException) -> Failure:
    if isinstance(exc, _Violation):
        code = inv.problem_code(exc.problems[0])
        return Failure("invariant", code, str(exc))
    if isinstance(exc, SimError):
        if "no Done after" in str(exc):
            return Failure("livelock", "steps", str(exc))
        return Failure("exception", "SimError", str(exc))
    name = type(exc).__name__
    if isinstance(exc, ProtocolError):
        return Failure("exception", "ProtocolError", str(exc))
    return Failure("exception", name, f"{name}: {exc}")


@dataclass
class _Run1:
    trace: str
    result: SimResult | None
    heal: SimResult | None
    fired: Counter[str]
    steps: int
    failure: Failure | None


def _run_world(
    scenario: Scenario, *, checked: bool, heal: bool, seed: int, trace: bool = True
) -> _Run1:
    buf = io.StringIO()
    writer = TraceWriter(buf) if trace else None
    meta = {"fuzz_seed": seed}
    fired: Counter[str] = Counter()
    result = heal_result = None
    steps = 0
    try:
        world = scenario.world()
        result, fired = _sim(world, machine=None, writer=writer, checked=checked, metadata=meta)
        steps = result.steps
        if heal:
            hw = _heal_world(scenario, world)
            heal_result, _ = _sim(
                hw,
                machine=result.machine.next_run(),
                writer=writer,
                checked=checked,
                metadata={**meta, "heal": True},
            )
            steps += heal_result.steps
    except Exception as exc:  # every failure of the engine is a finding, reported as data
        return _Run1(buf.getvalue(), result, heal_result, fired, steps, _failure_of(exc))
    return _Run1(buf.getvalue(), result, heal_result, fired, steps, None)


def _heal_failure(first: SimResult, healed: SimResult) -> Failure | None:
    """A clean next run after the faults must complete. One other end is legitimate: the
    context is over the emergency line and the compactor finds nothing to cut (no compaction
    succeeded), so the brain fails with ``context_overflow`` rather than loop."""
    outcome = healed.outcome
    if isinstance(outcome, Completed) and outcome.final_text == _HEAL_TEXT:
        return None
    if (
        isinstance(outcome, Failed)
        and outcome.error.kind == "context_overflow"
        and healed.compactions == 0
    ):
        return None
    ended: str = outcome.kind
    if isinstance(outcome, Failed):
        ended += f" ({outcome.error})"
    return Failure(
        "heal",
        outcome.kind,
        f"after the faults, a clean next run ended {ended} instead of completing "
        f"(it started with {first.machine.context_tokens} context tokens)",
    )


def _same_end(a: SimResult, b: SimResult) -> str | None:
    if a.outcome != b.outcome:
        return f"outcome {a.outcome!r} uninterrupted, {b.outcome!r} with the crash"
    if a.machine.history != b.machine.history:
        return "the history differs from the uninterrupted run's"
    if a.digest != b.digest:
        return f"final digest {a.digest} uninterrupted, {b.digest} with the crash"
    return None


def _outcome_name(outcome: MachineOutcome | None) -> str:
    if outcome is None:
        return "aborted"
    if isinstance(outcome, Failed):
        return f"failed:{outcome.error.kind}"
    return outcome.kind


def crash_variant(case: FuzzCase, scenario: Scenario, steps: int) -> Scenario:
    """``scenario`` with one more crash, at the step ``case.crash_at`` picks among ``steps``."""
    k = 1 + int(case.crash_at * max(steps, 1))
    crash = Fault(kind="crash", step=k)
    return scenario.model_copy(update={"faults": [*scenario.faults, crash]})


def check_case(
    case: FuzzCase, scenario: Scenario | None = None, config: FuzzConfig = FuzzConfig()
) -> CaseResult:
    """Run every check on ``scenario`` (default: the case's own) and report the first failure."""
    sc = scenario if scenario is not None else case.scenario
    out = CaseResult(seed=case.seed, enabled=case.enabled)
    first = _run_world(sc, checked=config.check_invariants, heal=config.check_heal, seed=case.seed)
    out.runs += 1 + (first.heal is not None)
    out.steps, out.faults, out.trace = first.steps, first.fired, first.trace
    out.outcome = _outcome_name(first.result.outcome if first.result else None)
    if first.failure is not None:
        out.failure = first.failure
        return out
    assert first.result is not None
    if config.check_heal and first.heal is not None:
        out.failure = _heal_failure(first.result, first.heal)
        if out.failure is not None:
            return out
    if config.check_determinism:
        second = _run_world(sc, checked=False, heal=config.check_heal, seed=case.seed)
        out.runs += 1 + (second.heal is not None)
        if second.trace != first.trace:
            a, b = first.trace.splitlines(), second.trace.splitlines()
            line = next(
                (i for i, (x, y) in enumerate(zip(a, b, strict=False), 1) if x != y),
                min(len(a), len(b)) + 1,
            )
            out.failure = Failure(
                "nondeterminism", "trace", f"two runs of the same seed differ at trace line {line}"
            )
            return out
    if config.check_crash:
        crashed = crash_variant(case, sc, first.result.steps)
        third = _run_world(crashed, checked=False, heal=False, seed=case.seed, trace=False)
        out.runs += 1
        if third.failure is not None:
            out.failure = Failure(
                "crash-restore",
                third.failure.code,
                f"with a crash at step {crashed.faults[-1].step}: {third.failure.message}",
            )
            return out
        assert third.result is not None
        diff = _same_end(first.result, third.result)
        if diff is not None:
            out.failure = Failure(
                "crash-restore", "differs", f"crash at step {crashed.faults[-1].step}: {diff}"
            )
    return out


# --- seeds, shrinking, files -------------------------------------------------------------------


def _shrink(case: FuzzCase, failure: Failure, config: FuzzConfig) -> ShrinkResult:
    quiet = dataclasses.replace(config, shrink=False)

    def fails(candidate: Scenario) -> bool:
        found = check_case(case, candidate, quiet).failure
        return found is not None and found.signature == failure.signature

    return shrink_scenario(case.scenario, fails, max_tests=config.max_shrink_tests)


def run_seed(seed: int, config: FuzzConfig = FuzzConfig(), out: str | None = None) -> CaseResult:
    """Check one seed; on failure save the trace and scenario to ``out`` and shrink them."""
    case = make_case(seed, config)
    result = check_case(case, None, config)
    failure = result.failure
    if failure is None:
        result.trace = ""
        return result
    files: list[str] = []
    if out is not None:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        base = d / f"seed-{seed}"
        Path(f"{base}.jsonl").write_text(result.trace, encoding="utf-8")
        Path(f"{base}.yaml").write_text(scenario_yaml(case.scenario), encoding="utf-8")
        files += [f"{base}.jsonl", f"{base}.yaml"]
    if config.shrink:
        shrunk = _shrink(case, failure, config)
        result.shrunk = shrunk.summary()
        small = shrunk.scenario.model_copy(
            update={"description": f"fuzz seed {seed}, shrunk ({shrunk.summary()}): {failure}"}
        )
        if failure.kind == "crash-restore":
            steps = check_case(case, small, dataclasses.replace(config, check_crash=False)).steps
            small = crash_variant(case, small, steps)
        if out is not None:
            again = check_case(case, small, dataclasses.replace(config, check_crash=False))
            base = Path(out) / f"seed-{seed}.min"
            Path(f"{base}.jsonl").write_text(again.trace, encoding="utf-8")
            Path(f"{base}.yaml").write_text(scenario_yaml(small), encoding="utf-8")
            files += [f"{base}.jsonl", f"{base}.yaml"]
    result.files = files
    result.trace = ""
    return result


@dataclass
class CampaignSummary:
    seeds: int = 0
    runs: int = 0
    steps: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    enabled: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[CaseResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, r: CaseResult) -> None:
        self.seeds += 1
        self.runs += r.runs
        self.steps += r.steps
        self.faults.update(r.faults)
        self.enabled.update(r.enabled)
        self.outcomes[r.outcome] += 1
        if r.failure is not None:
            self.failures.append(r)

    def lines(self) -> list[str]:
        out = [
            f"{self.seeds} seeds, {self.runs} simulated runs, {self.steps} steps checked; "
            f"{len(self.failures)} failing seed(s)",
            "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
            "faults that struck, by kind:",
        ]
        for kind in ALL_FAULTS:
            if self.enabled[kind] or self.faults[kind]:
                out.append(
                    f"  {kind:<20} {self.faults[kind]:>7}  (enabled in {self.enabled[kind]} seeds)"
                )
        return out


def _chunk(seeds: Sequence[int], config: FuzzConfig, out: str | None) -> list[CaseResult]:
    return [run_seed(s, config, out) for s in seeds]


def _chunks(seeds: Sequence[int], size: int) -> Iterator[Sequence[int]]:
    for i in range(0, len(seeds), size):
        yield seeds[i : i + size]


def run_campaign(
    seeds: Iterable[int],
    config: FuzzConfig = FuzzConfig(),
    *,
    workers: int = 1,
    out: str | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    chunk_size: int | None = None,
) -> CampaignSummary:
    """Check every seed (in ``workers`` processes, in chunks); ``on_result`` sees each case."""
    seed_list = list(seeds)
    summary = CampaignSummary()

    def take(results: Iterable[CaseResult]) -> None:
        for r in results:
            summary.add(r)
            if on_result is not None:
                on_result(r)

    size = chunk_size or max(1, min(100, len(seed_list) // max(1, workers * 8)))
    if workers <= 1:
        for chunk in _chunks(seed_list, size):
            take(_chunk(chunk, config, out))
        summary.failures.sort(key=lambda r: r.seed)
        return summary
    with ProcessPoolExecutor(max_workers=workers) as pool:
        pending: set[Future[list[CaseResult]]] = {
            pool.submit(_chunk, chunk, config, out) for chunk in _chunks(seed_list, size)
        }
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                take(fut.result())
    summary.failures.sort(key=lambda r: r.seed)
    return summary


def default_workers() -> int:
    return max(1, (os.cpu_count() or 1))
