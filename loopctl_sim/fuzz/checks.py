"""The checks of one case, in order; the first failure is reported (``run_checks``):

1. **invariants** after every step and feed (``fuzz.checker``), exact resume at every crash,
   nothing raising out of the run, and an end within a bound of steps (**liveness**);
2. a **heal** run after the faults completes, then the user's checks hold;
3. **determinism**: a second run's trace (fixed creation time ``CREATED``) is equal byte for
   byte; at driver level the second run streams and folds the replies the first took whole;
4. **crash/restore**: a run with one more crash (``crash_variant``) ends with the same outcome,
   history and digest.

Every failure is data, a ``Failure`` in the ``CaseResult``: the campaign keeps going, and the
shrinker keeps a smaller world only when it fails the same way (``Failure.signature``).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import re
from collections import Counter
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from loopctl.core import (
    Completed,
    Failed,
    LoopMachine,
    MachineOutcome,
    MachinePolicy,
    Message,
    ToolCall,
)
from loopctl_sim.fuzz.case import DEFAULT_CONFIG, FuzzCase, FuzzConfig
from loopctl_sim.fuzz.checker import CheckingMachine, DriverChecker, Violation
from loopctl_sim.fuzz.user_checks import run_user_checks
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.driver_watch import Broken, DriverWatch
from loopctl_sim.replay.explain import change_line, field_changes, show_value
from loopctl_sim.sim.driver import simulate_driver
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.machine import SimResult, SimRun, SimulationError
from loopctl_sim.sim.scenario import Scenario
from loopctl_sim.sim.world import ModelScript, World
from loopctl_sim.trace import RecordingMachine, Scrubber, TraceWriter

#: The fixed creation time written into fuzz traces, so that two runs compare byte for byte.
CREATED: Final = "2026-01-01T00:00:00+00:00"
HEAL_INPUT: Final = "Please wrap up."
HEAL_TEXT: Final = "healed"


@dataclass(frozen=True)
class Failure:
    """What went wrong in a case. ``kind``: invariant, nondeterminism, crash-restore, livelock,
    heal, exception, check, and for an agent tool-twice and tool-exception. ``code``: the
    invariant's code, the exception's type, the check's name (for shrinking)."""

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
    """One case's checks: what ran, what struck, how it ended, and the first failure if any."""

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
    #: the moves the exploring model made (an agent's case)
    moves: Counter[str] = field(default_factory=Counter)
    #: the replies the run got (an agent's case: the script a reproducer holds)
    script: list[Message] = field(default_factory=list)
    #: the ``--tools`` that replays the trace against the agent (the shrunk one's, when the
    #: seed was shrunk; ``first_replay_tools`` is then the first trace's)
    replay_tools: str = "live"
    first_replay_tools: str | None = None
    #: what the case could not check, and why
    notes: list[str] = field(default_factory=list)
    #: the faults the case's scenario schedules, by kind (``faults``: those that struck)
    scheduled: Counter[str] = field(default_factory=Counter)
    #: where the crash check struck (``FuzzCase.crash_at``): ``run --crash-at`` strikes there
    crash_at: float = 0.5


def _bound(world: World) -> int:
    """Steps a run of the built-in world may take before it counts as a livelock."""
    return step_bound(min(world.policy.max_turns, len(world.model.replies) + 2), world.faults)


def step_bound(turns: int, faults: Sized) -> int:
    """Steps a run of about ``turns`` replies under ``faults`` may take before it is a livelock."""
    return 6 * (turns + 2) + 4 * len(faults) + 10


def _sim(
    world: World,
    *,
    machine: LoopMachine | None,
    writer: TraceWriter | None,
    checked: bool,
    metadata: dict[str, Any],
    level: str = "machine",
    streamed: bool = False,
) -> SimResult:
    """One run of ``world``: at machine level the simulator drives a brain checked around it
    (``CheckingMachine``); at driver level a real ``BareLoop`` runs it, checked from outside
    (``DriverChecker``). ``streamed``: the driver streams and folds every reply (else it takes
    each whole)."""
    world = dataclasses.replace(world, max_steps=_bound(world))
    if level == "machine":
        cls = CheckingMachine if checked else RecordingMachine
        meta = {"world": world.name, "simulated": True, **world.metadata, **metadata}
        brain = machine if machine is not None else LoopMachine(world.history)
        return SimRun(world, cls(brain, writer, metadata=meta, created=CREATED)).go()
    checker = DriverChecker() if checked else None
    # the hands too: results in call order, each call dispatched once across a crash, attempts
    # and delays against the retry reference, overflow -> Compact(EMERGENCY), the estimate after
    # results, the policy of the configs in force (the checker above has the brain's invariants)
    hands = DriverWatch(brain=False, max_steps=world.max_steps) if checked else None
    try:
        return simulate_driver(
            world,
            writer,
            created=CREATED,
            metadata=metadata,
            observers=[checker] if checker is not None else (),
            before_step=checker.before_step if checker is not None else None,
            machine=machine,
            watch=hands,
            on_stream=(lambda event: None) if streamed else None,  # a watcher makes it stream
        )
    except Broken as broken:
        raise Violation(broken.problems, broken.where) from None


def _heal_world(world: World) -> World:
    tool = next(iter(world.tools)) if world.tools else "none"
    replies = [
        Message.assistant("One last check.", [ToolCall(id="heal_1", name=tool, arguments={})]),
        Message.assistant(HEAL_TEXT),
    ]
    policy = world.policy.model_copy(update={"max_turns": max(world.policy.max_turns, 4)})
    return dataclasses.replace(
        world, input=HEAL_INPUT, model=ModelScript(replies), faults=(), policy=policy
    )


def _failure_of(exc: BaseException) -> Failure:
    if isinstance(exc, Violation):
        code = inv.problem_code(exc.problems[0])
        return Failure("invariant", code, str(exc))
    if isinstance(exc, SimulationError):
        if "no Done after" in str(exc):
            return Failure("livelock", "steps", str(exc))
        return Failure("exception", "SimulationError", str(exc))
    name = type(exc).__name__
    return Failure("exception", name, str(exc) if name == "ProtocolError" else f"{name}: {exc}")


class _NothingSecret(Scrubber):
    """The built-in world's traces hold only what the case generator wrote (fixed texts,
    numbers): there is no secret to look for, and looking was a third of a seed's time."""

    def might_hold(self, json_text: str) -> bool:
        return False


#: The scrubber of the built-in world's fuzz traces (an agent's are scrubbed as any trace).
NOTHING_SECRET: Final = _NothingSecret()


R = TypeVar("R", bound=SimResult)


@dataclass
class WorldRun(Generic[R]):
    """A checked run (the faulted run, then its heal run) as a case's checks see it."""

    trace: str
    result: R | None
    heal: R | None
    steps: int
    failure: Failure | None


def _run_world(
    scenario: Scenario,
    *,
    checked: bool,
    heal: bool,
    seed: int,
    trace: bool = True,
    level: str = "machine",
    twin: bool = False,
) -> WorldRun[SimResult]:
    """The faulted run of ``scenario``, then its heal run (``heal``). ``twin``: the run that
    must equal the first; at driver level it watches the stream, so the driver streams and folds
    each reply the first run took whole."""
    buf = io.StringIO()
    writer = TraceWriter(buf, scrubber=NOTHING_SECRET) if trace else None
    sim = functools.partial(_sim, writer=writer, checked=checked, level=level, streamed=twin)
    meta = {"fuzz_seed": seed}
    result = heal_result = None
    steps = 0
    try:
        world = scenario.world()
        result = sim(world, machine=None, metadata=meta)
        steps = result.steps
        if heal:
            healing = _heal_world(world)
            heal_meta = {**meta, "heal": True}
            heal_result = sim(healing, machine=result.machine.next_run(), metadata=heal_meta)
            steps += heal_result.steps
    except Exception as exc:  # every failure of the engine is a finding, reported as data
        # the simulators leave a harness stop (Violation, StepLimit) out of the trace
        # (sim.body.agent_failure): it ends where the stop struck and replays up to there
        return WorldRun(buf.getvalue(), result, heal_result, steps, _failure_of(exc))
    return WorldRun(buf.getvalue(), result, heal_result, steps, None)


def heal_failure(first: SimResult, healed: SimResult, policy: MachinePolicy) -> Failure | None:
    """A clean next run after the faults must complete, or fail ``context_overflow`` when the
    faults left the context over the compaction line (an oversized tool result, a spike) and
    the compactor finds nothing more to cut (with no compaction, it was that high already)."""
    outcome = healed.outcome
    if isinstance(outcome, Completed) and outcome.final_text == HEAL_TEXT:
        return None
    over = first.machine.context_tokens >= policy.threshold_tokens
    if (
        isinstance(outcome, Failed)
        and outcome.error.kind == "context_overflow"
        and (healed.compactions == 0 or over)
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


_DURATION: Final = re.compile(r'"duration_s":[^,}]+')


def first_difference(a: str, b: str) -> int | None:
    """The first line (1-based) where two traces differ, durations excluded (the one field a
    deterministic run may vary: wall time), or None when they are the same."""
    if a == b:
        return None
    x, y = _DURATION.sub("", a).splitlines(), _DURATION.sub("", b).splitlines()
    if x == y:
        return None
    return next(
        (i for i, (p, q) in enumerate(zip(x, y, strict=False), 1) if p != q),
        min(len(x), len(y)) + 1,
    )


def outcome_name(outcome: MachineOutcome | None) -> str:
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
    case: FuzzCase, scenario: Scenario | None = None, config: FuzzConfig = DEFAULT_CONFIG
) -> CaseResult:
    """Run every check on ``scenario`` (default: the case's own) and report the first failure."""
    sc = scenario if scenario is not None else case.scenario
    twin = " (the second streamed its replies)" if config.level == "driver" else ""
    return run_checks(
        case,
        sc,
        config,
        functools.partial(_run_world, seed=case.seed, level=config.level),
        lambda first, healed: heal_failure(first, healed, sc.policy),
        lambda out, a, b, line: trace_differs(line, twin),
    )


def run_checks(
    case: FuzzCase,
    sc: Scenario,
    config: FuzzConfig,
    run: Callable[..., WorldRun[R]],
    healed: Callable[[R, R], Failure | None],
    differ: Callable[[CaseResult, str, str, int], Failure | None],
    *,
    took: Callable[[CaseResult, R], None] | None = None,
    twice: bool = True,
    whole: bool = False,
) -> CaseResult:
    """A case's checks, in the module docstring's order, at either level (one definition): ``run``
    makes a checked run (``_run_world``, the agent's ``_run``), ``healed`` judges its heal run,
    ``differ`` two traces differing at a line (a failure, or None: they may, noted in the report,
    and the crash check, which needs the same run twice, is skipped), ``took`` copies what the
    first run's result holds; ``twice``: run twice at all (else no crash check either);
    ``whole``: a crash check's failure quotes the whole failure of the crashed run."""
    out = CaseResult(seed=case.seed, enabled=case.enabled, crash_at=case.crash_at)
    out.scheduled.update(f.kind for f in sc.faults)
    first = run(sc, checked=True, heal=config.check_heal)
    out.runs += 1 + (first.heal is not None)
    out.steps, out.trace = first.steps, first.trace
    if first.result is not None:
        out.faults = Counter(first.result.fired)
        if took is not None:
            took(out, first.result)
    out.outcome = outcome_name(first.result.outcome if first.result else None)
    out.failure = first.failure
    if out.failure is not None:
        return out
    assert first.result is not None
    if config.check_heal and first.heal is not None:
        out.failure = healed(first.result, first.heal)
    if out.failure is None:  # the first of the user's checks that fails
        found = run_user_checks(config.checks, first.result, first.trace, config.cwd)
        out.failure = None if found is None else Failure("check", *found)
    if out.failure is not None:
        return out
    same_runs = twice
    if config.check_determinism and twice:
        second = run(sc, checked=False, heal=config.check_heal, twin=True)
        out.runs += 1 + (second.heal is not None)
        line = first_difference(first.trace, second.trace)
        if line is not None:
            out.failure = differ(out, first.trace, second.trace, line)
            if out.failure is not None:
                return out
            same_runs = False
    if config.check_crash and same_runs:
        crashed = crash_variant(case, sc, first.result.steps)
        third = run(crashed, checked=False, heal=False, trace=False)
        out.runs += 1
        out.failure = crash_failure(first.result, third, crashed, whole=whole)
    return out


def trace_differs(line: int, twin: str = "") -> Failure:
    """Two runs of one seed differ at ``line`` of their traces (``twin``: how the second ran)."""
    return Failure(
        "nondeterminism", "trace", f"two runs of the same seed differ at trace line {line}{twin}"
    )


def history_difference(
    expected: Sequence[Message], actual: Sequence[Message], expected_name: str, actual_name: str
) -> str:
    """Where ``actual`` first departs from ``expected``, in one line: the first differing message
    and leaf (``parts[1].arguments.amount: before -> after``, both bounded, so that a 10 KB tool
    result does not flood the report), or the first message only one side has."""
    sizes = f"{len(expected)} messages {expected_name}, {len(actual)} {actual_name}"
    for i, (x, y) in enumerate(zip(expected, actual, strict=False)):
        if x != y:
            leaf = field_changes(x.model_dump(mode="json"), y.model_dump(mode="json"), 1)
            # equal JSON, unequal messages: a value's Python type differs (a tuple, a list)
            at = change_line(*leaf[0]) if leaf else "a value's type only (the same JSON)"
            return f"message {i} ({sizes}) differs at {at}"
    n = min(len(expected), len(actual))
    extra, name = (expected[n], expected_name) if len(expected) > n else (actual[n], actual_name)
    kinds = ", ".join(p.kind for p in extra.parts) or "no parts"
    return f"message {n} ({sizes}) is only {name}: {extra.role} ({kinds}) " + show_value(
        extra.model_dump(mode="json"), 80
    )


def crash_failure(
    first: SimResult, third: WorldRun[Any], crashed: Scenario, *, whole: bool = False
) -> Failure | None:
    """How the run with one more crash (``third``, of ``crashed``) fails the crash/restore
    check: it fails (quoted ``whole``, else its message), or its outcome, history or final
    digest differ from the uninterrupted run's (``first``); None when it passes."""
    at = crashed.faults[-1].step
    if third.failure is not None:
        said = third.failure if whole else third.failure.message
        return Failure("crash-restore", third.failure.code, f"with a crash at step {at}: {said}")
    b = third.result
    assert b is not None
    if first.outcome != b.outcome:
        what = f"outcome {first.outcome!r} uninterrupted, {b.outcome!r} with the crash"
    elif first.machine.history != b.machine.history:
        what = "the history differs from the uninterrupted run's: " + history_difference(
            first.machine.history, b.machine.history, "uninterrupted", "with the crash"
        )
    elif first.digest != b.digest:
        what = f"final digest {first.digest} uninterrupted, {b.digest} with the crash"
    else:
        return None
    return Failure("crash-restore", "differs", f"crash at step {at}: {what}")
