"""The terminal: a ``rich`` console set up the one way every ``loopctl-sim`` command wants it.

Colour only on a terminal and never under ``NO_COLOR`` (https://no-color.org; ``FORCE_COLOR``
forces it, as rich reads it). Piped output with no ``COLUMNS`` is not wrapped, so ``grep`` sees
whole lines. Markup is off: trace texts hold brackets (``[call_1]``) that must print as they are.

Trace strings are untrusted: ``visible`` turns every control character into its escape before it
is printed, so a trace cannot retitle the window, clear the screen, hide a link (OSC 8) or
reverse what follows (bidi overrides). ``wrapped`` breaks an entry into lines by hand, not with a
rich table, so a timeline of 100,000 records prints line by line in constant memory.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from typing import Final

from rich.console import Console

from loopctl.terminal import visible

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
