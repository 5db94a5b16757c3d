"""A key the model streams in pieces is not recorded, on any wire, and the cassette still replays.

The model (a local server, ``fake_streams``) streams a key cut across three deltas, first in a
tool call's arguments, then in its reply text, on OpenAI's, Anthropic's and Ollama's wire formats.
Each delta alone holds no key shape (the first piece of the text ends in ``s``, the next begins
with ``k-proj-``), so only a scrub of the joined deltas finds it. The agent's run is recorded
through ``use_cassette`` (the plugin's machinery) and replayed offline, the server gone: the
replay completes with the scrubbed text and calls the tool with the scrubbed note.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fake_streams import Call, FakeStreams, Text
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import BareLoop, Completed, tool
from loopctl.api import ApiClient
from loopctl.providers import AnthropicClient, OllamaClient, OpenAIClient
from loopctl.testing import block_network
from loopctl_sim.plugin.cassette_rules import scrub_body
from loopctl_sim.plugin.cassettes import use_cassette
from loopctl_sim.plugin.stream_scrub import resplit
from loopctl_sim.trace.scrub import REDACTED, Scrubber, default_scrubber

KEY = "sk-proj-" + "Str3amedKeyAcross" + "ThreeDeltas0123456789"
#: What of the key each delta holds: none is a key shape alone.
FRAGMENTS = ("k-proj-Str3", "amedKeyAcrossTh", "reeDeltas0123456789")
TEXT = ["Saved. Your key is s", "k-proj-Str3amedKeyAcrossTh", "reeDeltas0123456789, kept safe."]
ARGUMENTS = ['{"note": "key s', "k-proj-Str3amedKeyAcrossTh", 'reeDeltas0123456789"}']
REPLIES: list[Text | Call] = [Call("remember", ARGUMENTS), Text(TEXT)]
WIRES = ("openai", "anthropic", "ollama")


def client_for(wire: str, url: str) -> ApiClient:
    if wire == "openai":
        return OpenAIClient("fake-model", api_key="sk-test-recording-key-000", base_url=url)
    if wire == "anthropic":
        return AnthropicClient("fake-model", api_key="sk-ant-test-recording-000", base_url=url)
    return OllamaClient("fake-model", base_url=url)


async def run_agent(client: ApiClient) -> tuple[Any, list[str]]:
    notes: list[str] = []

    @tool
    def remember(note: str) -> str:
        """Keep a note for the user."""
        notes.append(note)
        return "saved"

    result = await BareLoop(client, tools=[remember]).run("Remember my key, please.")
    assert isinstance(result.outcome, Completed), result.error
    return result, notes


def strings(value: Any) -> list[str]:
    """Every string in a loaded cassette, stream bodies' JSON events decoded too."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if not isinstance(value, str):
        return []
    found = [value]
    for line in value.splitlines():
        body = line.removeprefix("data:").strip()
        with contextlib.suppress(ValueError):  # a piece of arguments: searched as text above
            found += strings(json.loads(body)) if body.startswith("{") else []
    return found


def assert_no_key(path: Path) -> None:
    text = path.read_text()
    everything = [text, *strings(yaml.safe_load(text))]
    for fragment in (KEY, *FRAGMENTS):
        assert not any(fragment in s for s in everything), fragment


@pytest.mark.parametrize("wire", WIRES)
async def test_a_key_streamed_across_deltas_is_scrubbed_and_the_cassette_replays(
    wire: str, tmp_path: Path
) -> None:
    cassette = tmp_path / f"{wire}.yaml"
    with FakeStreams(wire, list(REPLIES)) as server:
        url = server.url
        with use_cassette(cassette, record_mode="once"):
            recorded, recorded_notes = await run_agent(client_for(wire, url))
    assert KEY in (recorded.final_text or "") and recorded_notes == [f"key {KEY}"]
    assert len(server.requests) == 2
    assert_no_key(cassette)

    # offline, the server gone: the same run, scrubbed
    with block_network(allow_loopback=False), use_cassette(cassette, record_mode="none") as played:
        replayed, replayed_notes = await run_agent(client_for(wire, url))
    scrub = default_scrubber()
    assert replayed.final_text == scrub.text(recorded.final_text or "")
    assert replayed_notes == [scrub.text(n) for n in recorded_notes]
    assert REDACTED.rstrip("]") in replayed_notes[0] and KEY not in replayed_notes[0]
    assert played.all_played


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_the_stream_keeps_its_events_and_the_text_around_the_key(wire: str) -> None:
    """Scrubbing keeps every event in place, the text before and after the key where it was,
    and puts the placeholder in the delta where the key began."""
    from fake_streams import STREAMS

    body = STREAMS[wire](Text(TEXT), 1)
    clean = scrub_body(body, Scrubber()).decode()
    assert clean.count("\n\n") == body.decode().count("\n\n")
    field = "content" if wire == "openai" else "text"
    pieces = [
        str(delta[field])
        for line in clean.splitlines()
        if line.startswith("data: {")
        for delta in deltas_of(json.loads(line[6:]))
        if field in delta
    ]
    assert [p for p in pieces if p] == [
        "Saved. Your key is [REDACTED]",
        ", kept safe.",
    ]


def deltas_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    if "choices" in event:
        return [c["delta"] for c in event["choices"]]
    return [event["delta"]] if event.get("type") == "content_block_delta" else []


def test_credential_named_fields_in_streamed_arguments_are_scrubbed() -> None:
    """Tool-call arguments are scrubbed as data once joined, as a trace scrubs them."""
    from fake_streams import openai_stream

    pieces = ['{"user": "ada", "pass', 'word": "hunt', 'er2", "db": "main"}']
    clean = scrub_body(openai_stream(Call("login", pieces), 1), Scrubber()).decode()
    joined = "".join(
        call["function"]["arguments"]
        for line in clean.splitlines()
        if line.startswith("data: {")
        for choice in json.loads(line[6:])["choices"]
        for call in choice["delta"].get("tool_calls", [])
    )
    assert json.loads(joined) == {"user": "ada", "password": REDACTED, "db": "main"}
    assert "hunt" not in clean


def test_resplit_lays_the_clean_text_over_the_pieces() -> None:
    assert resplit(["a sk-", "proj-0123456789 b"], "a [REDACTED] b") == ["a [REDACTED]", " b"]
    assert resplit(["x", "y"], "xy") == ["x", "y"]
    # two keys, one whole in the middle piece
    pieces = ["1 sk-aaaa", "aaaa 2 sk-bbbbbbbbbb 3 s", "k-cccccccc 4"]
    assert resplit(pieces, Scrubber().text("".join(pieces))) == [
        f"1 {REDACTED}",
        f" 2 {REDACTED} 3 {REDACTED}",
        " 4",
    ]


def test_a_responses_api_stream_is_scrubbed_joined() -> None:
    """The Responses API streams ``response.output_text.delta`` events (and the whole text again
    in ``.done``): both are clean."""

    def event(kind: str, **fields: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"

    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    body = "".join(event("response.output_text.delta", delta=p, **where) for p in TEXT)
    body += event("response.output_text.done", text="".join(TEXT), **where)
    clean = scrub_body(body, Scrubber())
    for fragment in (KEY, *FRAGMENTS):
        assert fragment not in clean
    deltas = [
        json.loads(line[6:])["delta"]
        for line in clean.splitlines()
        if line.startswith("data: ") and ".delta" in line
    ]
    assert "".join(deltas) == Scrubber().text("".join(TEXT))


def _chunk(choice: dict[str, Any]) -> str:
    event = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return f"data: {json.dumps(event)}\n\n"


#: The shapes of OpenAI-compatible hosts that OpenAIClient reads: Mistral's content chunks
#: (text and thinking), a host's reasoning_details, a chunk under ``message`` not ``delta``.
HOST_STREAMS = {
    "mistral text chunks": [
        {"index": 0, "delta": {"content": [{"type": "text", "text": p}]}} for p in TEXT
    ],
    "mistral thinking chunks": [
        {
            "index": 0,
            "delta": {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": p}]}]},
        }
        for p in TEXT
    ]
    + [{"index": 0, "delta": {"content": "ok"}}],
    "reasoning_details": [
        {"index": 0, "delta": {"reasoning_details": [{"type": "reasoning.text", "text": p}]}}
        for p in TEXT
    ]
    + [{"index": 0, "delta": {"content": "ok"}}],
    "message, not delta": [{"index": 0, "message": {"content": p}} for p in TEXT],
}


@pytest.mark.parametrize("shape", list(HOST_STREAMS))
async def test_a_key_across_a_hosts_chunk_shapes_is_scrubbed_and_replays(shape: str) -> None:
    """Each piece of the key comes in a chunk of the host's own shape: the recording scrubs the
    joined text, and the client reading the recorded stream gets the scrubbed text."""
    choices = HOST_STREAMS[shape]
    choices[-1] = {**choices[-1], "finish_reason": "stop"}
    body = "".join(_chunk(c) for c in choices) + "data: [DONE]\n\n"
    clean = scrub_body(body.encode(), Scrubber()).decode()
    for fragment in (KEY, *FRAGMENTS):
        assert fragment not in clean, fragment

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, content=clean.encode(), headers=headers)

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    client = OpenAIClient(
        "m", api_key="sk-test-0000000000", base_url="http://h/v1", http_client=http
    )
    result = await BareLoop(client).run("hi")
    shown = json.dumps([m.model_dump(mode="json") for m in result.messages])
    assert KEY not in shown and not any(f in shown for f in FRAGMENTS)
    assert Scrubber().text("".join(TEXT)) in shown.replace("\\", "")


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", " ", "sk-", "proj", "0123", "-x", "[", "]", "Bearer ", "é"]),
        max_size=40,
    ),
    st.lists(st.integers(min_value=0, max_value=60), max_size=6),
)
def test_resplit_always_joins_to_the_clean_text(words: list[str], cuts: list[int]) -> None:
    text = "".join(words)
    marks = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *marks], [*marks, len(text)], strict=True)]
    clean = Scrubber().text(text)
    out = resplit(pieces, clean)
    assert len(out) == len(pieces) and "".join(out) == clean
