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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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


class LocalServer:
    """The script, the requests received (their JSON bodies and headers), the base URL."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.answers: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

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


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner: LocalServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return None

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        answer = self.owner.next_answer(body, {k.lower(): v for k, v in self.headers.items()})
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
        data = (answer.body or "").encode()
        self.send_response(answer.status)
        self.send_header("content-type", answer.content_type)
        self.send_header("content-length", str(len(data)))
        for key, value in answer.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
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
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    owner = LocalServer(server)
    handler = type("Handler", (_Handler,), {"owner": owner})
    server.RequestHandlerClass = handler
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield owner
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
