"""Local HTTP servers for the OpenTelemetry tests, on 127.0.0.1 only.

``ScriptedOpenAI``: an OpenAI-compatible ``/v1/chat/completions`` that answers each request with
the next move of a script, streamed as server-sent events shaped as OpenAI's (text in two
pieces, each call's arguments in two, usage last): ``{"text": ...}``, ``{"calls": [(name,
arguments), ...]}``, or ``{"status": 401, "echo": True}`` (an error whose message echoes the
request's ``Authorization`` header, as some gateways do) / ``{"status": 429}``.

``Collector``: an OTLP/HTTP endpoint that keeps what it receives and answers with a given status
and body (``{headers}`` in the body is replaced by the request's headers, echoed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from examples.model_server.serving import LocalServer, QuietHandler, sse

__all__ = ["Collector", "ScriptedOpenAI"]


def _chunk(cid: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": cid, "object": "chat.completion.chunk", "model": "skyway-1", "choices": [choice]}


def _stream(move: dict[str, Any], n: int) -> bytes:
    cid = f"chatcmpl-{n}"
    chunks = [_chunk(cid, {"role": "assistant", "content": ""})]
    if "text" in move:
        text: str = move["text"]
        half = len(text) // 2
        chunks += [_chunk(cid, {"content": text[:half]}), _chunk(cid, {"content": text[half:]})]
        finish = "stop"
    else:
        for index, (name, arguments) in enumerate(move["calls"]):
            raw = json.dumps(arguments)
            head = {"index": index, "id": f"call_{n}_{index}", "type": "function"}
            chunks.append(_chunk(cid, {"tool_calls": [{**head, "function": {"name": name}}]}))
            for piece in (raw[:4], raw[4:]):
                frag = {"index": index, "function": {"arguments": piece}}
                chunks.append(_chunk(cid, {"tool_calls": [frag]}))
        finish = "tool_calls"
    chunks.append(_chunk(cid, {}, finish))
    usage = {"prompt_tokens": 30 + 10 * n, "completion_tokens": 5, "total_tokens": 35 + 10 * n}
    chunks.append({"id": cid, "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return ("".join(sse(c) for c in chunks) + "data: [DONE]\n\n").encode()


class _OpenAIHandler(QuietHandler):
    def do_POST(self) -> None:
        owner: ScriptedOpenAI = self.owner
        body = json.loads(self.body())
        owner.requests.append(body)
        move = owner.moves.pop(0)
        status = move.get("status")
        if status is None:
            self.send(200, "text/event-stream", _stream(move, len(owner.requests)))
            return
        message = f"refused (HTTP {status})"
        if move.get("echo"):
            message = f"Incorrect API key: {self.headers.get('authorization')}"
        error = {"error": {"message": message, "type": "invalid_request_error"}}
        self.send(int(status), "application/json", json.dumps(error).encode())


class ScriptedOpenAI(LocalServer):
    """``with ScriptedOpenAI(moves) as server:`` answers at ``server.url`` (a ``base_url``)."""

    def __init__(self, moves: Sequence[dict[str, Any]]) -> None:
        super().__init__(_OpenAIHandler)
        self.moves = list(moves)
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"{self.root}/v1"


class _CollectorHandler(QuietHandler):
    def do_POST(self) -> None:
        owner: Collector = self.owner
        body = self.body()
        owner.received.append((self.path, self.header_map(), body))
        echoed = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
        self.send(owner.status, "text/plain", owner.body.replace("{headers}", echoed).encode())


class Collector(LocalServer):
    """``with Collector(401, "denied: {headers}") as c:`` an OTLP/HTTP endpoint at ``c.url``."""

    def __init__(self, status: int = 200, body: str = "{}") -> None:
        super().__init__(_CollectorHandler)
        self.status = status
        self.body = body
        self.received: list[tuple[str, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        return self.root
