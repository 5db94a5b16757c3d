"""The terminal: a ``rich`` console set up the one way every ``loopctl-sim`` command wants it.

Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org: then no
styles at all, not just no colours); ``FORCE_COLOR`` forces it, as rich reads it. Lines wrap to
the terminal's width, or to ``COLUMNS`` when set; piped output with no ``COLUMNS`` is not wrapped
at all, so ``grep`` sees whole lines. Markup is off: trace texts hold brackets (``[call_1]``)
that must print as they are.

``wrapped`` breaks one entry into lines with a hanging indent (the seq column stays clear), by
hand rather than with a rich table: a timeline of 100,000 records prints line by line, in
constant memory, and a table would measure every row first.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator

from rich.console import Console
from rich.text import Text

__all__ = ["TONE_STYLE", "make_console", "styled", "wrap_width", "wrapped"]

#: The style of a line of each tone (``Described.tone``).
TONE_STYLE: dict[str, str] = {"ok": "green", "warn": "yellow", "error": "bold red", "": ""}


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that follows the rules above."""
    plain = "NO_COLOR" in os.environ and not os.environ.get("FORCE_COLOR")
    return Console(
        stderr=stderr,
        highlight=False,
        markup=False,
        emoji=False,
        color_system=None if plain else "auto",
        no_color=plain,
    )


def wrap_width(console: Console) -> int | None:
    """The width to wrap to: the terminal's (or ``COLUMNS``); ``None`` (no wrapping) when piped."""
    if console.is_terminal or os.environ.get("COLUMNS"):
        return max(console.width, 20)
    return None


def wrapped(prefix: str, body: str, width: int | None, indent: int = 2) -> Iterator[str]:
    """``prefix + body`` as lines of at most ``width`` columns; continuation lines are indented
    past the prefix (plus ``indent``), and newlines in ``body`` are kept (``show --full``)."""
    pad = " " * len(prefix)
    paragraphs = body.split("\n")
    if width is None:
        yield prefix + paragraphs[0]
        for more in paragraphs[1:]:
            yield pad + " " * indent + more
        return
    first = True
    room = max(width - len(prefix), 10)
    for paragraph in paragraphs:
        lines = textwrap.wrap(
            paragraph,
            width=room,
            subsequent_indent=" " * indent,
            initial_indent="" if first else " " * indent,
            break_on_hyphens=False,
            replace_whitespace=False,
            drop_whitespace=True,
        ) or [""]
        for line in lines:
            yield (prefix if first else pad) + line
            first = False


def styled(line: str, split: int, style: str) -> Text:
    """A line whose first ``split`` characters (the seq column) are dim and the rest ``style``."""
    text = Text(line[:split], style="dim")
    text.append(line[split:], style=style)
    return text
