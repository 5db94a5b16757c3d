"""OpenAI Chat Completions: the conversation as chat messages and back, tools, usage, reasoning.

History: the system prompt is the first message; an assistant message echoes its
``tool_calls`` (arguments as a JSON string); each ``ToolResult`` becomes one ``role: tool``
message, and text riding with results becomes a user message after them. The wire has no
``is_error`` flag: an error result travels as its content alone.

Reasoning and extras of compatible hosts are kept as parts of the client's ``provider`` key
(its host: ``deepseek``, ``openrouter``, ``gemini``, ...) and echoed back only to it, as the
fields it sent, on the assistant message they came with:

- ``reasoning_content`` (DeepSeek, Z.ai, Qwen), ``reasoning`` (OpenRouter, vLLM, Groq, Ollama)
  and ``reasoning_details`` (OpenRouter's structured, signed reasoning): one ``ThinkingPart``
  whose ``data`` holds the fields. DeepSeek's thinking mode requires ``reasoning_content`` back
  on assistant messages of tool-call turns (a 400 otherwise) and ignores it elsewhere;
  OpenRouter asks for ``reasoning_details`` back unchanged; so it goes back wherever it came.
- ``extra_content`` (Gemini's ``thought_signature``, which Gemini 3 requires back on function
  calls): on a tool call, a ``ProviderPart`` ``{"type": "call_extra", "call_id", "fields"}``;
  on the message, ``{"type": "message_extra", "fields"}``.

Another provider's parts are left out: no host documents a conversion.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from loopctl.api import ToolSpec, Usage
from loopctl.core import Message, ProviderPart, TextPart, ThinkingPart

DEFAULT_PROVIDER = "openai"
CALL_EXTRA: Final = "call_extra"
MESSAGE_EXTRA: Final = "message_extra"
#: The reasoning fields of an assistant message, in the order their text is preferred.
REASONING_FIELDS: Final = ("reasoning_content", "reasoning", "reasoning_details")
#: Reasoning kept in the message and the trace but not sent back (Mistral's ``thinking``
#: chunks: no host asks for them again).
KEPT_ONLY: Final = "thinking"


def args_json(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def merge_fields(into: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """Add a message's fields: strings join, lists extend, objects merge, the rest replaces."""
    for key, value in fields.items():
        old = into.get(key)
        if isinstance(old, str | list) and type(value) is type(old):
            into[key] = old + value  # type: ignore[operator]
        elif isinstance(old, dict) and isinstance(value, Mapping):
            merged = dict(old)
            merge_fields(merged, value)
            into[key] = merged
        else:
            into[key] = value


def _detail_text(details: Any) -> str:
    if not isinstance(details, list):
        return ""
    pieces = [d.get("text") or d.get("summary") or "" for d in details if isinstance(d, Mapping)]
    return "".join(p for p in pieces if isinstance(p, str))


def reasoning_text(value: Any) -> str:
    """The text of reasoning in a host's own shape: a string, or the ``text`` / ``content`` /
    ``summary`` / ``thinking`` strings inside objects and lists, joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(reasoning_text(v) for v in value)
    if isinstance(value, Mapping):
        for key in ("text", "content", "summary", "thinking", "reasoning"):
            if value.get(key):
                return reasoning_text(value[key])
    return ""


def reasoning_part(fields: Mapping[str, Any], provider: str) -> ThinkingPart | None:
    """The ``ThinkingPart`` of a message's reasoning fields, or None without any. Fields in
    ``REASONING_FIELDS`` go back to the host; ``thinking`` (Mistral's chunks) is kept only."""
    data = {k: fields[k] for k in (*REASONING_FIELDS, KEPT_ONLY) if fields.get(k)}
    if not data:
        return None
    text = reasoning_text(data.get("reasoning_content") or data.get("reasoning"))
    if not text:
        text = _detail_text(data.get("reasoning_details")) or reasoning_text(data.get(KEPT_ONLY))
    return ThinkingPart(provider=provider, text=text, data=data)


def _assistant(message: Message, provider: str) -> dict[str, Any]:
    # content may be null only beside tool_calls
    content = message.text or (None if message.tool_calls else "")
    entry: dict[str, Any] = {"role": "assistant", "content": content}
    calls: dict[str, dict[str, Any]] = {}
    if message.tool_calls:
        entry["tool_calls"] = []
        for call in message.tool_calls:
            wire = {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": args_json(call.arguments)},
            }
            entry["tool_calls"].append(wire)
            calls[call.id] = wire
    for part in message.parts:
        if not isinstance(part, ThinkingPart | ProviderPart) or part.provider != provider:
            continue
        if isinstance(part, ThinkingPart):
            if part.data:
                merge_fields(entry, {k: v for k, v in part.data.items() if k in REASONING_FIELDS})
        elif part.data.get("type") == CALL_EXTRA:
            target = calls.get(part.data.get("call_id", ""))
            if target is not None:
                target.update(part.data.get("fields") or {})
        elif part.data.get("type") == MESSAGE_EXTRA:
            entry.update(part.data.get("fields") or {})
    return entry


def messages_to_wire(
    messages: Sequence[Message], system: str | None = None, provider: str = DEFAULT_PROVIDER
) -> list[dict[str, Any]]:
    """Messages in Chat Completions form; ``system`` (if any) becomes the first message."""
    wire: list[dict[str, Any]] = []
    if system:
        wire.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "system":
            wire.append({"role": "system", "content": message.text})
        elif message.role == "assistant":
            wire.append(_assistant(message, provider))
        else:
            for result in message.tool_results:
                wire.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
                )
            texts = [p for p in message.parts if isinstance(p, TextPart)]
            if texts or not message.tool_results:
                wire.append({"role": "user", "content": message.text})
    return wire


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools as ``{"type": "function", "function": {...}}``."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def usage_from_wire(
    usage: Mapping[str, Any], prompt: str = "prompt_tokens", output: str = "completion_tokens"
) -> Usage:
    """Usage from ``prompt``/``output`` (Chat Completions' names; the Responses API's are
    ``input_tokens``/``output_tokens``) and their ``_details``; context = ``total_tokens``."""
    fresh = int(usage.get(prompt) or 0)
    out = int(usage.get(output) or 0)
    total = usage.get("total_tokens")
    details = usage.get(f"{prompt}_details") or {}
    out_details = usage.get(f"{output}_details") or {}
    return Usage(
        input_tokens=fresh,
        output_tokens=out,
        cache_read_tokens=int(details.get("cached_tokens") or 0),
        context_tokens=int(total) if total is not None else fresh + out,
        reasoning_tokens=int(out_details.get("reasoning_tokens") or 0),
    )
