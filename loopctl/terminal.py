"""What ``loopctl run`` does at the terminal: stream the answer, show retries, hear Ctrl-C.

``StreamOutput`` prints the answer as it streams. A model attempt that fails after streaming
some text cannot take that text back (``AttemptAbandoned``), so on a terminal the line is ended
and a retry is shown as one, on stderr; when stdout is not a terminal (a pipe, a file) each
attempt's text is held until the attempt finishes, so an abandoned attempt never reaches it.

``Interrupts`` turns the first SIGINT (Ctrl-C) or SIGTERM into the run's ``CancelSignal``: the
driver stops what it waits on, the brain ends ``Cancelled``, the exit door salvages what is
complete and a trace ends with its cancel feed and end record. A second signal aborts at once
(``KeyboardInterrupt``, even while a tool blocks the event loop). The handler does not fire the
signal itself: ``CancelSignal.cancel`` takes a lock that the interrupted code may hold, so it is
handed to the event loop (``call_soon_threadsafe``), which runs it as soon as it can.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

import click

from loopctl.api import AttemptAbandoned, StopEvent, StreamEvent, TextDelta
from loopctl.driver import CancelSignal

__all__ = ["Interrupts", "StreamOutput"]


class StreamOutput:
    """Streams text to stdout; a turn that ends in tool calls ends its line. ``live``: print
    text as it arrives (a terminal), else hold each attempt's text until the attempt ends.
    A retry is shown when the failed attempt had streamed text (which it cannot take back),
    or always with ``every_retry`` (``-v``): a quiet retry of a refused connection stays quiet,
    so the error a run ends with is still its one line."""

    def __init__(
        self, live: bool, every_retry: bool = False, clean: Callable[[str], str] = str
    ) -> None:
        self.live = live
        self.every_retry = every_retry
        self.clean = clean  # applied to what is said on stderr (an error may echo a secret)
        self.printed = False  # any text reached stdout
        self.line_open = False
        self.attempt_text = 0  # characters of the current attempt already shown
        self.held: list[str] = []
        self.retries = 0

    def on_stream(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta) and event.text:
            if self.live:
                self._show(event.text)
            else:
                self.held.append(event.text)
        elif isinstance(event, StopEvent):
            self._release()
            self.end_line()
            self.attempt_text = 0
        elif isinstance(event, AttemptAbandoned):
            self._abandoned(event)

    def _show(self, text: str) -> None:
        click.echo(text, nl=False)
        self.printed = True
        self.line_open = not text.endswith("\n")
        self.attempt_text += len(text)

    def _release(self) -> None:
        if self.held:
            self._show("".join(self.held))
            self.held.clear()

    def _abandoned(self, event: AttemptAbandoned) -> None:
        shown, self.attempt_text = self.attempt_text, 0
        dropped = sum(map(len, self.held))
        self.held.clear()
        self.end_line()
        if event.retry_in is None or not (shown or dropped or self.every_retry):
            return  # the call fails (the run's error says why), or nothing is to be taken back
        self.retries += 1
        what = f"attempt {event.attempt} failed ({event.error}: {event.message})"
        if shown:
            what += "; the text above is not part of the answer"
        elif dropped:
            what += f"; its {dropped} characters of text were dropped"
        next_one = f"attempt {event.attempt + 1} in {event.retry_in:.1f}s"
        click.echo(self.clean(f"retrying: {what}; {next_one}"), err=True)

    def end_line(self) -> None:
        if self.line_open:
            click.echo()
            self.line_open = False

    def finish(self) -> None:
        """The run is over: what an unfinished attempt held is not the answer; end the line."""
        self.held.clear()
        self.end_line()


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """While entered: the first SIGINT or SIGTERM cancels the run (``cancel``), a second one
    aborts (``KeyboardInterrupt``). ``attach(loop)`` names the event loop that fires the
    cancel; a signal before it is attached aborts. ``signum`` is the first signal received."""

    def __init__(self, cancel: CancelSignal) -> None:
        self.cancel = cancel
        self.signum: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        loop = self._loop
        if self.signum is not None or loop is None or loop.is_closed():
            raise KeyboardInterrupt
        self.signum = signum
        loop.call_soon_threadsafe(self.cancel.cancel)

    def __enter__(self) -> Interrupts:
        for signum in _SIGNALS:
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread: signals are not ours to take
                break
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    @property
    def exit_code(self) -> int:
        """The shell's code for a run ended by the signal received: 128 + its number."""
        return 128 + (self.signum or signal.SIGINT)

    @property
    def name(self) -> str:
        return "Ctrl-C" if self.signum in (None, signal.SIGINT) else "SIGTERM"
