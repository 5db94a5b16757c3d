"""The live ``OtelObserver`` and ``loopctl-sim otel`` on the same run give the same spans.

An agent (a system prompt, a temperature, an async tool, a sync one, one that raises) talks over
HTTP with SSE to an OpenAI-compatible server on 127.0.0.1 through ``OpenAIClient(base_url=...)``,
with an ``OtelObserver`` (in-memory exporter) and a ``TraceRecorder`` on the same loop; the trace
is then exported by the harness, through the Python API and through the command line; the sample
travel agent (``examples/travel_agent``: hooks, a middleware, its own compactor) does the same
against the local model server (``examples/model_server``) over each of its three wire formats.
Every span is
compared: name, parent, kind, status and its description, attributes, and events with their
attributes; only ids and times may differ. A run that fails on a 401 whose message echoes the
key shows the key in no span, live or exported.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan
from otel_helpers import memory_provider
from otel_server import ScriptedOpenAI

from loopctl import BareLoop, LoopError, Message, RunConfig, SessionConfig, ToolCall, tool
from loopctl.driver.config import RetryConfig
from loopctl.otel import OtelObserver
from loopctl.providers import OpenAIClient
from loopctl.testing import ScriptedClient
from loopctl_sim.cli import main
from loopctl_sim.trace import TraceRecorder
from loopctl_sim.view.otel_spans import export_spans

KEY = "sk-proj-otelParity" + "Key0123456789abcdefXYZ"


@tool
async def find_flight(city: str) -> str:
    """Find a flight to a city (async, as a call to a service would be)."""
    await asyncio.sleep(0)
    return json.dumps({"city": city, "flight": "SK 101", "seats": 3})


@tool
def hotel_price(city: str, nights: int) -> str:
    """A hotel's price for some nights (sync, in a worker)."""
    return f"{120 * nights} EUR in {city}"


@tool
def convert(amount: float, currency: str) -> str:
    """Convert an amount; refuses a currency it does not know."""
    if currency != "USD":
        raise ValueError(f"unknown currency {currency}")
    return f"{amount * 1.1:.2f} USD"


async def _no_sleep(_: float) -> None:
    return None


Shape = tuple[Any, ...]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


_MESSAGES = {"loopctl.error.message"}


def _shape(spans: Sequence[ReadableSpan], *, masked: bool = False) -> list[Shape]:
    """Every span but its ids and times, in an order both sides share (the root, then by turn,
    a turn's chat before its tools, tools by call id); ``masked``: but error messages too."""
    names = {s.context.span_id: s.name for s in spans if s.context is not None}

    def items(attributes: Any) -> list[tuple[str, Any]]:
        return sorted((k, "..." if masked and k in _MESSAGES else v) for k, v in attributes.items())

    def one(s: ReadableSpan) -> Shape:
        return (
            s.name,
            None if s.parent is None else names[s.parent.span_id],
            s.kind.name,
            s.status.status_code.name,
            "..." if masked and s.status.description else s.status.description,
            items(dict(s.attributes or {})),
            [(e.name, items(dict(e.attributes or {}))) for e in s.events],
        )

    def order(s: ReadableSpan) -> tuple[Any, ...]:
        a = s.attributes or {}
        return (
            s.parent is not None,
            a.get("loopctl.turn", 0),
            a.get("gen_ai.operation.name") != "chat",
            str(a.get("gen_ai.tool.call.id", "")),
        )

    return [one(s) for s in sorted(spans, key=order)]


async def _run(
    moves: list[dict[str, Any]], path: Path, *, capture: bool
) -> tuple[Any, list[ReadableSpan]]:
    provider, exporter = memory_provider()
    recorder = TraceRecorder(path)
    with ScriptedOpenAI(moves) as server:
        client = OpenAIClient("skyway-1", base_url=server.url, api_key=KEY)
        loop = BareLoop(
            client,
            tools=[find_flight, hotel_price, convert],
            config=RunConfig(max_turns=6, retry=RetryConfig(max_retries=2)),
            session=SessionConfig(
                system_prompt="You plan trips. Use the tools.", options={"temperature": 0.2}
            ),
            observers=[recorder, OtelObserver(provider, capture_content=capture)],
            sleep=_no_sleep,
            rng=lambda: 0.0,
        )
        result = await loop.run("A trip to Oslo for 2 nights, priced in NOK")
        await client.aclose()
    recorder.close()
    return result, list(exporter.get_finished_spans())


TRIP: list[dict[str, Any]] = [
    {"calls": [("find_flight", {"city": "Oslo"}), ("hotel_price", {"city": "Oslo", "nights": 2})]},
    {"status": 429},  # retried: one chat span, its error and its wait as events
    {"calls": [("convert", {"amount": 240, "currency": "NOK"})]},  # the tool raises
    {"calls": [("convert", {"amount": 240, "currency": "USD"})]},
    {"text": "Flight SK 101 and a hotel for 264.00 USD."},
]

FAILS: list[dict[str, Any]] = [
    {"calls": [("find_flight", {"city": "Oslo"}), ("convert", {"amount": 9, "currency": "X"})]},
    {"status": 500},
    {"status": 500},
    {"status": 500},  # retries exhausted: the run fails
]

ECHO: list[dict[str, Any]] = [
    {"calls": [("find_flight", {"city": "Oslo"})]},
    {"status": 401, "echo": True},  # the run fails; the message echoes the key
]


@pytest.fixture(autouse=True)
def _no_scrub_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a scrub key a trace's placeholder is a bare ``[REDACTED]``, as a live span's."""
    monkeypatch.delenv("LOOPCTL_SCRUB_KEY", raising=False)
    monkeypatch.delenv("LOOPCTL_SCRUB_KEY_FILE", raising=False)


@pytest.mark.parametrize("capture", [False, True], ids=["quiet", "content"])
@pytest.mark.parametrize("moves", [TRIP, FAILS], ids=["trip", "fails"])
async def test_live_and_exported_spans_are_the_same(
    tmp_path: Path, moves: list[dict[str, Any]], capture: bool
) -> None:
    path = tmp_path / "run.jsonl"
    result, live = await _run(moves, path, capture=capture)
    exported = export_spans(path, capture_content=capture)
    assert _shape(exported) == _shape(live)
    names = [s.name for s in live]
    # what the parity is about: every chat span names the model, the run the agent
    assert "invoke_agent loopctl" in names
    chats = [s for s in live if _attrs(s).get("gen_ai.operation.name") == "chat"]
    assert len(chats) >= 2 and all(s.name == "chat skyway-1" for s in chats)
    assert all(_attrs(s)["gen_ai.provider.name"].startswith("127.0.0.1:") for s in chats)
    assert all(_attrs(s)["gen_ai.request.temperature"] == 0.2 for s in chats)
    [run] = [s for s in live if s.parent is None]
    assert _attrs(run)["gen_ai.request.model"] == "skyway-1"
    if moves is TRIP:
        assert result.outcome.kind == "completed"
        raised = [s for s in live if s.status.status_code.name == "ERROR"]
        assert [s.name for s in raised] == ["execute_tool convert"]
        assert [e.name for e in chats[1].events] == ["loopctl.model_error", "loopctl.retry"]
    else:
        assert result.outcome.kind == "failed"
        assert run.status.status_code.name == "ERROR" and _attrs(run)["error.type"] == "provider"
        assert "HTTP 500" in str(run.status.description)
        assert [e.name for e in chats[1].events].count("loopctl.retry") == 2
        assert chats[1].status.status_code.name == "ERROR"
    if capture:  # the whole conversation each request showed, on both sides
        last = json.loads(_attrs(chats[-1])["gen_ai.input.messages"])
        assert last[0]["parts"][0]["text"].startswith("A trip to Oslo")
        assert len(last) == _attrs(chats[-1])["loopctl.request.messages"] > 1
        assert "You plan trips" in _attrs(chats[0])["gen_ai.system_instructions"]


def _strings(spans: Sequence[ReadableSpan]) -> str:
    """Every string the spans would export: names, attributes, statuses, events."""
    parts: list[str] = []
    for s in spans:
        parts += [s.name, str(s.status.description), json.dumps(dict(s.attributes or {}))]
        parts += [e.name + json.dumps(dict(e.attributes or {})) for e in s.events]
    return "\n".join(parts)


@pytest.mark.parametrize("capture", [False, True], ids=["quiet", "content"])
async def test_a_401_that_echoes_the_key_leaves_it_in_no_span(
    tmp_path: Path, capture: bool
) -> None:
    path = tmp_path / "run.jsonl"
    result, live = await _run(ECHO, path, capture=capture)
    assert result.outcome.kind == "failed"
    [run] = [s for s in live if s.parent is None]
    assert run.status.status_code.name == "ERROR"
    assert "Incorrect API key: Bearer [REDACTED]" in str(run.status.description)
    assert _attrs(run)["error.type"] == "auth"
    exported = export_spans(path, capture_content=capture)
    for spans in (live, exported):
        text = _strings(spans)
        assert KEY not in text and KEY[8:] not in text
        assert "[REDACTED]" in text
    # the same spans but for the scrubbed messages: the trace's scrubber (loopctl_sim's) may
    # hide more of a message than the live one (it knows more secret shapes)
    assert _shape(exported, masked=True) == _shape(live, masked=True)


@pytest.mark.parametrize("capture", [False, True], ids=["quiet", "content"])
async def test_a_client_error_holding_the_key_leaves_it_in_no_span(capture: bool) -> None:
    """Whatever the client does with an echoed key, the observer scrubs every path: a client
    whose error message holds it whole (a client of the user's own, say)."""
    provider, exporter = memory_provider()
    echoed = f"Incorrect API key provided: {KEY}; header x-api-key: {KEY}"
    refusal = LoopError(kind="auth", message=echoed, retryable=False, status=401)
    client = ScriptedClient(
        [
            Message.assistant(
                "",
                [
                    ToolCall(
                        id="c1", name="hotel_price", arguments={"city": f"Oslo {KEY}", "nights": 1}
                    )
                ],
            ),
            refusal,
        ]
    )
    observer = OtelObserver(provider, capture_content=capture)
    loop = BareLoop(client, tools=[hotel_price], observers=[observer], sleep=_no_sleep)
    result = await loop.run(f"my key is {KEY}")
    assert result.outcome.kind == "failed" and KEY in str(result.outcome.error.message)
    spans = list(exporter.get_finished_spans())
    [run] = [s for s in spans if s.parent is None]
    assert (
        run.status.description
        == "Incorrect API key provided: [REDACTED]; header x-api-key: [REDACTED]"
    )
    text = _strings(spans)
    assert KEY not in text and KEY[8:] not in text


def test_the_cli_exports_what_the_observer_saw(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    _, live = asyncio.run(_run(TRIP, path, capture=False))
    out = tmp_path / "spans.json"
    result = CliRunner().invoke(main, ["otel", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    spans = json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert sorted(s["name"] for s in spans) == sorted(s.name for s in live)
    by_id = {s["spanId"]: s["name"] for s in spans}
    parents = sorted((s["name"], by_id.get(s.get("parentSpanId", ""))) for s in spans)
    names = {s.context.span_id: s.name for s in live if s.context is not None}
    expected = sorted((s.name, None if s.parent is None else names[s.parent.span_id]) for s in live)
    assert parents == expected


# --- the sample travel agent against the local multi-wire model server --------------------------

TRAVEL_KEY = "sk-skyway-otel-parity-0123456789"
TRIP_ASK = (
    "I want to fly from Oslo to Paris on 2027-03-01 with passport P1234567. What is the price "
    "in USD, what will the weather be, and what should I see there?"
)
BAD_CURRENCY_ASK = "Fly me from Oslo to Rome with passport P7654321, and give the price in XYZ."


def _travel_client(api: str, server: Any) -> Any:
    from examples.travel_agent.agent import MODEL
    from loopctl.providers import AnthropicClient, OpenAIResponsesClient

    if api == "anthropic":
        return AnthropicClient(MODEL, base_url=server.root, api_key=TRAVEL_KEY)
    if api == "responses":
        return OpenAIResponsesClient(MODEL, base_url=server.url, api_key=TRAVEL_KEY)
    return OpenAIClient(MODEL, base_url=server.url, api_key=TRAVEL_KEY)


@pytest.mark.parametrize("ask", [TRIP_ASK, BAD_CURRENCY_ASK], ids=["trip", "bad_currency"])
@pytest.mark.parametrize("api", ["openai", "anthropic", "responses"])
async def test_the_travel_agent_over_each_wire(tmp_path: Path, api: str, ask: str) -> None:
    from examples.model_server import ModelServer
    from examples.travel_agent.agent import MODEL, build

    provider, exporter = memory_provider()
    path = tmp_path / "trip.jsonl"
    # recorded as the example records its traces: the factory's path in the metadata
    recorder = TraceRecorder(path, metadata={"agent": "examples.travel_agent.agent:build"})
    with ModelServer(api_key=TRAVEL_KEY) as server:
        client = _travel_client(api, server)
        observer = OtelObserver(provider, capture_content=True)
        result = await build(client=client, observers=[recorder, observer]).run(ask)
        await client.aclose()
    recorder.close()
    live = list(exporter.get_finished_spans())
    assert _shape(export_spans(path, capture_content=True)) == _shape(live)
    names = [s.name for s in live]
    assert names.count("invoke_agent loopctl") == 1
    assert names.count(f"chat {MODEL}") >= 2 and any(n.startswith("execute_tool") for n in names)
    assert result.outcome.kind == "completed"
    [run] = [s for s in live if s.parent is None]
    if ask is BAD_CURRENCY_ASK:  # convert_price raised: its span failed, the run went on
        failed = [s for s in live if s.status.status_code.name == "ERROR"]
        assert [s.name for s in failed] == ["execute_tool convert_price"]
    else:  # the agent's own compactor ran (its small context window)
        assert [e.name for e in run.events] == ["loopctl.compaction", "loopctl.compaction_result"]


def test_a_shipped_trace_recorded_over_http_names_the_model_on_every_chat_span() -> None:
    """The travel agent's committed traces (recorded through provider clients): the context is
    written once, and every exported chat span still names the model and the provider."""
    root = Path(__file__).resolve().parents[2] / "examples" / "travel_agent" / "traces"
    paths = sorted(root.glob("*.jsonl"))
    assert paths, root
    for path in paths:
        result = CliRunner().invoke(main, ["otel", str(path)])
        assert result.exit_code == 0, result.output
        spans = json.loads(result.output)["resourceSpans"][0]["scopeSpans"][0]["spans"]
        chats = [s for s in spans if s["name"].startswith("chat")]
        assert len(chats) >= 2, path
        for span in chats:
            attributes = {a["key"]: a["value"] for a in span["attributes"]}
            assert span["name"] == "chat skyway-model-1", path
            assert attributes["gen_ai.provider.name"]["stringValue"].startswith("127.0.0.1:")
        assert [s["name"] for s in spans if "parentSpanId" not in s] == ["invoke_agent loopctl"]
