"""A real local HTTP server that misbehaves: the OpenAI client and the whole loop over real
sockets on 127.0.0.1. Every case ends in a clear outcome, its trace reads back and replays.

Cases: a normal stream; a stream dropped mid-way (retried, the abandoned attempt announced); a
JSON body answering a stream request; a slow (trickling) stream; a stall past the client's read
timeout (a timeout, retried); 500 then success; 503 with retry-after (the delay honoured);
persistent 5xx (the run fails after its retries); the wrong content type (not retried); tool
arguments nested 5,000 deep (refused at the door); a 401 echoing the key (scrubbed from the
trace); eight runs at once against the one server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loopctl import BareLoop, Completed, Failed, RunConfig, tool
from loopctl.api import AttemptAbandoned, StreamEvent
from loopctl.driver import RetryConfig
from loopctl.providers import OpenAIClient
from loopctl_sim import TraceRecorder, read_trace, replay_driver, replay_trace
from tests.reliability.local_server import (
    Answer,
    LocalServer,
    call_chunks,
    local_server,
    text_chunks,
)

KEY = "sk-proj-" + "LiveKey0123456789abcdef"


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with local_server() as s:
        yield s


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def run(
    server: LocalServer, path: Path, *, retries: int = 2, timeout: float | None = None
) -> tuple[Any, list[StreamEvent], Sleeps]:
    seen: list[StreamEvent] = []
    sleeps = Sleeps()

    async def go() -> Any:
        client = OpenAIClient("m", api_key=KEY, base_url=server.base_url, timeout=timeout)
        recorder = TraceRecorder(path)
        loop = BareLoop(
            client,
            tools=[add],
            config=RunConfig(retry=RetryConfig(max_retries=retries)),
            observers=[recorder],
            on_stream=seen.append,
            sleep=sleeps,
        )
        try:
            return await loop.run("add 2 and 3")
        finally:
            recorder.close()
            await client.aclose()

    return asyncio.run(go()), seen, sleeps


def readable(path: Path) -> None:
    """The trace reads back and replays at both levels."""
    assert read_trace(path)[-1].type == "end"
    for result in (replay_trace(path), replay_driver(path)):
        assert result.ok and result.complete, result.divergence and result.divergence.report()


def test_a_normal_stream_completes(server: LocalServer, tmp_path: Path) -> None:
    server.script(
        Answer(call_chunks("add", '{"a": 2, "b": 3}')), Answer(text_chunks("It is ", "5."))
    )
    result, _, _ = run(server, tmp_path / "t.jsonl")
    assert result.final_text == "It is 5."
    assert len(server.requests) == 2 and all(r["stream"] for r in server.requests)
    readable(tmp_path / "t.jsonl")


def test_a_dropped_stream_is_retried_and_announced(server: LocalServer, tmp_path: Path) -> None:
    server.script(
        Answer(text_chunks("Hel", "partial ", "never"), drop_after=2),
        Answer(text_chunks("The answer is 42.")),
    )
    result, seen, _ = run(server, tmp_path / "t.jsonl")
    assert result.final_text == "The answer is 42."
    kinds = [e.kind for e in seen]
    assert kinds.index("attempt_abandoned") == 2  # after the two pieces, before the retry's
    abandoned = [e for e in seen if isinstance(e, AttemptAbandoned)]
    assert abandoned[0].error == "network" and abandoned[0].retry_in is not None
    readable(tmp_path / "t.jsonl")


def test_a_json_body_answering_a_stream_request_is_read_whole(
    server: LocalServer, tmp_path: Path
) -> None:
    body = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "whole"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    server.script(Answer(body=json.dumps(body), content_type="application/json"))
    result, _, _ = run(server, tmp_path / "t.jsonl")
    assert result.final_text == "whole"
    readable(tmp_path / "t.jsonl")


def test_a_slow_stream_is_assembled_exactly(server: LocalServer, tmp_path: Path) -> None:
    pieces = [f"w{i} " for i in range(12)]
    server.script(Answer(text_chunks(*pieces), gap=0.02))
    result, _, _ = run(server, tmp_path / "t.jsonl")
    assert result.final_text == "".join(pieces)
    readable(tmp_path / "t.jsonl")


def test_a_stall_past_the_read_timeout_is_a_timeout_and_retried(
    server: LocalServer, tmp_path: Path
) -> None:
    server.script(Answer(text_chunks("late"), stall=3.0), Answer(text_chunks("on time")))
    result, _, sleeps = run(server, tmp_path / "t.jsonl", timeout=0.3)
    assert result.final_text == "on time"
    errors = [
        r for r in read_trace(tmp_path / "t.jsonl") if getattr(r, "kind", "") == "model_error"
    ]
    assert [e.data["error"]["kind"] for e in errors] == ["timeout"]  # type: ignore[union-attr]
    assert len(sleeps.delays) == 1
    readable(tmp_path / "t.jsonl")


def test_a_500_then_success(server: LocalServer, tmp_path: Path) -> None:
    error = '{"error": {"message": "internal", "type": "server_error"}}'
    server.script(
        Answer(status=500, body=error, content_type="application/json"), Answer(text_chunks("ok"))
    )
    result, _, _ = run(server, tmp_path / "t.jsonl")
    assert result.final_text == "ok"
    readable(tmp_path / "t.jsonl")


def test_a_503_with_retry_after_is_waited_out(server: LocalServer, tmp_path: Path) -> None:
    error = '{"error": {"message": "overloaded"}}'
    server.script(
        Answer(
            status=503, body=error, content_type="application/json", headers={"retry-after": "7"}
        ),
        Answer(text_chunks("ok")),
    )
    result, _, sleeps = run(server, tmp_path / "t.jsonl")
    assert result.final_text == "ok"
    assert sleeps.delays and sleeps.delays[0] >= 7.0
    readable(tmp_path / "t.jsonl")


def test_persistent_5xx_fails_after_the_retries(server: LocalServer, tmp_path: Path) -> None:
    error = '{"error": {"message": "bad gateway"}}'
    server.script(
        *[Answer(status=502, body=error, content_type="application/json") for _ in range(3)]
    )
    result, _, sleeps = run(server, tmp_path / "t.jsonl", retries=2)
    assert isinstance(result.outcome, Failed)
    assert len(server.requests) == 3 and len(sleeps.delays) == 2
    readable(tmp_path / "t.jsonl")


def test_the_wrong_content_type_is_not_retried(server: LocalServer, tmp_path: Path) -> None:
    server.script(Answer(body="<html>proxy login</html>", content_type="text/html"))
    result, _, _ = run(server, tmp_path / "t.jsonl")
    assert isinstance(result.outcome, Failed)
    assert "text/html" in result.error.message and len(server.requests) == 1
    readable(tmp_path / "t.jsonl")


def test_arguments_nested_5000_deep_over_the_wire_are_refused(
    server: LocalServer, tmp_path: Path
) -> None:
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    server.script(Answer(call_chunks("add", deep)))
    result, _, _ = run(server, tmp_path / "t.jsonl")
    assert isinstance(result.outcome, Failed)
    assert result.error.kind == "provider" and "cannot hold" in result.error.message
    assert len(server.requests) == 1  # not retried
    readable(tmp_path / "t.jsonl")


def test_a_401_echoing_the_key_leaves_no_key_in_the_trace(
    server: LocalServer, tmp_path: Path
) -> None:
    error = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    )
    server.script(Answer(status=401, body=error, content_type="application/json"))
    path = tmp_path / "t.jsonl"
    result, _, _ = run(server, path)
    assert isinstance(result.outcome, Failed) and result.error.kind == "auth"
    assert server.headers[0].get("authorization") == f"Bearer {KEY}"  # it was sent...
    assert KEY not in path.read_text() and KEY[8:] not in path.read_text()  # ...never written
    assert replay_trace(path).ok and replay_driver(path).ok


def test_eight_runs_at_once_against_one_server(server: LocalServer, tmp_path: Path) -> None:
    for _ in range(8):
        server.script(Answer(text_chunks("one ", "answer"), gap=0.01))

    async def go() -> list[Any]:
        async with httpx.AsyncClient() as http:
            loops = []
            recorders = []
            for i in range(8):
                client = OpenAIClient("m", api_key=KEY, base_url=server.base_url, http_client=http)
                recorder = TraceRecorder(tmp_path / f"run{i}.jsonl")
                recorders.append(recorder)
                loops.append(BareLoop(client, observers=[recorder]))
            try:
                return await asyncio.gather(
                    *(loop.run(f"question {i}") for i, loop in enumerate(loops))
                )
            finally:
                for recorder in recorders:
                    recorder.close()

    results = asyncio.run(go())
    assert all(isinstance(r.outcome, Completed) and r.final_text == "one answer" for r in results)
    for i in range(8):
        path = tmp_path / f"run{i}.jsonl"
        readable(path)
        assert f"question {i}" in path.read_text()
