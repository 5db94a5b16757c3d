"""What a model reasons, as the OpenAI-compatible hosts return it, stays in the message and the
trace, streamed or whole, whether or not it is sent back (issue 30, item 13).

A real server on 127.0.0.1 speaks Chat Completions with SSE (or whole JSON bodies): reasoning in
``delta.reasoning_content`` / ``delta.reasoning`` / ``message.reasoning``, in a host's own object
shape, on a chunk that carries ``message`` instead of ``delta``, and Mistral's ``thinking``
content chunks. A ``BareLoop`` run records a trace through ``TraceRecorder``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from provider_helpers import mock_http, reply_of

from examples.model_server.serving import LocalServer, QuietHandler, sse
from loopctl import BareLoop, ThinkingPart, tool
from loopctl.api import ModelRequest
from loopctl.core import Message
from loopctl.providers import OpenAIClient
from loopctl_sim import TraceRecorder, read_trace, replay_trace
from loopctl_sim.trace import IoRecord

Reply = dict[str, Any]  # the assistant message of one whole completion


def _sse(message: Reply, reason: str) -> bytes:
    """``message`` streamed the way the hosts do: each field in a chunk of its own, then the
    finish chunk and ``[DONE]``."""
    chunks: list[dict[str, Any]] = []
    for key, value in message.items():
        if key == "tool_calls":
            value = [{**call, "index": i} for i, call in enumerate(value)]
        chunks.append({"choices": [{"index": 0, "delta": {key: value}}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    return ("".join(sse(c) for c in chunks) + "data: [DONE]\n\n").encode()


class _Host(QuietHandler):
    def do_POST(self) -> None:
        owner: _HostServer = self.owner
        body = json.loads(self.body())
        owner.bodies.append(body)
        message, reason = owner.replies.pop(0)
        if body.get("stream"):
            data, kind = _sse(message, reason), "text/event-stream"
        else:
            whole = {"choices": [{"index": 0, "message": message, "finish_reason": reason}]}
            data, kind = json.dumps(whole).encode(), "application/json"
        self.send(200, kind, data)


class _HostServer(LocalServer):
    """An OpenAI-compatible host answering each request with the next of ``replies``, streamed
    when the request asks; ``bodies`` keeps the requests."""

    def __init__(self) -> None:
        self.replies: list[tuple[Reply, str]] = []
        self.bodies: list[dict[str, Any]] = []
        super().__init__(_Host)


@pytest.fixture
def host() -> Iterator[tuple[str, list[tuple[Reply, str]], list[dict[str, Any]]]]:
    with _HostServer() as server:
        yield f"{server.root}/v1", server.replies, server.bodies


@tool
def lookup(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
}


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("reasoning_content", "reasoning"),
        ("reasoning", "reasoning_content"),
    ],
)
def test_reasoning_stays_in_the_messages_and_the_trace(
    host: tuple[str, list[tuple[Reply, str]], list[dict[str, Any]]],
    tmp_path: Path,
    stream: bool,
    first: str,
    second: str,
) -> None:
    base_url, replies, bodies = host
    replies += [
        ({first: "I should look the weather up.", "tool_calls": [CALL]}, "tool_calls"),
        ({second: "The tool said sunny.", "content": "Sunny in Oslo."}, "stop"),
    ]
    path = tmp_path / "run.jsonl"
    recorder = TraceRecorder(path)
    client = OpenAIClient("m", base_url=base_url, stream=stream)
    result = BareLoop(client, tools=[lookup], observers=[recorder]).run_sync("Weather in Oslo?")
    recorder.close()
    assert result.final_text == "Sunny in Oslo."
    thoughts = [
        part
        for message in result.messages
        for part in message.parts
        if isinstance(part, ThinkingPart)
    ]
    assert [(t.text, t.data) for t in thoughts] == [
        ("I should look the weather up.", {first: "I should look the weather up."}),
        ("The tool said sunny.", {second: "The tool said sunny."}),
    ]
    # the trace holds both, in the replies as the driver got them
    replies_recorded = [
        r.data["message"]
        for r in read_trace(path)
        if isinstance(r, IoRecord) and r.kind == "model_reply"
    ]
    texts = [p.get("text") for m in replies_recorded for p in m["parts"] if p["kind"] == "thinking"]
    assert texts == ["I should look the weather up.", "The tool said sunny."]
    # this host's reasoning went back to it with the call it preceded
    assistant = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0][first] == "I should look the weather up."
    assert replay_trace(path).ok


MISTRAL_WHOLE = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": [{"type": "text", "text": "Two and two. "}]},
        {"type": "thinking", "thinking": [{"type": "text", "text": "Four."}]},
        {"type": "text", "text": "4"},
    ],
}


def test_mistral_thinking_chunks_are_kept_and_not_sent_back(
    host: tuple[str, list[tuple[Reply, str]], list[dict[str, Any]]], tmp_path: Path
) -> None:
    base_url, replies, bodies = host
    replies += [(MISTRAL_WHOLE, "stop"), ({"content": "yes"}, "stop")]
    path = tmp_path / "run.jsonl"
    recorder = TraceRecorder(path)
    loop = BareLoop(
        OpenAIClient("magistral", base_url=base_url, stream=False), observers=[recorder]
    )
    first = loop.run_sync("2+2?")
    assert first.final_text == "4"
    thinking = first.messages[-1].parts[0]
    assert isinstance(thinking, ThinkingPart)
    assert thinking.text == "Two and two. Four."
    assert thinking.data == {"thinking": "Two and two. Four."}
    recorder.close()
    assert "Two and two. Four." in path.read_text()
    # the next request carries the answer, not the thinking
    history = [*first.messages, Message.user("sure?")]
    client = OpenAIClient("magistral", base_url=base_url, stream=False)
    second = asyncio.run(reply_of(client, ModelRequest(messages=history)))
    assert second.message.text == "yes"
    sent = [m for m in bodies[1]["messages"] if m["role"] == "assistant"]
    assert sent == [{"role": "assistant", "content": "4"}]


def _request() -> ModelRequest:
    return ModelRequest(messages=[Message.user("hi")])


def _stream_of(*deltas: dict[str, Any], key: str = "delta") -> bytes:
    chunks = [{"choices": [{"index": 0, key: d}]} for d in deltas]
    chunks.append({"choices": [{"index": 0, key: {}, "finish_reason": "stop"}]})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


SSE = {"content-type": "text/event-stream"}


@pytest.mark.parametrize(
    ("body", "text", "data"),
    [
        (
            _stream_of({"reasoning": {"text": "as an "}}, {"reasoning": {"text": "object"}}),
            "as an object",
            {"reasoning": {"text": "as an object"}},
        ),
        (
            _stream_of({"reasoning": "under message"}, {"content": "ok"}, key="message"),
            "under message",
            {"reasoning": "under message"},
        ),
        (
            _stream_of(
                {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "mi"}]}]},
                {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": "st"}]}]},
                {"content": [{"type": "text", "text": "ok"}]},
            ),
            "mist",
            {"thinking": "mist"},
        ),
        (
            _stream_of({"reasoning_content": "both", "reasoning": "both"}, {"content": "ok"}),
            "both",
            {"reasoning_content": "both", "reasoning": "both"},
        ),
    ],
    ids=["object", "message-key", "mistral-chunks", "both-fields"],
)
async def test_each_shape_of_streamed_reasoning_is_a_thinking_part(
    body: bytes, text: str, data: dict[str, Any]
) -> None:
    client = OpenAIClient(
        "m", base_url="http://127.0.0.1:9/v1", http_client=mock_http(body, headers=SSE)
    )
    reply = await reply_of(client, _request())
    assert reply.message.thinking[0].text == text
    assert reply.message.thinking[0].data == data
