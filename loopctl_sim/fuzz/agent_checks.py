"""The checks of one case of the user's own agent, at driver level: ``checks.run_checks`` in the
order of ``loopctl_sim.fuzz.checks``, with what an agent adds:

- **nothing escapes the run**: an exception out of ``run()``, or one the dispatcher turned into
  an error result unless the tool declared it (``@tool(raises=...)``; ``CrashWatch``);
- **no tool call runs twice**, except one a crash interrupted after it ran;
- **determinism**: where two runs' traces first differ at a tool's result, the tools are not
  deterministic: a failure only when they were declared so; otherwise a note, and no crash check.

``scripted`` turns a failing case's run into the same scenario with the exploring model's
replies written out: what the shrinker cuts down and what a reproducer holds.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from loopctl.core import Completed, Failed, Message, ProtocolError, ToolCall
from loopctl.observe import IoEvent, LoopObserver
from loopctl.tools import ToolError
from loopctl_sim.fuzz.agent_case import agent_profile
from loopctl_sim.fuzz.case import DEFAULT_CONFIG, FuzzCase, FuzzConfig
from loopctl_sim.fuzz.checker import DriverChecker, Violation
from loopctl_sim.fuzz.checks import (
    CREATED,
    HEAL_INPUT,
    HEAL_TEXT,
    CaseResult,
    Failure,
    WorldRun,
    outcome_name,
    run_checks,
    step_bound,
    trace_differs,
)
from loopctl_sim.props import invariants as inv
from loopctl_sim.sim.agent_run import AgentRun, AgentRunError, AgentWorld, run_agent
from loopctl_sim.sim.layers import StepLimit
from loopctl_sim.sim.scenario import CallScenario, ReplyScenario, Scenario
from loopctl_sim.trace import TraceWriter


@dataclass(frozen=True)
class Crash:
    """One exception the dispatcher turned into an error result, and what raised it (``where``:
    ``tool``, ``pre-tool hook``, ``post-tool hook``, ``tool middleware``; its ``name``)."""

    where: str
    name: str
    kind: str
    text: str

    @property
    def code(self) -> str:
        """What a failure's signature holds: the same crash shrinks to the same code."""
        return f"{self.name}:{self.kind}"

    def __str__(self) -> str:
        said = f"{self.kind}: {self.text}" if self.text else self.kind
        if self.where == "tool":
            return (
                f"tool '{self.name}' raised {said}, an exception it does not declare (declare "
                "the ones it raises on purpose with @tool(raises=...); ToolError always is)"
            )
        return f"{self.where} {self.name} raised {said}"


class CrashWatch(LoopObserver):
    """Collects the crashes of the runs it observes (``crashes``, in order), from each call's
    ``tool_result`` event (``IoEvent.raised``). The dispatcher turns any exception out of a tool
    call into an error result, so nothing escapes the run; as Hypothesis does for a test, a
    campaign takes each for a finding unless the tool declared it (``expected``: each tool's
    ``Tool.raises`` by name; ``ToolError`` always is). A hook or a middleware declares none."""

    def __init__(self, expected: Mapping[str, tuple[type[BaseException], ...]]) -> None:
        self.expected = expected
        self.crashes: list[Crash] = []

    def io(self, event: IoEvent) -> None:
        for where, name, error in event.raised:
            if where == "tool" and isinstance(error, (ToolError, *self.expected.get(name, ()))):
                continue
            self.crashes.append(Crash(where, name, type(error).__name__, str(error)))


def _failure_of(exc: BaseException) -> Failure:
    if isinstance(exc, Violation):
        return Failure("invariant", inv.problem_code(exc.problems[0]), str(exc))
    if isinstance(exc, StepLimit):
        return Failure("livelock", "steps", str(exc))
    name = type(exc).__name__
    where = "the engine refused what the agent fed it" if isinstance(exc, ProtocolError) else ""
    text = f"{name}: {exc}" + (f" ({where})" if where else "")
    return Failure("exception", name, f"{text}, escaped the run")


def _heal_world(world: AgentWorld) -> AgentWorld:
    return dataclasses.replace(
        world,
        input=HEAL_INPUT,
        script=[Message.assistant(HEAL_TEXT)],
        explore=None,
        tokens=(),
        faults=(),
        history=(),
        max_steps=40,
        metadata={**world.metadata, "heal": True},
    )


def _run(
    scenario: Scenario,
    config: FuzzConfig,
    *,
    checked: bool,
    heal: bool,
    seed: int,
    trace: bool = True,
    twin: bool = False,
) -> WorldRun[AgentRun]:
    """The faulted run of ``scenario``, then its heal run (``heal``)."""
    buf = io.StringIO()
    writer = TraceWriter(buf) if trace else None
    world = scenario.agent_world(cwd=config.cwd)
    turns = len(world.script) + 2 if world.script is not None else world.explore_config.turns
    world = dataclasses.replace(
        world,
        max_steps=step_bound(turns, world.faults),
        metadata={**world.metadata, "fuzz_seed": seed},
    )
    checker = DriverChecker() if checked else None
    observers: list[LoopObserver] = [checker] if checker is not None else []
    hook = checker.before_step if checker is not None else None
    expected = {}
    if config.check_tool_exceptions and scenario.agent is not None:
        expected = dict(agent_profile(scenario.agent, config.cwd).raises)
    watch = CrashWatch(expected)
    observers.append(watch)
    result = healed = None
    steps = 0
    try:
        result = run_agent(world, writer, created=CREATED, observers=observers, before_step=hook)
        steps = result.steps
        twice = sorted(
            i for i, n in result.executions.items() if n > 1 and i not in result.rerun_allowed
        )
        if twice:
            ran_twice = Failure("tool-twice", "executions", f"tool calls ran twice: {twice}")
            return WorldRun(buf.getvalue(), result, None, steps, ran_twice)
        if heal:
            healed = run_agent(
                _heal_world(world),
                writer,
                machine=result.machine,
                created=CREATED,
                observers=observers,
                before_step=hook,
            )
            steps += healed.steps
    except AgentRunError as exc:  # everything out of the user's loop is a finding, as data
        partial = exc.run
        if result is None:
            result, steps = partial, partial.steps
        else:
            healed, steps = partial, steps + partial.steps
        return WorldRun(buf.getvalue(), result, healed, steps, _failure_of(exc.error))
    crash = watch.crashes[0] if config.check_tool_exceptions and watch.crashes else None
    failure = None if crash is None else Failure("tool-exception", crash.code, str(crash))
    return WorldRun(buf.getvalue(), result, healed, steps, failure)


def _heal_failure(first: AgentRun, healed: AgentRun) -> Failure | None:
    """The heal run must complete (whatever the agent makes of the final text); a
    ``context_overflow`` failure is legitimate when the faults left the context over the
    compaction line (the compactor may be unable to cut it)."""
    outcome = healed.outcome
    if isinstance(outcome, Completed):
        return None
    policy = first.policy
    over = policy is not None and first.machine.context_tokens >= policy.threshold_tokens
    if isinstance(outcome, Failed) and outcome.error.kind == "context_overflow" and over:
        return None
    ended = outcome_name(outcome)
    return Failure(
        "heal",
        getattr(outcome, "kind", "?"),
        f"after the faults, a clean next run ended {ended} instead of completing (it started "
        f"with {first.machine.context_tokens} context tokens)",
    )


def _tool_difference(a: str, b: str, line: int) -> bool:
    """Whether the two traces first differ at a tool's result (the tools, not the engine)."""
    for text in (a, b):
        lines = text.splitlines()
        if line <= len(lines):
            record = json.loads(lines[line - 1])
            kind = record.get("kind") if record.get("type") == "io" else record.get("name")
            if kind in ("tool_result", "tool_results"):
                return True
    return False


def check_agent_case(
    case: FuzzCase, scenario: Scenario | None = None, config: FuzzConfig = DEFAULT_CONFIG
) -> CaseResult:
    """Run every check on ``scenario`` (default: the case's own) and report the first failure."""
    sc = scenario if scenario is not None else case.scenario

    def took(out: CaseResult, result: AgentRun) -> None:
        out.moves, out.script = Counter(result.moves), list(result.script)
        out.replay_tools = replay_tools(result)

    def differ(out: CaseResult, a: str, b: str, line: int) -> Failure | None:
        if not _tool_difference(a, b, line):
            return trace_differs(line)
        if config.deterministic:
            return Failure(
                "nondeterminism",
                "tool",
                f"the tools were declared deterministic, but two runs of the same seed "
                f"differ at trace line {line}, a tool's result",
            )
        out.notes.append("determinism not checked: the agent's tools are not deterministic")
        return None

    twice = config.deterministic is not False
    run = functools.partial(_run, config=config, seed=case.seed)
    out = run_checks(
        case, sc, config, run, _heal_failure, differ, took=took, twice=twice, whole=True
    )
    if not twice and out.failure is None:
        out.notes.append("determinism not checked: the tools were declared nondeterministic")
    return out


def scripted(scenario: Scenario, script: Sequence[Message]) -> Scenario:
    """``scenario`` with its model written out: ``script``'s replies instead of the exploring
    model (the same run, if the agent is deterministic), ready to shrink and to keep."""
    replies = [ReplyScenario(text=m.text, calls=[_call(c) for c in m.tool_calls]) for m in script]
    return scenario.model_copy(update={"model": replies, "explore": None})


def _call(call: ToolCall) -> CallScenario:
    return CallScenario(name=call.name, arguments=dict(call.arguments), id=call.id)


def replay_tools(run: AgentRun) -> str:
    """The ``--tools`` that replays ``run``'s trace against the agent: every tool that ran live
    and no fault struck runs live again; the others (simulated, scripted, faulted) are answered
    from the trace."""
    names = run.tools
    live = [n for n in names if n in run.live and n not in run.faulted_tools]
    if len(live) == len(names):
        return "live"
    if not live:
        return "recorded"
    return "live:" + ",".join(live)
