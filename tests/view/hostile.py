"""Crafted traces for the view tests: every free-text field of a shipped trace carrying a payload.

A bug report's trace is written by whoever sends it. ``hostile_trace`` appends a payload to every
string of a shipped trace that the trace reader still accepts with it (an io record's kind, tool
names, texts, results, errors, metadata, the outcome, ...), found by trying each string in turn,
so a field added to the format later is covered without naming it here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopctl_sim.trace import TraceFormatError, TraceReader

#: Breaks out of an HTML attribute or element and runs script, if anything puts it in as markup.
HTML_PAYLOAD = (
    '"><script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
    "' onmouseover='window.__pwned=1' x='{{script}}"
)

#: Terminal control: a window title change, clear-screen, an OSC-8 link, a bell, CSI by its C1
#: byte, and a right-to-left override that reverses what follows.
TERMINAL_PAYLOAD = (
    "\x1b]0;pwned-title\x07\x1b[2J\x1b[H\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
    "\x9b31m\u202egnp.exe\u2066x\u2069\x7f"
)

#: What must never reach the terminal raw.
CONTROL = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))] + [
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
]


def _strings(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


def _set(record: dict[str, Any], path: tuple[Any, ...], value: str) -> None:
    target: Any = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _get(record: dict[str, Any], path: tuple[Any, ...]) -> str:
    target: Any = record
    for key in path:
        target = target[key]
    assert isinstance(target, str)
    return target


def _readable(path: Path) -> bool:
    try:
        reader = TraceReader(path)
        for _ in reader:
            pass
    except TraceFormatError:
        return False
    return True


def hostile_trace(
    source: Path, out: Path, payload: str, keep: frozenset[str] = frozenset()
) -> tuple[Path, int]:
    """``source`` with ``payload`` appended to every string the reader still accepts it in
    (but those under a key in ``keep``: ``{"kind"}`` keeps the records' own kinds, so the views
    describe them as the kinds they know), written to ``out``; returns ``out`` and how many
    strings carry it."""
    records = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    carried = 0
    for record in records:
        for where in list(_strings(record)):
            if where[-1] in ("type", "format") or where[-1] in keep:
                continue
            old = _get(record, where)
            _set(record, where, old + payload)
            out.write_text("".join(json.dumps(r) + "\n" for r in records))
            if _readable(out):
                carried += 1
            else:
                _set(record, where, old)
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out, carried
