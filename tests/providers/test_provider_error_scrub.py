"""A provider's error shows no secret, by the rule the trace scrubber reads (``loopctl.secrets``).

The client knows its own key, the URL's credentials and its credential headers, and replaces
them wherever a server echoes them; a server may also echo a secret the client never held
(another key, a password in a config it reports), which the shapes and the name rule catch.
Which query parameters and headers carry a credential is the same rule the trace applies to
a recorded URL, so a base URL is shown as the trace would show it.
"""

from __future__ import annotations

import json

import httpx
import pytest
from provider_helpers import events_of

from loopctl.api import ApiError, ModelRequest
from loopctl.core import Message
from loopctl.providers import OpenAIClient
from loopctl_sim.trace.scrub import Scrubber

REQUEST = ModelRequest(messages=[Message.user("hi")])
OTHER_KEY = "sk-" + "proj-Zz9Yy8Xx7Ww6Vv5"
QUERY_KEY = "Kq8Zr2Lm5Np0"
SIG = "c2lnbmF0dXJlMTIz"


def _echoing(headers: dict[str, str] | None = None) -> tuple[httpx.AsyncClient, list[str]]:
    """An http client whose server answers 401 echoing the URL, every header and a config."""
    echoed: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent = "; ".join(f"{k}: {v}" for k, v in request.headers.items())
        echo = f"bad credentials for {request.url} ({sent}); had {OTHER_KEY}, password: hunter2xyz"
        echoed.append(echo)
        return httpx.Response(401, json={"error": {"message": echo, "type": "auth_error"}})

    transport = httpx.MockTransport(handler)
    return httpx.AsyncClient(transport=transport, headers=headers), echoed


async def _error(client: OpenAIClient) -> str:
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert caught.value.error.kind == "auth"
    return str(caught.value) + json.dumps(caught.value.error.model_dump())


async def test_a_secret_the_client_never_held_is_scrubbed_from_its_error() -> None:
    http, echoed = _echoing()
    text = await _error(OpenAIClient("m", base_url="http://127.0.0.1:9/v1", http_client=http))
    assert OTHER_KEY in echoed[0] and "hunter2xyz" in echoed[0]  # the server did echo them
    assert OTHER_KEY not in text and "hunter2xyz" not in text
    assert "password: [REDACTED]" in text and "bad credentials for" in text


RAW_URL = f"http://127.0.0.1:9/v1?key={QUERY_KEY}&sig={SIG}&api-version=1"
SHOWN_URL = "http://127.0.0.1:9/v1?key=[REDACTED]&sig=[REDACTED]&api-version=1"


async def test_a_bare_key_and_a_signature_in_the_query_are_sent_and_never_shown() -> None:
    http, echoed = _echoing()
    text = await _error(OpenAIClient("m", base_url=RAW_URL, api_key="", http_client=http))
    assert f"key={QUERY_KEY}" in echoed[0] and f"sig={SIG}" in echoed[0]  # the server got them
    assert QUERY_KEY not in text and SIG not in text


async def test_the_query_is_shown_as_the_trace_scrubber_shows_it() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}")

    http = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    client = OpenAIClient("m", base_url=RAW_URL, api_key="", http_client=http)
    with pytest.raises(ApiError) as caught:
        await events_of(client, REQUEST)
    assert caught.value.error.details["base_url"] == SHOWN_URL
    assert Scrubber()(RAW_URL) == SHOWN_URL  # the trace reads the query by the same rule


async def test_credential_headers_of_a_shared_client_are_named_by_the_one_rule() -> None:
    headers = {"x-goog-api-key": "goog-Vv1Ww2Xx3", "x-request-id": "req-abcdef123"}
    http, echoed = _echoing(headers)
    text = await _error(OpenAIClient("m", base_url="http://127.0.0.1:9/v1", http_client=http))
    assert "goog-Vv1Ww2Xx3" in echoed[0]
    assert "goog-Vv1Ww2Xx3" not in text
    assert "req-abcdef123" in text  # a request id names no credential
