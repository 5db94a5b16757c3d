"""Write the provider cassettes under cassettes/<provider>/ (vcrpy's YAML format).

No provider was reachable where these were made, so every interaction is written by hand from
the providers' documented wire formats (their API specs, official SDK fixtures and sources): the
response bodies are what each server streams, byte for byte, and the request bodies are literal
JSON (NOT produced by loopctl's converters, so a changed request fails to match a stale answer).
tests/providers/test_cassettes.py validates every response body with the official SDK types.

Run from the repository root:  .venv/bin/python tests/providers/make_cassettes.py
To re-record against real servers instead, see docs/providers.md (--loopctl-record-mode).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2] / "cassettes"

OPENAI_URL = "https://api.openai.com/v1/chat/completions"
VLLM_URL = "http://127.0.0.1:8000/v1/chat/completions"
LLAMACPP_URL = "http://127.0.0.1:8080/v1/chat/completions"
ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
OLLAMA_URL = "http://127.0.0.1:11434/api/chat"

WEATHER_PARAMS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
WEATHER_DESC = "Current weather for a city."


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def interaction(
    method: str,
    uri: str,
    body: dict[str, Any],
    status: int,
    headers: dict[str, str],
    response: str,
    request_headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    reasons = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests"}
    return {
        "request": {
            "body": dumps(body),
            "headers": {k: [v] for k, v in (request_headers or {}).items()},
            "method": method,
            "uri": uri,
        },
        "response": {
            "status": {"code": status, "message": reasons.get(status, "")},
            "headers": {k: [v] for k, v in headers.items()},
            "body": {"string": response},
        },
    }


def write(provider: str, name: str, interactions: list[dict[str, Any]]) -> None:
    path = ROOT / provider / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"interactions": interactions, "version": 1}
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    assert yaml.safe_load(text) == data, f"{path}: YAML round trip changed the data"
    path.write_text(text)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value and not any(line != line.rstrip() for line in value.split("\n")):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


# --- OpenAI Chat Completions ------------------------------------------------------------------

OAI_MODEL = "gpt-4o-mini"
OAI_SERVED = "gpt-4o-mini-2024-07-18"
OAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": WEATHER_DESC,
            "parameters": WEATHER_PARAMS,
        },
    }
]
OAI_STREAM = {"stream": True, "stream_options": {"include_usage": True}}
OAI_REQ_HEADERS = {"content-type": "application/json"}
SSE = {"content-type": "text/event-stream; charset=utf-8"}
JSON = {"content-type": "application/json"}


def oai_headers(request_id: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **SSE,
        "x-request-id": request_id,
        "openai-processing-ms": "212",
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": "9999",
        "x-ratelimit-reset-requests": "6ms",
        **(extra or {}),
    }


class OaiStream:
    """Chat completion chunks as ``data:`` lines, one id / created / model for the reply."""

    def __init__(
        self, cid: str, model: str = OAI_SERVED, fingerprint: str | None = "fp_0ba0d124f1"
    ):
        self.head = {"id": cid, "object": "chat.completion.chunk", "created": 1764489600}
        self.model = model
        self.fingerprint = fingerprint
        self.lines: list[str] = []

    def chunk(
        self,
        delta: dict[str, Any] | None = None,
        finish: str | None = None,
        usage: dict[str, Any] | None = None,
        *,
        choices: bool = True,
        with_usage_key: bool = True,
    ) -> OaiStream:
        body: dict[str, Any] = {**self.head, "model": self.model}
        if self.fingerprint is not None:
            body["system_fingerprint"] = self.fingerprint
        body["choices"] = (
            [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
            if choices
            else []
        )
        if with_usage_key:
            body["usage"] = usage
        self.lines.append(f"data: {dumps(body)}\n\n")
        return self

    def raw(self, text: str) -> OaiStream:
        self.lines.append(text)
        return self

    def done(self) -> str:
        return "".join(self.lines) + "data: [DONE]\n\n"

    def text(self) -> str:
        return "".join(self.lines)


def oai_usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def oai_completion(cid: str, message: dict[str, Any], finish: str, usage: dict[str, Any]) -> str:
    return dumps(
        {
            "id": cid,
            "object": "chat.completion",
            "created": 1764489600,
            "model": OAI_SERVED,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "refusal": None, "annotations": [], **message},
                    "logprobs": None,
                    "finish_reason": finish,
                }
            ],
            "usage": usage,
            "service_tier": "default",
            "system_fingerprint": "fp_0ba0d124f1",
        }
    )


def oai_call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def openai() -> None:
    sys_user = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    plain = (
        OaiStream("chatcmpl-CXaPlain0001")
        .chunk({"role": "assistant", "content": "", "refusal": None})
        .chunk({"content": "The capital"})
        .chunk({"content": " of France is"})
        .chunk({"content": " Paris."})
        .chunk({}, "stop")
        .chunk(usage=oai_usage(24, 8), choices=False)
        .done()
    )
    write(
        "openai",
        "plain_answer",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": sys_user, **OAI_STREAM},
                200,
                oai_headers("req_plain01"),
                plain,
                OAI_REQ_HEADERS,
            )
        ],
    )
    write(
        "openai",
        "plain_answer_nonstream",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": sys_user, "stream": False},
                200,
                {**JSON, "x-request-id": "req_plain02"},
                oai_completion(
                    "chatcmpl-CXaPlain0002",
                    {"content": "The capital of France is Paris."},
                    "stop",
                    oai_usage(24, 8),
                ),
                OAI_REQ_HEADERS,
            )
        ],
    )

    # a tool round trip: the call streamed in fragments, then the answer
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    call_id = "call_pX7qW2mV9sTn3LkR8dYb4cEf"
    first = (
        OaiStream("chatcmpl-CXaTool00001")
        .chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ],
                "refusal": None,
            }
        )
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"'}}]})
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": "city"}}]})
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": '":"Par'}}]})
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'is"}'}}]})
        .chunk({}, "tool_calls")
        .chunk(usage=oai_usage(61, 15), choices=False)
        .done()
    )
    echo = [
        *ask,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [oai_call(call_id, "get_weather", '{"city":"Paris"}')],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "18 C and sunny"},
    ]
    second = (
        OaiStream("chatcmpl-CXaTool00002")
        .chunk({"role": "assistant", "content": "", "refusal": None})
        .chunk({"content": "It is 18 C and sunny in Paris."})
        .chunk({}, "stop")
        .chunk(usage=oai_usage(92, 11, cached=0), choices=False)
        .done()
    )
    write(
        "openai",
        "tool_round_trip",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": ask, "tools": OAI_TOOLS, **OAI_STREAM},
                200,
                oai_headers("req_tool01"),
                first,
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": echo, "tools": OAI_TOOLS, **OAI_STREAM},
                200,
                oai_headers("req_tool02"),
                second,
                OAI_REQ_HEADERS,
            ),
        ],
    )
    write(
        "openai",
        "tool_call_nonstream",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": ask, "tools": OAI_TOOLS, "stream": False},
                200,
                {**JSON, "x-request-id": "req_tool03"},
                oai_completion(
                    "chatcmpl-CXaTool00003",
                    {
                        "content": None,
                        "tool_calls": [oai_call(call_id, "get_weather", '{"city":"Paris"}')],
                    },
                    "tool_calls",
                    oai_usage(61, 15),
                ),
                OAI_REQ_HEADERS,
            )
        ],
    )

    # parallel calls: two indexes, fragments interleaved; then both results go back
    both = [{"role": "user", "content": "Weather in Paris and in Tokyo?"}]
    p1, p2 = "call_Q1aZ8kLm3NpR5tUv7WxY9bCd", "call_H4sJ6dFg8KlZ2xCv4BnM6qWe"
    parallel = (
        OaiStream("chatcmpl-CXaPara00001")
        .chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "index": 0,
                        "id": p1,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ],
                "refusal": None,
            }
        )
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]})
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]})
        .chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": p2,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        )
        .chunk({"tool_calls": [{"index": 1, "function": {"arguments": '{"city": '}}]})
        .chunk({"tool_calls": [{"index": 1, "function": {"arguments": '"Tokyo"}'}}]})
        .chunk({}, "tool_calls")
        .chunk(usage=oai_usage(64, 46), choices=False)
        .done()
    )
    answers = [
        *both,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                oai_call(p1, "get_weather", '{"city":"Paris"}'),
                oai_call(p2, "get_weather", '{"city":"Tokyo"}'),
            ],
        },
        {"role": "tool", "tool_call_id": p1, "content": "18 C and sunny"},
        {"role": "tool", "tool_call_id": p2, "content": "24 C and raining"},
    ]
    final = (
        OaiStream("chatcmpl-CXaPara00002")
        .chunk({"role": "assistant", "content": "", "refusal": None})
        .chunk({"content": "Paris: 18 C, sunny. Tokyo: 24 C, raining."})
        .chunk({}, "stop")
        .chunk(usage=oai_usage(131, 17), choices=False)
        .done()
    )
    write(
        "openai",
        "parallel_tools",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": both, "tools": OAI_TOOLS, **OAI_STREAM},
                200,
                oai_headers("req_para01"),
                parallel,
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": answers, "tools": OAI_TOOLS, **OAI_STREAM},
                200,
                oai_headers("req_para02"),
                final,
                OAI_REQ_HEADERS,
            ),
        ],
    )

    # 429 rate limit with retry hints, then the same request succeeds
    hello = [{"role": "user", "content": "Say hello."}]
    rate_body = {
        "error": {
            "message": "Rate limit reached for gpt-4o-mini in organization org-abc123 on "
            "requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. "
            "Visit https://platform.openai.com/account/rate-limits to learn more.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    hi = (
        OaiStream("chatcmpl-CXaRate00001")
        .chunk({"role": "assistant", "content": "", "refusal": None})
        .chunk({"content": "Hello!"})
        .chunk({}, "stop")
        .chunk(usage=oai_usage(10, 2), choices=False)
        .done()
    )
    req = {"model": OAI_MODEL, "messages": hello, **OAI_STREAM}
    write(
        "openai",
        "rate_limit_then_success",
        [
            interaction(
                "POST",
                OPENAI_URL,
                req,
                429,
                {
                    **JSON,
                    "x-request-id": "req_rate01",
                    "retry-after": "20",
                    "retry-after-ms": "19876",
                    "x-ratelimit-limit-requests": "3",
                    "x-ratelimit-remaining-requests": "0",
                    "x-ratelimit-reset-requests": "20s",
                },
                dumps(rate_body),
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST", OPENAI_URL, req, 200, oai_headers("req_rate02"), hi, OAI_REQ_HEADERS
            ),
        ],
    )
    quota_body = {
        "error": {
            "message": "You exceeded your current quota, please check your plan and billing "
            "details. For more information on this error, read the docs: "
            "https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "type": "insufficient_quota",
            "param": None,
            "code": "insufficient_quota",
        }
    }
    write(
        "openai",
        "quota_exhausted",
        [
            interaction(
                "POST",
                OPENAI_URL,
                req,
                429,
                {**JSON, "x-request-id": "req_quota01"},
                dumps(quota_body),
                OAI_REQ_HEADERS,
            )
        ],
    )

    long = [{"role": "user", "content": "Summarize: " + "lorem ipsum " * 8}]
    overflow = {
        "error": {
            "message": "This model's maximum context length is 4097 tokens. However, your "
            "messages resulted in 4294 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    write(
        "openai",
        "context_overflow",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": long, **OAI_STREAM},
                400,
                {**JSON, "x-request-id": "req_ctx01"},
                dumps(overflow),
                OAI_REQ_HEADERS,
            )
        ],
    )

    story = [{"role": "user", "content": "Tell me a story."}]
    broken = (
        OaiStream("chatcmpl-CXaErr000001")
        .chunk({"role": "assistant", "content": "", "refusal": None})
        .chunk({"content": "Once upon"})
        .raw(
            'data: {"error": {"message": "The server had an error while processing your '
            'request. Sorry about that!", "type": "server_error"}}\n\n'
        )
        .text()
    )
    write(
        "openai",
        "stream_error",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": story, **OAI_STREAM},
                200,
                oai_headers("req_err01"),
                broken,
                OAI_REQ_HEADERS,
            )
        ],
    )

    # compatible servers -------------------------------------------------------------------
    # vLLM / an OpenRouter-style gateway: SSE comment lines, index 0 reused for each call of a
    # parallel batch, whole arguments in one delta, no usage chunk at all, no "call_" prefix.
    gateway = (
        OaiStream("chatcmpl-b7e1c0d2a4f94c1e", model="Qwen/Qwen2.5-7B-Instruct", fingerprint=None)
        .raw(": OPENROUTER PROCESSING\n\n")
        .chunk({"role": "assistant", "content": ""}, with_usage_key=False)
        .chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "chatcmpl-tool-5f1c2a9e",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ]
            },
            with_usage_key=False,
        )
        .raw(": OPENROUTER PROCESSING\n\n")
        .chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "chatcmpl-tool-9d3b7c41",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'},
                    }
                ]
            },
            with_usage_key=False,
        )
        .chunk({}, "tool_calls", with_usage_key=False)
        .done()
    )
    write(
        "openai",
        "compat_index_reuse",
        [
            interaction(
                "POST",
                VLLM_URL,
                {
                    "model": "Qwen/Qwen2.5-7B-Instruct",
                    "messages": both,
                    "tools": OAI_TOOLS,
                    **OAI_STREAM,
                },
                200,
                SSE,
                gateway,
                OAI_REQ_HEADERS,
            )
        ],
    )
    # llama.cpp: a call without any id; usage null on content chunks
    nameless = (
        OaiStream("chatcmpl-4GqLzX0x2wQm9rYkT7uVbN1sE3dF5hJ8", model="qwen2.5-7b", fingerprint=None)
        .chunk({"role": "assistant", "content": None})
        .chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ]
            }
        )
        .chunk({}, "tool_calls")
        .chunk(
            usage={"prompt_tokens": 180, "completion_tokens": 20, "total_tokens": 200},
            choices=False,
        )
        .done()
    )
    write(
        "openai",
        "compat_missing_id",
        [
            interaction(
                "POST",
                LLAMACPP_URL,
                {"model": "qwen2.5-7b", "messages": ask, "tools": OAI_TOOLS, **OAI_STREAM},
                200,
                SSE,
                nameless,
                OAI_REQ_HEADERS,
            )
        ],
    )
    lcpp_overflow = {
        "error": {
            "code": 400,
            "message": "request (5120 tokens) exceeds the available context size (4096 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5120,
            "n_ctx": 4096,
        }
    }
    write(
        "openai",
        "compat_context_overflow",
        [
            interaction(
                "POST",
                LLAMACPP_URL,
                {"model": "qwen2.5-7b", "messages": long, **OAI_STREAM},
                400,
                JSON,
                dumps(lcpp_overflow),
                OAI_REQ_HEADERS,
            )
        ],
    )


# --- Anthropic Messages -----------------------------------------------------------------------

ANT_MODEL = "claude-sonnet-4-20250514"
ANT_TOOLS = [{"name": "get_weather", "description": WEATHER_DESC, "input_schema": WEATHER_PARAMS}]
ANT_REQ_HEADERS = {"content-type": "application/json", "anthropic-version": "2023-06-01"}


def ant_headers(request_id: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "request-id": request_id,
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "2025-12-01T12:00:01Z",
        **(extra or {}),
    }


class AntStream:
    def __init__(self, msg_id: str, input_tokens: int, cache_read: int = 0) -> None:
        self.parts: list[str] = []
        self.event(
            "message_start",
            {
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": ANT_MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": input_tokens,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": cache_read,
                        "output_tokens": 1,
                        "service_tier": "standard",
                    },
                }
            },
        )

    def event(self, name: str, data: dict[str, Any]) -> AntStream:
        self.parts.append(f"event: {name}\ndata: {dumps({'type': name, **data})}\n\n")
        return self

    def text_block(self, index: int, *pieces: str) -> AntStream:
        self.event(
            "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
        )
        for piece in pieces:
            self.event(
                "content_block_delta",
                {"index": index, "delta": {"type": "text_delta", "text": piece}},
            )
        return self.event("content_block_stop", {"index": index})

    def tool_block(self, index: int, tool_id: str, name: str, *pieces: str) -> AntStream:
        self.event(
            "content_block_start",
            {
                "index": index,
                "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
            },
        )
        for piece in ("", *pieces):
            self.event(
                "content_block_delta",
                {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
            )
        return self.event("content_block_stop", {"index": index})

    def finish(self, reason: str, output_tokens: int) -> str:
        self.event(
            "message_delta",
            {
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
        self.event("message_stop", {})
        return "".join(self.parts)

    def text(self) -> str:
        return "".join(self.parts)


def ant_message(msg_id: str, content: list[dict[str, Any]], reason: str, i: int, o: int) -> str:
    return dumps(
        {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": ANT_MODEL,
            "content": content,
            "stop_reason": reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": i,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": o,
                "service_tier": "standard",
            },
        }
    )


def anthropic() -> None:
    base = {"model": ANT_MODEL, "max_tokens": 4096}
    capital = [{"role": "user", "content": "What is the capital of France?"}]
    plain = (
        AntStream("msg_01PlainA1b2C3d4E5f6G7h8", 21)
        .event("ping", {})
        .text_block(0, "The capital", " of France is Paris.")
        .finish("end_turn", 10)
    )
    write(
        "anthropic",
        "plain_answer",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": capital, "system": "You are terse.", "stream": True},
                200,
                ant_headers("req_011Plain01"),
                plain,
                ANT_REQ_HEADERS,
            )
        ],
    )
    write(
        "anthropic",
        "plain_answer_nonstream",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": capital, "system": "You are terse."},
                200,
                {**JSON, "request-id": "req_011Plain02"},
                ant_message(
                    "msg_01PlainB1b2C3d4E5f6G7h8",
                    [{"type": "text", "text": "The capital of France is Paris."}],
                    "end_turn",
                    21,
                    10,
                ),
                ANT_REQ_HEADERS,
            )
        ],
    )

    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    tool_id = "toolu_01NRLabsLyVHZPKxbKvkfSMn"
    first = (
        AntStream("msg_019Q1hrJbZG26Fb9BQhrkHEr", 377)
        .text_block(0, "I'll check the weather", " in Paris.")
        .tool_block(1, tool_id, "get_weather", '{"ci', 'ty": "P', "ar", 'is"}')
        .finish("tool_use", 65)
    )
    back = [
        *ask,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll check the weather in Paris."},
                {
                    "type": "tool_use",
                    "id": tool_id,
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "18 C and sunny"}
            ],
        },
    ]
    second = (
        AntStream("msg_01Xq2Wd8RkT5yHn3LmP7sVb4", 460, cache_read=0)
        .text_block(0, "It is 18 C and sunny", " in Paris.")
        .finish("end_turn", 14)
    )
    write(
        "anthropic",
        "tool_round_trip",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": ask, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Tool01"),
                first,
                ANT_REQ_HEADERS,
            ),
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": back, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Tool02"),
                second,
                ANT_REQ_HEADERS,
            ),
        ],
    )
    write(
        "anthropic",
        "tool_call_nonstream",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": ask, "tools": ANT_TOOLS},
                200,
                {**JSON, "request-id": "req_011Tool03"},
                ant_message(
                    "msg_01Tool3b2C3d4E5f6G7h8i",
                    [
                        {"type": "text", "text": "I'll check the weather in Paris."},
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "get_weather",
                            "input": {"city": "Paris"},
                        },
                    ],
                    "tool_use",
                    377,
                    65,
                ),
                ANT_REQ_HEADERS,
            )
        ],
    )

    both = [{"role": "user", "content": "Weather in Paris and in Tokyo?"}]
    t1, t2 = "toolu_01A09q90qw90lq917835lq9", "toolu_01B4r6Tz8Yx2Wv5Nm3Kp7Lq1"
    parallel = (
        AntStream("msg_01Para1b2C3d4E5f6G7h8i", 402)
        .tool_block(0, t1, "get_weather", '{"city": "Paris"}')
        .event("ping", {})
        .tool_block(1, t2, "get_weather", '{"city": ', '"Tokyo"}')
        .finish("tool_use", 98)
    )
    answers = [
        *both,
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": t1, "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": t2, "name": "get_weather", "input": {"city": "Tokyo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": t1, "content": "18 C and sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": t2,
                    "content": "weather service unavailable for Tokyo",
                    "is_error": True,
                },
            ],
        },
    ]
    final = (
        AntStream("msg_01Para2b2C3d4E5f6G7h8i", 520)
        .text_block(0, "Paris: 18 C and sunny. ", "I could not get Tokyo's weather.")
        .finish("end_turn", 21)
    )
    write(
        "anthropic",
        "parallel_tools",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": both, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Para01"),
                parallel,
                ANT_REQ_HEADERS,
            ),
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": answers, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Para02"),
                final,
                ANT_REQ_HEADERS,
            ),
        ],
    )

    hello = [{"role": "user", "content": "Say hello."}]
    req = {**base, "messages": hello, "stream": True}
    rate = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "This request would exceed the rate limit for your organization "
            "(a1b2c3d4-0000-4000-8000-000000000000) of 50 requests per minute. For details, refer "
            "to: https://docs.claude.com/en/api/rate-limits.",
        },
        "request_id": "req_011Rate01",
    }
    hi = AntStream("msg_01Rate2b2C3d4E5f6G7h8i", 10).text_block(0, "Hello!").finish("end_turn", 5)
    write(
        "anthropic",
        "rate_limit_then_success",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                req,
                429,
                {
                    **JSON,
                    "request-id": "req_011Rate01",
                    "retry-after": "12",
                    "anthropic-ratelimit-requests-limit": "50",
                    "anthropic-ratelimit-requests-remaining": "0",
                    "anthropic-ratelimit-requests-reset": "2025-12-01T12:00:12Z",
                    "x-should-retry": "true",
                },
                dumps(rate),
                ANT_REQ_HEADERS,
            ),
            interaction(
                "POST", ANTHROPIC_URL, req, 200, ant_headers("req_011Rate02"), hi, ANT_REQ_HEADERS
            ),
        ],
    )
    long = [{"role": "user", "content": "Summarize: " + "lorem ipsum " * 8}]
    overflow = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208656 tokens > 200000 maximum",
        },
        "request_id": "req_011Ctx01",
    }
    write(
        "anthropic",
        "context_overflow",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": long, "stream": True},
                400,
                {**JSON, "request-id": "req_011Ctx01"},
                dumps(overflow),
                ANT_REQ_HEADERS,
            )
        ],
    )
    story = [{"role": "user", "content": "Tell me a story."}]
    broken = (
        AntStream("msg_01Err01b2C3d4E5f6G7h8i", 12)
        .event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        .event(
            "content_block_delta",
            {"index": 0, "delta": {"type": "text_delta", "text": "Once upon"}},
        )
        .event("ping", {})
        .event("error", {"error": {"type": "overloaded_error", "message": "Overloaded"}})
        .text()
    )
    write(
        "anthropic",
        "stream_error",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": story, "stream": True},
                200,
                ant_headers("req_011Err01"),
                broken,
                ANT_REQ_HEADERS,
            )
        ],
    )
    overloaded = {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_011Over01",
    }
    write(
        "anthropic",
        "overloaded",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": hello, "stream": True},
                529,
                {**JSON, "request-id": "req_011Over01", "x-should-retry": "true"},
                dumps(overloaded),
                ANT_REQ_HEADERS,
            )
        ],
    )


# --- Ollama native ----------------------------------------------------------------------------

OLL_MODEL = "llama3.2"
NDJSON = {"content-type": "application/x-ndjson"}


def oll_line(content: str = "", tool_calls: list[dict[str, Any]] | None = None) -> str:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return dumps(
        {
            "model": OLL_MODEL,
            "created_at": "2025-12-01T12:00:00.184789Z",
            "message": message,
            "done": False,
        }
    )


def oll_done(prompt: int | None, evals: int, reason: str = "stop", *, line: bool = True) -> Any:
    body: dict[str, Any] = {
        "model": OLL_MODEL,
        "created_at": "2025-12-01T12:00:00.19314Z",
        "message": {"role": "assistant", "content": ""},
        "done_reason": reason,
        "done": True,
        "total_duration": 182242375,
        "load_duration": 41295167,
    }
    if prompt is not None:
        body["prompt_eval_count"] = prompt
    body.update({"prompt_eval_duration": 24573166, "eval_count": evals, "eval_duration": 115959084})
    return dumps(body) if line else body


def ollama() -> None:
    capital = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    plain = "".join(
        f"{line}\n"
        for line in (
            oll_line("The capital"),
            oll_line(" of France is"),
            oll_line(" Paris."),
            oll_done(26, 8),
        )
    )
    write(
        "ollama",
        "plain_answer",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": capital, "stream": True},
                200,
                NDJSON,
                plain,
                OAI_REQ_HEADERS,
            )
        ],
    )
    whole = oll_done(26, 8, line=False)
    whole["message"] = {"role": "assistant", "content": "The capital of France is Paris."}
    write(
        "ollama",
        "plain_answer_nonstream",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": capital, "stream": False},
                200,
                {"content-type": "application/json; charset=utf-8"},
                dumps(whole),
                OAI_REQ_HEADERS,
            )
        ],
    )

    # the documented example: a call with no id (the client names it call_1_0), cached prompt
    ask = [{"role": "user", "content": "What is the weather in Paris?"}]
    first = (
        oll_line(tool_calls=[{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])
        + "\n"
        + oll_done(169, 15)
        + "\n"
    )
    back = [
        *ask,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1_0",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {
            "role": "tool",
            "content": "18 C and sunny",
            "tool_name": "get_weather",
            "tool_call_id": "call_1_0",
        },
    ]
    second = (
        oll_line("It is 18 C")
        + "\n"
        + oll_line(" and sunny in Paris.")
        + "\n"
        + oll_done(None, 12)
        + "\n"
    )
    write(
        "ollama",
        "tool_round_trip",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": ask, "stream": True, "tools": OAI_TOOLS},
                200,
                NDJSON,
                first,
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": back, "stream": True, "tools": OAI_TOOLS},
                200,
                NDJSON,
                second,
                OAI_REQ_HEADERS,
            ),
        ],
    )
    nonstream_call = oll_done(169, 15, line=False)
    nonstream_call["message"] = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_k3m9x2qa",
                "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    }
    write(
        "ollama",
        "tool_call_nonstream",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": ask, "stream": False, "tools": OAI_TOOLS},
                200,
                {"content-type": "application/json; charset=utf-8"},
                dumps(nonstream_call),
                OAI_REQ_HEADERS,
            )
        ],
    )

    # a current server: ids and function.index on each call, both calls in one line
    both = [{"role": "user", "content": "Weather in Paris and in Tokyo?"}]
    calls = [
        {
            "id": "call_p4r1s0ab",
            "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
        },
        {
            "id": "call_t0ky0cd9",
            "function": {"index": 1, "name": "get_weather", "arguments": {"city": "Tokyo"}},
        },
    ]
    parallel = oll_line(tool_calls=calls) + "\n" + oll_done(180, 40) + "\n"
    answers = [
        *both,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_p4r1s0ab",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                },
                {
                    "id": "call_t0ky0cd9",
                    "function": {"name": "get_weather", "arguments": {"city": "Tokyo"}},
                },
            ],
        },
        {
            "role": "tool",
            "content": "18 C and sunny",
            "tool_name": "get_weather",
            "tool_call_id": "call_p4r1s0ab",
        },
        {
            "role": "tool",
            "content": "24 C and raining",
            "tool_name": "get_weather",
            "tool_call_id": "call_t0ky0cd9",
        },
    ]
    final = oll_line("Paris: 18 C, sunny. Tokyo: 24 C, raining.") + "\n" + oll_done(230, 16) + "\n"
    write(
        "ollama",
        "parallel_tools",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": both, "stream": True, "tools": OAI_TOOLS},
                200,
                NDJSON,
                parallel,
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": answers, "stream": True, "tools": OAI_TOOLS},
                200,
                NDJSON,
                final,
                OAI_REQ_HEADERS,
            ),
        ],
    )

    # Ollama's queue-full 429 (server.ErrMaxQueue); the native server sends no Retry-After
    hello = [{"role": "user", "content": "Say hello."}]
    req = {"model": OLL_MODEL, "messages": hello, "stream": True}
    busy = {"error": "server busy, please try again.  maximum pending requests exceeded"}
    hi = oll_line("Hello!") + "\n" + oll_done(11, 3) + "\n"
    write(
        "ollama",
        "rate_limit_then_success",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                req,
                429,
                {"content-type": "application/json; charset=utf-8"},
                dumps(busy),
                OAI_REQ_HEADERS,
            ),
            interaction("POST", OLLAMA_URL, req, 200, NDJSON, hi, OAI_REQ_HEADERS),
        ],
    )
    # Ollama does not reject an over-long prompt: it truncates to num_ctx and says so only through
    # prompt_eval_count (here equal to num_ctx). The client reports the full context.
    long = [{"role": "user", "content": "Summarize: " + "lorem ipsum " * 8}]
    full = oll_line("Lorem ipsum is placeholder text.") + "\n" + oll_done(2048, 9, "stop") + "\n"
    write(
        "ollama",
        "context_overflow",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {
                    "model": OLL_MODEL,
                    "messages": long,
                    "stream": True,
                    "options": {"num_ctx": 2048},
                },
                200,
                NDJSON,
                full,
                OAI_REQ_HEADERS,
            )
        ],
    )
    story = [{"role": "user", "content": "Tell me a story."}]
    broken = (
        oll_line("Once upon")
        + "\n"
        + dumps({"error": "an error was encountered while running the model: unexpected EOF"})
        + "\n"
    )
    write(
        "ollama",
        "stream_error",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": OLL_MODEL, "messages": story, "stream": True},
                200,
                NDJSON,
                broken,
                OAI_REQ_HEADERS,
            )
        ],
    )
    missing = {"error": "model 'llama9' not found"}
    write(
        "ollama",
        "model_not_found",
        [
            interaction(
                "POST",
                OLLAMA_URL,
                {"model": "llama9", "messages": hello, "stream": True},
                404,
                {"content-type": "application/json; charset=utf-8"},
                dumps(missing),
                OAI_REQ_HEADERS,
            )
        ],
    )


def strict_tools_variant(
    provider: str, source: str, target: str, results: dict[str, str] | None = None
) -> None:
    """A copy of a cassette whose tool schemas say ``additionalProperties: false``.

    That is the schema ``@tool`` derives from ``def get_weather(city: str) -> str``, so whole
    ``BareLoop`` runs (tests/providers/test_loop_cassettes.py) replay these copies.
    """
    data = yaml.safe_load((ROOT / provider / f"{source}.yaml").read_text())
    for item in data["interactions"]:
        body = json.loads(item["request"]["body"])
        for tool in body.get("tools", []):
            schema = (
                tool.get("input_schema")
                if provider == "anthropic"
                else tool.get("function", {}).get("parameters")
            )
            if schema is not None:  # a tool the provider runs itself has none
                schema["additionalProperties"] = False
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block["type"] == "tool_result":
                    block["content"] = (results or {}).get(block["content"], block["content"])
        item["request"]["body"] = dumps(body)
    write(provider, target, data["interactions"])


def main() -> None:
    import make_cassettes_compat
    import make_cassettes_responses
    import make_cassettes_thinking

    openai()
    anthropic()
    ollama()
    make_cassettes_thinking.write_all()
    make_cassettes_compat.write_all()
    make_cassettes_responses.write_all()
    for provider in ("anthropic", "ollama"):
        strict_tools_variant(provider, "thinking_tool_use", "loop_thinking_tool_use")
    strict_tools_variant("openai", "compat_deepseek_reasoning", "loop_deepseek_reasoning")
    strict_tools_variant("anthropic", "server_tools_nonstream", "loop_server_tools")
    for provider in ("openai", "anthropic", "ollama"):
        strict_tools_variant(provider, "tool_round_trip", "loop_tool_round_trip")
        # in a loop, the failing Tokyo lookup is a tool that raised: the driver words the result
        raised = {
            "weather service unavailable for Tokyo": "tool 'get_weather' raised RuntimeError: "
            "weather service unavailable for Tokyo"
        }
        strict_tools_variant(provider, "parallel_tools", "loop_parallel_tools", raised)
    print(f"cassettes written under {ROOT}")


if __name__ == "__main__":
    main()
