"""``BareLoop``: the hands. Asks the brain, does what it says, reports back.

    while True:
        step = machine.next_step(policy)      # policy from the configs, kept while unchanged
        CallLLM   -> model call (middleware, stream, retries)   -> model_response / fail
        CallTools -> tool waves (hooks, middleware, timeouts)   -> tool_results
        Compact   -> the compactor                              -> compaction_result / _noop
        Done      -> leave the loop
    finalize()                                # the one exit door: commit or discard pending

The driver never decides turn order, compaction timing or termination; it only reports. Every feed
goes through ``_feed``, which tells the observers, so a trace holds every (step, feed) pair. Cancel
is honoured between steps and, since the signal cancels the run's task, inside model streams, tool
waves and retry sleeps. ``before_step`` (``loopctl.driver.control``) is the seam for run-level
events from outside the world (a cancel, an injected message, a crash) at a step boundary.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

from loopctl.api import ApiClient, ApiError, StreamEvent, Usage
from loopctl.core import (
    AcceptInput,
    CallLLM,
    CallTools,
    Cancel,
    CommitPending,
    Compact,
    CompactionNoop,
    CompactionResult,
    CompactReason,
    Completed,
    DiscardPending,
    Done,
    Fail,
    Failed,
    Feed,
    Inject,
    LoopError,
    LoopMachine,
    MachinePolicy,
    Message,
    ModelResponse,
    SetContextTokens,
    Terminal,
    ToolResult,
    ToolResults,
)
from loopctl.driver.cancel import CancelFired, CancelGuard, CancelSignal
from loopctl.driver.compaction import ContextCompactor, MiddleOutCompactor
from loopctl.driver.config import RunConfig, SessionConfig, build_policy
from loopctl.driver.control import BeforeStep, StepPoint
from loopctl.driver.estimate import CharEstimator, TokenEstimator
from loopctl.driver.model import ModelCaller, ModelMiddleware, Sleep, model_request
from loopctl.driver.reflect import NoReflector, ReflectionContext, Reflector
from loopctl.driver.result import Hooks, RunResult
from loopctl.observe import IO_REPORTER, IoEvent, LoopObserver, io_event
from loopctl.tools import Dispatcher, Tool, ToolMiddleware, ToolRegistry


class BareLoop:
    """The driver. See the module docstring."""

    def __init__(
        self,
        client: ApiClient,
        tools: Sequence[Tool[..., Any]] | ToolRegistry = (),
        config: RunConfig | None = None,
        session: SessionConfig | None = None,
        *,
        compactor: ContextCompactor | None = None,
        hooks: Hooks | None = None,
        middleware: Sequence[ToolMiddleware] = (),
        model_middleware: Sequence[ModelMiddleware] = (),
        observers: Sequence[LoopObserver] = (),
        reflector: Reflector | None = None,
        estimator: TokenEstimator | None = None,
        sleep: Sleep | None = None,
        rng: Callable[[], float] | None = None,
        on_stream: Callable[[StreamEvent], None] | None = None,
        before_step: BeforeStep | None = None,
        machine: LoopMachine | None = None,
    ) -> None:
        # What ``replace`` builds a copy from, as given, besides the settings kept as attributes.
        self._arguments: dict[str, Any] = {
            "client": client,
            "model_middleware": model_middleware,
            "sleep": sleep,
            "rng": rng,
            "on_stream": on_stream,
        }
        self.client = client
        self.registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(list(tools))
        self.config = config or RunConfig()
        self.session = session or SessionConfig()
        self.compactor: ContextCompactor = compactor or MiddleOutCompactor()
        self.hooks = hooks or Hooks()
        self.middleware = tuple(middleware)
        self.reflector: Reflector = reflector or NoReflector()
        self.estimator: TokenEstimator = estimator or CharEstimator()
        self.before_step = before_step
        self._machine = machine if machine is not None else LoopMachine()
        self._compact_requested = False
        self._guard: CancelGuard | None = None
        self._policy_cache: tuple[tuple[object, ...], MachinePolicy] | None = None
        self._dispatcher_cache: tuple[tuple[Any, ...], Dispatcher] | None = None
        # One list, shared with the model caller, which reports to it (see ModelCaller).
        self._observers: list[LoopObserver] = list(observers)
        self._model = ModelCaller(
            client,
            model_middleware,
            sleep or asyncio.sleep,
            rng or random.random,
            self._observers,
            on_stream,
        )
        # Tell every observer of an IO event: the model caller's own telling, not a second copy.
        self._emit: Callable[[IoEvent], None] = self._model.emit

    @property
    def observers(self) -> list[LoopObserver]:
        """The observers, called in this order (one list, shared with the model caller)."""
        return self._observers

    @observers.setter
    def observers(self, observers: Sequence[LoopObserver]) -> None:
        self._observers[:] = list(observers)

    @property
    def machine(self) -> LoopMachine:
        return self._machine

    @property
    def sleep(self) -> Sleep:
        """What the loop waits with before a retry (``asyncio.sleep`` unless given)."""
        return self._model.sleep

    def into_machine(self) -> LoopMachine:
        """Take the brain out (to save it); this loop is left with a fresh one."""
        machine, self._machine = self._machine, LoopMachine()
        return machine

    @classmethod
    def from_machine(
        cls,
        machine: LoopMachine,
        client: ApiClient,
        tools: Sequence[Tool[..., Any]] | ToolRegistry = (),
        config: RunConfig | None = None,
        **kwargs: Any,
    ) -> Self:
        """Put a brain into a fresh body; a mid-run brain resumes with ``run()`` (no input)."""
        return cls(client, tools, config, machine=machine, **kwargs)

    def replace(self, **changes: Any) -> BareLoop:
        """A new loop built with this one's current settings, ``changes`` applied: the seam a
        harness uses on a user's loop (``loop.replace(client=replayer, observers=[...])``).
        The brain is carried over (the same object) unless ``machine=`` is given."""
        arguments = {
            **self._arguments,
            "tools": self.registry,
            "config": self.config,
            "session": self.session,
            "compactor": self.compactor,
            "hooks": self.hooks,
            "middleware": self.middleware,
            "observers": list(self._observers),
            "reflector": self.reflector,
            "estimator": self.estimator,
            "before_step": self.before_step,
            "machine": self._machine,
            **changes,
        }
        return BareLoop(**arguments)

    def request_compaction(self) -> None:
        """Ask for a manual compaction before the next model call."""
        self._compact_requested = True

    def policy(self) -> MachinePolicy:
        """The brain's settings for the next step: rebuilt when a (frozen) config, the
        registry or a compaction request changed, else reused, not validated again."""
        key = (self.session, self.config, self.registry, self._compact_requested)
        cached = self._policy_cache
        if cached is not None and cached[0] == key:  # the same objects (or equal configs)
            return cached[1]
        policy = build_policy(
            self.session,
            self.config,
            tools=self.registry.names(),
            compact_now=self._compact_requested,
        )
        self._policy_cache = (key, policy)
        return policy

    def run_sync(
        self, input: str | Message | None = None, cancel: CancelSignal | None = None
    ) -> RunResult:
        """``run`` for scripts without an event loop."""
        return asyncio.run(self.run(input, cancel))

    async def run(
        self, input: str | Message | None = None, cancel: CancelSignal | None = None
    ) -> RunResult:
        """Run until the brain says ``Done``. ``input=None`` resumes a brain saved mid-run."""
        cancel = cancel or CancelSignal()
        machine = self._machine
        if machine.is_terminal and machine.finalized:
            machine = self._machine = machine.next_run()
        resuming = machine.started
        if resuming and input is not None:
            raise ValueError("this loop holds a run under way; call run() without input to resume")
        if not resuming and input is None:
            raise ValueError("run() needs an input to start a run")
        self._usages: list[Usage] = []
        self._carried: list[Message] = []
        for observer in self._observers:
            observer.run_started(machine, input)
        task = asyncio.current_task()
        assert task is not None
        guard = self._guard = CancelGuard(task, asyncio.get_running_loop())
        unsubscribe = cancel.subscribe(guard.schedule)
        try:
            # Tool sources report their own IO (MCP sessions) while the run is under way. A
            # ContextVar bound and reset here, not a context manager: 12,600 -> 2,300
            # instructions a run (cachegrind).
            reporter = IO_REPORTER.set(self._emit)
            try:
                for event in self.registry.announcements():
                    self._emit(event)
                if input is not None:
                    message = Message.user(input) if isinstance(input, str) else input
                    self._feed(AcceptInput(message))
                await self._steps(cancel)
            finally:
                IO_REPORTER.reset(reporter)
        except Exception as exc:  # how the run ended: the observers are told, then it propagates
            for observer in self._observers:  # (one written before run_raised lacks it)
                getattr(observer, "run_raised", _ignore)(self._machine, exc)
            raise
        finally:
            unsubscribe()
            guard.close()
            self._guard = None
        return self._finalize()

    async def _steps(self, cancel: CancelSignal) -> None:
        """Ask, do, report, until the brain says ``Done``."""
        point = StepPoint(self)
        while True:
            if cancel.cancelled and not self._machine.is_terminal:
                self._emit(IoEvent(kind="cancel"))
                self._feed(Cancel())
            if self.before_step is not None:
                self.before_step(point)
            policy = self.policy()
            step = self._machine.next_step(policy)
            for observer in self._observers:
                observer.step(policy, step, self._machine)
            try:
                match step:
                    case CallLLM():
                        await self._call_llm(step, policy, cancel)
                    case CallTools():
                        await self._call_tools(step, policy, cancel)
                    case Compact():
                        await self._compact(step, cancel)
                    case Done():
                        break
            except (CancelFired, asyncio.CancelledError) as exc:
                # A wait on the world cut off by the cancel signal (``CancelGuard`` cancels the
                # run's own task; its flag tells that from an outside cancel, which propagates).
                guard = self._guard
                if isinstance(exc, asyncio.CancelledError) and not (guard and guard.fired):
                    raise
                self._emit(IoEvent(kind="cancel"))
                self._feed(Cancel())

    async def _call_llm(self, step: CallLLM, policy: MachinePolicy, cancel: CancelSignal) -> None:
        machine = self._machine
        request = model_request(machine, self.registry, self.session, step.turn)
        if self._observers:
            # The request itself, for observers to read what they need (a trace recorder keeps
            # its context and a digest); who it goes to, as far as the client says.
            client = self.client
            self._emit(
                io_event(
                    "model_request",
                    step.turn,
                    {
                        "request": request,
                        "model": _named(getattr(client, "model", None)),
                        "provider": _named(getattr(client, "provider", None)),
                        "n_messages": len(request.messages),
                        "tools": [t.name for t in request.tools],
                    },
                )
            )
        try:
            if cancel.cancelled:
                raise CancelFired
            reply = await self._model.call(request, self.config.retry)
        except ApiError as exc:
            if exc.error.kind == "context_overflow":
                # Withdraw the call: the brain turns an over-the-line count into Compact(EMERGENCY).
                line = policy.emergency_tokens
                reported = exc.error.details.get("prompt_tokens")
                n = max(line, reported if isinstance(reported, int) else 0)
                self._feed(SetContextTokens(n))
                return
            self._feed(Fail(exc.error))
            return
        usage, message = reply.usage, reply.message
        self._usages.append(usage)  # added up once, at the end
        tokens = usage.context_tokens
        if tokens is None:
            tokens = machine.context_tokens + self.estimator.count([message])
        self._feed(ModelResponse(message, tokens))
        reflecting = not isinstance(self.reflector, NoReflector)
        if reflecting and machine.state.kind == "start" and message.tool_calls:
            # Every call was unknown: the brain answered them all itself.
            answered = machine.conversation()[-1].tool_results
            await self._maybe_reflect(step.turn, answered, policy, cancel)

    async def _call_tools(
        self, step: CallTools, policy: MachinePolicy, cancel: CancelSignal
    ) -> None:
        # Without a reflector nothing would be said: no verdict, no answered calls gathered.
        reflecting = not isinstance(self.reflector, NoReflector)
        exchange = self._machine.exchange if reflecting else None  # gone after the feed
        dispatcher = self._dispatcher()
        if cancel.cancelled:
            raise CancelFired
        on_event = self._emit if self._observers else None
        results = await dispatcher.run(step.calls, on_event=on_event, turn=step.turn)
        message = Message.from_results(results)  # ToolResult objects: not validated again
        # The results and the context's size after them in one feed (the brain keeps the count
        # as it is until then, so counting first gives the number a feed after them would).
        tokens = self._machine.context_tokens + self.estimator.count([message])
        self._feed(ToolResults(message, tokens))
        if reflecting:
            preanswered = exchange.preanswered if exchange is not None else ()
            await self._maybe_reflect(step.turn, (*results, *preanswered), policy, cancel)

    def _dispatcher(self) -> Dispatcher:
        """The tool pipeline, bound again only when one of its inputs changed."""
        hooks = self.hooks
        key = (
            self.registry,
            tuple(hooks.pre_tool),
            tuple(hooks.post_tool),
            self.middleware,
            self.config.tool_timeout,
        )
        cached = self._dispatcher_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        dispatcher = Dispatcher(
            self.registry, hooks.pre_tool, hooks.post_tool, self.middleware, key[-1]
        )
        self._dispatcher_cache = (key, dispatcher)
        return dispatcher

    async def _maybe_reflect(
        self,
        turn: int,
        answered: Sequence[ToolResult],
        policy: MachinePolicy,
        cancel: CancelSignal,
    ) -> None:
        """After an exchange: consult the reflector (not a ``NoReflector``) on tool errors or a
        coming loop warning."""
        verdict = self._machine.loop_verdict(policy)
        if verdict is None and not any(r.is_error for r in answered):
            return
        context = ReflectionContext(
            turn=turn,
            errors=tuple(r for r in answered if r.is_error),
            loop=verdict,
            messages=self._machine.conversation(),
        )
        if cancel.cancelled:
            raise CancelFired
        note = await self.reflector.reflect(context)
        if note is not None:
            self._emit(IoEvent(kind="reflection", turn=turn, data={"text": note.text}))
            self._feed(Inject(note))

    async def _compact(self, step: Compact, cancel: CancelSignal) -> None:
        if step.reason is CompactReason.MANUAL:
            self._compact_requested = False
        machine = self._machine
        before = machine.context_tokens
        messages = machine.messages()
        started = time.perf_counter()
        if cancel.cancelled:
            raise CancelFired
        try:
            compacted = await self.compactor.compact(messages, step.reason)
        except (CancelFired, asyncio.CancelledError):
            raise
        except Exception as exc:
            error = LoopError(
                kind="compaction", message=f"the compactor failed: {type(exc).__name__}: {exc}"
            )
            self._feed(Fail(error))
            return
        duration = time.perf_counter() - started
        if compacted is not None and len(compacted) >= len(messages):
            # Nothing was cut: treat it as a no-op, or a compactor that returns its input would
            # be asked again and again.
            compacted = None
        data = {"reason": step.reason.value, "noop": compacted is None, "before": before}
        if compacted is None:
            self._emit(IoEvent(kind="compaction", data=data, duration_s=duration))
            self._feed(CompactionNoop(before, before))
            return
        after = self.estimator.count(compacted)
        data.update(after=after, messages_before=len(messages), messages_after=len(compacted))
        self._emit(IoEvent(kind="compaction", data=data, duration_s=duration))
        self._carried.extend(machine.pending)
        self._feed(CompactionResult(compacted, before, after))

    def _feed(self, feed: Feed) -> None:
        machine = self._machine
        machine.feed(feed)
        if self._observers:
            name, args = feed.name, feed.args()
            for observer in self._observers:
                observer.feed(name, args, machine)

    def _finalize(self) -> RunResult:
        """The one exit door: commit on success, salvage and discard otherwise."""
        machine = self._machine
        state = machine.state
        assert isinstance(state, Terminal)
        outcome = state.outcome
        messages = (*self._carried, *machine.pending)
        if isinstance(outcome, Completed):
            self._feed(CommitPending())
        else:
            self._feed(DiscardPending())
        for observer in self._observers:
            observer.run_ended(machine)
        return RunResult(
            outcome=outcome,
            final_text=outcome.final_text if isinstance(outcome, Completed) else None,
            messages=messages,
            turns=machine.turns_taken,
            usage=Usage.total(self._usages),
            error=outcome.error if isinstance(outcome, Failed) else None,
        )


def _ignore(*args: object) -> None:
    """What an observer without a hook does."""


def _named(value: object) -> str | None:
    """A client's ``model`` or ``provider`` when it is a name (a string), else None."""
    return value if isinstance(value, str) else None
