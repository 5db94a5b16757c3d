"""A watcher of the stream (``on_stream``) is told of every attempt whose text is not the reply,
and what to take back: ``AttemptAbandoned`` comes after the attempt's last event and before
anything of the next, with the text it streamed. Cases: text then a dropped connection, a reply
refused after its stream ended (arguments that are not JSON), an attempt that streamed nothing
after an earlier turn's text, a cancel mid-stream; and ``loopctl run`` writing to a pipe, where
no abandoned text reaches stdout, or to a terminal, where the retry says the text is void."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from loopctl import BareLoop, LoopError, RunConfig, tool
from loopctl.api import (
    ApiError,
    AttemptAbandoned,
    ModelRequest,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
)
from loopctl.cli import main
from loopctl.driver import CancelSignal, RetryConfig
from loopctl.terminal import StreamOutput
from tests.reliability.local_server import (
    Answer,
    LocalServer,
    call_chunks,
    local_server,
    text_chunks,
)


def dropped(*texts: str) -> Callable[[], AsyncIterator[StreamEvent]]:
    """An attempt that streams ``texts`` and then loses its connection."""

    async def stream() -> AsyncIterator[StreamEvent]:
        for text in texts:
            yield TextDelta(text=text)
        raise ApiError(LoopError(kind="network", message="connection reset", retryable=True))

    return stream


def streamed(*events: StreamEvent) -> Callable[[], AsyncIterator[StreamEvent]]:
    async def stream() -> AsyncIterator[StreamEvent]:
        for event in events:
            yield event

    return stream


def answered(text: str) -> Callable[[], AsyncIterator[StreamEvent]]:
    return streamed(TextDelta(text=text), StopEvent(reason="end_turn"))


def bad_arguments(text: str) -> Callable[[], AsyncIterator[StreamEvent]]:
    """Text and a call whose arguments are not JSON; the stream ends (stop, then usage) and
    the fold refuses the reply after it (retryable)."""
    return streamed(
        TextDelta(text=text),
        ToolCallStart(index=0, id="c1", name="add"),
        ToolCallDelta(index=0, arguments='{"a": '),
        ToolCallEnd(index=0),
        StopEvent(reason="tool_use"),
        UsageEvent(usage=Usage(input_tokens=3, output_tokens=4)),
    )


class Attempts:
    """A client whose attempts are scripted, one stream function each."""

    def __init__(self, *attempts: Callable[[], AsyncIterator[StreamEvent]]) -> None:
        self.attempts = list(attempts)

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self.attempts.pop(0)()


class Screen:
    """A UI that shows every text delta and, told of an abandoned attempt, cuts what it took
    back (``len(event.text)`` characters from the end)."""

    def __init__(self) -> None:
        self.shown = ""
        self.events: list[StreamEvent] = []

    def __call__(self, event: StreamEvent) -> None:
        self.events.append(event)
        if isinstance(event, TextDelta):
            self.shown += event.text
        elif isinstance(event, AttemptAbandoned):
            assert self.shown.endswith(event.text)
            self.shown = self.shown[: len(self.shown) - len(event.text)]

    def abandoned(self) -> list[AttemptAbandoned]:
        return [e for e in self.events if isinstance(e, AttemptAbandoned)]


async def no_sleep(seconds: float) -> None:
    return None


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def run(client: Attempts, screen: Screen, cancel: CancelSignal | None = None) -> Any:
    config = RunConfig(retry=RetryConfig(max_retries=3))
    loop = BareLoop(client, tools=[add], config=config, on_stream=screen, sleep=no_sleep)
    return asyncio.run(loop.run("q", cancel))


def test_partial_text_then_a_failure_is_taken_back_before_the_retry_streams() -> None:
    screen = Screen()
    result = run(Attempts(dropped("Hel", "partial "), answered("The answer is 42.")), screen)
    assert result.final_text == "The answer is 42." == screen.shown
    kinds = [e.kind for e in screen.events]
    assert kinds == ["text_delta", "text_delta", "attempt_abandoned", "text_delta", "stop"]
    [abandoned] = screen.abandoned()
    assert (abandoned.attempt, abandoned.error, abandoned.text, abandoned.events) == (
        1,
        "network",
        "Helpartial ",
        2,
    )
    assert abandoned.retry_in is not None


def test_a_reply_refused_after_its_stream_ended_is_taken_back_too() -> None:
    screen = Screen()
    result = run(Attempts(bad_arguments("Let me check. "), answered("Done.")), screen)
    assert result.final_text == "Done." == screen.shown
    kinds = [e.kind for e in screen.events]
    stop, usage, abandoned_at = (
        kinds.index("stop"),
        kinds.index("usage"),
        kinds.index("attempt_abandoned"),
    )
    assert stop < usage < abandoned_at  # after the stream's end, before the next attempt
    [abandoned] = screen.abandoned()
    assert abandoned.text == "Let me check. " and abandoned.events == 6
    assert abandoned.error == "provider" and "invalid JSON" in abandoned.message


def test_an_attempt_that_streamed_nothing_takes_nothing_back() -> None:
    """Turn 1's text was the reply's (its call ran); turn 2's first attempt fails before any
    event: the abandonment takes back nothing of turn 1."""
    screen = Screen()
    turn_1 = streamed(
        TextDelta(text="Adding. "),
        ToolCallStart(index=0, id="c1", name="add"),
        ToolCallDelta(index=0, arguments='{"a": 1, "b": 2}'),
        ToolCallEnd(index=0),
        StopEvent(reason="tool_use"),
    )
    result = run(Attempts(turn_1, dropped(), answered("It is 3.")), screen)
    assert result.final_text == "It is 3."
    assert screen.shown == "Adding. It is 3."
    [abandoned] = screen.abandoned()
    assert (abandoned.text, abandoned.events) == ("", 0)


def test_a_cancel_mid_stream_abandons_the_attempt() -> None:
    cancel = CancelSignal()
    screen = Screen()

    async def hangs() -> AsyncIterator[StreamEvent]:
        yield TextDelta(text="Once upon ")
        await asyncio.Event().wait()  # the rest never comes
        yield StopEvent(reason="end_turn")  # pragma: no cover

    def watch(event: StreamEvent) -> None:
        screen(event)
        if isinstance(event, TextDelta):
            cancel.cancel()

    config = RunConfig(retry=RetryConfig(max_retries=3))
    loop = BareLoop(Attempts(hangs), config=config, on_stream=watch, sleep=no_sleep)
    result = asyncio.run(loop.run("story", cancel))
    assert result.outcome.kind == "cancelled"
    [abandoned] = screen.abandoned()
    assert (abandoned.error, abandoned.text, abandoned.retry_in) == (
        "cancelled_io",
        "Once upon ",
        None,
    )
    assert screen.shown == ""


# --- loopctl run -----------------------------------------------------------------------------

KEY = "sk-test-" + "0123456789abcdef"


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with local_server() as s:
        yield s


def cli(server: LocalServer) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main,
        ["run", "q", "--model", "m", "--base-url", server.base_url],
        env={"OPENAI_API_KEY": KEY},
    )
    return result.exit_code, result.stdout, result.stderr


def text_then_bad_call(text: str) -> Answer:
    """Text, then a call whose arguments are cut short, in one stream that ends normally."""
    return Answer([*text_chunks(text)[:-1], *call_chunks("calculator", '{"expression": ')])


def test_the_cli_keeps_a_refused_replys_text_out_of_a_pipe(server: LocalServer) -> None:
    server.script(text_then_bad_call("Let me check "), Answer(text_chunks("The answer is 42.")))
    code, out, err = cli(server)
    assert code == 0, err
    assert out == "The answer is 42.\n"  # not "Let me check \nThe answer is 42."
    assert "retrying: attempt 1 failed (provider: the model sent invalid JSON arguments" in err
    assert "its 13 characters of text were dropped" in err


def test_the_cli_prints_no_text_of_a_run_that_fails_after_its_stream(
    server: LocalServer,
) -> None:
    server.script(*[text_then_bad_call("Let me check ") for _ in range(4)])
    code, out, err = cli(server)
    assert code == 1
    assert out == ""
    assert "invalid JSON arguments" in err


def test_on_a_terminal_the_retry_says_the_text_above_is_void(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``StreamOutput(live=True)`` (what ``loopctl run`` uses on a terminal), driven by the
    events of a reply refused after its stream ended."""
    out = StreamOutput(live=True)
    events: list[StreamEvent] = [TextDelta(text="Let me check "), StopEvent(reason="tool_use")]
    for event in events:
        out.on_stream(event)
    out.on_stream(AttemptAbandoned(attempt=1, error="provider", retry_in=0.5, text="Let me check "))
    out.on_stream(TextDelta(text="42."))
    out.on_stream(StopEvent(reason="end_turn"))
    out.finish(answered=True)
    captured = capsys.readouterr()
    assert captured.out == "Let me check \n42.\n"
    assert "the text above is not part of the answer; attempt 2 in 0.5s" in captured.err


def test_on_a_terminal_the_models_control_characters_are_shown_not_obeyed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model's answer held an OSC title change, a bidi override and a carriage return, which
    ``loopctl run`` wrote raw to the terminal; in a pipe the text stays as it came."""
    text = "Hi \x1b]0;PWNED\x07 there \u202e rev\r end"
    for live in (True, False):
        out = StreamOutput(live=live)
        out.on_stream(TextDelta(text=text))
        out.on_stream(StopEvent(reason="end_turn"))
        out.finish(answered=True)
        shown = capsys.readouterr().out
        if live:
            assert shown == "Hi \\x1b]0;PWNED\\x07 there \\u202e rev\\r end\n"
        else:
            assert shown == text + "\n"


def test_in_a_pipe_a_taken_reply_survives_a_later_attempt_that_streamed_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = StreamOutput(live=False)
    first: list[StreamEvent] = [TextDelta(text="Adding."), StopEvent(reason="tool_use")]
    for event in first:
        out.on_stream(event)
    out.on_stream(AttemptAbandoned(attempt=1, error="network", retry_in=0.5))  # turn 2, empty
    second: list[StreamEvent] = [TextDelta(text="It is 3."), StopEvent(reason="end_turn")]
    for event in second:
        out.on_stream(event)
    out.finish(answered=True)
    assert capsys.readouterr().out == "Adding.\nIt is 3.\n"
