"""``dispatch``: run one exchange's tool calls and answer every one of them.

Waves (``plan_waves``, pure): consecutive parallel-safe calls share a wave and run concurrently;
a call whose tool is not parallel-safe is a wave of its own, so it sees the effects of every call
before it and none after it. Results come back in call order, whatever order calls finish in.

Per call: pre-tool hooks -> middleware around (argument validation -> execution under the tool's
timeout, else ``default_timeout``; none for an ``inline`` tool) -> post-tool hooks. A name
missing from the registry is answered at once, without hooks. Hooks run in list order. A
pre-tool hook answers ``Allow()`` (or None), ``Deny(reason)`` (the first one stops the call; the
model gets the reason) or ``Replace(arguments)`` (what later hooks and the tool see). Middleware
is ``async def mw(call, next) -> ToolResult``, the first in the list outermost; ``next`` never
raises, so middleware can retry, cache, time or rewrite. A post-tool hook sees the call and the
result so far and may return a rewritten ``ToolResult`` (None keeps it). Hooks may be sync
(they run on the event loop: keep them quick) or async.

The brain needs one result per call and a tool must never crash the run, so whatever goes wrong
(an exception in a tool, a hook or a middleware; a timeout; invalid arguments; a denial; an
unknown name) becomes ``ToolResult(is_error=True)`` with a message written for the model; only a
cancel of the task running ``dispatch`` propagates (after every running tool task is cancelled).

``on_event`` gets ``tool_call`` events (the model's arguments, even if a hook replaced them) when
a wave starts and ``tool_result`` events with durations when it ends, both in call order, so
traces are identical from run to run; a cancelled wave reports no results. Each exception out of
a tool, hook or middleware is logged to ``loopctl.tools`` and handed, as the object, to the
call's ``tool_result`` event (``IoEvent.raised``) for a harness to judge.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from loopctl.core import ToolCall, ToolResult, not_available
from loopctl.observe import IoEvent, io_event
from loopctl.tools.decorator import ToolArgumentsError, ToolError, encode_result
from loopctl.tools.registry import ToolRegistry

__all__ = ["Dispatcher", "dispatch", "plan_waves"]

logger = logging.getLogger("loopctl.tools")


@dataclass(frozen=True, slots=True)
class Allow:
    """Let the call go ahead unchanged."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call; ``reason`` is told to the model."""

    reason: str


@dataclass(frozen=True, slots=True)
class Replace:
    """Run the call with these arguments instead of the model's."""

    arguments: dict[str, Any] = field(default_factory=dict)


PreToolDecision: TypeAlias = Allow | Deny | Replace | None
PreToolHook: TypeAlias = Callable[[ToolCall], PreToolDecision | Awaitable[PreToolDecision]]
PostToolHook: TypeAlias = Callable[
    [ToolCall, ToolResult], ToolResult | Awaitable[ToolResult | None] | None
]
NextTool: TypeAlias = Callable[[ToolCall], Awaitable[ToolResult]]
ToolMiddleware: TypeAlias = Callable[[ToolCall, NextTool], Awaitable[ToolResult]]

OnEvent = Callable[["IoEvent"], None]
Raised = tuple[str, str, Exception]

#: The exceptions turned into error results for the call under way: ``Dispatcher._timed`` binds a
#: list per call, ``_failed`` adds to it, the call's ``tool_result`` event carries it.
_RAISED: ContextVar[list[Raised] | None] = ContextVar("loopctl_tool_raised", default=None)


def plan_waves(calls: Sequence[ToolCall], registry: ToolRegistry) -> list[tuple[int, ...]]:
    """Indices of ``calls`` grouped into waves of consecutive indices, in order. A name missing
    from the registry counts as parallel-safe: it runs nothing, so it conflicts with nothing."""
    waves: list[tuple[int, ...]] = []
    current: list[int] = []
    for index, call in enumerate(calls):
        found = registry.get(call.name)
        if found is None or found.parallel_safe:
            current.append(index)
            continue
        if current:
            waves.append(tuple(current))
            current = []
        waves.append((index,))
    if current:
        waves.append(tuple(current))
    return waves


async def dispatch(
    calls: Sequence[ToolCall],
    registry: ToolRegistry,
    *,
    pre_hooks: Sequence[PreToolHook] = (),
    post_hooks: Sequence[PostToolHook] = (),
    middleware: Sequence[ToolMiddleware] = (),
    default_timeout: float | None = None,
    on_event: OnEvent | None = None,
    turn: int | None = None,
    max_concurrency: int | None = None,
) -> list[ToolResult]:
    """Run ``calls`` in waves and return one result per call, in call order.

    ``turn`` only labels the emitted events. ``max_concurrency`` caps how many calls of one
    wave run at once (None: no cap); the rest wait their turn in call order.
    """
    return await Dispatcher(registry, pre_hooks, post_hooks, middleware, default_timeout).run(
        calls, on_event=on_event, turn=turn, max_concurrency=max_concurrency
    )


class Dispatcher:
    """``dispatch`` with its registry, hooks, middleware and default timeout bound once.

    A loop dispatches every exchange with the same ones, so ``BareLoop`` keeps one of these
    instead of binding the pipeline (the middleware chain) again for every exchange: 6,000
    instructions an exchange (cachegrind). ``run`` is ``dispatch`` for one exchange.
    """

    def __init__(
        self,
        registry: ToolRegistry,
        pre_hooks: Sequence[PreToolHook] = (),
        post_hooks: Sequence[PostToolHook] = (),
        middleware: Sequence[ToolMiddleware] = (),
        default_timeout: float | None = None,
    ) -> None:
        self.registry = registry
        self.pre_hooks = tuple(pre_hooks)
        self.post_hooks = tuple(post_hooks)
        self.default_timeout = default_timeout
        handler: NextTool = _Executor(registry, default_timeout).execute
        for layer in reversed(tuple(middleware)):
            handler = _wrap(layer, handler)
        self.handler = handler

    async def run(
        self,
        calls: Sequence[ToolCall],
        *,
        on_event: OnEvent | None = None,
        turn: int | None = None,
        max_concurrency: int | None = None,
    ) -> list[ToolResult]:
        """See ``dispatch``."""
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        limit = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None
        # The waves are consecutive runs of the calls, in order (``plan_waves``): their results,
        # appended wave after wave, are in call order. (A dict by index, read back in order at
        # the end, cost a one-call exchange 8,000 instructions more; a turn of bench_driver
        # went 292,895 -> 286,684 without it: cachegrind.)
        results: list[ToolResult] = []
        # one call is one wave, whatever its tool: no plan needed
        waves = plan_waves(calls, self.registry) if len(calls) > 1 else [(0,)] if calls else []
        for wave in waves:
            if on_event is not None:
                for index in wave:
                    call = calls[index]
                    asked = {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}
                    on_event(io_event("tool_call", turn, asked))
            if len(wave) == 1:
                # A wave of one needs no task group: run it in this task (cancel still propagates).
                outcomes = [await self._timed(calls[wave[0]], limit)]
            else:
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(self._timed(calls[i], limit)) for i in wave]
                outcomes = [task.result() for task in tasks]
            for result, duration, raised in outcomes:
                results.append(result)
                if on_event is not None:
                    answered = {
                        "id": result.call_id,
                        "name": result.name,
                        "content": result.content,
                        "is_error": result.is_error,
                    }
                    on_event(io_event("tool_result", turn, answered, duration, raised))
        return results

    async def _timed(
        self, call: ToolCall, limit: asyncio.Semaphore | None
    ) -> tuple[ToolResult, float, tuple[Raised, ...]]:
        """The pipeline for one call, with its duration (waiting for a slot not included) and
        the exceptions it turned into error results."""
        raised: list[Raised] = []
        token = _RAISED.set(raised)
        try:
            if limit is None:
                started = time.perf_counter()
                result = await self._call(call)
            else:
                async with limit:
                    started = time.perf_counter()
                    result = await self._call(call)
        finally:
            _RAISED.reset(token)
        return result, time.perf_counter() - started, tuple(raised)

    async def _call(self, call: ToolCall) -> ToolResult:
        if call.name not in self.registry:
            return not_available(call, self.registry.names())  # the brain's own answer
        effective = call
        result: ToolResult | None = None
        name = call.name
        for hook in self.pre_hooks:
            decision, result = await _guarded("pre-tool hook", hook, effective, _call_hook, hook)
            if result is not None:
                break
            if decision is None or isinstance(decision, Allow):
                continue
            if isinstance(decision, Replace):
                effective = effective.model_copy(update={"arguments": dict(decision.arguments)})
                continue
            if isinstance(decision, Deny):
                result = _error(effective, denied_message(name, decision.reason))
            else:
                result = _error(
                    effective,
                    f"tool '{name}' was not run: pre-tool hook {_label(hook)} returned "
                    f"{type(decision).__name__}, expected Allow(), Deny(reason) or "
                    "Replace(arguments)",
                )
            break
        if result is None:
            result = await self.handler(effective)
        for post in self.post_hooks:
            rewritten, failure = await _guarded(
                "post-tool hook", post, effective, _call_hook, post, result
            )
            if failure is not None:
                result = failure
            elif isinstance(rewritten, ToolResult):
                result = rewritten
            elif rewritten is not None:
                result = _error(
                    effective,
                    f"tool '{name}' ran but post-tool hook {_label(post)} returned "
                    f"{type(rewritten).__name__}, expected a ToolResult or None",
                )
        if result.call_id != call.id or result.name != call.name:
            # a hook or middleware built a result for another call: answer the one asked
            result = result.model_copy(update={"call_id": call.id, "name": call.name})
        return result


class _Executor:
    """The innermost step of a pipeline. An object of its own, not a method of ``Dispatcher``:
    a pipeline holding its own bound method as its handler was a reference cycle, which kept
    every finished run in memory until the cyclic garbage collector found it."""

    __slots__ = ("default_timeout", "registry")

    def __init__(self, registry: ToolRegistry, default_timeout: float | None) -> None:
        self.registry = registry
        self.default_timeout = default_timeout

    async def execute(self, call: ToolCall) -> ToolResult:
        found = self.registry.get(call.name)
        if found is None:
            return not_available(call, self.registry.names())  # the brain's own answer
        try:
            validated = found.parse_arguments(call.arguments)
        except ToolArgumentsError as exc:
            return _error(call, str(exc))
        if found.inline:
            limit = None  # it blocks the loop until it returns: no deadline could fire meanwhile
        else:
            limit = found.timeout if found.timeout is not None else self.default_timeout
        deadline: asyncio.Timeout | None = None
        try:
            if limit is None:
                value = await found.execute(validated)
            else:
                # The tool's first step runs before its deadline is armed: a call that returns
                # without waiting on anything could not have been interrupted, and arming a
                # deadline (asyncio.timeout: a timer scheduled, then cancelled) costs 33,000
                # instructions, more than a cheap async tool itself (cachegrind). A call that
                # waits gets its deadline then, counted from its start.
                started = asyncio.get_running_loop().time()
                running = found.execute(validated)
                try:
                    waiting_on = running.send(None)
                except StopIteration as done:
                    value = done.value
                else:
                    async with (deadline := asyncio.timeout_at(started + limit)):
                        value = await _resumed(running, waiting_on)
            return ToolResult.answering(call, encode_result(found.name, value))
        except TimeoutError as exc:
            if deadline is not None and deadline.expired():
                return _error(call, timed_out_message(call.name, limit or 0.0))
            _failed("tool", call.name, exc)
            return _error(call, raised_message(call.name, exc))
        except ToolError as exc:
            return _error(call, str(exc) or f"tool '{call.name}' failed")
        except asyncio.CancelledError:
            if _cancelling():
                raise
            return _error(call, cancelled_message(call.name))
        except Exception as exc:
            _failed("tool", call.name, exc)
            return _error(call, raised_message(call.name, exc))


@types.coroutine
def _resumed(running: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """Go on awaiting ``running``, a coroutine already started and now waiting on
    ``waiting_on``: what ``await running`` does from its first suspension on (the task's
    answers are sent in, its cancels thrown in, the coroutine's value returned)."""
    while True:
        try:
            sent = yield waiting_on
        except GeneratorExit:
            running.close()
            raise
        except BaseException as exc:  # thrown in by the task: a cancel, above all
            try:
                waiting_on = running.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                waiting_on = running.send(sent)
            except StopIteration as done:
                return done.value


def _wrap(layer: ToolMiddleware, inner: NextTool) -> NextTool:
    """One middleware layer whose own failures become error results, so ``next`` never raises."""

    async def handler(call: ToolCall) -> ToolResult:
        result, failure = await _guarded("tool middleware", layer, call, layer, inner)
        if failure is not None:
            return failure
        if not isinstance(result, ToolResult):
            return _error(
                call,
                f"tool '{call.name}' failed: middleware {_label(layer)} returned "
                f"{type(result).__name__}, expected a ToolResult",
            )
        return result

    return handler


# The texts the model reads when a tool call goes wrong: part of the observable behaviour (traces
# record them), so a simulator that fakes tool failures builds identical results from these.


def describe_exception(exc: BaseException) -> str:
    """``ValueError: bad input``, or just ``ValueError`` when the exception has no text."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def timed_out_message(name: str, seconds: float) -> str:
    return f"tool '{name}' timed out after {float(seconds)} s"


def raised_message(name: str, exc: BaseException) -> str:
    return f"tool '{name}' raised {describe_exception(exc)}"


def denied_message(name: str, reason: str) -> str:
    return f"tool '{name}' was denied: {reason}"


def cancelled_message(name: str) -> str:
    """A tool that raised ``CancelledError`` on its own (not a cancel of the run)."""
    return f"tool '{name}' was cancelled"


#: What the model reads when a hook or a middleware fails: (cancelled, raised), by where.
_FAILURES: Final = {
    "pre-tool hook": (
        "tool '{name}' was cancelled by a pre-tool hook",
        "tool '{name}' was not run: pre-tool hook {label} raised {error}",
    ),
    "post-tool hook": (
        "tool '{name}': a post-tool hook was cancelled",
        "tool '{name}' ran but post-tool hook {label} raised {error}",
    ),
    "tool middleware": (
        "tool '{name}' was cancelled by middleware {label}",
        "tool '{name}' failed in middleware {label}: {error}",
    ),
}


async def _guarded(
    where: str, hook: Any, call: ToolCall, run: Callable[..., Awaitable[Any]], *args: Any
) -> tuple[Any, ToolResult | None]:
    """What ``run(call, *args)`` (a call of ``hook``) gives, and None; or its failure as the
    error result for ``call`` (``_FAILURES``). A cancel of this task propagates."""
    cancelled, raised = _FAILURES[where]
    try:
        return await run(call, *args), None
    except asyncio.CancelledError:
        if _cancelling():
            raise
        return None, _error(call, cancelled.format(name=call.name, label=_label(hook)))
    except Exception as exc:
        _failed(where, _label(hook), exc)
        error = describe_exception(exc)
        return None, _error(call, raised.format(name=call.name, label=_label(hook), error=error))


def _failed(where: str, name: str, exc: Exception) -> None:
    """Log ``exc``, turned into an error result, and keep it for the call's event."""
    logger.warning("%s %s failed", where, name, exc_info=exc)
    raised = _RAISED.get()
    if raised is not None:
        raised.append((where, name, exc))


def _cancelling() -> bool:
    """Whether this task is really being cancelled (then ``CancelledError`` must propagate);
    a tool may raise ``CancelledError`` on its own (a future someone else cancelled): that is
    the tool's failure, reported like any other."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


async def _call_hook(call: ToolCall, hook: Callable[..., Any], *args: Any) -> Any:
    """A hook's answer for ``call``, awaited when it is async."""
    value = hook(call, *args)
    return await value if inspect.isawaitable(value) else value


def _error(call: ToolCall, message: str) -> ToolResult:
    return ToolResult.answering(call, message, is_error=True)


def _label(obj: object) -> str:
    """A hook's name for messages: the function's ``__name__``, else its class's name."""
    name = getattr(obj, "__name__", None)
    return str(name) if name else type(obj).__name__
