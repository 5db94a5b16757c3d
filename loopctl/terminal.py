"""What ``loopctl run`` does at the terminal: stream the answer, show retries, hear Ctrl-C.

``StreamOutput`` prints the answer as it streams (on a terminal, control characters as
escapes: a model's answer cannot retitle the window or clear the screen). A failed attempt
cannot take back text it streamed (``AttemptAbandoned``), so on a terminal the line is ended and
the retry shown on stderr; into a pipe or a file each attempt's text is held until its reply is
taken, so an abandoned attempt never reaches it.

``Interrupts`` turns the first SIGINT or SIGTERM into the run's ``CancelSignal``; a second one
aborts at once (``KeyboardInterrupt``, even while a tool blocks the event loop). The handler
does not fire the signal itself: ``CancelSignal.cancel`` takes a lock the interrupted code may
hold, so it is handed to the event loop (``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

from loopctl.api import AttemptAbandoned, StopEvent, StreamEvent, TextDelta, UsageEvent
from loopctl.driver import CancelSignal

__all__ = ["Interrupts", "StreamOutput", "visible"]


def _escape(code: int) -> str:
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


#: What a model's text may not send to a terminal raw (``loopctl-sim show`` shows the same as
#: escapes): C0 controls but newline and tab (an OSC title or link, clear-screen, a carriage
#: return over the line), DEL, C1 controls, the bidi marks, embeddings, overrides and isolates,
#: and the line and paragraph separators.
_CONTROLS = (
    [c for c in range(0x20) if c not in (0x09, 0x0A)]
    + list(range(0x7F, 0xA0))
    + [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
)
_VISIBLE = {code: _escape(code) for code in _CONTROLS}


def visible(text: str) -> str:
    """``text`` with its control characters (``_CONTROLS``) shown as escapes."""
    return text.translate(_VISIBLE)


class StreamOutput:
    """Streams text to stdout. ``live``: print text as it arrives (a terminal), else hold each
    attempt's text until its reply is taken. A retry is shown when the failed attempt had
    streamed text, or always with ``every_retry`` (``-v``).

    An attempt's end is not its ``StopEvent``: a reply can be refused after its stream ended.
    So held text waits for a sign that its reply was taken: the next attempt's content, an
    abandonment of other text than the held (a later attempt's), or ``finish`` with an answer."""

    def __init__(
        self, live: bool, every_retry: bool = False, clean: Callable[[str], str] = str
    ) -> None:
        self.live = live
        self.every_retry = every_retry
        self.clean = clean  # applied to what is said on stderr (an error may echo a secret)
        self.printed = False  # any text reached stdout
        self.line_open = False
        self.held: list[str] = []
        self.stopped = False  # the attempt's stream ended; its reply may still be refused

    def on_stream(self, event: StreamEvent) -> None:
        if isinstance(event, AttemptAbandoned):
            self._abandoned(event)
            return
        if self.stopped and not isinstance(event, UsageEvent | StopEvent):
            self._settle()  # the next attempt's content: the one before was taken
        if isinstance(event, TextDelta) and event.text:
            if self.live:
                self._show(event.text)
            else:
                self.held.append(event.text)
        elif isinstance(event, StopEvent):
            self.stopped = True
            if self.live:
                self.end_line()

    def _show(self, text: str) -> None:
        # on a terminal the model's text cannot drive it: its control characters are shown
        click.echo(visible(text) if self.live else text, nl=False)
        self.printed = True
        self.line_open = not text.endswith("\n")

    def _settle(self) -> None:
        self.stopped = False
        if self.held:
            self._show("".join(self.held))
            self.held.clear()
        self.end_line()

    def _abandoned(self, event: AttemptAbandoned) -> None:
        if self.stopped and event.text != "".join(self.held):
            self._settle()  # not the held attempt's text: a later one failed, the held was taken
        shown = len(event.text) if self.live else 0
        dropped = sum(map(len, self.held))
        self.held.clear()
        self.stopped = False
        self.end_line()
        if event.retry_in is None or not (shown or dropped or self.every_retry):
            return  # the call fails (the run's error says why), or nothing is to be taken back
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

    def finish(self, answered: bool = False) -> None:
        """The run is over; ``answered``: it completed, so the held text is the answer's."""
        if answered and self.stopped:
            self._settle()
        self.held.clear()
        self.stopped = False
        self.end_line()


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """While entered: the first SIGINT or SIGTERM cancels the run, a second one aborts.
    ``attach(loop)`` names the event loop that fires the cancel (a signal before it aborts);
    ``signum`` is the first signal received."""

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

    def __exit__(self, *exc: object) -> None:
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
