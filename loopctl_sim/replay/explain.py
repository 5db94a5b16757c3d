"""Divergences in the user's terms: what the agent did differently, said the way they would say it.

A replay knows the two records that differ (the trace's and the live one); this module turns them
into the sentence a user wants first and the detail lines under it:

- ``turn 3: tool `search_files` returned `...900...`, the trace has `...800...```
- ``turn 1: the request's system prompt differs`` with a ``-``/``+`` diff of the two prompts
- ``turn 2: tool spec `calculator` changed its schema`` with the changed JSON paths
- ``the agent's settings differ: max_turns 10 -> 20``
- ``after tool_results, the brain's state differs: turns 3 -> 4, pending 7 -> 8``

Everything here is pure: data in, text out.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from loopctl.core import LoopMachine
from loopctl_sim.trace import BrainSummary, brain_fields

__all__ = [
    "brain_changes",
    "feed_explanation",
    "field_changes",
    "policy_changes",
    "request_explanation",
    "snippets",
]

#: How much text either side of the first difference a snippet shows.
SNIPPET: Final = 24


def snippets(expected: str, actual: str, width: int = SNIPPET) -> tuple[str, str]:
    """The two texts around their first difference: ``('...800...', '...900...')``."""
    if expected == actual:
        return expected, actual
    start = 0
    for a, b in zip(expected, actual, strict=False):
        if a != b:
            break
        start += 1
    end_a, end_b = len(expected), len(actual)
    while end_a > start and end_b > start and expected[end_a - 1] == actual[end_b - 1]:
        end_a -= 1
        end_b -= 1

    def cut(text: str, stop: int) -> str:
        lo, hi = max(0, start - width), min(len(text), stop + width)
        return ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")

    return cut(expected, end_a), cut(actual, end_b)


def field_changes(expected: Any, actual: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every leaf path where two JSON values differ, with both values (``MISSING`` marks a key
    one side lacks)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in list(expected) + [k for k in actual if k not in expected]:
            where = f"{path}.{key}" if path else str(key)
            out += field_changes(expected.get(key, MISSING), actual.get(key, MISSING), where)
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (a, b) in enumerate(zip(expected, actual, strict=True)):
            out += field_changes(a, b, f"{path}[{i}]")
        return out
    return [] if expected == actual else [(path or "(value)", expected, actual)]


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


MISSING: Final = _Missing()


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=repr)
    if isinstance(value, _Missing):
        text = "(missing)"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def policy_changes(recorded: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """``["max_turns 10 -> 20", ...]``: the settings the agent hands the brain now, against the
    trace's."""
    changes = field_changes(dict(recorded), dict(live))
    return [f"{path} {_short(a)} -> {_short(b)}" for path, a, b in changes]


def brain_changes(recorded: Mapping[str, Any] | None, live: Mapping[str, Any]) -> list[str]:
    """The brain's small fields that differ (``turns 3 -> 4``); empty when they agree (the
    difference is then inside its messages or loop window) or the trace has none (v1)."""
    if recorded is None:
        return []
    return [f"{path} {_short(a)} -> {_short(b)}" for path, a, b in field_changes(recorded, live)]


def continuation_divergence(
    named: str | None, recorded: BrainSummary | None, machine: LoopMachine
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A header that continues the previous run names another brain than the replayed run's
    ``next_run()`` (``machine``): the sentence, with the small fields that differ, and both
    sides (digest and brain summary) for the report."""
    expected = brain_fields(recorded)
    actual = BrainSummary.of(machine).model_dump(mode="json")
    changes = brain_changes(expected, actual)
    how = ": " + ", ".join(changes) if changes else " (inside its messages or loop window)"
    message = f"the previous run's next_run() is not the brain the header continues from{how}"
    return (
        message,
        {"digest": named, "brain": expected},
        {"digest": machine.digest(), "brain": actual},
    )


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
                was, now = snippets(str(a.get("content", "")), str(b.get("content", "")))
                lines.append(f"tool `{tool}` returned `{now}`, the trace has `{was}`")
        if lines:
            return at + lines[0], lines[1:]
    if name == "accept_input":
        return at + "the run's input differs", _diff_lines(recorded, live)
    if name == "set_context_tokens":
        return (
            at + f"the driver counted the context as {live.get('n')} tokens, "
            f"the trace as {recorded.get('n')}",
            ["(the agent's estimator or the tool results it counts changed)"],
        )
    changes = field_changes(dict(recorded), dict(live))
    details = [f"{path}: {_short(a)} -> {_short(b)}" for path, a, b in changes[:8]]
    return at + f"the agent fed {name}() with other arguments", details


def _text_diff(expected: str | None, actual: str | None) -> list[str]:
    lines = difflib.unified_diff(
        (expected or "").splitlines(), (actual or "").splitlines(), "trace", "agent", lineterm=""
    )
    return list(lines)[2:]


def _diff_lines(expected: Any, actual: Any) -> list[str]:
    return [f"{p}: {_short(a)} -> {_short(b)}" for p, a, b in field_changes(expected, actual)][:8]


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
            out += [f"  {p}: {_short(x)} -> {_short(y)}" for p, x, y in field_changes(a, b)][:6]
    if not out and list(old) != list(new):
        out.append(f"the tools are advertised in another order: {list(new)} (trace {list(old)})")
    return out


def request_explanation(
    turn: int | None,
    recorded: Mapping[str, Any] | None,
    live: Mapping[str, Any],
    recorded_data: Mapping[str, Any],
    live_data: Mapping[str, Any],
) -> tuple[str, list[str]]:
    """The sentence and detail lines for a model request that differs from the trace's.

    ``recorded``/``live`` are the two contexts (None: the trace holds none, version 1);
    ``*_data`` the two ``model_request`` records' data."""
    at = f"turn {turn}: " if turn else ""
    if recorded is not None and recorded != live:
        if recorded.get("system") != live.get("system"):
            return at + "the request's system prompt differs", _text_diff(
                recorded.get("system"), live.get("system")
            )
        if recorded.get("tools") != live.get("tools"):
            lines = _tool_spec_lines(recorded.get("tools", []), live.get("tools", []))
            return at + lines[0], lines[1:]
        for field in ("model", "provider", "options", "server_tools"):
            if recorded.get(field) != live.get(field):
                return at + f"the request's {field} differs", _diff_lines(
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
