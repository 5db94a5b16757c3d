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
from typing import Any

from examples.model_server.serving import LocalServer, QuietHandler, sse

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


def openai_stream(reply: Reply, turn: int) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse(
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
    out = [sse({"type": "message_start", "message": message}, "message_start")]
    if isinstance(reply, Text):
        block: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": p} for p in reply.pieces]
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_{turn}", "name": reply.name, "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in reply.pieces]
        stop = "tool_use"
    out.append(
        sse(
            {"type": "content_block_start", "index": 0, "content_block": block},
            "content_block_start",
        )
    )
    for delta in deltas:
        out.append(
            sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        )
    out.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    out.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
            "message_delta",
        )
    )
    out.append(sse({"type": "message_stop"}, "message_stop"))
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


class _Handler(QuietHandler):
    def do_POST(self) -> None:
        owner: FakeStreams = self.owner
        body = json.loads(self.body())
        owner.requests.append(body)
        owner.seen.append((self.path, self.header_map()))
        if owner.stall:
            owner.stalled.set()
            owner.release.wait()
            return
        turn = len(owner.requests) - 1
        if self.path.split("?")[0] != PATHS[owner.wire] or turn >= len(owner.replies):
            self.send(404, "application/json", b'{"error":{"message":"no such reply"}}')
            return
        payload = STREAMS[owner.wire](owner.replies[turn], turn)
        self.send(200, TYPES[owner.wire], payload)


class FakeStreams(LocalServer):
    """``with FakeStreams("anthropic", replies) as server:`` serves on ``server.url`` (the
    client's ``base_url``) until the block ends."""

    def __init__(self, wire: str, replies: list[Reply], *, stall: bool = False) -> None:
        self.wire, self.replies, self.stall = wire, replies, stall
        self.requests: list[dict[str, Any]] = []
        self.seen: list[tuple[str, dict[str, str]]] = []  # each request's path and headers
        self.stalled = threading.Event()
        self.release = threading.Event()
        super().__init__(_Handler)

    @property
    def url(self) -> str:
        return f"{self.root}/v1" if self.wire == "openai" else self.root

    def close(self) -> None:
        self.release.set()  # a stalled request ends, unanswered
        super().close()
