"""Every cassette is well formed: bodies validate with the official SDK types, no secrets inside."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent
from anthropic.types.beta import BetaMessage, BetaRawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.shared import ErrorObject
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from vcr_support import CASSETTES, SECRET_REQUEST_HEADERS

CASSETTE_FILES = sorted(CASSETTES.glob("*/*.yaml"))
REQUIRED = {
    "plain_answer",
    "plain_answer_nonstream",
    "tool_round_trip",
    "tool_call_nonstream",
    "parallel_tools",
    "rate_limit_then_success",
    "context_overflow",
    "stream_error",
}

CHUNK = TypeAdapter(ChatCompletionChunk)
COMPLETION = TypeAdapter(ChatCompletion)
OAI_ERROR = TypeAdapter(ErrorObject)
ANT_EVENT = TypeAdapter(RawMessageStreamEvent)
ANT_MESSAGE = TypeAdapter(Message)
ANT_ERROR = TypeAdapter(ErrorResponse)
# a request with an ``anthropic-beta`` header (the MCP connector) is answered in the beta types
ANT_BETA_EVENT = TypeAdapter(BetaRawMessageStreamEvent)
ANT_BETA_MESSAGE = TypeAdapter(BetaMessage)
RESPONSES_EVENT = TypeAdapter(ResponseStreamEvent)
RESPONSE = TypeAdapter(Response)
PROVIDER_DIRS = ["openai", "anthropic", "ollama", "openai_responses"]


# Ollama has no official Python types in the test deps: a strict model of the documented shapes.
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class OllamaFunction(_Strict):
    name: str
    arguments: dict[str, Any]
    index: int | None = None


class OllamaToolCall(_Strict):
    id: str | None = None
    function: OllamaFunction


class OllamaMessage(_Strict):
    role: Literal["assistant"]
    content: str
    thinking: str | None = None
    tool_calls: list[OllamaToolCall] | None = None


class OllamaChunk(_Strict):
    model: str
    created_at: str
    message: OllamaMessage
    done: bool
    done_reason: Literal["stop", "length", "load", "unload"] | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None


class OllamaError(_Strict):
    error: str


# llama.cpp's error object (not the OpenAI shape: ``code`` is the HTTP status as a number)
class LlamaCppError(_Strict):
    code: int
    message: str
    type: str
    n_prompt_tokens: int | None = None
    n_ctx: int | None = None


# OpenRouter's error object (openrouter.ai/docs/api-reference/errors): a numeric ``code`` and
# ``metadata`` (for a provider error: ``provider_name`` and the upstream's ``raw`` error)
class OpenRouterMetadata(_Strict):
    provider_name: str | None = None
    raw: Any = None
    reasons: list[str] | None = None
    flagged_input: str | None = None


class OpenRouterError(_Strict):
    code: int
    message: str
    metadata: OpenRouterMetadata | None = None


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def sse_data(body: str) -> list[tuple[str | None, str]]:
    """(event name, data) pairs; every event must end with a blank line."""
    assert body.endswith("\n\n"), "an SSE body ends with a blank line"
    events = []
    for block in body.split("\n\n")[:-1]:
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            field, _, value = line.partition(": ")
            assert field in ("event", "data"), f"unexpected SSE line {line!r}"
            if field == "event":
                name = value
            else:
                data.append(value)
        if data:
            events.append((name, "\n".join(data)))
    return events


def validate_openai(status: int, ctype: str, body: str, compat: bool) -> None:
    if status >= 400:
        err = json.loads(body)["error"]
        if compat and isinstance(err.get("code"), int):
            (LlamaCppError if "type" in err else OpenRouterError).model_validate(err)
        else:
            OAI_ERROR.validate_python(err)
        return
    if ctype.startswith("text/event-stream"):
        events = sse_data(body)
        assert events[-1][1] == "[DONE]" or "error" in json.loads(events[-1][1])
        for _, data in events:
            if data == "[DONE]":
                continue
            obj = json.loads(data)
            if "error" in obj:
                OAI_ERROR.validate_python(obj["error"])
            else:
                CHUNK.validate_python(obj)
    else:
        COMPLETION.validate_python(json.loads(body))


def validate_anthropic(status: int, ctype: str, body: str, beta: bool = False) -> None:
    if status >= 400:
        ANT_ERROR.validate_python(json.loads(body))
        return
    event, message = (ANT_BETA_EVENT, ANT_BETA_MESSAGE) if beta else (ANT_EVENT, ANT_MESSAGE)
    if ctype.startswith("text/event-stream"):
        for name, data in sse_data(body):
            obj = json.loads(data)
            assert obj["type"] == name, "the event line names the data's type"
            if name == "ping":
                assert obj == {"type": "ping"}
            elif name == "error":
                ANT_ERROR.validate_python(obj)
            else:
                event.validate_python(obj)
    else:
        message.validate_python(json.loads(body))


def validate_responses(status: int, ctype: str, body: str) -> None:
    if status >= 400:
        OAI_ERROR.validate_python(json.loads(body)["error"])
        return
    if ctype.startswith("text/event-stream"):
        events = sse_data(body)
        assert events, "a stream has events"
        for name, data in events:
            obj = json.loads(data)
            assert obj["type"] == name, "the event line names the data's type"
            RESPONSES_EVENT.validate_python(obj)
    else:
        RESPONSE.validate_python(json.loads(body))


def validate_ollama(status: int, ctype: str, body: str) -> None:
    if status >= 400:
        OllamaError.model_validate_json(body)
        return
    if ctype.startswith("application/x-ndjson"):
        assert body.endswith("\n")
        lines = body.split("\n")[:-1]
        for line in lines:
            obj = json.loads(line)
            if "error" in obj:
                OllamaError.model_validate(obj)
            else:
                OllamaChunk.model_validate(obj)
    else:
        OllamaChunk.model_validate_json(body)


def validate_cassette(path: Path) -> int:
    provider = path.parent.name
    checked = 0
    for interaction in load(path)["interactions"]:
        response = interaction["response"]
        status = response["status"]["code"]
        ctype = response["headers"]["content-type"][0]
        body = response["body"]["string"]
        json.loads(interaction["request"]["body"])  # requests are JSON too
        if provider == "openai":
            validate_openai(status, ctype, body, compat=path.stem.startswith("compat_"))
        elif provider == "anthropic":
            beta = "anthropic-beta" in {k.lower() for k in interaction["request"]["headers"]}
            validate_anthropic(status, ctype, body, beta)
        elif provider == "openai_responses":
            validate_responses(status, ctype, body)
        elif provider == "ollama":
            validate_ollama(status, ctype, body)
        else:
            raise AssertionError(f"unknown provider directory {provider}")
        checked += 1
    return checked


@pytest.mark.parametrize("path", CASSETTE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_cassette_bodies_validate_with_sdk_types(path: Path) -> None:
    assert validate_cassette(path) >= 1


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
def test_every_provider_has_the_required_cassettes(provider: str) -> None:
    names = {p.stem for p in (CASSETTES / provider).glob("*.yaml")}
    assert names >= REQUIRED, REQUIRED - names
    assert len(load(CASSETTES / provider / "tool_round_trip.yaml")["interactions"]) == 2
    rate = load(CASSETTES / provider / "rate_limit_then_success.yaml")["interactions"]
    assert [i["response"]["status"]["code"] for i in rate] == [429, 200]


@pytest.mark.parametrize(
    "provider, mutate",
    [
        ("openai", lambda b: b.replace('"object":"chat.completion.chunk"', '"object":"chunk"')),
        ("openai", lambda b: b.replace('"created":1764489600', '"created":"yesterday"')),
        ("anthropic", lambda b: b.replace('"type":"text_delta"', '"type":"txt_delta"')),
        ("anthropic", lambda b: b.replace('"index":0,', "")),
        ("ollama", lambda b: b.replace('"done":true', '"done":"yes"')),
    ],
)
def test_validation_catches_a_malformed_cassette(provider: str, mutate: Any) -> None:
    data = load(CASSETTES / provider / "plain_answer.yaml")
    response = data["interactions"][0]["response"]
    broken = mutate(response["body"]["string"])
    assert broken != response["body"]["string"]
    validator = {"openai": validate_openai, "anthropic": validate_anthropic}.get(provider)
    with pytest.raises((ValidationError, AssertionError, KeyError)):
        if validator is validate_openai:
            validate_openai(200, "text/event-stream", broken, compat=False)
        elif validator is validate_anthropic:
            validate_anthropic(200, "text/event-stream", broken)
        else:
            validate_ollama(200, "application/x-ndjson", broken)


# --- secrets ---------------------------------------------------------------------------------

KEY_PATTERNS = [
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"sk-(?:proj-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"Bearer\s+[A-Za-z0-9._\-]{8,}", re.IGNORECASE),
    re.compile(r"x-api-key\s*[:=]\s*\S+", re.IGNORECASE),
]


def secrets_in(text: str) -> list[str]:
    return [m.group(0) for pattern in KEY_PATTERNS for m in pattern.finditer(text)]


@pytest.mark.parametrize("path", CASSETTE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_secrets_in_cassettes(path: Path) -> None:
    text = path.read_text()
    assert secrets_in(text) == []
    for interaction in load(path)["interactions"]:
        headers = {k.lower() for k in interaction["request"]["headers"]}
        assert headers.isdisjoint(SECRET_REQUEST_HEADERS)


@pytest.mark.parametrize(
    "text",
    [
        "authorization: Bearer abcdefgh12345678",
        "key sk-proj-abcdefghijklmnop1234",
        "sk-ant-api03-abcdefghijkl",
        "x-api-key: [secret-value]",
    ],
)
def test_secret_scan_finds_key_shaped_strings(text: str) -> None:
    assert secrets_in(text)


def test_the_cassettes_are_what_the_generator_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import make_cassettes

    monkeypatch.setattr(make_cassettes, "ROOT", tmp_path)
    make_cassettes.main()
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.glob("*/*.yaml"))
    assert written == sorted(p.relative_to(CASSETTES) for p in CASSETTE_FILES)
    for rel in written:
        assert (tmp_path / rel).read_text() == (CASSETTES / rel).read_text(), rel
