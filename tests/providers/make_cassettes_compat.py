"""Hand-made cassettes of OpenAI-compatible hosts: their reasoning, extras, errors, odd bodies.

Written like ``make_cassettes`` (its ``main`` calls ``write_all``). The chunks are the hosts'
documented shapes (DeepSeek's thinking mode, OpenRouter's ``reasoning`` / ``reasoning_details``
and error ``metadata``, Gemini's ``extra_content.google.thought_signature``, Ollama's ``/v1``
``reasoning``), validated with ``openai.types.chat`` (whose models keep unknown fields). vcrpy
matches method, path and body, not the host: each host's path is distinct here.
"""

from __future__ import annotations

from typing import Any

from make_cassettes import (
    JSON,
    OAI_REQ_HEADERS,
    OAI_STREAM,
    OAI_TOOLS,
    SSE,
    OaiStream,
    dumps,
    interaction,
    oai_call,
    oai_completion,
    oai_usage,
    write,
)

PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]
DEEPSEEK_URL = "https://api.deepseek.com/chat/completions"
OPENROUTER_URL = "https://openrouter.ai/api/v1/chat/completions"
GEMINI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
GROQ_URL = "https://api.groq.com/openai/v1/chat/completions"
OLLAMA_V1_URL = "http://127.0.0.1:11434/v1/chat/completions"
VLLM_URL = "http://127.0.0.1:8000/v1/chat/completions"

DS_REASONING = "The user wants Paris weather. I will call get_weather."
DS_CALL = "call_00_DsK8n2Qp4Rv6Tx8Zb0Cd"
OR_CALL = "toolu_vrtx_01OrQ3Wp5Yr7Tv9Xb1Zd"
OR_SIGNATURE = "ErUBCkYIBhgCIkDw5aPq1vKf3nS8zXyB2hL0mJ6tR4eW9uI7oQ1cV3bN5"
OR_DETAIL = {
    "type": "reasoning.text",
    "text": "Paris weather: call the tool.",
    "signature": OR_SIGNATURE,
    "format": "anthropic-claude-v1",
    "index": 0,
}
GEMINI_CALL = "function-call-6f2a7c1e4b9d3085"
THOUGHT_SIGNATURE = "CtgBAdHtim9kQ2m8zWq4XyP7vL1sR3nT6uE0aB5cD8fG2hJ4kM7oN9pQ"


def usage_with_reasoning(prompt: int, completion: int, reasoning: int) -> dict[str, Any]:
    usage = oai_usage(prompt, completion)
    usage["completion_tokens_details"]["reasoning_tokens"] = reasoning
    return usage


def _deepseek() -> None:
    first = (
        OaiStream("chatcmpl-ds0001", model="deepseek-reasoner", fingerprint="fp_ds_v1")
        .chunk({"role": "assistant", "content": None, "reasoning_content": ""})
        .chunk({"reasoning_content": "The user wants Paris weather."})
        .chunk({"reasoning_content": " I will call get_weather."})
        .chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": DS_CALL,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        )
        .chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Paris"}'}}]})
        .chunk({}, "tool_calls")
        .chunk(usage=usage_with_reasoning(90, 40, 22), choices=False)
        .done()
    )
    echo = [
        *PARIS,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [oai_call(DS_CALL, "get_weather", '{"city":"Paris"}')],
            "reasoning_content": DS_REASONING,
        },
        {"role": "tool", "tool_call_id": DS_CALL, "content": "18 C and sunny"},
    ]
    second = (
        OaiStream("chatcmpl-ds0002", model="deepseek-reasoner", fingerprint="fp_ds_v1")
        .chunk({"role": "assistant", "content": None, "reasoning_content": "The tool says 18 C."})
        .chunk({"content": "It is 18 C and sunny in Paris."})
        .chunk({}, "stop")
        .chunk(usage=usage_with_reasoning(140, 20, 8), choices=False)
        .done()
    )
    base = {"model": "deepseek-reasoner", "tools": OAI_TOOLS, **OAI_STREAM}
    write(
        "openai",
        "compat_deepseek_reasoning",
        [
            interaction(
                "POST",
                DEEPSEEK_URL,
                {**base, "messages": PARIS},
                200,
                SSE,
                first,
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST", DEEPSEEK_URL, {**base, "messages": echo}, 200, SSE, second, OAI_REQ_HEADERS
            ),
        ],
    )


def _openrouter() -> None:
    head = {"role": "assistant", "content": ""}
    first = (
        OaiStream("gen-1764489600-OrReason01", model="anthropic/claude-sonnet-4", fingerprint=None)
        .raw(": OPENROUTER PROCESSING\n\n")
        .chunk(head)
        .chunk(
            {
                "reasoning": "Paris weather:",
                "reasoning_details": [
                    {
                        **{k: v for k, v in OR_DETAIL.items() if k != "signature"},
                        "text": "Paris weather:",
                    }
                ],
            }
        )
        .chunk(
            {
                "reasoning": " call the tool.",
                "reasoning_details": [
                    {"type": "reasoning.text", "text": " call the tool.", "index": 0}
                ],
            }
        )
        .chunk(
            {
                "reasoning_details": [
                    {"type": "reasoning.text", "signature": OR_SIGNATURE, "index": 0}
                ]
            }
        )
        .chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": OR_CALL,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ]
            }
        )
        .chunk({}, "tool_calls", usage_with_reasoning(120, 45, 18))
        .done()
    )
    echo = [
        *PARIS,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [oai_call(OR_CALL, "get_weather", '{"city":"Paris"}')],
            "reasoning": "Paris weather: call the tool.",
            "reasoning_details": [OR_DETAIL],
        },
        {"role": "tool", "tool_call_id": OR_CALL, "content": "18 C and sunny"},
    ]
    second = (
        OaiStream("gen-1764489600-OrReason02", model="anthropic/claude-sonnet-4", fingerprint=None)
        .chunk({"role": "assistant", "content": "It is 18 C and sunny in Paris."})
        .chunk({}, "stop", oai_usage(180, 12))
        .done()
    )
    base = {"model": "anthropic/claude-sonnet-4", "tools": OAI_TOOLS, **OAI_STREAM}
    write(
        "openai",
        "compat_openrouter_reasoning",
        [
            interaction(
                "POST",
                OPENROUTER_URL,
                {**base, "messages": PARIS},
                200,
                SSE,
                first,
                OAI_REQ_HEADERS,
            ),
            interaction(
                "POST",
                OPENROUTER_URL,
                {**base, "messages": echo},
                200,
                SSE,
                second,
                OAI_REQ_HEADERS,
            ),
        ],
    )
    upstream = {
        "error": {
            "code": 502,
            "message": "Provider returned error",
            "metadata": {
                "provider_name": "Anthropic",
                "raw": dumps(
                    {
                        "type": "error",
                        "error": {"type": "overloaded_error", "message": "Overloaded"},
                    }
                ),
            },
        }
    }
    write(
        "openai",
        "compat_openrouter_error",
        [
            interaction(
                "POST",
                OPENROUTER_URL,
                {"model": "anthropic/claude-sonnet-4", "messages": PARIS, **OAI_STREAM},
                502,
                JSON,
                dumps(upstream),
                OAI_REQ_HEADERS,
            )
        ],
    )


def _gemini() -> None:
    extra = {"google": {"thought_signature": THOUGHT_SIGNATURE}}
    first = (
        OaiStream("gemini-ts-0001", model="gemini-3-pro-preview", fingerprint=None)
        .chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": GEMINI_CALL,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                        "extra_content": extra,
                    }
                ],
            },
            "tool_calls",
            oai_usage(70, 21),
        )
        .done()
    )
    echo = [
        *PARIS,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {**oai_call(GEMINI_CALL, "get_weather", '{"city":"Paris"}'), "extra_content": extra}
            ],
        },
        {"role": "tool", "tool_call_id": GEMINI_CALL, "content": "18 C and sunny"},
    ]
    second = (
        OaiStream("gemini-ts-0002", model="gemini-3-pro-preview", fingerprint=None)
        .chunk({"role": "assistant", "content": "It is 18 C and sunny in Paris."}, "stop")
        .done()
    )
    base = {"model": "gemini-3-pro-preview", "tools": OAI_TOOLS, **OAI_STREAM}
    write(
        "openai",
        "compat_gemini_thought_signature",
        [
            interaction(
                "POST", GEMINI_URL, {**base, "messages": PARIS}, 200, SSE, first, OAI_REQ_HEADERS
            ),
            interaction(
                "POST", GEMINI_URL, {**base, "messages": echo}, 200, SSE, second, OAI_REQ_HEADERS
            ),
        ],
    )


def _other_hosts() -> None:
    refused = {
        "error": {
            "message": "Invalid API Key",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    write(
        "openai",
        "compat_groq_error",
        [
            interaction(
                "POST",
                GROQ_URL,
                {"model": "llama-3.3-70b-versatile", "messages": PARIS, **OAI_STREAM},
                401,
                {**JSON, "x-request-id": "req_01groq0000000000"},
                dumps(refused),
                OAI_REQ_HEADERS,
            )
        ],
    )
    # a server that ignores "stream": true and answers with the whole completion
    whole = oai_completion(
        "chatcmpl-vllm-json01",
        {"content": "It is 18 C and sunny in Paris.", "reasoning_content": "Easy: say it."},
        "stop",
        usage_with_reasoning(30, 14, 5),
    )
    write(
        "openai",
        "compat_json_to_stream",
        [
            interaction(
                "POST",
                VLLM_URL,
                {"model": "Qwen/Qwen3-8B", "messages": PARIS, **OAI_STREAM},
                200,
                JSON,
                whole,
                OAI_REQ_HEADERS,
            )
        ],
    )
    thinking = (
        OaiStream("chatcmpl-417", model="qwen3:8b", fingerprint="fp_ollama")
        .chunk({"role": "assistant", "content": "", "reasoning": "Paris"})
        .chunk({"role": "assistant", "content": "", "reasoning": " is the capital."})
        .chunk({"role": "assistant", "content": "The capital of France is Paris."})
        .chunk({"role": "assistant", "content": ""}, "stop")
        .chunk(usage=oai_usage(18, 25), choices=False)
        .done()
    )
    capital = [{"role": "user", "content": "What is the capital of France?"}]
    write(
        "openai",
        "compat_ollama_v1_reasoning",
        [
            interaction(
                "POST",
                OLLAMA_V1_URL,
                {"model": "qwen3:8b", "messages": capital, **OAI_STREAM},
                200,
                SSE,
                thinking,
                OAI_REQ_HEADERS,
            )
        ],
    )


def write_all() -> None:
    _deepseek()
    _openrouter()
    _gemini()
    _other_hosts()
