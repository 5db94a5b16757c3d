"""Anthropic Messages: the conversation to content blocks and back, tools, usage.

History: the system prompt (and any system messages of the history, joined by blank lines) goes
top-level; assistant messages become their blocks in order; results become ``tool_result``
blocks (``is_error`` sent only when true). Anthropic wants roles to alternate and every
``tool_result`` at the start of the next user message, so consecutive messages of one role are
merged into one, ``tool_result`` blocks first (results then a steering note become one user
message). A user message that is a single text stays a plain string. A message with nothing to
send (an empty assistant reply) is left out, as the API rejects empty content.

Parts this client keeps (``provider`` is its key, ``anthropic`` at api.anthropic.com) go back
as Anthropic requires: a ``ThinkingPart`` as the ``thinking`` block with its ``signature``, or
the ``redacted_thinking`` block with its data, unchanged (required with extended thinking in a
tool-use turn; the API drops what a model cannot read); a ``ProviderPart`` as the block it was
(``server_tool_use``, ``web_search_tool_result``, ``mcp_tool_use``, ...), and a citations part
as the ``citations`` of the text block before it. Parts of any other provider are left out:
Anthropic cannot check another provider's reasoning, and its docs describe no conversion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopctl.api import ToolSpec, Usage
from loopctl.core import Message, Part, ProviderPart, TextPart, ThinkingPart, ToolCall, ToolResult

DEFAULT_PROVIDER = "anthropic"
#: The ``data["type"]`` of a ProviderPart holding the citations of the text part before it.
CITATIONS = "citations"


def _thinking_block(part: ThinkingPart) -> dict[str, Any] | None:
    if part.redacted is not None:
        return {"type": "redacted_thinking", "data": part.redacted}
    if part.signature is None:
        return None  # unsigned thinking is refused: it cannot go back
    return {"type": "thinking", "thinking": part.text, "signature": part.signature}


def _blocks(message: Message, provider: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            blocks.append(
                {"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments}
            )
        elif isinstance(part, ToolResult):
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": part.call_id,
                "content": part.content,
            }
            if part.is_error:
                block["is_error"] = True
            blocks.append(block)
        elif part.provider != provider:
            continue  # another provider's reasoning or block: Anthropic cannot use it
        elif isinstance(part, ThinkingPart):
            thinking = _thinking_block(part)
            if thinking is not None:
                blocks.append(thinking)
        elif part.data.get("type") == CITATIONS:
            if blocks and blocks[-1]["type"] == "text":
                blocks[-1]["citations"] = part.data.get("citations", [])
        else:
            blocks.append(dict(part.data))
    return blocks


def messages_to_wire(
    messages: Sequence[Message], system: str | None = None, provider: str = DEFAULT_PROVIDER
) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` in Messages form, with same-role neighbours merged."""
    systems = [system] if system else []
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                systems.append(message.text)
            continue
        blocks = _blocks(message, provider)
        if not blocks:
            continue  # the API rejects empty content; the neighbours merge instead
        if merged and merged[-1][0] == message.role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((message.role, blocks))
    wire: list[dict[str, Any]] = []
    for role, blocks in merged:
        if role == "user":
            blocks.sort(key=lambda b: b["type"] != "tool_result")  # stable: results first
        if len(blocks) == 1 and blocks[0]["type"] == "text" and "citations" not in blocks[0]:
            wire.append({"role": role, "content": blocks[0]["text"]})
        else:
            wire.append({"role": role, "content": blocks})
    return ("\n\n".join(systems) or None), wire


def block_parts(block: Mapping[str, Any], provider: str) -> list[Part]:
    """The parts of one content block that is not a tool call or result (those the callers
    handle, since they need ids and names): text, reasoning, or the block kept whole."""
    btype = block.get("type")
    if btype == "text":
        parts: list[Part] = [TextPart(text=block["text"])] if block.get("text") else []
        if block.get("citations"):
            parts.append(
                ProviderPart(
                    provider=provider, data={"type": CITATIONS, "citations": block["citations"]}
                )
            )
        return parts
    if btype == "thinking":
        return [
            ThinkingPart(
                provider=provider, text=block.get("thinking", ""), signature=block.get("signature")
            )
        ]
    if btype == "redacted_thinking":
        return [ThinkingPart(provider=provider, redacted=block.get("data", ""))]
    return [ProviderPart(provider=provider, data=dict(block))]


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools as ``{"name", "description", "input_schema"}``."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Input = uncached + cache writes + cache reads; context = input + output."""
    fresh = int(usage.get("input_tokens") or 0)
    write = int(usage.get("cache_creation_input_tokens") or 0)
    read = int(usage.get("cache_read_input_tokens") or 0)
    output = int(usage.get("output_tokens") or 0)
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=fresh + write + read,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        context_tokens=fresh + write + read + output,
        reasoning_tokens=int(details.get("thinking_tokens") or 0),
    )
