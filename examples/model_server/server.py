"""The HTTP side of the local model server: routes, the API key check, the kept requests.

``ModelServer`` (a ``serving.LocalServer``) listens on 127.0.0.1 (a free port unless given one)
in a thread of the process that starts it; ``with ModelServer() as server:`` serves on
``server.url`` (a ``base_url`` for ``OpenAIClient``, ``AnthropicClient`` and
``OpenAIResponsesClient`` alike) until the block ends.
Like a real provider it refuses a request without an API key (401, in the provider's error shape):
``Authorization: Bearer ...`` for the OpenAI routes, ``x-api-key`` for Anthropic's. With
``api_key`` set only that key is accepted.

``requests`` keeps every request received (``Received``: path, JSON body, headers), so a test can
tell a replay (no request) from a recording. ``delay`` makes each answer wait that many seconds
before its first byte: a slow model. ``hold(n)`` makes the n-th request on (counting from 1)
wait, unanswered, until ``release()``: a test kills a run exactly while it waits for the model.
``fail(n, status)`` answers the n-th request with that HTTP error instead (429 with
``retry-after: 0``, 500, 529 overloaded), in the provider's error shape: a retry over HTTP.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from examples.model_server.serving import LocalServer, QuietHandler
from examples.model_server.travel_model import Move, Turn, decide
from examples.model_server.wire import (
    anthropic_body,
    anthropic_turns,
    chat_body,
    chat_turns,
    responses_body,
    responses_turns,
)

__all__ = ["ModelServer", "Received"]

_Route = tuple[
    Callable[[Mapping[str, Any]], list[Turn]],
    Callable[[Mapping[str, Any], Move, int], tuple[str, bytes]],
]
ROUTES: dict[str, _Route] = {
    "/v1/chat/completions": (chat_turns, chat_body),
    "/v1/messages": (anthropic_turns, anthropic_body),
    "/v1/responses": (responses_turns, responses_body),
}


@dataclass(frozen=True)
class Received:
    """One request the server received."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]


def _error(path: str, status: int, kind: str, message: str) -> bytes:
    if path == "/v1/messages":
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    error = {"message": message, "type": kind, "param": None, "code": kind}
    return json.dumps({"error": error}).encode()


#: An injected failure's error type and message, by HTTP status (the providers' wording).
_FAILURES: dict[int, tuple[str, str]] = {
    429: ("requests", "Rate limit reached for requests. Please try again in 0s."),
    500: ("api_error", "The server had an error while processing your request."),
    503: ("server_error", "The engine is currently overloaded, please try again later"),
    529: ("overloaded_error", "Overloaded"),
}


class _Handler(QuietHandler):
    answer_headers = {"x-request-id": "req_skyway"}

    def version_string(self) -> str:
        return "skyway-model-server"

    def do_POST(self) -> None:
        owner: ModelServer = self.owner
        headers = self.header_map()
        try:
            body = json.loads(self.body())
        except ValueError:
            body = None
        with owner.lock:
            owner.requests.append(
                Received(self.path, body if isinstance(body, dict) else {}, headers)
            )
            n = len(owner.requests)
        route = ROUTES.get(self.path)
        if route is None:
            self.send(
                404,
                "application/json",
                _error(self.path, 404, "not_found_error", f"no route {self.path}"),
            )
            return
        if not owner.authorized(self.path, headers):
            kind = "authentication_error" if self.path == "/v1/messages" else "invalid_api_key"
            message = (
                "invalid x-api-key"
                if self.path == "/v1/messages"
                else ("Invalid API key: send one as a Bearer token.")
            )
            self.send(401, "application/json", _error(self.path, 401, kind, message))
            return
        if not isinstance(body, dict) or not body.get("model"):
            kind = "invalid_request_error"
            self.send(
                400,
                "application/json",
                _error(self.path, 400, kind, "a JSON body with a model is required"),
            )
            return
        failure = owner.failures.get(n)
        if failure is not None:
            self._fail(failure)
            return
        to_turns, to_body = route
        content_type, payload = to_body(body, decide(to_turns(body)), n)
        if owner.held_from is not None and n >= owner.held_from:
            owner.released.wait()
        if owner.delay:
            time.sleep(owner.delay)
        self.send(200, content_type, payload)

    def _fail(self, status: int) -> None:
        anthropic = self.path == "/v1/messages"
        kind, message = _FAILURES.get(status, ("api_error", "The server had an error."))
        if anthropic and status == 429:
            kind = "rate_limit_error"
        elif not anthropic and status == 529:
            kind = "server_error"
        extra = {"retry-after": "0"} if status in (429, 529, 503) else {}
        self.send(status, "application/json", _error(self.path, status, kind, message), extra)


class ModelServer(LocalServer):
    """A deterministic model on 127.0.0.1 speaking the providers' wire formats; see the module
    docstring."""

    def __init__(self, port: int = 0, *, api_key: str | None = None, delay: float = 0.0) -> None:
        self.api_key = api_key
        self.delay = delay
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        self.held_from: int | None = None
        self.released = threading.Event()
        self.failures: dict[int, int] = {}
        super().__init__(_Handler, port)

    @property
    def url(self) -> str:
        """The ``base_url`` the clients take (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def authorized(self, path: str, headers: Mapping[str, str]) -> bool:
        if path == "/v1/messages":
            given = headers.get("x-api-key", "")
        else:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            given = given.strip() if scheme.lower() == "bearer" else ""
        return bool(given) and (self.api_key is None or given == self.api_key)

    def fail(self, n: int, status: int = 429) -> None:
        """Answer the ``n``-th request (1 is the first) with HTTP ``status`` in the provider's
        error shape (429, 503 and 529 with ``retry-after: 0``) instead of the model's move."""
        self.failures[n] = status

    def hold(self, n: int) -> None:
        """From the ``n``-th request on (1 is the first this server receives), answer nothing
        until ``release()``."""
        self.released.clear()
        self.held_from = n

    def release(self) -> None:
        """Answer the held requests, and hold no more."""
        self.held_from = None
        self.released.set()

    def close(self) -> None:
        self.release()
        super().close()
