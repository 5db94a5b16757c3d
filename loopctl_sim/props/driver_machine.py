"""``DriverMachine``: the hands (``BareLoop``) under hypothesis's stateful testing.

Hypothesis plays the world (``driver_world``). Each ``run`` rule starts one run of a
``BareLoop`` over the same conversation; cancels, crashes and config changes strike at arbitrary
steps and feeds, and a crash is followed by what a real restart does (the brain saved to JSON,
restored into a fresh body, resumed). The ``DriverWatch`` in every body checks the brain and the
hands after every step and feed, with bounds so that a looping driver fails instead of hanging.

Run it as a test (``from loopctl_sim.props.driver_machine import TestDriver``), or around your
own agent (``driver_agent``): its factory builds every loop, a model explores its tools, faults
strike around the model, the tools and the run, and the same checks hold::

    class ShopMachine(DriverMachine):
        agent = "examples.support_agent.agent:build"
        simulated = frozenset({"refund"})      # a stand-in answers: no side effects

    TestShop = ShopMachine.TestCase
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any, ClassVar, Final

from hypothesis import event as _hypothesis_event
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from loopctl.core import (
    AwaitingCompaction,
    AwaitingTools,
    Completed,
    Failed,
    LoopMachine,
    ProtocolError,
    Terminal,
    ToolCall,
)
from loopctl.driver import BareLoop, CancelSignal, RunConfig, RunResult
from loopctl.testing import ExploreConfig, FunctionClient
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.brain_compactions import REFUSED
from loopctl_sim.props.driver_agent import AgentRun, fault_plans
from loopctl_sim.props.driver_watch import Broken, Crash, DriverWatch, Strike, unwrap
from loopctl_sim.props.driver_world import (
    COMPACTOR_MODES,
    PlannedCompactor,
    ReplySpec,
    ScriptedModel,
    World,
    config_changes,
    reply_specs,
    run_configs,
)
from loopctl_sim.sim.agent import AgentFactory, load_agent
from loopctl_sim.sim.body import run_simulated

#: The most crash-and-resume cycles one run may need (each drawn crash strikes once).
_MAX_RESUMES: Final = 20

#: Cancels and crashes by the count of steps and feeds, and crashes between the last result of
#: a wave and the next step (``results_crash`` at the k-th wave).
_INTERRUPTS: Final = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["cancel", "crash"]), st.integers(1, 25)),
        st.tuples(st.just("results_crash"), st.integers(1, 2)),
    ),
    max_size=2,
)
#: A user's agent also crashes inside a tool, after it ran (``tool_crash`` at the k-th dispatch).
_AGENT_INTERRUPTS: Final = st.lists(
    st.tuples(st.sampled_from(["cancel", "crash", "tool_crash"]), st.integers(1, 12)), max_size=2
)


def event(text: str) -> None:
    """``hypothesis.event``, and nothing when a rule is called outside hypothesis."""
    with contextlib.suppress(InvalidArgument):
        _hypothesis_event(text)


class DriverMachine(RuleBasedStateMachine):
    """Hypothesis drives ``BareLoop`` runs, in the scripted world or around your own agent:
    ``configs``: a strategy of ``RunConfig`` (None: an agent's own config); ``changes``: of the
    config updates made mid-run. Your own agent: ``agent`` is its factory (``"mypkg.agent:build"``
    or the callable); ``inputs`` are the user messages runs start with; ``simulated`` names tools
    a stand-in answers (side effects); ``exempt`` tools never faulted; ``explore`` the model's
    ``ExploreConfig``. ``tolerated``: brain problem codes reported nowhere (known issues);
    ``skip``: driver property codes not checked (say ``InvariantCode.RETRY`` for a model
    middleware that retries on its own); ``max_steps`` bounds the steps of one run.
    """

    agent: ClassVar[str | AgentFactory | None] = None
    inputs: ClassVar[tuple[str, ...]] = ("Hello!", "Can you help me?", "What can you do?")
    simulated: ClassVar[frozenset[str]] = frozenset()
    exempt: ClassVar[frozenset[str]] = frozenset()
    explore: ClassVar[ExploreConfig] = ExploreConfig(turns=8)
    configs: ClassVar[st.SearchStrategy[RunConfig] | None] = run_configs()
    changes: ClassVar[st.SearchStrategy[dict[str, Any]]] = config_changes()
    tolerated: ClassVar[frozenset[str]] = frozenset({inv.InvariantCode.RESTORE_TERMINAL_OPEN_TAIL})
    skip: ClassVar[frozenset[str]] = frozenset()
    max_steps: ClassVar[int] = 200

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("agent") is not None and "configs" not in cls.__dict__:
            cls.configs = None  # the agent's own config, unless the subclass draws some

    def __init__(self) -> None:
        super().__init__()
        self.machine = LoopMachine()
        self.config: RunConfig | None = RunConfig() if self.agent is None else None
        self.signal = CancelSignal()
        self.world = World(lambda: self.signal)
        self.allowed: Counter[Any] = Counter()  # extra executions a crash in flight allows
        # a user's live tools, by (run, call id): the exploring model's ids start again in a
        # run whose predecessor was discarded
        self.agent_executions: Counter[tuple[int, str]] = Counter()
        self.dispatched: Counter[str] = Counter()  # every run's dispatches, by call id
        self.tool_names: frozenset[str] = frozenset()
        self.runs = 0
        self.last: RunResult | None = None
        self.watch = DriverWatch()
        self.model = ScriptedModel(self.watch, [])
        self.compactor = PlannedCompactor()
        self.agent_run: AgentRun | None = None

    @property
    def executions(self) -> Counter[Any]:
        """Tool executions by ``_key`` (the run under way included)."""
        if self.agent is None:
            return self.world.executions
        counts = Counter(self.agent_executions)
        run = self.agent_run
        if run is not None:
            for call_id, n in run.tools.executions.items():
                counts[(self.runs, call_id)] += n
        return counts

    @classmethod
    def factory(cls) -> AgentFactory:
        """The agent's factory (``agent`` loaded once per class)."""
        assert cls.agent is not None
        loaded = cls.__dict__.get("_loaded")
        if loaded is None:
            loaded = load_agent(cls.agent)
            cls._loaded = loaded
        return loaded

    def _body(self, machine: LoopMachine) -> BareLoop:
        """A fresh body holding ``machine``, before the watch is installed."""
        if self.agent_run is not None:
            changes = {"config": self.config} if self.config is not None else {}
            return self.agent_run.body(machine, **changes)
        return BareLoop.from_machine(
            machine,
            FunctionClient(self.model),
            [self.world.tool],
            self.config,
            compactor=self.compactor,
        )

    def _key(self, call: ToolCall) -> Any:
        """What executions are counted by: ``n`` in the built-in world, else (run, call id)."""
        return call.arguments.get("n") if self.agent is None else (self.runs, call.id)

    @initialize(data=st.data())
    def setup(self, data: st.DataObject) -> None:
        if self.configs is not None:
            self.config = data.draw(self.configs, label="config")

    @precondition(lambda self: self.agent is None)
    @rule(
        replies=st.lists(reply_specs(), max_size=6),
        interrupts=_INTERRUPTS,
        text=st.sampled_from(["go", "continue", "and now?"]),
        data=st.data(),
    )
    def run(
        self,
        replies: list[ReplySpec],
        interrupts: list[Strike],
        text: str,
        data: st.DataObject | None = None,
    ) -> None:
        """One run in the built-in world: the model plays ``replies``."""
        watch = self._watch(interrupts, data)
        self.model = ScriptedModel(watch, [self.world.entry(s) for s in replies])
        plan = data.draw(st.lists(st.sampled_from(COMPACTOR_MODES), max_size=3)) if data else []
        self.compactor = PlannedCompactor(plan)
        self._drive(watch, text)

    @precondition(lambda self: self.agent is not None)
    @rule(data=st.data(), interrupts=_AGENT_INTERRUPTS)
    def run_agent(self, data: st.DataObject, interrupts: list[Strike]) -> None:
        """One run of the user's agent: drawn replies, drawn faults, drawn strikes."""
        text = data.draw(st.sampled_from(self.inputs), label="input")
        watch = self._watch(interrupts, data)
        plan = data.draw(fault_plans(tuple(sorted(self.tool_names))), label="faults")
        self.agent_run = AgentRun(
            self.factory(),
            data,
            plan,
            self.explore,
            simulated=self.simulated,
            exempt=self.exempt,
        )
        self.agent_run.tools.cancel = self.signal
        run = self.runs
        try:
            self._drive(watch, text)
        finally:
            for call_id, n in self.agent_run.tools.executions.items():
                self.agent_executions[(run, call_id)] += n
            self.agent_run.tools.executions.clear()
            for name, n in self.agent_run.tools.fired.items():
                event(f"tool fault {name} x{min(n, 3)}")
            for name in self.agent_run.client.fired:
                event(f"model fault {name}")

    def _watch(self, interrupts: list[Strike], data: st.DataObject | None) -> DriverWatch:
        strikes: list[Strike] = list(interrupts)
        if data is not None:
            changes = data.draw(st.lists(self.changes, max_size=2), label="config changes")
            at = data.draw(st.lists(st.integers(1, 12), min_size=len(changes), max_size=2))
            strikes += [("config", k, c) for k, c in zip(at, changes, strict=False)]
            # what a hook or before_step changes: a compaction requested, or the config
            seams = st.tuples(
                st.sampled_from(["before_step", "hook"]),
                st.integers(1, 6),
                st.one_of(st.just("compact"), self.changes),
            )
            strikes += data.draw(st.lists(seams, max_size=2), label="seam changes")
        self.signal = CancelSignal()
        self.watch = DriverWatch(
            strikes,
            signal=self.signal,
            tolerated=self.tolerated,
            skip=self.skip,
            max_steps=self.max_steps,
        )
        return self.watch

    def _drive(self, watch: DriverWatch, text: str) -> None:
        """Run to the end through crashes (each restored into a fresh body), then check the
        result against the brain."""
        loop = self._body(self.machine)
        self.tool_names = frozenset(loop.registry.names())
        loop = self._watched(watch.install(loop))
        result: RunResult | None = None
        resumes = 0
        first = True
        try:
            while True:
                try:
                    result = run_simulated(loop.run(text if first else None, self.signal))
                    break
                except ProtocolError as exc:
                    # the brain refused what the compactor returned: it propagates, and the
                    # brain is left where it was, nothing lost; the user mends the compactor
                    # and resumes (in a fresh body, as after a crash)
                    self._refused_compaction(loop.machine, exc)
                except BaseException as exc:  # a Crash, possibly wrapped in a group by tools
                    broken = unwrap(exc, Broken)
                    if isinstance(broken, Broken):
                        raise broken.violation() from None
                    if unwrap(exc, Crash) is None:
                        raise
                first = False
                resumes += 1
                assert resumes <= _MAX_RESUMES, "the run keeps crashing or failing: no progress"
                restarted = self._restart(loop, watch)
                if restarted is None:  # struck after the exit door: the run is over
                    break
                loop = self._watched(restarted)
        finally:
            self.dispatched += watch.dispatches
        if result is not None:
            self.machine = loop.machine
        self.runs += 1
        self.last = result
        if result is not None:
            problems = [
                p for p in watch.check_result(result) if inv.problem_code(p) not in self.skip
            ]
            if problems:
                raise inv.InvariantViolation(problems, "the run's result")
            state = self.machine.state
            assert isinstance(state, Terminal) and state.outcome == result.outcome
            event(f"outcome {result.outcome.kind}")
            if isinstance(result.outcome, Completed):
                assert result.final_text == result.outcome.final_text
            if isinstance(result.outcome, Failed):
                assert result.error == result.outcome.error
            raised = self.agent is None and self.compactor.done[-1:] == ["raise"]
            if raised and (result.error is None or result.error.kind != "compaction"):
                # the compactor's last call raised: the run must have failed there, typed
                problem = (
                    f"{inv.InvariantCode.COMPACTION}: the compactor raised, "
                    f"the run ended {result!r}"
                )
                raise inv.InvariantViolation([problem], "the run's result")
        if resumes:
            event("resumed after a crash")

    def _refused_compaction(self, machine: LoopMachine, exc: ProtocolError) -> None:
        """A compaction the brain refused: only a history that separates a call from its
        result may be refused, and the brain still awaits a compaction of what it handed
        over."""
        done = self.compactor.done
        assert self.agent is None and done and done[-1] in REFUSED, (done, exc)
        assert isinstance(machine.state, AwaitingCompaction), machine.state
        assert list(machine.messages()) == self.compactor.handed, "the refusal lost messages"
        event(f"compaction refused: {done[-1]}")

    def _watched(self, loop: BareLoop) -> BareLoop:
        if self.agent_run is not None:
            self.agent_run.loop = loop  # the loop the faults read the policy and timeouts of
        return loop

    def _restart(self, loop: BareLoop, watcher: DriverWatch) -> BareLoop | None:
        """What a restarted process does: restore the saved brain into a fresh body."""
        machine = loop.machine
        if isinstance(machine.state, AwaitingTools) and machine.exchange is not None:
            executions = self.executions
            for call in machine.exchange.dispatch:
                key = self._key(call)
                if key is not None and executions[key]:
                    self.allowed[key] += 1  # it may run again on resume
        if machine.is_terminal and machine.finalized:
            self.machine = machine
            return None
        text = machine.model_dump_json()
        try:
            restored = LoopMachine.model_validate_json(text)
        except ValueError:
            problems = inv.check_resume(machine)
            real = [p for p in problems if inv.problem_code(p) not in self.tolerated]
            assert not real, real
            event("known issue: a terminal machine with calls in flight does not restore")
            restored = machine
        else:
            assert restored == machine and restored.digest() == machine.digest()
        self.machine = restored
        return watcher.restarted(self._body(restored))

    @rule()
    def save_and_restore_between_runs(self) -> None:
        if self.machine.is_terminal and not self.machine.finalized:
            return
        self.machine = LoopMachine.model_validate_json(self.machine.model_dump_json())

    @invariant()
    def every_run_ended(self) -> None:
        m = self.machine
        if self.runs:
            assert m.is_terminal and m.finalized, m
        problems = [p for p in inv.check_machine(m) if inv.problem_code(p) not in self.tolerated]
        assert not problems, problems

    @invariant()
    def no_tool_call_ran_twice_except_after_a_crash(self) -> None:
        for key, times in self.executions.items():
            assert times <= 1 + self.allowed[key], (key, times, self.allowed[key])

    @invariant()
    def every_answered_call_ran(self) -> None:
        """The lower bound: a call answered in the conversation was dispatched (and, in the
        built-in world, whose calls are never denied and always valid, executed)."""
        for message in self.machine.messages():
            for result in message.tool_results:
                if self.agent is None and result.name == "work" and result.call_id[1:].isdigit():
                    n = int(result.call_id[1:])
                    assert self.executions[n] >= 1, f"call {result.call_id} answered, never run"
                elif self.agent is not None and result.name in self.tool_names:
                    assert self.dispatched[result.call_id] >= 1, (
                        f"call {result.call_id} answered, never dispatched"
                    )


TestDriver = DriverMachine.TestCase
