"""Local HTTP servers for the OpenTelemetry tests, on 127.0.0.1 only.

``ScriptedOpenAI``: an OpenAI-compatible ``/v1/chat/completions`` that answers each request with
the next move of a script, answered as the model server answers (``wire.chat_body`` of
``examples/model_server``: text in two pieces, each call's arguments in two, usage last when
asked for): ``{"text": ...}``, ``{"calls": [(name,
arguments), ...]}``, or ``{"status": 401, "echo": True}`` (an error whose message echoes the
request's ``Authorization`` header, as some gateways do) / ``{"status": 429}``.

``Collector``: an OTLP/HTTP endpoint that keeps what it receives and answers with a given status
and body (``{headers}`` in the body is replaced by the request's headers, echoed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from examples.model_server.serving import LocalServer, QuietHandler
from examples.model_server.travel_model import Call, Move
from examples.model_server.wire import chat_body

__all__ = ["Collector", "ScriptedOpenAI"]


def _move(move: dict[str, Any], n: int) -> Move:
    """A script's move as the model server's (its calls' ids ``call_<n>_<index>``)."""
    calls = tuple(
        Call(f"{n}_{index}", name, arguments)
        for index, (name, arguments) in enumerate(move.get("calls", ()))
    )
    return Move(move.get("text", ""), calls)


class _OpenAIHandler(QuietHandler):
    def do_POST(self) -> None:
        owner: ScriptedOpenAI = self.owner
        body = json.loads(self.body())
        owner.requests.append(body)
        move = owner.moves.pop(0)
        status = move.get("status")
        if status is None:
            self.send(200, *chat_body(body, _move(move, len(owner.requests)), len(owner.requests)))
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
