"""Scrubbing a recorded model stream as its client reads it: each channel's deltas joined.

A key the model streams may be cut across pieces, so scrubbing each line alone keeps it while
the client joins the pieces whole again. Here the pieces of each channel (one choice's text, one
tool call's arguments, one content block) are joined, scrubbed, and cut back at the same places:
a placeholder goes where its secret began. The stream keeps its events and their order.

Tool-call arguments are scrubbed as data too. When the clean text cannot be laid over the pieces
(the arguments were re-serialized), it goes whole into the channel's first piece and the others
are emptied: the joined result is the same.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import Any, Final

from loopctl.secrets import PLACEHOLDER
from loopctl_sim.trace.scrub import Scrubber

#: OpenAI chat ``delta`` fields that stream text (reasoning as some hosts send it).
_CHAT_TEXT: Final = ("content", "refusal", "reasoning_content", "reasoning", "reasoning_details")
#: The fields of a streamed chunk that hold text, or chunks of their own (``thinking``).
_CHUNK_TEXT: Final = ("text", "summary", "thinking", "content")
#: Anthropic delta fields that stream text or a tool's JSON input.
_BLOCK_TEXT: Final = ("text", "partial_json", "thinking")
#: Ollama ``message`` fields that stream text.
_OLLAMA_TEXT: Final = ("content", "thinking")

#: What names a channel whose joined pieces are a JSON text (a tool call's arguments).
_JSON_CHANNELS: Final = ('"arguments"', '"partial_json"', "function_call_arguments")

#: A place a string delta sits: the channel it belongs to, its container, the field.
_Slot = tuple[str, dict[str, Any], str]


def _key(*parts: Any) -> str:
    return json.dumps(parts, default=str)


def _chunk_slots(where: tuple[Any, ...], value: Any) -> Iterator[_Slot]:
    """The texts of a delta field that streams chunks, not a string (Mistral's content chunks,
    a thinking chunk's own list, a host's ``reasoning`` object or ``reasoning_details``): the
    texts of one kind of chunk join into a channel of their own, as the client joins them."""
    for chunk in value if isinstance(value, list) else [value]:
        if not isinstance(chunk, dict):
            continue
        kind = chunk.get("type")
        for field in _CHUNK_TEXT:
            inner = chunk.get(field)
            if isinstance(inner, str):
                yield _key(*where, kind, field), chunk, field
            elif isinstance(inner, list | dict):
                yield from _chunk_slots((*where, kind, field), inner)


def _chat_slots(obj: dict[str, Any]) -> Iterator[_Slot]:
    choices = obj.get("choices")
    if not isinstance(choices, list):
        return
    for choice in choices:
        if not isinstance(choice, dict):
            continue
        # some hosts send a chunk's piece under ``message`` instead of ``delta``
        delta = choice.get("delta") if "delta" in choice else choice.get("message")
        if not isinstance(delta, dict):
            continue
        index = choice.get("index", 0)
        for field in _CHAT_TEXT:
            if isinstance(delta.get(field), str):
                yield _key("choice", index, field), delta, field
            elif isinstance(delta.get(field), list | dict):
                yield from _chunk_slots(("choice", index, field), delta[field])
        calls = delta.get("tool_calls")
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                channel = _key("choice", index, "tool", call.get("index", 0), "arguments")
                yield channel, function, "arguments"


def _event_slots(obj: dict[str, Any]) -> Iterator[_Slot]:
    kind = obj.get("type")
    if kind == "content_block_start":  # Anthropic: a block may open with some text
        block = obj.get("content_block")
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            yield _key("block", obj.get("index", 0), "text"), block, "text"
    elif kind == "content_block_delta":  # Anthropic
        delta = obj.get("delta")
        if isinstance(delta, dict):
            for field in _BLOCK_TEXT:
                if isinstance(delta.get(field), str):
                    yield _key("block", obj.get("index", 0), field), delta, field
    elif isinstance(kind, str) and kind.endswith(".delta") and isinstance(obj.get("delta"), str):
        # the Responses API: output text, function-call arguments, reasoning summaries
        where = (obj.get("item_id"), obj.get("output_index"), obj.get("content_index"))
        yield _key("item", kind, *where), obj, "delta"


def _ollama_slots(obj: dict[str, Any]) -> Iterator[_Slot]:
    if "done" not in obj:
        return
    message = obj.get("message")
    if isinstance(message, dict):
        for field in _OLLAMA_TEXT:
            if isinstance(message.get(field), str):
                yield _key("message", field), message, field
    if isinstance(obj.get("response"), str):  # /api/generate
        yield _key("response"), obj, "response"


def slots(obj: Any) -> Iterator[_Slot]:
    """Every streamed string of one decoded event, with the channel its deltas join into."""
    if isinstance(obj, dict):
        yield from _chat_slots(obj)
        yield from _event_slots(obj)
        yield from _ollama_slots(obj)


def _replaced_spans(original: str, clean: str) -> list[tuple[int, int, str]] | None:
    """Where in ``original`` each placeholder of ``clean`` stands: ``(start, end, placeholder)``,
    the text between them unchanged; None when ``clean`` is not ``original`` with spans
    replaced by placeholders."""
    holders = list(PLACEHOLDER.finditer(clean))
    cuts = [0, *[p for m in holders for p in m.span()], len(clean)]
    between = [clean[cuts[i] : cuts[i + 1]] for i in range(0, len(cuts), 2)]
    head, tail = between[0], between[-1]
    if not holders or not original.startswith(head) or not original.endswith(tail):
        return None
    if len(head) + len(tail) > len(original):
        return None
    spans: list[tuple[int, int, str]] = []
    pos = len(head)
    for i, holder in enumerate(holders):
        after = between[i + 1]
        if i == len(holders) - 1:
            end = len(original) - len(after)
        elif not after:
            return None  # two placeholders side by side: where one ends is unknown
        else:
            end = original.find(after, pos + 1)
        if end < pos:
            return None
        spans.append((pos, end, holder.group(0)))
        pos = end + len(after)
    return spans


def resplit(pieces: Sequence[str], clean: str) -> list[str]:
    """``clean`` (the scrubbed join of ``pieces``) cut into as many pieces: the unchanged text at
    its old places, each placeholder in the piece where its secret began; the joined result is
    always ``clean``."""
    joined = "".join(pieces)
    if clean == joined or not pieces:
        return list(pieces)
    spans = _replaced_spans(joined, clean)
    if spans is None:
        return [clean, *[""] * (len(pieces) - 1)]
    starts: list[int] = []
    ends: list[int] = []
    offset = 0
    for piece in pieces:
        starts.append(offset)
        offset += len(piece)
        ends.append(offset)
    out: list[list[str]] = [[] for _ in pieces]

    def keep(lo: int, hi: int) -> None:
        for k, (start, end) in enumerate(zip(starts, ends, strict=True)):
            a, b = max(lo, start), min(hi, end)
            if a < b:
                out[k].append(joined[a:b])

    pos = 0
    for start, end, holder in spans:
        keep(pos, start)
        owner = min(max(bisect_right(starts, start) - 1, 0), len(pieces) - 1)
        out[owner].append(holder)
        pos = end
    keep(pos, len(joined))
    return ["".join(parts) for parts in out]


def _clean_channel(channel: str, text: str, scrub: Scrubber) -> str:
    clean = scrub.text(text)
    if not any(mark in channel for mark in _JSON_CHANNELS):
        return clean
    try:
        data = json.loads(clean)
    except ValueError:
        return clean
    scrubbed = scrub(data)
    return clean if scrubbed is data else json.dumps(scrubbed, ensure_ascii=False)


def scrub_stream_deltas(events: Sequence[Any], scrub: Scrubber) -> set[int]:
    """Scrub, in place, the streamed strings of ``events`` (decoded JSON events in stream order)
    channel by channel, joined; returns the indexes of the events it changed."""
    channels: dict[str, list[tuple[int, dict[str, Any], str]]] = {}
    for index, event in enumerate(events):
        for channel, container, field in slots(event):
            channels.setdefault(channel, []).append((index, container, field))
    changed: set[int] = set()
    for channel, places in channels.items():
        pieces = [str(container[field]) for _, container, field in places]
        joined = "".join(pieces)
        clean = _clean_channel(channel, joined, scrub)
        if clean == joined:
            continue
        for (index, container, field), new in zip(places, resplit(pieces, clean), strict=True):
            if container[field] != new:
                container[field] = new
                changed.add(index)
    return changed
