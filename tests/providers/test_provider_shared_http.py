"""Many clients, one ``httpx.AsyncClient``: each provider client takes ``http_client=``, uses it
for its requests and leaves it open when it is closed itself (it is the caller's), so many
concurrent runs share one connection pool and one SSL context instead of building one each."""

from __future__ import annotations

import asyncio
import json

import httpx

from loopctl import BareLoop
from loopctl.api import ModelRequest
from loopctl.core import Message
from loopctl.providers import AnthropicClient, OllamaClient, OpenAIClient, OpenAIResponsesClient


def _answering() -> tuple[httpx.AsyncClient, list[str]]:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        text = body["messages"][-1]["content"]
        asked.append(text)
        message = {"role": "assistant", "content": f"echo {text}"}
        completion = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        return httpx.Response(200, json=completion)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), asked


async def test_concurrent_runs_share_one_http_client() -> None:
    shared, asked = _answering()
    clients = [
        OpenAIClient("m", base_url="http://127.0.0.1:9/v1", http_client=shared, stream=False)
        for _ in range(20)
    ]
    assert all(c.http_client is shared for c in clients)
    results = await asyncio.gather(*(BareLoop(c).run(f"q{i}") for i, c in enumerate(clients)))
    assert [r.final_text for r in results] == [f"echo q{i}" for i in range(20)]
    assert sorted(asked) == sorted(f"q{i}" for i in range(20))
    for client in clients:
        await client.aclose()
    assert not shared.is_closed  # the caller's to close
    await shared.aclose()


async def test_a_client_closes_only_the_http_client_it_built() -> None:
    for make in (
        lambda h: OpenAIClient("m", base_url="http://127.0.0.1:9/v1", http_client=h),
        lambda h: OpenAIResponsesClient("m", base_url="http://127.0.0.1:9/v1", http_client=h),
        lambda h: AnthropicClient("m", api_key="k", http_client=h),
        lambda h: OllamaClient("m", http_client=h),
    ):
        own = make(None)
        built = own.http_client
        await own.aclose()
        assert built.is_closed
        shared = httpx.AsyncClient()
        borrowing = make(shared)
        assert borrowing.http_client is shared
        await borrowing.aclose()
        assert not shared.is_closed
        await shared.aclose()


class _Body(httpx.AsyncByteStream):
    """A streamed body that says when the client closed it."""

    def __init__(self) -> None:
        self.closed = False

    async def __aiter__(self):  # type: ignore[no-untyped-def]
        chunk = {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
        for _ in range(100):
            yield f"data: {json.dumps(chunk)}\n\n".encode()

    async def aclose(self) -> None:
        self.closed = True


async def test_an_abandoned_stream_releases_its_response_at_once() -> None:
    body = _Body()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    client = OpenAIClient("m", base_url="http://127.0.0.1:9/v1", http_client=http)
    events = client.stream(ModelRequest(messages=[Message.user("hi")]))
    assert type(await anext(events)).__name__ == "TextDelta"
    await events.aclose()  # type: ignore[attr-defined]
    assert body.closed
    await http.aclose()
