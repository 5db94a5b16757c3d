"""A real HTTP server on 127.0.0.1, started by a test, that answers OpenAI chat completion
requests from a script and misbehaves on demand: drops a stream, answers a stream with JSON,
stalls, trickles, fails with 5xx, sends the wrong content type.

The network guard (``loopctl.testing.block_network``, on for every test) lets loopback through,
so the provider clients reach it over real sockets; nothing leaves the machine. Streams are sent
with chunked transfer encoding, so a connection closed before the last chunk is a broken body the
client sees (``httpx.RemoteProtocolError``), as a dropped proxy connection would be.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from examples.model_server import serving

__all__ = ["Answer", "LocalServer", "call_chunks", "local_server", "text_chunks"]


def text_chunks(*pieces: str) -> list[dict[str, Any]]:
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return chunks


def call_chunks(name: str, arguments: str, call_id: str = "call_1") -> list[dict[str, Any]]:
    frag = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return [
        {"choices": [{"index": 0, "delta": {"tool_calls": [frag]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]


@dataclass
class Answer:
    """One scripted answer. ``chunks``: SSE events (``data: {...}``) sent with ``gap`` seconds
    between them; ``drop_after``: close the connection after that many events, before the
    stream's end; ``stall``: wait this long before the headers; ``status``/``body``/
    ``content_type``/``headers``: a whole response instead of a stream."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    gap: float = 0.0
    drop_after: int | None = None
    stall: float = 0.0
    status: int = 200
    body: str | None = None
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    #: set once the first event of the stream was sent (a test waits on it to interrupt)
    started: threading.Event = field(default_factory=threading.Event)


class LocalServer(serving.LocalServer):
    """The script, the requests received (their JSON bodies and headers), the base URL."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        super().__init__(_Handler)

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def script(self, *answers: Answer) -> list[Answer]:
        with self.lock:
            self.answers.extend(answers)
        return list(answers)

    def next_answer(self, body: dict[str, Any], headers: dict[str, str]) -> Answer:
        with self.lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not self.answers:
                return Answer(
                    status=500,
                    body='{"error": {"message": "the script ran out"}}',
                    content_type="application/json",
                )
            return self.answers.pop(0)


class _Handler(serving.QuietHandler):
    def do_POST(self) -> None:
        owner: LocalServer = self.owner
        answer = owner.next_answer(json.loads(self.body() or b"{}"), self.header_map())
        if answer.stall:
            time.sleep(answer.stall)
        try:
            if answer.body is not None:
                self._whole(answer)
            else:
                self._stream(answer)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up: fine
            pass

    def _whole(self, answer: Answer) -> None:
        self.send(answer.status, answer.content_type, (answer.body or "").encode(), answer.headers)
        self.wfile.flush()

    def _stream(self, answer: Answer) -> None:
        self.send_response(answer.status)
        self.send_header("content-type", answer.content_type)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        for i, chunk in enumerate(answer.chunks):
            if answer.drop_after is not None and i == answer.drop_after:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)  # before the last chunk: a broken body
                self.close_connection = True
                return
            self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            answer.started.set()
            if answer.gap:
                time.sleep(answer.gap)
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


@contextmanager
def local_server() -> Iterator[LocalServer]:
    """A server on 127.0.0.1 (a free port) for the length of the block."""
    with LocalServer() as server:
        yield server
