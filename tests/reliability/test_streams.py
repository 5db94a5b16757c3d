"""Text streamed by a failed attempt is never taken back silently: the driver tells ``on_stream``
that the attempt was abandoned (``AttemptAbandoned``), so a watcher can clear it, and the
``loopctl`` CLI shows a retry as a retry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from loopctl import BareLoop, LoopError, RunConfig
from loopctl.api import (
    ApiError,
    AttemptAbandoned,
    ModelRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    fold_events,
)
from loopctl.driver import RetryConfig


class DropsFirstStream:
    """Attempt 1 streams some text, then the connection drops; attempt 2 answers."""

    def __init__(self, failures: int = 1, retryable: bool = True) -> None:
        self.failures = failures
        self.retryable = retryable
        self.attempts = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.attempts += 1
        if self.attempts <= self.failures:
            yield TextDelta(text="Hel")
            yield TextDelta(text="partial ")
            raise ApiError(
                LoopError(kind="network", message="connection reset", retryable=self.retryable)
            )
        yield TextDelta(text="The answer is 42.")
        yield StopEvent(reason="end_turn")


async def no_sleep(seconds: float) -> None:
    return None


def run(client: DropsFirstStream, max_retries: int = 2) -> tuple[list[StreamEvent], object]:
    seen: list[StreamEvent] = []
    config = RunConfig(retry=RetryConfig(max_retries=max_retries))
    loop = BareLoop(client, config=config, on_stream=seen.append, sleep=no_sleep)
    result = asyncio.run(loop.run("what is the answer?"))
    return seen, result


class Screen:
    """A watcher that clears an abandoned attempt's text: what a UI would show."""

    def __init__(self) -> None:
        self.shown = ""
        self.attempt_start = 0

    def __call__(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.shown += event.text
        elif isinstance(event, AttemptAbandoned):
            self.shown = self.shown[: self.attempt_start]
        elif isinstance(event, StopEvent):
            self.attempt_start = len(self.shown)


def test_a_dropped_stream_is_abandoned_before_the_retry_streams() -> None:
    seen, result = run(DropsFirstStream())
    assert result.final_text == "The answer is 42."  # type: ignore[attr-defined]
    kinds = [e.kind for e in seen]
    assert kinds == ["text_delta", "text_delta", "attempt_abandoned", "text_delta", "stop"]
    abandoned = seen[2]
    assert isinstance(abandoned, AttemptAbandoned)
    assert abandoned.attempt == 1 and abandoned.error == "network"
    assert abandoned.message == "connection reset"
    assert abandoned.retry_in is not None and abandoned.retry_in >= 0


def test_a_watcher_that_clears_abandoned_attempts_shows_only_the_reply() -> None:
    screen = Screen()
    config = RunConfig(retry=RetryConfig(max_retries=3))
    loop = BareLoop(DropsFirstStream(failures=2), config=config, on_stream=screen, sleep=no_sleep)
    asyncio.run(loop.run("q"))
    assert screen.shown == "The answer is 42."


def test_the_last_failed_attempt_is_abandoned_with_no_retry() -> None:
    seen, result = run(DropsFirstStream(failures=5), max_retries=1)
    abandoned = [e for e in seen if isinstance(e, AttemptAbandoned)]
    assert [a.attempt for a in abandoned] == [1, 2]
    assert abandoned[0].retry_in is not None and abandoned[-1].retry_in is None
    assert result.error is not None  # type: ignore[attr-defined]


def test_a_fatal_error_is_abandoned_at_once() -> None:
    seen, _ = run(DropsFirstStream(retryable=False))
    [abandoned] = [e for e in seen if isinstance(e, AttemptAbandoned)]
    assert abandoned.attempt == 1 and abandoned.retry_in is None


def test_the_fold_ignores_the_event() -> None:
    events: list[StreamEvent] = [
        TextDelta(text="a"),
        AttemptAbandoned(attempt=1, error="network"),
        TextDelta(text="b"),
    ]
    assert fold_events(events).message.text == "ab"
