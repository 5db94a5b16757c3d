"""Hand-made cassettes of OpenAI's Responses API (``cassettes/openai_responses/``).

Written like ``make_cassettes`` (its ``main`` calls ``write_all``): every event and body is
validated with ``openai.types.responses`` (``ResponseStreamEvent``, ``Response``), the request
bodies are literal JSON. The event order follows the API reference: ``response.created``,
``in_progress``, per output item ``output_item.added``, its parts and deltas,
``output_item.done``; then ``response.completed`` (or ``incomplete`` / ``failed``), each with a
``sequence_number``.
"""

from __future__ import annotations

import json
from typing import Any

from make_cassettes import (
    JSON,
    OAI_REQ_HEADERS,
    SSE,
    WEATHER_DESC,
    WEATHER_PARAMS,
    dumps,
    interaction,
    write,
)

URL = "https://api.openai.com/v1/responses"
MODEL = "gpt-5-mini"
SERVED = "gpt-5-mini-2025-08-07"
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": WEATHER_DESC,
        "parameters": WEATHER_PARAMS,
    }
]
STATELESS = {"store": False, "include": ["reasoning.encrypted_content"]}
PARIS = [{"role": "user", "content": "What is the weather in Paris?"}]
REASONING_ID = "rs_68a1c0ffee0b1e5d00aa11bb22cc33dd"
ENCRYPTED = "gAAAAABoocOFFEEencryptedReasoningBlob0123456789abcdefGHIJKLmnopqrSTUV=="
SUMMARY = "**Checking the weather**\n\nThe user wants Paris; I'll call get_weather."
CALL_ID = "call_Rq7Lm2Xw9Pz4Vt1Nk8Hs3Jd6"
FC_ID = "fc_68a1c0ffee0b1e5d00aa11bb22cc33ee"
MSG_ID = "msg_68a1c0ffee0b1e5d00aa11bb22cc33ff"
SEARCH_ID = "ws_68a1c0ffee0b1e5d00aa11bb22cc3400"


def usage(i: int, o: int, reasoning: int = 0, cached: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": i,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": o,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": i + o,
    }


def response(
    rid: str, status: str, output: list[Any], use: dict[str, Any] | None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1764489600,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": SERVED,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": False,
        "usage": use,
        **extra,
    }


def reasoning_item(status: str = "completed", encrypted: str | None = ENCRYPTED) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": REASONING_ID,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": SUMMARY}] if status == "completed" else [],
        "encrypted_content": encrypted,
    }
    return item


def call_item(status: str = "completed") -> dict[str, Any]:
    return {
        "id": FC_ID,
        "type": "function_call",
        "status": status,
        "arguments": '{"city":"Paris"}' if status == "completed" else "",
        "call_id": CALL_ID,
        "name": "get_weather",
    }


def message_item(
    text: str, status: str = "completed", annotations: list[Any] | None = None
) -> dict[str, Any]:
    content = [
        {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}
    ]
    return {
        "id": MSG_ID,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [] if status == "in_progress" else content,
    }


class Stream:
    """Responses events as SSE, numbered in order."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.lines: list[str] = []
        self.seq = 0
        self.event("response.created", response=response(rid, "in_progress", [], None))
        self.event("response.in_progress", response=response(rid, "in_progress", [], None))

    def event(self, name: str, **data: Any) -> Stream:
        body = {"type": name, "sequence_number": self.seq, **data}
        self.seq += 1
        self.lines.append(f"event: {name}\ndata: {dumps(body)}\n\n")
        return self

    def reasoning(self, index: int, *pieces: str) -> Stream:
        self.event(
            "response.output_item.added",
            output_index=index,
            item=reasoning_item("in_progress", None),
        )
        part = {"item_id": REASONING_ID, "output_index": index, "summary_index": 0}
        self.event(
            "response.reasoning_summary_part.added",
            **part,
            part={"type": "summary_text", "text": ""},
        )
        for piece in pieces:
            self.event("response.reasoning_summary_text.delta", **part, delta=piece)
        self.event("response.reasoning_summary_text.done", **part, text="".join(pieces))
        self.event(
            "response.reasoning_summary_part.done",
            **part,
            part={"type": "summary_text", "text": "".join(pieces)},
        )
        return self.event("response.output_item.done", output_index=index, item=reasoning_item())

    def call(self, index: int, *pieces: str) -> Stream:
        self.event("response.output_item.added", output_index=index, item=call_item("in_progress"))
        for piece in pieces:
            self.event(
                "response.function_call_arguments.delta",
                item_id=FC_ID,
                output_index=index,
                delta=piece,
            )
        self.event(
            "response.function_call_arguments.done",
            item_id=FC_ID,
            output_index=index,
            arguments="".join(pieces),
        )
        return self.event("response.output_item.done", output_index=index, item=call_item())

    def message(self, index: int, *pieces: str, annotations: list[Any] | None = None) -> Stream:
        text = "".join(pieces)
        self.event(
            "response.output_item.added", output_index=index, item=message_item("", "in_progress")
        )
        at = {"item_id": MSG_ID, "output_index": index, "content_index": 0}
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self.event("response.content_part.added", **at, part=empty)
        for piece in pieces:
            self.event("response.output_text.delta", **at, delta=piece, logprobs=[])
        self.event("response.output_text.done", **at, text=text, logprobs=[])
        done = {
            "type": "output_text",
            "text": text,
            "annotations": annotations or [],
            "logprobs": [],
        }
        self.event("response.content_part.done", **at, part=done)
        return self.event(
            "response.output_item.done",
            output_index=index,
            item=message_item(text, annotations=annotations),
        )

    def search(self, index: int, query: str) -> Stream:
        item = {
            "id": SEARCH_ID,
            "type": "web_search_call",
            "status": "in_progress",
            "action": {"type": "search", "query": query},
        }
        self.event("response.output_item.added", output_index=index, item=item)
        for stage in ("in_progress", "searching", "completed"):
            self.event(f"response.web_search_call.{stage}", item_id=SEARCH_ID, output_index=index)
        return self.event(
            "response.output_item.done", output_index=index, item={**item, "status": "completed"}
        )

    def end(
        self, name: str, status: str, output: list[Any], use: dict[str, Any] | None, **extra: Any
    ) -> str:
        self.event(name, response=response(self.rid, status, output, use, **extra))
        return "".join(self.lines)


def _reasoning_tool_use() -> None:
    first = (
        Stream("resp_68a1c0ffee0b1e5d00000001")
        .reasoning(
            0, "**Checking the weather**\n\n", "The user wants Paris; I'll call get_weather."
        )
        .call(1, '{"city":', '"Paris"}')
        .end(
            "response.completed", "completed", [reasoning_item(), call_item()], usage(62, 150, 128)
        )
    )
    back = [
        *PARIS,
        reasoning_item(),
        {
            "type": "function_call",
            "call_id": CALL_ID,
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
            "id": FC_ID,
        },
        {"type": "function_call_output", "call_id": CALL_ID, "output": "18 C and sunny"},
    ]
    answer = "It is 18 C and sunny in Paris."
    second = (
        Stream("resp_68a1c0ffee0b1e5d00000002")
        .message(0, "It is 18 C", " and sunny in Paris.")
        .end(
            "response.completed", "completed", [message_item(answer)], usage(240, 12, 0, cached=128)
        )
    )
    base = {"model": MODEL, "tools": TOOLS, **STATELESS, "stream": True}
    write(
        "openai_responses",
        "reasoning_tool_use",
        [
            interaction("POST", URL, {**base, "input": PARIS}, 200, SSE, first, OAI_REQ_HEADERS),
            interaction("POST", URL, {**base, "input": back}, 200, SSE, second, OAI_REQ_HEADERS),
        ],
    )
    whole = response(
        "resp_68a1c0ffee0b1e5d00000003",
        "completed",
        [reasoning_item(), call_item()],
        usage(62, 150, 128),
    )
    write(
        "openai_responses",
        "tool_call_nonstream",
        [
            interaction(
                "POST",
                URL,
                {"model": MODEL, "input": PARIS, "tools": TOOLS, **STATELESS, "stream": False},
                200,
                JSON,
                dumps(whole),
                OAI_REQ_HEADERS,
            )
        ],
    )


def _plain_and_errors() -> None:
    capital = [{"role": "user", "content": "What is the capital of France?"}]
    text = "The capital of France is Paris."
    plain = (
        Stream("resp_68a1c0ffee0b1e5d00000010")
        .message(0, "The capital", " of France is Paris.")
        .end("response.completed", "completed", [message_item(text)], usage(20, 8))
    )
    body = {
        "model": MODEL,
        "input": capital,
        "instructions": "You are terse.",
        **STATELESS,
        "stream": True,
    }
    write(
        "openai_responses",
        "plain_answer",
        [interaction("POST", URL, body, 200, SSE, plain, OAI_REQ_HEADERS)],
    )
    failed = Stream("resp_68a1c0ffee0b1e5d00000011").end(
        "response.failed",
        "failed",
        [],
        None,
        error={"code": "server_error", "message": "The model failed to generate a response."},
    )
    write(
        "openai_responses",
        "stream_error",
        [interaction("POST", URL, body, 200, SSE, failed, OAI_REQ_HEADERS)],
    )
    overflow = {
        "error": {
            "message": "Your input exceeds the context window of this model. "
            "Please adjust your input and try again.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    write(
        "openai_responses",
        "context_overflow",
        [
            interaction(
                "POST",
                URL,
                body,
                400,
                {**JSON, "x-request-id": "req_resp_overflow"},
                dumps(overflow),
                OAI_REQ_HEADERS,
            )
        ],
    )
    cut = (
        Stream("resp_68a1c0ffee0b1e5d00000012")
        .message(0, "The capital")
        .end(
            "response.incomplete",
            "incomplete",
            [message_item("The capital", "incomplete")],
            usage(20, 16, 12),
            incomplete_details={"reason": "max_output_tokens"},
        )
    )
    body_cut = {**body, "max_output_tokens": 16}
    write(
        "openai_responses",
        "incomplete",
        [interaction("POST", URL, body_cut, 200, SSE, cut, OAI_REQ_HEADERS)],
    )


CITATION = {
    "type": "url_citation",
    "start_index": 0,
    "end_index": 30,
    "title": "Paris weather today",
    "url": "https://weather.example.org/paris",
}


def _web_search() -> None:
    text = "It is 18 C and sunny in Paris."
    done_search = {
        "id": SEARCH_ID,
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": "weather Paris today"},
    }
    stream = (
        Stream("resp_68a1c0ffee0b1e5d00000020")
        .search(0, "weather Paris today")
        .message(1, "It is 18 C and sunny", " in Paris.", annotations=[CITATION])
        .end(
            "response.completed",
            "completed",
            [done_search, message_item(text, annotations=[CITATION])],
            usage(1800, 40),
        )
    )
    body = {
        "model": MODEL,
        "input": PARIS,
        "tools": [*TOOLS, {"type": "web_search"}],
        **STATELESS,
        "stream": True,
    }
    write(
        "openai_responses",
        "web_search",
        [interaction("POST", URL, body, 200, SSE, stream, OAI_REQ_HEADERS)],
    )


def loop_variant() -> None:
    """``reasoning_tool_use`` with the schema ``@tool`` derives (no additional properties)."""
    import yaml
    from make_cassettes import ROOT

    data = yaml.safe_load((ROOT / "openai_responses" / "reasoning_tool_use.yaml").read_text())
    for item in data["interactions"]:
        body = json.loads(item["request"]["body"])
        for tool in body["tools"]:
            tool["parameters"]["additionalProperties"] = False
        item["request"]["body"] = dumps(body)
    write("openai_responses", "loop_reasoning_tool_use", data["interactions"])


def write_all() -> None:
    _reasoning_tool_use()
    _plain_and_errors()
    _web_search()
    loop_variant()
