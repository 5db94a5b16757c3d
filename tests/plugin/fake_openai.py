"""A local OpenAI-compatible server that plays the support agent's model, for recording cassettes.

It listens on 127.0.0.1 (a free port), answers ``POST /v1/chat/completions`` with a streamed chat
completion (server-sent events shaped as OpenAI's, usage last when ``stream_options`` asks) and
decides like a small, deterministic model of the sample agent in ``examples/support_agent``:

- the user names an order (``A-1001``) and no tool answered yet: call ``lookup_order``;
- the order came back, the user asked for a refund and none was tried: call ``refund`` for the
  whole amount;
- otherwise: a final text built from the last tool's answer.

Ids, timestamps and headers are fixed, so recording twice writes the same cassette. It keeps every
request it received (``requests``: the JSON body and the headers) so a test can tell a replay
(no request) from a recording.
"""

from __future__ import annotations

import json
import re
from typing import Any

from examples.model_server.serving import LocalServer, QuietHandler, sse

__all__ = ["FAKE_KEY", "FakeOpenAI"]

#: The key a recording sends (shaped like a real one, so a test can check it is not written).
FAKE_KEY = "sk-proj-fakeKEYfor" + "Recording0123456789abcdef"
MODEL = "gpt-4o-mini-2024-07-18"
_ORDER = re.compile(r"\bA-\d{4}\b")


def _user_text(messages: list[dict[str, Any]]) -> str:
    texts = [m.get("content") for m in messages if m.get("role") == "user"]
    return str(texts[-1]) if texts else ""


def _tool_call(name: str, arguments: dict[str, Any], turn: int) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"call_{turn}", "name": name, "arguments": arguments}]}


def decide(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's next move: ``{"text": ...}`` or ``{"tool_calls": [...]}``."""
    turn = len(messages)
    asked = _user_text(messages)
    order = _ORDER.search(asked)
    last = messages[-1] if messages else {}
    if last.get("role") == "user":
        if order is None:
            return {"text": "Which order is it about? Its id looks like A-1001."}
        return _tool_call("lookup_order", {"order_id": order.group(0)}, turn)
    answer = str(last.get("content", ""))
    tried_refund = any(
        c["function"]["name"] == "refund" for m in messages for c in (m.get("tool_calls") or [])
    )
    if answer.startswith("{"):
        found = json.loads(answer)
        if "refund" in asked.lower() and not tried_refund and found["status"] == "delivered":
            args = {"order_id": found["order_id"], "amount": found["amount"]}
            return _tool_call("refund", args, turn)
        return {"text": f"Order {found['order_id']} ({found['item']}) is {found['status']}."}
    return {"text": f"About your refund: {answer}."}


def _chunk(cid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": 1764489600,
        "model": MODEL,
        "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def stream_of(move: dict[str, Any], turn: int, usage: bool) -> bytes:
    """The move as OpenAI's streamed chunks (the text in two pieces, each call's arguments in
    two), then the usage chunk when asked for, then ``[DONE]``."""
    cid = f"chatcmpl-fake{turn:04d}"
    chunks = [_chunk(cid, {"role": "assistant", "content": None if "tool_calls" in move else ""})]
    if "text" in move:
        text: str = move["text"]
        half = len(text) // 2
        chunks += [_chunk(cid, {"content": text[:half]}), _chunk(cid, {"content": text[half:]})]
        finish = "stop"
    else:
        for index, call in enumerate(move["tool_calls"]):
            arguments = json.dumps(call["arguments"])
            head = {"id": call["id"], "type": "function"}
            function = {"name": call["name"], "arguments": arguments[:5]}
            chunks.append(
                _chunk(cid, {"tool_calls": [{"index": index, **head, "function": function}]})
            )
            rest = {"index": index, "function": {"arguments": arguments[5:]}}
            chunks.append(_chunk(cid, {"tool_calls": [rest]}))
        finish = "tool_calls"
    chunks.append(_chunk(cid, {}, finish))
    if usage:
        tail = _chunk(cid, {})
        tail["choices"] = []
        tail["usage"] = {
            "prompt_tokens": 40 + 10 * turn,
            "completion_tokens": 12,
            "total_tokens": 52 + 10 * turn,
        }
        chunks.append(tail)
    return ("".join(sse(c) for c in chunks) + "data: [DONE]\n\n").encode()


class _Handler(QuietHandler):
    def version_string(self) -> str:
        return "fake-openai"

    def do_POST(self) -> None:
        owner: FakeOpenAI = self.owner
        body = json.loads(self.body())
        owner.requests.append((body, self.header_map()))
        request_id = {"x-request-id": f"req_fake{len(owner.requests):04d}"}
        if self.path != "/v1/chat/completions":
            self.send(404, "application/json", b'{"error":{"message":"not found"}}', request_id)
            return
        messages: list[dict[str, Any]] = body["messages"]
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        payload = stream_of(decide(messages), len(messages), usage)
        self.send(200, "text/event-stream; charset=utf-8", payload, request_id)


class FakeOpenAI(LocalServer):
    """``with FakeOpenAI() as server:`` serves on ``server.url`` (an OpenAI ``base_url``) until
    the block ends; ``requests`` is what it received."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        super().__init__(_Handler)

    @property
    def url(self) -> str:
        return f"{self.root}/v1"
