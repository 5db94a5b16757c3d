"""The inverses of the providers' history converters (``messages_to_wire``), for the tests:
a history converted to a wire format and read back must be the same history (nothing lost).
The library only ever converts one way; these read a wire history back into messages."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from loopctl.core import Message, Part, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers._anthropic import block_parts
from loopctl.providers._openai_wire import CALL_EXTRA, MESSAGE_EXTRA, reasoning_part


def _openai_extras(entry: Mapping[str, Any], ids: Sequence[str], provider: str) -> list[Part]:
    parts: list[Part] = []
    for call_id, tc in zip(ids, entry.get("tool_calls") or [], strict=True):
        if tc.get("extra_content"):
            data = {
                "type": CALL_EXTRA,
                "call_id": call_id,
                "fields": {"extra_content": tc["extra_content"]},
            }
            parts.append(ProviderPart(provider=provider, data=data))
    if entry.get("extra_content"):
        data = {"type": MESSAGE_EXTRA, "fields": {"extra_content": entry["extra_content"]}}
        parts.append(ProviderPart(provider=provider, data=data))
    return parts


def openai_from_wire(
    wire: Sequence[Mapping[str, Any]], provider: str = "openai"
) -> tuple[str | None, list[Message]]:
    """The inverse of ``messages_to_wire``: a leading system message becomes ``system``.

    Consecutive ``role: tool`` messages become one user message of results; the result's
    tool name is looked up from the assistant call it answers.
    """
    system: str | None = None
    messages: list[Message] = []
    names: dict[str, str] = {}
    results: list[ToolResult] = []

    def flush() -> None:
        if results:
            messages.append(Message.from_results(list(results)))
            results.clear()

    for i, entry in enumerate(wire):
        role = entry.get("role")
        if role != "tool":
            flush()
        content = entry.get("content")
        if role == "system":
            if i == 0:
                system = content
            else:
                messages.append(Message.system(content or ""))
        elif role == "assistant":
            calls = []
            for tc in entry.get("tool_calls") or []:
                fn = tc["function"]
                raw = fn.get("arguments") or ""
                calls.append(
                    ToolCall(id=tc["id"], name=fn["name"], arguments=json.loads(raw) if raw else {})
                )
                names[tc["id"]] = fn["name"]
            thinking = reasoning_part(entry, provider)
            parts: list[Part] = [thinking] if thinking is not None else []
            parts.extend(Message.assistant(content or "", calls).parts)
            parts.extend(_openai_extras(entry, [c.id for c in calls], provider))
            messages.append(Message(role="assistant", parts=tuple(parts)))
        elif role == "tool":
            call_id = entry["tool_call_id"]
            results.append(
                ToolResult(call_id=call_id, name=names.get(call_id, ""), content=content or "")
            )
        else:
            messages.append(Message.user(content or ""))
    flush()
    return system, messages


def anthropic_from_wire(
    system: str | None, wire: Sequence[Mapping[str, Any]], provider: str = "anthropic"
) -> tuple[str | None, list[Message]]:
    """The inverse of ``messages_to_wire`` (a merged message stays merged)."""
    names: dict[str, str] = {}
    messages: list[Message] = []
    for entry in wire:
        role = entry["role"]
        content = entry["content"]
        if isinstance(content, str):
            messages.append(Message(role=role, parts=(TextPart(text=content),)))
            continue
        parts: list[Part] = []
        for block in content:
            btype = block["type"]
            if btype == "tool_use":
                names[block["id"]] = block["name"]
                parts.append(ToolCall(id=block["id"], name=block["name"], arguments=block["input"]))
            elif btype == "tool_result":
                raw = block.get("content", "")
                text = (
                    raw
                    if isinstance(raw, str)
                    else "".join(b.get("text", "") for b in raw if b.get("type") == "text")
                )
                parts.append(
                    ToolResult(
                        call_id=block["tool_use_id"],
                        name=names.get(block["tool_use_id"], ""),
                        content=text,
                        is_error=bool(block.get("is_error", False)),
                    )
                )
            else:
                parts.extend(block_parts(block, provider))
        messages.append(Message(role=role, parts=tuple(parts)))
    return system, messages


def ollama_from_wire(
    wire: Sequence[Mapping[str, Any]], provider: str = "ollama"
) -> tuple[str | None, list[Message]]:
    """The inverse of ``messages_to_wire``; consecutive tool messages form one results message."""
    system: str | None = None
    messages: list[Message] = []
    results: list[ToolResult] = []
    for i, entry in enumerate(wire):
        role = entry["role"]
        if role != "tool" and results:
            messages.append(Message.from_results(results))
            results = []
        content = entry.get("content") or ""
        if role == "system":
            if i == 0:
                system = content
            else:
                messages.append(Message.system(content))
        elif role == "assistant":
            calls = [
                ToolCall(
                    id=tc.get("id", ""),
                    name=tc["function"]["name"],
                    arguments=tc["function"].get("arguments") or {},
                )
                for tc in entry.get("tool_calls") or []
            ]
            parts: list[Part] = []
            if entry.get("thinking"):
                parts.append(ThinkingPart(provider=provider, text=entry["thinking"]))
            parts.extend(Message.assistant(content, calls).parts)
            messages.append(Message(role="assistant", parts=tuple(parts)))
        elif role == "tool":
            results.append(
                ToolResult(
                    call_id=entry.get("tool_call_id", ""),
                    name=entry.get("tool_name", ""),
                    content=content,
                )
            )
        else:
            messages.append(Message.user(content))
    if results:
        messages.append(Message.from_results(results))
    return system, messages
