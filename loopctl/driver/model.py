"""Calling the model: middleware chain, streaming fold, retries with backoff, cancel.

Each attempt goes through the model middleware (outermost first) to the client's stream, folded
into one message (or the client's whole reply when nobody watches the stream). A retryable
``ApiError`` is retried after ``retry_delay`` (sleep and the random draw injected: a simulation
stays deterministic). Every failed attempt is told to the stream's watcher as
``AttemptAbandoned``, with the text it streamed, which would otherwise run into the next
attempt's. A body that could not be parsed (``details["parse"]``) is retried, since the next
reply may differ, but is fatal once it fails the same way twice in a row.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from loopctl.api import (
    ApiClient,
    ApiError,
    AttemptAbandoned,
    ModelReply,
    ModelRequest,
    StreamEvent,
    WholeReply,
    fold_events,
    whole_reply_of,
)
from loopctl.core import LoopError, LoopMachine, Message
from loopctl.core.values import parts_problem
from loopctl.driver.config import RetryConfig, SessionConfig
from loopctl.driver.retry import retry_delay
from loopctl.observe import IoEvent, LoopObserver, io_event
from loopctl.tools import ToolRegistry

CallNext = Callable[[ModelRequest], Awaitable[ModelReply]]
ModelMiddleware = Callable[[ModelRequest, CallNext], Awaitable[ModelReply]]
Sleep = Callable[[float], Awaitable[None]]


def model_request(
    machine: LoopMachine, registry: ToolRegistry, session: SessionConfig, turn: int
) -> ModelRequest:
    """The model request for ``turn``: the brain's conversation as a view (O(1), not a copy),
    the registry's specs, the session's system prompt and options (validated into a copy), the
    brain's turn number. Fields at their default are left out and the model's validator is
    called without its ``__init__`` wrapper: 25,400 -> 18,500 instructions a request
    (cachegrind)."""
    fields = {"messages": machine.conversation(), "tools": registry.specs(), "turn": turn}
    if session.system_prompt is not None:
        fields["system"] = session.system_prompt
    if session.options:
        fields["options"] = session.options
    request: ModelRequest = _validate_request(fields)
    return request


_validate_request: Final = ModelRequest.__pydantic_validator__.validate_python


def check_call_ids(message: Message) -> None:
    """Providers guarantee unique, non-empty call ids; anything else is a retryable error."""
    ids = [p.id for p in message.parts if p.kind == "tool_call"]
    if "" in ids or len(set(ids)) != len(ids):
        raise ApiError(
            LoopError(
                kind="provider",
                message=f"the model returned empty or duplicate tool call ids: {ids}",
                retryable=True,
            )
        )


def check_reply(message: Message) -> None:
    """What the brain's ``model_response`` would refuse, as the run's error, for a reply a
    model middleware handed back (it did not come through the fold's door)."""
    if message.role != "assistant" or message.tool_results:
        raise ApiError(
            LoopError(
                kind="provider",
                message="a model middleware returned a reply that is not an assistant message "
                "without tool results",
            )
        )
    problem = parts_problem(message.parts)
    if problem is not None:
        raise ApiError(LoopError(kind="provider", message=f"the model's reply: {problem}"))
    check_call_ids(message)


class ModelCaller:
    """One model call with middleware, streaming and retries; reports IO events to
    ``observers``, the loop's own list: nothing here refers back to the loop, whose reference
    cycle kept every finished run in memory until the cyclic collector, whose passes were 5% of
    a simulated run (cachegrind, ``benchmarks.bench_fuzz_driver``)."""

    def __init__(
        self,
        client: ApiClient,
        middleware: Sequence[ModelMiddleware],
        sleep: Sleep,
        draw: Callable[[], float],
        observers: list[LoopObserver],
        on_stream: Callable[[StreamEvent], None] | None = None,
    ) -> None:
        self.client = client
        self.middleware = tuple(middleware)
        self.sleep = sleep
        self.draw = draw
        self.observers = observers
        self.on_stream = on_stream
        self._whole: tuple[object, WholeReply | None] = (None, None)  # client -> its whole_reply
        # What the watcher was shown of the attempt under way, for its AttemptAbandoned.
        self._streamed: list[StreamEvent] = []

    def emit(self, event: IoEvent) -> None:
        """Tell every observer of ``event``."""
        for observer in self.observers:
            observer.io(event)

    async def _stream(self, request: ModelRequest) -> ModelReply:
        """One attempt: the client's stream, folded, or its whole reply (``WholeReplyClient``)
        when nobody watches the stream; the door's checks run either way."""
        on_stream = self.on_stream
        whole = None
        if on_stream is None:
            client, whole = self._whole
            if client is not self.client:  # looked up once per client (a walk of its bases)
                self._whole = (self.client, whole := whole_reply_of(self.client))
        events: list[StreamEvent] = []
        try:
            if whole is not None:
                reply: ModelReply = await whole(request)
            else:
                async for event in self.client.stream(request):
                    events.append(event)
                    if on_stream is not None:
                        self._streamed.append(event)
                        on_stream(event)
        except (ApiError, GeneratorExit):
            raise
        except Exception as exc:  # a client bug or an unclassified transport failure
            raise ApiError(
                LoopError(
                    kind="provider",
                    message=f"the model stream broke: {type(exc).__name__}: {exc}",
                    retryable=False,
                )
            ) from exc
        if whole is None:
            reply = fold_events(events)
        check_call_ids(reply.message)
        return reply

    def _abandoned(self, attempt: int, error: LoopError, delay: float | None) -> None:
        """Tell the stream's watcher that what this attempt streamed (its text, its count of
        events) is not the reply: it cannot tell where the attempt began."""
        if self.on_stream is not None:
            streamed, self._streamed = self._streamed, []
            text = "".join([e.text for e in streamed if e.kind == "text_delta"])
            self.on_stream(
                AttemptAbandoned(
                    attempt=attempt + 1,
                    error=error.kind,
                    message=error.message,
                    retry_in=delay,
                    text=text,
                    events=len(streamed),
                )
            )

    def _chain(self) -> CallNext:
        call: CallNext = self._stream
        for middleware in reversed(self.middleware):
            call = _bind(middleware, call)
        return call

    async def call(self, request: ModelRequest, retry: RetryConfig) -> ModelReply:
        """The reply, or the last ``ApiError`` once retries are exhausted or the error is fatal."""
        chain = self._chain() if self.middleware else self._stream
        attempt = 0
        last_parse_failure: str | None = None
        while True:
            started = time.perf_counter()
            if self._streamed:
                self._streamed = []  # an earlier call's, answered: not this attempt's
            try:
                reply = await chain(request)
                if self.middleware:  # the reply may not be the fold's
                    check_reply(reply.message)
            except ApiError as exc:
                elapsed = time.perf_counter() - started
                self.emit(
                    IoEvent(
                        kind="model_error",
                        turn=request.turn,
                        data={"attempt": attempt, "error": exc.error.model_dump(mode="json")},
                        duration_s=elapsed,
                    )
                )
                failure = exc.error.message if (exc.error.details or {}).get("parse") else None
                delay = retry_delay(exc, attempt, retry, self.draw())
                repeats = delay is None or failure == last_parse_failure  # it will repeat
                if failure is not None and attempt and repeats:
                    final = _parse_failure_after(exc, attempt + 1)
                    self._abandoned(attempt, final.error, None)
                    raise final from exc
                last_parse_failure = failure
                self._abandoned(attempt, exc.error, delay)
                if delay is None:
                    raise
                self.emit(
                    IoEvent(
                        kind="retry",
                        turn=request.turn,
                        data={"attempt": attempt + 1, "delay_s": delay, "kind": exc.error.kind},
                    )
                )
                await self.sleep(delay)
                attempt += 1
                continue
            except asyncio.CancelledError:  # the run's cancel signal: nothing is the reply
                self._abandoned(attempt, _CANCELLED, None)
                raise
            except Exception as exc:  # a middleware's own bug, on its way out of the run
                self._abandoned(attempt, LoopError(kind="internal", message=repr(exc)), None)
                raise
            if self.observers:  # the data costs a dump of the reply: only if someone watches
                message, usage = reply.message, reply.usage
                self.emit(
                    io_event(
                        "model_reply",
                        request.turn,
                        {
                            "message": message.model_dump(mode="json"),
                            "usage": usage.__pydantic_serializer__.to_python(usage, mode="json"),
                            "stop_reason": reply.stop_reason,
                            "attempts": attempt + 1,
                        },
                        time.perf_counter() - started,
                    )
                )
            return reply


#: What ``AttemptAbandoned`` says of an attempt cut off by a cancel.
_CANCELLED: Final = LoopError(kind="cancelled_io", message="the model call was cancelled")


def _parse_failure_after(exc: ApiError, attempts: int) -> ApiError:
    """The final error of a body that could not be parsed, ``attempts`` times: not retried."""
    error = exc.error
    return ApiError(
        LoopError(
            kind=error.kind,
            message=f"{error.message} (after {attempts} attempts; not retried again)",
            retryable=False,
            status=error.status,
            details={**(error.details or {}), "attempts": attempts},
        )
    )


def _bind(middleware: ModelMiddleware, call_next: CallNext) -> CallNext:
    async def bound(request: ModelRequest) -> ModelReply:
        return await middleware(request, call_next)

    return bound
