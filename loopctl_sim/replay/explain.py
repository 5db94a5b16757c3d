"""Divergences in the user's terms: the sentence a user wants first and the detail lines under it.

``turn 3: tool `search_files` returned `...900...`, the trace has `...800...```; ``turn 1: the
request's system prompt differs`` with a ``-``/``+`` diff; ``turn 2: tool spec `calculator`
changed its schema``; ``the agent's settings differ: max_turns 10 -> 20``; ``turn 2: the
compactor kept 3 messages, the trace's 4``. Every quoted value is bounded: two texts that differ
show as excerpts around their first difference (``snippets``) and a field path names the
character where they start to differ (``content[812:]``), so a 10 KB tool result that changed in
one character reads as one line. Pure: data in, text out.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from itertools import zip_longest
from typing import Any, Final

from loopctl.core import LoopMachine, to_jsonable
from loopctl_sim.trace import BrainSummary

#: How much text either side of the first difference a snippet shows.
SNIPPET: Final = 24
#: How much of the differing stretch itself a snippet shows, at most.
SPAN: Final = 48
#: A text longer than this is shown as excerpts, and where it starts to differ is named.
LONG: Final = 100


def first_difference(expected: str, actual: str) -> int:
    """The index of the first character where the texts differ (or the shorter one's length)."""
    start = 0
    for a, b in zip(expected, actual, strict=False):
        if a != b:
            break
        start += 1
    return start


def snippets(expected: str, actual: str, width: int = SNIPPET, span: int = SPAN) -> tuple[str, str]:
    """The two texts around their first difference: ``('...800...', '...900...')``: ``width``
    characters of context either side, at most ``span`` of the stretch that differs, so each is
    at most ``2 * width + span`` characters (and the dots) however long the texts are."""
    if expected == actual:
        return expected, actual
    start = first_difference(expected, actual)
    end_a, end_b = len(expected), len(actual)
    while end_a > start and end_b > start and expected[end_a - 1] == actual[end_b - 1]:
        end_a -= 1
        end_b -= 1

    def cut(text: str, stop: int) -> str:
        lo, hi = max(0, start - width), min(len(text), min(stop, start + span) + width)
        return ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")

    return cut(expected, end_a), cut(actual, end_b)


def one_line(text: str) -> str:
    """``text`` on one line: newlines (and backslashes) as escapes."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def excerpt_pair(expected: Any, actual: Any, limit: int = LONG) -> tuple[str, str]:
    """Two differing values, each on one line (``\\n``) and bounded: short ones whole, long ones
    (strings, or the JSON of anything else) as ``snippets`` around where they first differ."""
    a, b = _text(expected), _text(actual)
    if len(a) <= limit and len(b) <= limit:
        return one_line(a), one_line(b)
    if expected is ABSENT or actual is ABSENT:
        return one_line(show_value(expected, limit)), one_line(show_value(actual, limit))
    was, now = snippets(a, b)
    return one_line(was), one_line(now)


def _text(value: Any) -> str:
    if value is ABSENT:
        return "(absent)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)


def where(path: str, expected: Any, actual: Any) -> str:
    """``path``, and for two long strings (too long to show whole, so shown as excerpts) the
    character they start to differ at: ``messages[3].parts[0].content[812:]``."""
    strings = isinstance(expected, str) and isinstance(actual, str) and expected != actual
    if strings and max(len(expected), len(actual)) > LONG:
        return f"{path}[{first_difference(expected, actual)}:]"
    return path or "(value)"


def change_line(path: str, expected: Any, actual: Any) -> str:
    """``path[i:]: before -> after``, bounded (``excerpt_pair``)."""
    was, now = excerpt_pair(expected, actual)
    return f"{where(path, expected, actual)}: {was} -> {now}"


def field_changes(
    expected: Any, actual: Any, limit: int | None = None
) -> list[tuple[str, Any, Any]]:
    """Every leaf where two JSON values differ: its path (``a.b[2].c``; ``""`` for the values
    themselves) and both values, in ``expected``'s key order, at most ``limit`` of them. Dicts
    are walked key by key and lists item by item (``ABSENT`` on the side that lacks one); a dict
    against a list, or a value against None, is one leaf; 1 and 1.0 agree, True and 1 do not."""
    out: list[tuple[str, Any, Any]] = []
    _walk(expected, actual, "", out, limit)
    return out


def _walk(a: Any, b: Any, path: str, out: list[tuple[str, Any, Any]], limit: int | None) -> None:
    if limit is not None and len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            inner = f"{path}.{key}" if path else str(key)
            _walk(a.get(key, ABSENT), b.get(key, ABSENT), inner, out, limit)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for i in range(max(len(a), len(b))):
            left, right = a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT
            _walk(left, right, f"{path}[{i}]", out, limit)
    elif a != b or (type(a) is not type(b) and not (_number(a) and _number(b))):
        out.append((path, a, b))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Absent:
    """The value on the side where a key or list item does not exist."""

    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Final = _Absent()


def show_value(value: Any, limit: int | None = 60) -> str:
    """A leaf's value as a person reads it: strings bare, everything else as JSON, cut."""
    text = _text(value)
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def policy_changes(recorded: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """``["max_turns 10 -> 20", ...]``: the agent's settings now against the trace's."""
    changes = field_changes(dict(recorded), dict(live))
    return [f"{path} {' -> '.join(excerpt_pair(a, b))}" for path, a, b in changes]


def brain_divergence(
    sentence: str, named: str | None, recorded: BrainSummary | None, machine: LoopMachine
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The replayed brain (``machine``) is not the one a record names (its digest ``named``,
    its summary ``recorded``, None before v2): ``sentence`` with the small fields that differ
    (``turns 3 -> 4``), and both sides (digest and brain summary) for the report."""
    expected = to_jsonable(recorded)
    actual = to_jsonable(BrainSummary.of(machine))
    fields = [] if expected is None else field_changes(expected, actual)
    changes = [f"{path} {show_value(a)} -> {show_value(b)}" for path, a, b in fields]
    how = (
        ": " + ", ".join(changes)
        if changes
        else " (inside its messages or loop window)"
        if expected is not None
        else f" (state now {machine.state.kind}, turns {machine.turns_taken}, "
        f"context {machine.context_tokens})"
    )
    return (
        sentence + how,
        {"digest": named, "brain": expected},
        {"digest": machine.digest(), "brain": actual},
    )


#: A header that continues the previous run names another brain than its ``next_run()``.
NOT_CONTINUED: Final = "the previous run's next_run() is not the brain the header continues from"


def _results(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts", [])
    return [p for p in parts if isinstance(p, dict) and p.get("kind") == "tool_result"]


def feed_explanation(
    turn: int | None, name: str, recorded: Mapping[str, Any], live: Mapping[str, Any]
) -> tuple[str, list[str]]:
    """The sentence and detail lines for a feed the agent gave with other arguments."""
    at = f"turn {turn}: " if turn else ""
    if name == "tool_results":
        old = {r.get("call_id"): r for r in _results(recorded.get("message", {}))}
        new = {r.get("call_id"): r for r in _results(live.get("message", {}))}
        lines: list[str] = []
        for call_id in list(old) + [c for c in new if c not in old]:
            a, b = old.get(call_id), new.get(call_id)
            if a == b:
                continue
            if a is None or b is None:
                which = "the agent answered" if a is None else "the agent did not answer"
                lines.append(f"{which} call {call_id}")
                continue
            tool = b.get("name", "?")
            if a.get("is_error") != b.get("is_error"):
                state = "failed" if b.get("is_error") else "succeeded"
                lines.append(f"tool `{tool}` {state} where the trace's did not")
            if a.get("content") != b.get("content"):
                old_text, new_text = str(a.get("content", "")), str(b.get("content", ""))
                was, now = (one_line(t) for t in snippets(old_text, new_text))
                lines.append(f"tool `{tool}` returned `{now}`, the trace has `{was}`")
                if max(len(old_text), len(new_text)) > LONG:  # a long result: say where
                    at_char = first_difference(old_text, new_text)
                    lines.append(
                        f"  (from character {at_char} of {len(new_text)}; the trace's has "
                        f"{len(old_text)})"
                    )
        if lines:
            return at + lines[0], lines[1:]
    counts = {"tool_results": "context_tokens", "set_context_tokens": "n"}
    if name in counts and recorded.get(counts[name]) != live.get(counts[name]):
        return (
            at + f"the driver counted the context as {live.get(counts[name])} tokens, "
            f"the trace as {recorded.get(counts[name])}",
            ["(the agent's estimator or the tool results it counts changed)"],
        )
    if name == "accept_input":
        return at + "the run's input differs", _diff_lines(recorded, live)
    if name == "compaction_result":
        return compaction_explanation(turn, recorded, live)
    changes = field_changes(dict(recorded), dict(live))
    details = [change_line(path, a, b) for path, a, b in changes[:8]]
    return at + f"the agent fed {name}() with other arguments", details


def _message_text(message: Any) -> str:
    """A message as one line: its role, then its parts (texts, calls, results) in words."""
    if not isinstance(message, Mapping):
        return _text(message)
    parts = []
    for part in message.get("parts") or ():
        if not isinstance(part, Mapping):
            parts.append(_text(part))
        elif part.get("kind") == "text":
            parts.append(str(part.get("text", "")))
        elif part.get("kind") == "tool_call":
            args = json.dumps(part.get("arguments"), ensure_ascii=False)
            parts.append(f"call {part.get('name')}({args}) [{part.get('id')}]")
        elif part.get("kind") == "tool_result":
            parts.append(
                f"result {part.get('name')} [{part.get('call_id')}]: {part.get('content')}"
            )
        else:
            parts.append(_text(dict(part)))
    return f"{message.get('role')}: " + " | ".join(parts)


def compaction_explanation(
    turn: int | None, recorded: Mapping[str, Any], live: Mapping[str, Any]
) -> tuple[str, list[str]]:
    """The sentence and detail lines for a compaction whose result differs from the trace's."""
    at = f"turn {turn}: " if turn else ""
    old = list(recorded.get("compacted") or ())
    new = list(live.get("compacted") or ())
    lines: list[str] = []
    pairs = enumerate(zip_longest(old, new, fillvalue=ABSENT))
    first = next((i for i, (a, b) in pairs if a != b), None)
    if len(old) != len(new):
        message = f"the compactor kept {len(new)} messages, the trace's {len(old)}"
    elif first is not None:
        message = f"the compacted history differs in message {first} of {len(new)}"
    else:
        message = "the compaction's token counts differ"
    if first is not None:
        was = _message_text(old[first]) if first < len(old) else "(none)"
        now = _message_text(new[first]) if first < len(new) else "(none)"
        was, now = excerpt_pair(was, now, limit=100)
        head = f"first differing message: compacted[{first}]"
        lines += [head, f"  agent: {now}", f"  trace: {was}"]
    for key, words in (("before", "context before"), ("after", "context after")):
        if recorded.get(key) != live.get(key):
            lines.append(f"{words}: {recorded.get(key)} -> {live.get(key)} tokens")
    return at + message, lines


#: A text diff (of a system prompt) longer than this many lines, or with a line wider than
#: ``2 * LONG``, is shown as an excerpt of both texts around their first difference instead.
TEXT_DIFF_LINES: Final = 40


def _text_diff(expected: str | None, actual: str | None) -> list[str]:
    """A ``-``/``+`` diff of two texts, bounded (else excerpts around the first difference)."""
    a, b = expected or "", actual or ""
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), "trace", "agent", lineterm="")
    lines = list(diff)[2:]  # without the two file headers
    if len(lines) <= TEXT_DIFF_LINES and all(len(line) <= 2 * LONG for line in lines):
        return lines
    was, now = (one_line(t) for t in snippets(a, b))
    return [
        f"(from character {first_difference(a, b)}; the trace's is {len(a)} characters, "
        f"the agent's {len(b)})",
        f"-{was}",
        f"+{now}",
    ]


def _diff_lines(expected: Any, actual: Any) -> list[str]:
    return [change_line(p, a, b) for p, a, b in field_changes(expected, actual)][:8]


def _tool_spec_lines(recorded: Sequence[Any], live: Sequence[Any]) -> list[str]:
    old = {t.get("name"): t for t in recorded if isinstance(t, dict)}
    new = {t.get("name"): t for t in live if isinstance(t, dict)}
    out: list[str] = []
    for name in list(old) + [n for n in new if n not in old]:
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if a is None:
            out.append(f"tool spec `{name}` is new")
        elif b is None:
            out.append(f"tool spec `{name}` is gone")
        else:
            what = "schema" if a.get("parameters") != b.get("parameters") else "description"
            out.append(f"tool spec `{name}` changed its {what}")
            out += [f"  {change_line(p, x, y)}" for p, x, y in field_changes(a, b)][:6]
    if not out and list(old) != list(new):
        out.append(f"the tools are advertised in another order: {list(new)} (trace {list(old)})")
    return out


#: The request's context fields compared after the prompt and the tools, as a sentence says them.
_REQUEST_FIELDS = (
    ("model", "model differs"),
    ("provider", "provider differs"),
    ("options", "options differ"),
    ("server_tools", "server tools differ"),
)


def request_explanation(
    turn: int | None,
    recorded: Mapping[str, Any] | None,
    live: Mapping[str, Any],
    recorded_data: Mapping[str, Any],
    live_data: Mapping[str, Any],
) -> tuple[str, list[str]]:
    """The sentence and detail lines for a model request that differs from the trace's:
    ``recorded``/``live`` its contexts (None: version 1 has none), ``*_data`` the records' data."""
    at = f"turn {turn}: " if turn else ""
    if recorded is not None and recorded != live:
        if recorded.get("system") != live.get("system"):
            return at + "the request's system prompt differs", _text_diff(
                recorded.get("system"), live.get("system")
            )
        if recorded.get("tools") != live.get("tools"):
            lines = _tool_spec_lines(recorded.get("tools", []), live.get("tools", []))
            return at + lines[0], lines[1:]
        for field, said in _REQUEST_FIELDS:
            if recorded.get(field) != live.get(field):
                return at + f"the request's {said}", _diff_lines(
                    recorded.get(field), live.get(field)
                )
    if recorded_data.get("n_messages") != live_data.get("n_messages"):
        return (
            at + f"the request holds {live_data.get('n_messages')} messages, "
            f"the trace's {recorded_data.get('n_messages')}",
            _diff_lines(recorded_data.get("last"), live_data.get("last")),
        )
    return at + "the messages sent to the model differ", _diff_lines(
        recorded_data.get("last"), live_data.get("last")
    )
