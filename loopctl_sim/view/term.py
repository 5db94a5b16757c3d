"""The terminal: a ``rich`` console set up the one way every ``loopctl-sim`` command wants it.

Colour only on a terminal, and never when ``NO_COLOR`` is set (https://no-color.org: then no
styles at all, not just no colours); ``FORCE_COLOR`` forces it, as rich reads it. Lines wrap to
the terminal's width, or to ``COLUMNS`` when set; piped output with no ``COLUMNS`` is not wrapped
at all, so ``grep`` sees whole lines. Markup is off: trace texts hold brackets (``[call_1]``)
that must print as they are.

Trace strings are untrusted (model text, tool results, tool names, file names, error messages):
``visible`` turns every control character in them into its escape (``\x1b``, ``\r``,
``\u202e``) before it is printed, so a trace cannot retitle the window, clear the screen, hide a
link (OSC 8) or reverse what follows (the bidi overrides and isolates); newlines and tabs stay.
Every terminal view (``show``, ``diff``, ``replay``'s reports and messages) prints through it.

``wrapped`` breaks one entry into lines with a hanging indent (the seq column stays clear), by
hand rather than with a rich table: a timeline of 100,000 records prints line by line, in
constant memory, and a table would measure every row first.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from typing import Final

from rich.console import Console
from rich.text import Text

from loopctl.terminal import visible

#: The style of a line of each tone (``Described.tone``).
TONE_STYLE: dict[str, str] = {"ok": "green", "warn": "yellow", "error": "bold red", "": ""}


#: In JSON text the control characters ``visible`` escapes (``loopctl.terminal``: C0 but newline
#: and tab, DEL, C1, the bidi controls, the line and paragraph separators) as JSON escapes;
#: ``json.dumps`` already escapes C0.
_VISIBLE_JSON: Final = {
    code: f"\\u{code:04x}" for code in range(0x7F, 0x2070) if visible(chr(code)) != chr(code)
}


def visible_json(text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) with the control characters it
    still holds raw (DEL, C1, the bidi controls) as ``\\uXXXX``: the same JSON, inert on a
    terminal."""
    return text.translate(_VISIBLE_JSON)


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
