"""Hand-made cassettes of reasoning and provider-run tools: Anthropic and Ollama.

Written like ``make_cassettes`` (whose helpers this reuses; its ``main`` calls ``write_all``):
the response bodies follow the official SDKs' types event for event (``test_provider_cassettes``
validates them; a request carrying ``anthropic-beta`` is validated with the SDK's beta types),
and the request bodies are literal JSON, so a client that sends a thinking block back changed,
or not at all, fails to match.
"""

from __future__ import annotations

from typing import Any

from make_cassettes import (
    ANT_MODEL,
    ANT_REQ_HEADERS,
    ANT_TOOLS,
    ANTHROPIC_URL,
    JSON,
    NDJSON,
    OAI_MODEL,
    OAI_REQ_HEADERS,
    OAI_STREAM,
    OLL_MODEL,
    OLLAMA_URL,
    OPENAI_URL,
    WEATHER_DESC,
    WEATHER_PARAMS,
    AntStream,
    OaiStream,
    ant_headers,
    dumps,
    interaction,
    oai_call,
    oai_headers,
    oai_usage,
    oll_done,
    write,
)

THINKING = {"type": "enabled", "budget_tokens": 2048}
PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]
THOUGHT = "The user wants the weather in Paris. I should call get_weather with city Paris."
SIGNATURE = "EqQBCkgIBhABGAIiQL2pVxN8yT3kQ7mW4eRzH1cBf0aJ6sKdLq9tPu5vXw2YgZ3nM8oA7iE4rT6yU1pS0dF"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ"
TOOL_ID = "toolu_01Ab3Cd5Ef7Gh9Ij1Kl3Mn5P"
SEARCH_ID = "srvtoolu_014hJH82Qum7Td6UV8gDXThB"
MCP_ID = "mcptoolu_01Lq8Xn4Wv6Tz2Yb5Rc7Pd9F"
RESULT_URL = "https://weather.example.org/paris"
ENCRYPTED = "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y2ESDD"


class ThinkingStream(AntStream):
    """``AntStream`` with the blocks of extended thinking and of provider-run tools."""

    def thinking_block(self, index: int, signature: str, *pieces: str) -> ThinkingStream:
        self.event(
            "content_block_start",
            {
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        )
        for piece in pieces:
            self.event(
                "content_block_delta",
                {"index": index, "delta": {"type": "thinking_delta", "thinking": piece}},
            )
        self.event(
            "content_block_delta",
            {"index": index, "delta": {"type": "signature_delta", "signature": signature}},
        )
        self.event("content_block_stop", {"index": index})
        return self

    def whole_block(self, index: int, block: dict[str, Any]) -> ThinkingStream:
        """A block that arrives complete in its start event (a result, redacted thinking)."""
        self.event("content_block_start", {"index": index, "content_block": block})
        self.event("content_block_stop", {"index": index})
        return self

    def input_block(self, index: int, block: dict[str, Any], *pieces: str) -> ThinkingStream:
        """A server or MCP tool call: its input streams as ``input_json_delta``."""
        self.event("content_block_start", {"index": index, "content_block": {**block, "input": {}}})
        for piece in ("", *pieces):
            self.event(
                "content_block_delta",
                {"index": index, "delta": {"type": "input_json_delta", "partial_json": piece}},
            )
        self.event("content_block_stop", {"index": index})
        return self

    def cited_text_block(
        self, index: int, citation: dict[str, Any], *pieces: str
    ) -> ThinkingStream:
        self.event(
            "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
        )
        self.event(
            "content_block_delta",
            {"index": index, "delta": {"type": "citations_delta", "citation": citation}},
        )
        for piece in pieces:
            self.event(
                "content_block_delta",
                {"index": index, "delta": {"type": "text_delta", "text": piece}},
            )
        self.event("content_block_stop", {"index": index})
        return self

    def finish_with(self, reason: str, usage: dict[str, Any]) -> str:
        self.event(
            "message_delta",
            {"delta": {"stop_reason": reason, "stop_sequence": None}, "usage": usage},
        )
        self.event("message_stop", {})
        return self.text()


def _thinking_tool_use() -> None:
    base = {"model": ANT_MODEL, "max_tokens": 4096, "thinking": THINKING}
    first = (
        ThinkingStream("msg_01Th1nk1ngT00lUse0000001", 412)
        .thinking_block(0, SIGNATURE, "The user wants the weather in Paris.", THOUGHT[36:])
        .text_block(1, "Let me check", " the weather.")
        .tool_block(2, TOOL_ID, "get_weather", '{"city": ', '"Paris"}')
        .finish_with(
            "tool_use", {"output_tokens": 96, "output_tokens_details": {"thinking_tokens": 41}}
        )
    )
    thinking = {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
    back = [
        *PARIS,
        {
            "role": "assistant",
            "content": [
                thinking,
                {"type": "text", "text": "Let me check the weather."},
                {
                    "type": "tool_use",
                    "id": TOOL_ID,
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": TOOL_ID, "content": "18 C and sunny"}
            ],
        },
    ]
    second = (
        ThinkingStream("msg_01Th1nk1ngT00lUse0000002", 530)
        .text_block(0, "It is 18 C and sunny", " in Paris.")
        .finish("end_turn", 15)
    )
    write(
        "anthropic",
        "thinking_tool_use",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": PARIS, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Think01"),
                first,
                ANT_REQ_HEADERS,
            ),
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": back, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Think02"),
                second,
                ANT_REQ_HEADERS,
            ),
        ],
    )


def _redacted_thinking() -> None:
    base = {"model": ANT_MODEL, "max_tokens": 4096, "thinking": THINKING}
    first = (
        ThinkingStream("msg_01RedactedThinking00001", 405)
        .whole_block(0, {"type": "redacted_thinking", "data": REDACTED})
        .tool_block(1, TOOL_ID, "get_weather", '{"city": "Paris"}')
        .finish("tool_use", 70)
    )
    back = [
        *PARIS,
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": REDACTED},
                {
                    "type": "tool_use",
                    "id": TOOL_ID,
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": TOOL_ID, "content": "18 C and sunny"}
            ],
        },
    ]
    second = (
        ThinkingStream("msg_01RedactedThinking00002", 480)
        .text_block(0, "18 C and sunny in Paris.")
        .finish("end_turn", 9)
    )
    write(
        "anthropic",
        "redacted_thinking",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": PARIS, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Redact01"),
                first,
                ANT_REQ_HEADERS,
            ),
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**base, "messages": back, "tools": ANT_TOOLS, "stream": True},
                200,
                ant_headers("req_011Redact02"),
                second,
                ANT_REQ_HEADERS,
            ),
        ],
    )


WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
CITATION = {
    "type": "web_search_result_location",
    "cited_text": "Paris today: 18 C, sunny, light wind from the west.",
    "url": RESULT_URL,
    "title": "Paris weather today",
    "encrypted_index": "EpMBCioIAhgBIiQyYjQ0OWJmZi1lNm",
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": SEARCH_ID,
    "content": [
        {
            "type": "web_search_result",
            "title": "Paris weather today",
            "url": RESULT_URL,
            "encrypted_content": ENCRYPTED,
            "page_age": "December 1, 2025",
        }
    ],
}
SEARCH_USAGE = {
    "input_tokens": 2104,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "output_tokens": 118,
    "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
}


def search_stream() -> str:
    """A reply that searched the web itself: its call, the results, cited text."""
    return (
        ThinkingStream("msg_01WebSearchServerTool001", 2104)
        .text_block(0, "I'll search for", " the current weather.")
        .input_block(
            1,
            {"type": "server_tool_use", "id": SEARCH_ID, "name": "web_search"},
            '{"query": "weat',
            'her Paris today"}',
        )
        .whole_block(2, SEARCH_RESULT)
        .cited_text_block(3, CITATION, "It is 18 C and sunny", " in Paris.")
        .finish_with("end_turn", SEARCH_USAGE)
    )


def search_body() -> dict[str, Any]:
    """The same reply as one Messages body."""
    return {
        "id": "msg_01WebSearchServerTool002",
        "type": "message",
        "role": "assistant",
        "model": ANT_MODEL,
        "content": [
            {"type": "text", "text": "I'll search for the current weather."},
            {
                "type": "server_tool_use",
                "id": SEARCH_ID,
                "name": "web_search",
                "input": {"query": "weather Paris today"},
            },
            SEARCH_RESULT,
            {"type": "text", "text": "It is 18 C and sunny in Paris.", "citations": [CITATION]},
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {**SEARCH_USAGE, "service_tier": "standard"},
    }


def _server_tools() -> None:
    ask = {
        "model": ANT_MODEL,
        "max_tokens": 4096,
        "messages": PARIS,
        "tools": [*ANT_TOOLS, WEB_SEARCH],
    }
    write(
        "anthropic",
        "server_tools_stream",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**ask, "stream": True},
                200,
                ant_headers("req_011Search01"),
                search_stream(),
                ANT_REQ_HEADERS,
            )
        ],
    )
    write(
        "anthropic",
        "server_tools_nonstream",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                ask,
                200,
                {**JSON, "request-id": "req_011Search02"},
                dumps(search_body()),
                ANT_REQ_HEADERS,
            )
        ],
    )
    # a server that ignores "stream": true and answers with the whole body
    write(
        "anthropic",
        "json_to_stream",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                {**ask, "stream": True},
                200,
                {**JSON, "request-id": "req_011Search03"},
                dumps(search_body()),
                ANT_REQ_HEADERS,
            )
        ],
    )


MCP_SERVER = {"type": "url", "url": "https://mcp.example.org/weather", "name": "weather-mcp"}
MCP_BETA = "mcp-client-2025-04-04"


def _mcp_tools() -> None:
    body = {
        "model": ANT_MODEL,
        "max_tokens": 4096,
        "messages": PARIS,
        "mcp_servers": [MCP_SERVER],
        "stream": True,
    }
    reply = (
        ThinkingStream("msg_01McpToolUse000000000001", 611)
        .input_block(
            0,
            {
                "type": "mcp_tool_use",
                "id": MCP_ID,
                "name": "forecast",
                "server_name": "weather-mcp",
            },
            '{"location"',
            ': "Paris"}',
        )
        .whole_block(
            1,
            {
                "type": "mcp_tool_result",
                "tool_use_id": MCP_ID,
                "is_error": False,
                "content": [{"type": "text", "text": "Paris: 18 C, sunny"}],
            },
        )
        .text_block(2, "The forecast says 18 C", " and sunny in Paris.")
        .finish("end_turn", 42)
    )
    write(
        "anthropic",
        "mcp_tools_stream",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                body,
                200,
                ant_headers("req_011Mcp01"),
                reply,
                {**ANT_REQ_HEADERS, "anthropic-beta": MCP_BETA},
            )
        ],
    )


# --- Ollama native, think: true --------------------------------------------------------------

OLL_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": WEATHER_DESC,
            "parameters": WEATHER_PARAMS,
        },
    }
]
OLL_THINKING = "The user asks for the weather in Paris; get_weather will tell."


def _oll(message: dict[str, Any]) -> str:
    return dumps(
        {
            "model": OLL_MODEL,
            "created_at": "2025-12-01T12:00:00.184789Z",
            "message": {"role": "assistant", "content": "", **message},
            "done": False,
        }
    )


def _ollama_thinking() -> None:
    call = {
        "id": "call_th1nk0ll",
        "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Paris"}},
    }
    first = "".join(
        f"{line}\n"
        for line in (
            _oll({"thinking": "The user asks for the weather in Paris;"}),
            _oll({"thinking": " get_weather will tell."}),
            _oll({"tool_calls": [call]}),
            oll_done(180, 31),
        )
    )
    back = [
        *PARIS,
        {
            "role": "assistant",
            "content": "",
            "thinking": OLL_THINKING,
            "tool_calls": [
                {
                    "id": "call_th1nk0ll",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {
            "role": "tool",
            "content": "18 C and sunny",
            "tool_name": "get_weather",
            "tool_call_id": "call_th1nk0ll",
        },
    ]
    second = "".join(
        f"{line}\n"
        for line in (_oll({"content": "It is 18 C and sunny in Paris."}), oll_done(230, 11))
    )
    base = {"model": OLL_MODEL, "stream": True, "tools": OLL_TOOLS, "think": True}
    write(
        "ollama",
        "thinking_tool_use",
        [
            interaction(
                "POST", OLLAMA_URL, {**base, "messages": PARIS}, 200, NDJSON, first, OAI_REQ_HEADERS
            ),
            interaction(
                "POST", OLLAMA_URL, {**base, "messages": back}, 200, NDJSON, second, OAI_REQ_HEADERS
            ),
        ],
    )


# --- one conversation, three legs: Anthropic thinking, an OpenAI model, Anthropic again ------

STRICT = {**WEATHER_PARAMS, "additionalProperties": False}
TOKYO = "And in Tokyo?"
NO_DATA = "I have no fresh data for Tokyo."


def _cross_provider() -> None:
    """What each provider gets after the thinking turn of ``loop_thinking_tool_use``: OpenAI the
    conversation without Anthropic's thinking; Anthropic, afterwards, its thinking block again."""
    call = {"type": "tool_use", "id": TOOL_ID, "name": "get_weather", "input": {"city": "Paris"}}
    answer = "It is 18 C and sunny in Paris."
    openai_tools = [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": WEATHER_DESC, "parameters": STRICT},
        }
    ]
    to_openai = [
        *PARIS,
        {
            "role": "assistant",
            "content": "Let me check the weather.",
            "tool_calls": [oai_call(TOOL_ID, "get_weather", '{"city":"Paris"}')],
        },
        {"role": "tool", "tool_call_id": TOOL_ID, "content": "18 C and sunny"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": TOKYO},
    ]
    reply = (
        OaiStream("chatcmpl-CXaCross0001")
        .chunk({"role": "assistant", "content": NO_DATA})
        .chunk({}, "stop")
        .chunk(usage=oai_usage(120, 9), choices=False)
        .done()
    )
    write(
        "openai",
        "cross_after_anthropic",
        [
            interaction(
                "POST",
                OPENAI_URL,
                {"model": OAI_MODEL, "messages": to_openai, "tools": openai_tools, **OAI_STREAM},
                200,
                oai_headers("req_cross01"),
                reply,
                OAI_REQ_HEADERS,
            )
        ],
    )
    thinking = {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE}
    to_anthropic = [
        *PARIS,
        {
            "role": "assistant",
            "content": [thinking, {"type": "text", "text": "Let me check the weather."}, call],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": TOOL_ID, "content": "18 C and sunny"}
            ],
        },
        {"role": "assistant", "content": answer},
        {"role": "user", "content": TOKYO},
        {"role": "assistant", "content": NO_DATA},
        {"role": "user", "content": "Thanks!"},
    ]
    tools = [{"name": "get_weather", "description": WEATHER_DESC, "input_schema": STRICT}]
    body = {
        "model": ANT_MODEL,
        "max_tokens": 4096,
        "thinking": THINKING,
        "messages": to_anthropic,
        "tools": tools,
        "stream": True,
    }
    back = ThinkingStream("msg_01CrossBackFromOpenAI0001", 700).text_block(0, "You're welcome!")
    write(
        "anthropic",
        "cross_back_from_openai",
        [
            interaction(
                "POST",
                ANTHROPIC_URL,
                body,
                200,
                ant_headers("req_011Cross01"),
                back.finish("end_turn", 6),
                ANT_REQ_HEADERS,
            )
        ],
    )


def write_all() -> None:
    _cross_provider()
    _thinking_tool_use()
    _redacted_thinking()
    _server_tools()
    _mcp_tools()
    _ollama_thinking()
