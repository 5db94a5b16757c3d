"""A readable timeline of a trace: turns, tool calls and results, errors, compactions, outcome.

Built from the brain's records (steps and feeds); IO records add what the world did that the brain
never saw (retries, model errors, crashes). Streams the trace: memory stays flat.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from loopctl.core import CallLLM, CallTools, Compact, Done, Failed, Message
from loopctl_sim.trace import EndRecord, HeaderRecord, IoRecord, StepRecord, TraceReader

__all__ = ["timeline"]


def _clip(text: str, limit: int = 100) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _args(arguments: dict[str, Any]) -> str:
    return _clip(json.dumps(arguments, sort_keys=True, separators=(",", ":")), 80)


def _message(m: Message) -> Iterator[str]:
    if m.text:
        yield f'"{_clip(m.text)}"'
    for c in m.tool_calls:
        yield f"call {c.name}({_args(c.arguments)}) [{c.id}]"


def _outcome(outcome: Any) -> str:
    if outcome is None:
        return "not finished"
    if isinstance(outcome, Failed):
        return f"failed: {outcome.error}"
    text = getattr(outcome, "final_text", None)
    return f"{outcome.kind}" + (f': "{_clip(text)}"' if text else "")


def timeline(path: str | os.PathLike[str]) -> Iterator[str]:
    """Lines of the timeline of the trace at ``path`` (``TraceFormatError`` if unreadable)."""
    reader = TraceReader(path)
    for _, record in reader.numbered():
        seq = f"{record.seq:>5}"
        if isinstance(record, HeaderRecord):
            snap = record.snapshot
            history = 0 if snap is None else len(snap.history)
            meta = ", ".join(f"{k}={v}" for k, v in record.metadata.items())
            if snap is not None and snap.started:
                yield (
                    f"{seq}  run resumed from a snapshot ({record.created}; state "
                    f"{snap.state.kind}, turns {snap.turns_taken}, {history} + "
                    f"{len(snap.pending)} messages)"
                )
                continue
            yield (
                f"{seq}  run started ({record.created}, engine {record.engine_version}, "
                f"history {history} messages){'; ' + meta if meta else ''}"
            )
        elif isinstance(record, StepRecord):
            step = record.step
            if isinstance(step, CallLLM):
                yield f"{seq}  turn {step.turn}: call the model"
            elif isinstance(step, CallTools):
                names = ", ".join(c.name for c in step.calls)
                yield f"{seq}  turn {step.turn}: run tools {names}"
            elif isinstance(step, Compact):
                yield f"{seq}  compact ({step.reason.value})"
            elif isinstance(step, Done):
                yield f"{seq}  done: {_outcome(step.outcome)}"
        elif isinstance(record, IoRecord):
            line = _io(record)
            if line:
                yield f"{seq}    ~ {line}"
        elif isinstance(record, EndRecord):
            yield f"{seq}  run ended: {_outcome(record.outcome)} (digest {record.digest})"
        else:
            yield from (f"{seq}  {line}" for line in _feed(record.name, record.args))
    for warning in reader.warnings:
        yield f"warning: {warning}"


def _feed(name: str, args: Any) -> Iterator[str]:
    if name == "accept_input":
        yield f'user: "{_clip(args.input.text)}"'
    elif name == "model_response":
        parts = list(_message(args.response)) or ["(empty reply)"]
        yield f"assistant: {'; '.join(parts)} (context {args.context_tokens} tokens)"
    elif name == "tool_results":
        for r in args.message.tool_results:
            flag = " ERROR" if r.is_error else ""
            yield f"  result{flag} {r.name} [{r.call_id}]: {_clip(r.content, 80)}"
    elif name == "compaction_result":
        yield (
            f"compacted: {len(args.compacted)} messages kept, "
            f"context {args.before} -> {args.after} tokens"
        )
    elif name == "compaction_noop":
        yield f"compaction found nothing to cut (context {args.after} tokens)"
    elif name == "set_context_tokens":
        yield f"context set to {args.n} tokens"
    elif name == "inject":
        yield f'injected: "{_clip(args.message.text)}"'
    elif name == "fail":
        yield f"ERROR: {args.error}"
    elif name == "cancel":
        yield "cancelled"
    elif name == "commit_pending":
        yield "committed the run to history"
    elif name == "discard_pending":
        yield "discarded the run's in-flight tail (coherent prefix kept)"


def _io(record: IoRecord) -> str | None:
    d = record.data
    kind = record.kind
    took = f" in {record.duration_s:.3f}s" if record.duration_s is not None else ""
    if kind == "model_error":
        err = d.get("error") or {}
        status = f" HTTP {err.get('status')}" if err.get("status") else ""
        return f"model error{status}: {err.get('kind')}: {err.get('message')}{took}"
    if kind == "retry":
        return f"retry {d.get('attempt')} after {d.get('delay_s')}s ({d.get('kind')})"
    if kind == "crash":
        size = d.get("snapshot_bytes")
        return f"crash at step {d.get('step')}; restored from a {size}-byte snapshot"
    if kind == "cancel":
        return f"cancel: {d.get('reason', '')}"
    if kind == "tool_result" and d.get("fault"):
        return f"tool fault {d.get('fault')} in {d.get('name')}"
    if kind == "compaction":
        if d.get("noop"):
            return f"compaction ({d.get('reason')}): nothing to cut"
        return (
            f"compaction ({d.get('reason')}): {d.get('messages_before')} messages -> "
            f"{d.get('messages_after')}"
        )
    return None
