"""A local model server that streams scripted replies in OpenAI's, Anthropic's or Ollama's wire
format, each piece as its own event, for recording cassettes of streams.

A reply is a text in pieces (``Text(["Your key ", "sk-pr", ...])``) or a tool call whose
arguments' JSON comes in pieces (``Call("remember", ['{"note": "sk-', ...])``); the server
answers its n-th request with the n-th reply, streamed piece by piece exactly as given (Ollama
sends a tool call whole, as Ollama does). ``stall=True`` makes it accept each request and never
answer (``stalled`` is set once one arrived), for a test that kills its client mid-recording.

It listens on 127.0.0.1 (a free port); ``requests`` keeps every JSON body it received, ``seen``
each request's path (query included) and headers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["Call", "FakeStreams", "Text"]

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}


@dataclass(frozen=True)
class Text:
    pieces: list[str]


@dataclass(frozen=True)
class Call:
    name: str
    pieces: list[str]  # the arguments' JSON text, cut


Reply = Text | Call


def _sse(obj: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(obj, separators=(',', ':'))}\n\n"


def openai_stream(reply: Reply, turn: int) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(
            {
                "id": f"chatcmpl-{turn}",
                "object": "chat.completion.chunk",
                "created": 1764489600,
                "model": "fake-model",
                "choices": [choice],
            }
        )

    out = [chunk({"role": "assistant", "content": ""})]
    if isinstance(reply, Text):
        out += [chunk({"content": p}) for p in reply.pieces]
        out.append(chunk({}, "stop"))
    else:
        head = {
            "index": 0,
            "id": f"call_{turn}",
            "type": "function",
            "function": {"name": reply.name, "arguments": ""},
        }
        out.append(chunk({"tool_calls": [head]}))
        for piece in reply.pieces:
            out.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        out.append(chunk({}, "tool_calls"))
    return ("".join(out) + "data: [DONE]\n\n").encode()


def anthropic_stream(reply: Reply, turn: int) -> bytes:
    message: dict[str, Any] = {
        "id": f"msg_{turn}",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    out = [_sse({"type": "message_start", "message": message}, "message_start")]
    if isinstance(reply, Text):
        block: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in reply.pieces]
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_{turn}", "name": reply.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in reply.pieces]
        stop = "tool_use"
    out.append(
        _sse(
            {"type": "content_block_start", "index": 0, "content_block": block},
            "content_block_start",
        )
    )
    for delta in deltas:
        out.append(
            _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        )
    out.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    out.append(
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
            "message_delta",
        )
    )
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return "".join(out).encode()


def ollama_stream(reply: Reply, turn: int) -> bytes:
    def line(message: dict[str, Any], done: bool) -> str:
        obj: dict[str, Any] = {
            "model": "fake-model",
            "created_at": "2026-11-30T08:00:00Z",
            "message": {"role": "assistant", **message},
            "done": done,
        }
        if done:
            obj |= {"done_reason": "stop", "prompt_eval_count": 10, "eval_count": 9}
        return json.dumps(obj, separators=(",", ":")) + "\n"

    if isinstance(reply, Text):
        out = [line({"content": p}, False) for p in reply.pieces]
    else:  # Ollama sends a call whole
        arguments = json.loads("".join(reply.pieces))
        call = {"function": {"name": reply.name, "arguments": arguments}}
        out = [line({"content": "", "tool_calls": [call]}, False)]
    out.append(line({"content": ""}, True))
    return "".join(out).encode()


STREAMS = {"openai": openai_stream, "anthropic": anthropic_stream, "ollama": ollama_stream}
TYPES = {
    "openai": "text/event-stream",
    "anthropic": "text/event-stream",
    "ollama": "application/x-ndjson",
}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        owner = self.server.owner
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        owner.requests.append(body)
        owner.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        if owner.stall:
            owner.stalled.set()
            owner.release.wait()
            return
        turn = len(owner.requests) - 1
        if self.path.split("?")[0] != PATHS[owner.wire] or turn >= len(owner.replies):
            self._send(404, "application/json", b'{"error":{"message":"no such reply"}}')
            return
        payload = STREAMS[owner.wire](owner.replies[turn], turn)
        self._send(200, TYPES[owner.wire], payload)

    def _send(self, status: int, content_type: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    owner: FakeStreams
    daemon_threads = True


class FakeStreams:
    """``with FakeStreams("anthropic", replies) as server:`` serves on ``server.url`` (the
    client's ``base_url``) until the block ends."""

    def __init__(self, wire: str, replies: list[Reply], *, stall: bool = False) -> None:
        self.wire, self.replies, self.stall = wire, replies, stall
        self.requests: list[dict[str, Any]] = []
        self.seen: list[tuple[str, dict[str, str]]] = []  # each request's path and headers
        self.stalled = threading.Event()
        self.release = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        root = f"http://{host!s}:{port}"
        return f"{root}/v1" if self.wire == "openai" else root

    def __enter__(self) -> FakeStreams:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
