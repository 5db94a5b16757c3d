"""OpenAI Responses (``POST {base_url}/responses``): the API OpenAI recommends for new work.

Requests are stateless: the whole conversation goes in ``input`` every time, with
``store: false`` (nothing kept on OpenAI's side) and ``include: ["reasoning.encrypted_content"]``,
so reasoning items come back encrypted and can be sent back in the next request, which reasoning
models need across tool calls when nothing is stored.

Input items, from the conversation:

- the system prompt is ``instructions``; a system message of the history a ``system`` message;
- user text is a ``user`` message; each ``ToolResult`` a ``function_call_output``
  ``{"call_id", "output"}`` (the wire has no error flag: an error result is its text);
- an assistant message keeps its order: its reasoning items as received, its text as an
  ``assistant`` message (with the annotations that came with it), each call a
  ``function_call`` ``{"call_id", "name", "arguments", "id"}`` (the item id kept from the reply),
  and any other item this client kept (a ``web_search_call``, ...) as received.

Parts kept under another provider's key are left out. Reply parsing lives in
``_openai_responses_stream``; tools are flat ``{"type": "function", "name", "description",
"parameters"}``, followed by the built-in tools OpenAI runs itself (``server_tools``, e.g.
``{"type": "web_search"}``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Unpack

import httpx

from loopctl.api import ModelRequest, StreamEvent, ToolSpec
from loopctl.core import Message, TextPart, ThinkingPart, ToolCall, ToolResult
from loopctl.providers._common import ClientArgs, OpenAIKeyed
from loopctl.providers._framing import Cursor
from loopctl.providers._openai_responses_stream import (
    ANNOTATIONS,
    CALL_EXTRA,
    response_events,
    stream_events,
)
from loopctl.providers._openai_wire import args_json

DEFAULT_PROVIDER = "openai-responses"


def _assistant_items(message: Message, provider: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                items.append({"role": "assistant", "content": part.text})
        elif isinstance(part, ToolCall):
            item = {
                "type": "function_call",
                "call_id": part.id,
                "name": part.name,
                "arguments": args_json(part.arguments),
            }
            calls[part.id] = item
            items.append(item)
        elif isinstance(part, ToolResult) or part.provider != provider:
            continue
        elif isinstance(part, ThinkingPart):
            if part.data:
                items.append(dict(part.data))
        elif part.data.get("type") == CALL_EXTRA:
            target = calls.get(part.data.get("call_id", ""))
            if target is not None:
                target.update(part.data.get("fields") or {})
        elif part.data.get("type") == ANNOTATIONS:
            if items and items[-1].get("role") == "assistant":
                text = items[-1]["content"]
                items[-1] = {
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "output_text",
                            "text": text,
                            "annotations": part.data.get("annotations", []),
                        }
                    ],
                }
        else:
            items.append(dict(part.data))
    return items


def input_items(messages: Sequence[Message], provider: str = DEFAULT_PROVIDER) -> list[Any]:
    """The conversation as Responses input items (see the module docstring)."""
    items: list[Any] = []
    for message in messages:
        if message.role == "system":
            items.append({"role": "system", "content": message.text})
        elif message.role == "assistant":
            items.extend(_assistant_items(message, provider))
        else:
            for result in message.tool_results:
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": result.call_id,
                        "output": result.content,
                    }
                )
            texts = [p for p in message.parts if isinstance(p, TextPart)]
            if texts or not message.tool_results:
                items.append({"role": "user", "content": message.text})
    return items


def tools_to_wire(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools as ``{"type": "function", "name", "description", "parameters"}``."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        }
        for tool in tools
    ]


class OpenAIResponsesClient(OpenAIKeyed):
    """A Responses API client (streaming SSE by default; ``stream=False`` for one JSON body).

    The arguments of ``OpenAIClient``, and ``store`` (default False), sent as is; while it
    is False the request asks for ``reasoning.encrypted_content``. ``options`` are extra body
    fields (``reasoning: {"effort": ..., "summary": "auto"}``, ``max_output_tokens``, ...); a
    request's own ``options`` win. ``server_tools`` are OpenAI's built-in tools in its form
    (``{"type": "web_search"}``). ``provider`` overrides the key the kept parts carry.
    """

    family = "responses"
    path = "responses"

    def __init__(self, model: str, *, store: bool = False, **kwargs: Unpack[ClientArgs]) -> None:
        super().__init__(model, **kwargs)
        self.store = store

    def body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": input_items(request.messages, self.provider),
        }
        if request.system:
            body["instructions"] = request.system
        if tools := self.tools(request, tools_to_wire):
            body["tools"] = tools
        body["store"] = self.store
        if not self.store:
            body["include"] = ["reasoning.encrypted_content"]
        body.update(self.options)
        body.update(request.options)
        body["stream"] = self.streaming
        return body

    def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        lines = response.aiter_lines()
        return stream_events(self.info, lines, cursor, request.turn, self.provider)

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        return response_events(self.info, data, request.turn, self.provider)
