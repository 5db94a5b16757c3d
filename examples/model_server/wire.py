"""The three wire formats the local server speaks, both ways: a request body as the neutral
conversation ``travel_model.decide`` reads, and a ``Move`` as the provider's response body.

- OpenAI Chat Completions (``/v1/chat/completions``): server-sent ``chat.completion.chunk``
  events (the role first, text and each call's arguments in pieces, ``finish_reason`` on a chunk
  whose delta is ``{}``, the usage chunk with ``choices: []`` when ``stream_options.include_usage``
  asks, then ``data: [DONE]``), or one ``chat.completion`` object when ``stream`` is false;
- Anthropic Messages (``/v1/messages``): ``event:`` + ``data:`` pairs, ``message_start``,
  per block ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``input_json_delta`` starting with ``""``) / ``content_block_stop``, ``message_delta`` with the
  stop reason and cumulative usage, ``message_stop``; or one ``message`` object;
- OpenAI Responses (``/v1/responses``): ``response.created``, ``response.output_item.added`` /
  ``.done``, ``response.output_text.delta``, ``response.function_call_arguments.delta`` /
  ``.done``, ``response.completed`` with the usage, every event with its ``sequence_number``; or
  one ``response`` object.

Shapes follow the providers' references (the SDKs' fixtures), so the project's own clients read
them as they read the real services. Ids and timestamps are fixed or derived from the
conversation: the same request always gets the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from examples.model_server.travel_model import Call, Move, Result, Turn

__all__ = [
    "anthropic_body",
    "anthropic_turns",
    "chat_body",
    "chat_turns",
    "responses_body",
    "responses_turns",
    "usage_of",
]

CREATED = 1764489600  # 2025-11-30: fixed, so recording twice gives the same bytes


def _dumps(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text of its blocks/parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, Mapping) and "text" in b
        )
    return ""


def usage_of(body: Mapping[str, Any], move: Move) -> tuple[int, int]:
    """(input, output) token counts: about 4 characters a token, as a tokenizer would guess."""
    prompt = max(1, len(_dumps(body)) // 4)
    output = max(1, (len(move.text) + len(_dumps([c.arguments for c in move.calls]))) // 4)
    return prompt, output


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [piece for piece in (text[:half], text[half:]) if piece]


# --- OpenAI Chat Completions -----------------------------------------------------------------


def chat_turns(body: Mapping[str, Any]) -> list[Turn]:
    turns: list[Turn] = []
    for m in body.get("messages") or []:
        role = m.get("role")
        if role == "assistant":
            calls = [
                Call(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
                for c in m.get("tool_calls") or []
            ]
            turns.append(Turn("assistant", _text_of(m.get("content")), calls))
        elif role == "tool":
            result = Result(str(m.get("tool_call_id")), _text_of(m.get("content")))
            turns.append(Turn("tool", results=[result]))
        elif role == "user":
            turns.append(Turn("user", _text_of(m.get("content"))))
    return turns


def _chunk(cid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return _dumps(
        {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_skyway",
            "choices": [choice],
        }
    )


def chat_body(body: Mapping[str, Any], move: Move, n: int) -> tuple[str, bytes]:
    """(content type, payload) of the Chat Completions answer to ``body``."""
    model = str(body.get("model"))
    cid = f"chatcmpl-skyway{n:05d}"
    prompt, output = usage_of(body, move)
    usage = {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}
    calls: list[dict[str, Any]] = [
        {
            "id": f"call_{c.id}",
            "type": "function",
            "function": {"name": c.name, "arguments": _dumps(c.arguments)},
        }
        for c in move.calls
    ]
    finish = "tool_calls" if calls else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {
            "role": "assistant",
            "content": move.text or None,
            "refusal": None,
        }
        if calls:
            message["tool_calls"] = calls
        whole = {
            "id": cid,
            "object": "chat.completion",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_skyway",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": usage,
        }
        return "application/json", _dumps(whole).encode()
    chunks = [_chunk(cid, model, {"role": "assistant", "content": None if calls else ""})]
    chunks += [_chunk(cid, model, {"content": piece}) for piece in _halves(move.text)]
    for index, call in enumerate(calls):
        arguments = call["function"]["arguments"]
        first = {
            **call,
            "index": index,
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        chunks.append(_chunk(cid, model, {"tool_calls": [first]}))
        for piece in _halves(arguments):
            rest = {"index": index, "function": {"arguments": piece}}
            chunks.append(_chunk(cid, model, {"tool_calls": [rest]}))
    chunks.append(_chunk(cid, model, {}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        tail = json.loads(_chunk(cid, model, {}))
        tail["choices"], tail["usage"] = [], usage
        chunks.append(_dumps(tail))
    text = "".join(f"data: {c}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return "text/event-stream; charset=utf-8", text.encode()


# --- Anthropic Messages ----------------------------------------------------------------------


def anthropic_turns(body: Mapping[str, Any]) -> list[Turn]:
    turns: list[Turn] = []
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        if m.get("role") == "assistant":
            calls = [
                Call(b["id"], b["name"], dict(b.get("input") or {}))
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            turns.append(Turn("assistant", text, calls))
            continue
        results = [
            Result(str(b["tool_use_id"]), _text_of(b.get("content")), bool(b.get("is_error")))
            for b in blocks
            if b.get("type") == "tool_result"
        ]
        if results:
            turns.append(Turn("tool", results=results))
        # consecutive user messages arrive merged, one text block each
        turns += [Turn("user", str(b["text"])) for b in blocks if b.get("type") == "text"]
    return turns


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {_dumps({'type': name, **data})}\n\n"


def anthropic_body(body: Mapping[str, Any], move: Move, n: int) -> tuple[str, bytes]:
    model = str(body.get("model"))
    prompt, output = usage_of(body, move)
    blocks: list[dict[str, Any]] = []
    if move.text:
        blocks.append({"type": "text", "text": move.text})
    for c in move.calls:
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{c.id}", "name": c.name, "input": c.arguments}
        )
    stop = "tool_use" if move.calls else "end_turn"
    message: dict[str, Any] = {
        "id": f"msg_skyway{n:05d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output,
        },
    }
    if not body.get("stream"):
        return "application/json", _dumps(message).encode()
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    events = [_event("message_start", {"message": start}), _event("ping", {})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(
                _event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            for piece in _halves(block["text"]):
                delta = {"type": "text_delta", "text": piece}
                events.append(_event("content_block_delta", {"index": index, "delta": delta}))
        else:
            opened = {**block, "input": {}}
            events.append(_event("content_block_start", {"index": index, "content_block": opened}))
            for piece in ["", *_halves(_dumps(block["input"]))]:
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(_event("content_block_delta", {"index": index, "delta": delta}))
        events.append(_event("content_block_stop", {"index": index}))
    events.append(
        _event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output},
            },
        )
    )
    events.append(_event("message_stop", {}))
    return "text/event-stream; charset=utf-8", "".join(events).encode()


# --- OpenAI Responses ------------------------------------------------------------------------


def responses_turns(body: Mapping[str, Any]) -> list[Turn]:
    turns: list[Turn] = []
    for item in body.get("input") or []:
        kind = item.get("type")
        if kind == "function_call":
            call = Call(
                str(item["call_id"]), item["name"], json.loads(item.get("arguments") or "{}")
            )
            if turns and turns[-1].role == "assistant":
                turns[-1].calls.append(call)
            else:
                turns.append(Turn("assistant", calls=[call]))
        elif kind == "function_call_output":
            turns.append(Turn("tool", results=[Result(str(item["call_id"]), str(item["output"]))]))
        elif item.get("role") == "user":
            turns.append(Turn("user", _text_of(item.get("content"))))
        elif item.get("role") == "assistant":
            turns.append(Turn("assistant", _text_of(item.get("content"))))
    return turns


def responses_body(body: Mapping[str, Any], move: Move, n: int) -> tuple[str, bytes]:
    model = str(body.get("model"))
    prompt, output = usage_of(body, move)
    items: list[dict[str, Any]] = []
    if move.text:
        items.append(
            {
                "id": f"msg_skyway{n:05d}",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": move.text, "annotations": []}],
            }
        )
    for c in move.calls:
        items.append(
            {
                "id": f"fc_{c.id}",
                "type": "function_call",
                "status": "completed",
                "call_id": f"call_{c.id}",
                "name": c.name,
                "arguments": _dumps(c.arguments),
            }
        )
    response: dict[str, Any] = {
        "id": f"resp_skyway{n:05d}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": model,
        "output": items,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": output,
            "total_tokens": prompt + output,
        },
    }
    if not body.get("stream"):
        return "application/json", _dumps(response).encode()
    seq = iter(range(1_000_000))

    def event(name: str, data: dict[str, Any]) -> str:
        numbered = {"type": name, "sequence_number": next(seq), **data}
        return f"event: {name}\ndata: {_dumps(numbered)}\n\n"

    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    events = [event("response.created", {"response": opening})]
    for index, item in enumerate(items):
        if item["type"] == "message":
            events.append(
                event(
                    "response.output_item.added",
                    {
                        "output_index": index,
                        "item": {**item, "content": [], "status": "in_progress"},
                    },
                )
            )
            for piece in _halves(move.text):
                events.append(
                    event(
                        "response.output_text.delta",
                        {
                            "item_id": item["id"],
                            "output_index": index,
                            "content_index": 0,
                            "delta": piece,
                        },
                    )
                )
            events.append(
                event(
                    "response.output_text.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "text": move.text,
                    },
                )
            )
        else:
            events.append(
                event(
                    "response.output_item.added",
                    {
                        "output_index": index,
                        "item": {**item, "arguments": "", "status": "in_progress"},
                    },
                )
            )
            for piece in _halves(item["arguments"]):
                events.append(
                    event(
                        "response.function_call_arguments.delta",
                        {"item_id": item["id"], "output_index": index, "delta": piece},
                    )
                )
            events.append(
                event(
                    "response.function_call_arguments.done",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "name": item["name"],
                        "arguments": item["arguments"],
                    },
                )
            )
        events.append(event("response.output_item.done", {"output_index": index, "item": item}))
    events.append(event("response.completed", {"response": response}))
    return "text/event-stream; charset=utf-8", "".join(events).encode()
