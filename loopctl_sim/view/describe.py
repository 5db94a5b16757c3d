"""One record, described for a person: its lane, its kind, its tone and its lines of text.

Every view (``show``, the HTML timeline) describes records here, so the words agree everywhere.
It works on a record's JSON, not the typed models, so a kind or part it does not know (a newer
trace format, a new provider part) is described generically instead of breaking the view.

``clip`` bounds every text (``None``: whole texts, newlines kept: ``show --full``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

#: How long a text may get in a summary line before it is cut (``show`` without ``--full``).
CLIP: Final = 100

#: The swimlanes, top to bottom ("other": io of a kind this view does not know).
LANES: Final = ("run", "brain", "model", "tools", "compaction", "events", "other")


@dataclass(frozen=True, slots=True)
class Described:
    """What a view shows of one record."""

    lane: str
    #: The record's own kind: the step's kind, the feed's name, the io kind, ``header``,
    #: ``resume`` or ``end``; ``show --kind`` filters on it (and on the lane and the type).
    kind: str
    #: "" (plain), "ok", "warn" or "error": the colour of the line.
    tone: str
    lines: tuple[str, ...]
    #: An io record that repeats what a brain record says (the request, the reply, a tool call
    #: and its plain result): ``show`` leaves these out unless asked for by kind.
    echo: bool = False
    turn: int | None = None


def data_of(rec: dict[str, Any]) -> dict[str, Any]:
    """An io record's ``data`` (an empty dict when it has none, or not a dict)."""
    data = rec.get("data")
    return data if isinstance(data, dict) else {}


def _clip(text: str, limit: int | None) -> str:
    if limit is None:
        return text
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json(data: Any, limit: int | None) -> str:
    return _clip(json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False), limit)


def _short(limit: int | None, by: int = 20) -> int | None:
    return None if limit is None else max(limit - by, 20)


def _part(part: Any, limit: int | None) -> str:
    if not isinstance(part, dict):
        return _json(part, limit)
    kind = part.get("kind")
    if kind == "text":
        return f'"{_clip(str(part.get("text", "")), limit)}"'
    if kind == "tool_call":
        args = _json(part.get("arguments", {}), _short(limit))
        return f"call {part.get('name')}({args}) [{part.get('id')}]"
    if kind == "tool_result":
        flag = " ERROR" if part.get("is_error") else ""
        content = _clip(str(part.get("content", "")), _short(limit))
        return f"result{flag} {part.get('name')} [{part.get('call_id')}]: {content}"
    if kind == "thinking" and isinstance(part.get("text"), str):
        return f"(thinking: {_clip(part['text'], _short(limit))})"
    rest = {k: v for k, v in part.items() if k != "kind"}
    return f"[{kind}] {_json(rest, _short(limit))}"


def _message(message: Any, limit: int | None) -> list[str]:
    """A message's parts, each as text; a message of unknown shape as its JSON."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return [_json(message, limit)]
    return [_part(p, limit) for p in message["parts"]]


def _error(error: Any) -> str:
    if not isinstance(error, dict):
        return str(error)
    status = f" (HTTP {error['status']})" if error.get("status") is not None else ""
    return f"{error.get('kind')}{status}: {error.get('message')}"


def outcome_text(outcome: Any, limit: int | None = CLIP) -> str:
    """An outcome (as JSON) in words: ``completed: "..."``, ``failed: kind: message``."""
    if outcome is None:
        return "not finished"
    if not isinstance(outcome, dict):
        return _json(outcome, limit)
    kind = outcome.get("kind")
    if kind == "failed":
        return f"failed: {_error(outcome.get('error'))}"
    text = outcome.get("final_text")
    return f"{kind}" + (f': "{_clip(text, limit)}"' if isinstance(text, str) and text else "")


def _fork(fork: dict[str, Any], limit: int | None) -> str:
    """A fork's branch point: its parent, the edits made there, its ancestors."""
    parent = fork.get("parent") or {}
    text = (
        f"fork of {parent.get('path')} at seq {parent.get('at')} "
        f"(sha256 {str(parent.get('sha256'))[:12]})"
    )
    edits = []
    for edit in fork.get("edits") or ():
        kind = edit.get("kind")
        if kind == "inject":
            edits.append(f'inject "{_clip(str(edit.get("text")), limit)}"')
        elif kind == "tool_result":
            edits.append(f'{edit.get("call_id")} result "{_clip(str(edit.get("content")), limit)}"')
        elif kind == "reply":
            edits.append(f'turn {edit.get("turn")} reply "{_clip(str(edit.get("text")), limit)}"')
        elif kind == "policy":
            edits.append(f"max_turns={edit.get('max_turns')}")
        elif kind == "options":
            edits.append(f"options {_json(edit.get('options'), limit)}")
    text += "; edits: " + (", ".join(edits) if edits else "none")
    ancestors = fork.get("ancestors") or ()
    if len(ancestors) > 1:
        chain = " > ".join(f"{a.get('path')}@{a.get('at')}" for a in ancestors)
        text += f"; ancestors: {chain}"
    return text


def _header(rec: dict[str, Any], limit: int | None) -> Described:
    fork = (rec.get("metadata") or {}).get("fork")
    if isinstance(fork, dict):  # a fork's branch point (its snapshot: the brain there)
        return Described("run", "fork", "warn", (_fork(fork, limit),))
    snap = rec.get("snapshot") or {}
    history = len(snap.get("history") or ())
    if snap.get("started"):
        state = (snap.get("state") or {}).get("kind")
        text = (
            f"run resumed from a snapshot ({rec.get('created')}; state {state}, turns "
            f"{snap.get('turns_taken')}, {history} + {len(snap.get('pending') or ())} messages)"
        )
        return Described("run", "resume", "warn", (text,))
    metadata = dict(rec.get("metadata") or {})
    turn = _session_turn(metadata.pop("session", None), limit)  # a session's run: its user turn
    meta = ", ".join(f"{k}={v}" for k, v in metadata.items())
    # (v3) a header that continues the previous run names its brain, not its history
    held = (
        f"continues the previous run, brain {rec['continues']}"
        if isinstance(rec.get("continues"), str)
        else f"history {history} messages"
    )
    text = (
        f"{turn}run started ({rec.get('created')}, engine {rec.get('engine_version')}, "
        f"{held}){'; ' + _clip(meta, limit) if meta else ''}"
    )
    return Described("run", "header", "", (text,))


def _session_turn(entry: object, limit: int | None) -> str:
    """A session's run names its user turn: its number, kind, and what the user does."""
    if not isinstance(entry, dict) or not isinstance(entry.get("turn"), dict):
        return ""
    turn = entry["turn"]
    said = [str(turn.get("kind", "message"))]
    if turn.get("cancel_at") is not None:
        said.append(f"cancels before step {turn['cancel_at']}")
    if turn.get("interject") is not None:
        said.append(f"writes {_clip(repr(turn['interject']), limit)} while tools run")
    if turn.get("calls"):
        said.append(f"{len(turn['calls'])} model call(s) of the user recorded")
    return f"session turn {entry.get('run')} ({'; '.join(said)}): "


def _step(rec: dict[str, Any], limit: int | None) -> Described:
    step = rec.get("step") or {}
    kind = str(step.get("kind"))
    turn = step.get("turn")
    if kind == "call_llm":
        return Described("brain", kind, "", (f"turn {turn}: call the model",), turn=turn)
    if kind == "call_tools":
        names = ", ".join(str(c.get("name")) for c in step.get("calls") or ())
        return Described("brain", kind, "", (f"turn {turn}: run tools {names}",), turn=turn)
    if kind == "compact":
        return Described("brain", kind, "", (f"compact ({step.get('reason')})",))
    if kind == "done":
        outcome = step.get("outcome")
        tone = _outcome_tone(outcome)
        return Described("brain", kind, tone, (f"done: {outcome_text(outcome, limit)}",))
    rest = {k: v for k, v in step.items() if k != "kind"}
    return Described("brain", kind, "", (f"step {kind} {_json(rest, limit)}",), turn=turn)


def _outcome_tone(outcome: Any) -> str:
    kind = outcome.get("kind") if isinstance(outcome, dict) else None
    return {"completed": "ok", "failed": "error", None: "warn"}.get(kind, "warn")


def _feed_lines(name: str, args: dict[str, Any], limit: int | None) -> Iterator[str]:
    if name == "accept_input":
        yield "user: " + "; ".join(_message(args.get("input"), limit))
    elif name == "model_response":
        parts = _message(args.get("response"), limit) or ["(empty reply)"]
        yield f"assistant: {'; '.join(parts)} (context {args.get('context_tokens')} tokens)"
    elif name == "tool_results":
        for part in _message(args.get("message"), limit):
            yield f"  {part}"
        if args.get("context_tokens") is not None:
            yield f"  (context {args['context_tokens']} tokens)"
    elif name == "compaction_result":
        yield (
            f"compacted: {len(args.get('compacted') or ())} messages kept, "
            f"context {args.get('before')} -> {args.get('after')} tokens"
        )
    elif name == "compaction_noop":
        yield f"compaction found nothing to cut (context {args.get('after')} tokens)"
    elif name == "set_context_tokens":
        yield f"context set to {args.get('n')} tokens"
    elif name == "inject":
        yield "injected: " + "; ".join(_message(args.get("message"), limit))
    elif name == "fail":
        yield f"ERROR: {_error(args.get('error'))}"
    elif name == "cancel":
        yield "cancelled"
    elif name == "commit_pending":
        yield "committed the run to history"
    elif name == "discard_pending":
        yield "discarded the run's in-flight tail (coherent prefix kept)"
    else:
        yield f"{name} {_json(args, limit)}"


_FEED_TONE: Final = {"fail": "error", "cancel": "warn", "discard_pending": "warn"}


def _feed(rec: dict[str, Any], limit: int | None) -> Described:
    name = str(rec.get("name"))
    args = rec.get("args")
    lines = tuple(_feed_lines(name, args if isinstance(args, dict) else {}, limit))
    tone = _FEED_TONE.get(name, "")
    if name == "tool_results" and any(" ERROR " in line for line in lines):
        tone = "error"
    return Described("brain", name, tone, lines)


def _took(rec: dict[str, Any]) -> str:
    d = rec.get("duration_s")
    return f" in {d:.3f}s" if isinstance(d, int | float) else ""


def _io_lines(kind: str, d: dict[str, Any], took: str, limit: int | None) -> Described:
    """An io record, from its data."""
    if kind == "model_request":
        tools = d.get("tools")
        names = ", ".join(
            str(t.get("name", t)) if isinstance(t, dict) else str(t) for t in tools or ()
        )
        size = d.get("n_messages")
        if size is None and isinstance(d.get("messages"), list):
            size = len(d["messages"])
        text = f"model request: {size} messages; tools {_clip(names, limit) or '(none)'}"
        return Described("model", kind, "", (text,), echo=True)
    if kind == "model_reply":
        usage = d.get("usage") or {}
        text = (
            f"model reply{took}: {usage.get('input_tokens')} in / "
            f"{usage.get('output_tokens')} out tokens, stop {d.get('stop_reason')}, "
            f"attempt {d.get('attempts')}"
        )
        return Described("model", kind, "", (text,), echo=True)
    if kind == "model_error":
        err = d.get("error") or {}
        status = f" HTTP {err.get('status')}" if err.get("status") else ""
        text = f"model error{status}: {err.get('kind')}: {_clip(str(err.get('message')), limit)}"
        return Described("model", kind, "error", (text + took,))
    if kind == "retry":
        text = f"retry {d.get('attempt')} after {d.get('delay_s')}s ({d.get('kind')})"
        return Described("model", kind, "warn", (text,))
    if kind == "tool_call":
        args = _json(d.get("arguments", {}), _short(limit))
        text = f"tool call {d.get('name')}({args}) [{d.get('id')}]"
        return Described("tools", kind, "", (text,), echo=True)
    if kind == "tool_result" and d.get("fault"):
        text = f"tool fault {d.get('fault')} in {d.get('name')}"
        return Described("tools", kind, "error", (text,))
    if kind == "tool_result":
        flag = " ERROR" if d.get("is_error") else ""
        content = _clip(str(d.get("content", "")), _short(limit))
        text = f"tool result{flag} {d.get('name')} [{d.get('id')}]{took}: {content}"
        return Described("tools", kind, "error" if flag else "", (text,), echo=True)
    if kind == "crash":
        size = d.get("snapshot_bytes")
        text = f"crash at step {d.get('step')}; restored from a {size}-byte snapshot"
        return Described("run", kind, "error", (text,))
    if kind == "snapshot":  # a periodic one (TraceRecorder(snapshot_every=N)): its size
        found = d.get("snapshot")
        snap: dict[str, Any] = found if isinstance(found, dict) else {}
        history, pending = len(snap.get("history") or ()), len(snap.get("pending") or ())
        text = f"snapshot of the brain: {history} + {pending} messages (digest {d.get('digest')})"
        return Described("run", kind, "", (text,))
    if kind == "cancel":
        return Described("events", kind, "warn", (f"cancel: {d.get('reason', '')}",))
    if kind == "compaction" and d.get("noop"):
        text = f"compaction ({d.get('reason')}): nothing to cut"
        return Described("compaction", kind, "warn", (text + took,))
    if kind == "compaction":
        text = (
            f"compaction ({d.get('reason')}): {d.get('messages_before')} messages -> "
            f"{d.get('messages_after')}"
        )
        return Described("compaction", kind, "", (text + took,))
    if kind == "reflection":
        text = f'reflection: "{_clip(str(d.get("text", "")), limit)}"'
        return Described("events", kind, "", (text,), echo=True)
    if kind == "mcp":
        return _mcp(d, limit)
    lane = "run" if kind == "resume" else "other"  # a kind this view does not know: its data
    return Described(lane, kind, "", (f"{kind}{took}: {_json(d, limit)}",))


def _mcp(d: dict[str, Any], limit: int | None) -> Described:
    """An MCP server's session (``loopctl.tools.mcp``): its tool list, a call's result, a
    failure."""
    server, op, tool = d.get("server"), d.get("op"), d.get("tool")
    if op == "tools":
        found = d.get("tools")
        listed: list[Any] = found if isinstance(found, list) else []
        names = ", ".join(str(t.get("name")) for t in listed if isinstance(t, dict))
        changes = [
            f"{what} {', '.join(map(str, d[what]))}"
            for what in ("added", "removed", "changed")
            if isinstance(d.get(what), list) and d[what]
        ]
        said = f" (its list changed: {'; '.join(changes)})" if "removed" in d else ""
        text = f"mcp {server}: advertises {_clip(names, limit) or '(no tools)'}{said}"
        return Described("tools", "mcp", "warn" if said else "", (text,))
    if op == "error":
        text = f"mcp {server}: {tool} failed: {_clip(str(d.get('error')), _short(limit))}"
        return Described("tools", "mcp", "error", (text,))
    answer = d.get("result")
    result: dict[str, Any] = answer if isinstance(answer, dict) else {}
    flag = " ERROR" if result.get("isError") else ""
    content = _clip(_json(result.get("content"), None), _short(limit))
    text = f"mcp {server}: {tool} answered{flag}: {content}"
    return Described("tools", "mcp", "error" if flag else "", (text,))


def _io(rec: dict[str, Any], limit: int | None) -> Described:
    found = _io_lines(str(rec.get("kind")), data_of(rec), _took(rec), limit)
    turn = rec.get("turn")
    return replace(found, turn=turn) if isinstance(turn, int) else found


def describe(rec: dict[str, Any], clip: int | None = CLIP) -> Described:
    """What a view shows of the record ``rec`` (a record's JSON); never raises on odd data."""
    kind = rec.get("type")
    if kind == "header":
        return _header(rec, clip)
    if kind == "step":
        return _step(rec, clip)
    if kind == "feed":
        return _feed(rec, clip)
    if kind == "io":
        return _io(rec, clip)
    if kind == "end":
        outcome, error = rec.get("outcome"), rec.get("error")
        if isinstance(error, dict):  # an exception escaped the run: that is how it ended
            raised = _clip(f"{error.get('type')}: {error.get('message')}", clip)
            text = f"run ended by an exception: {raised} (digest {rec.get('digest')})"
            return Described("run", "end", "error", (text,))
        text = f"run ended: {outcome_text(outcome, clip)} (digest {rec.get('digest')})"
        return Described("run", "end", _outcome_tone(outcome), (text,))
    rest = {k: v for k, v in rec.items() if k not in ("seq", "type")}
    return Described("other", str(kind), "", (f"{kind} {_json(rest, clip)}",))
