"""Anthropic Messages (``POST {base_url}/v1/messages``), streaming SSE or one JSON body.

The conversion lives in ``_anthropic_wire`` (history to blocks, tools, usage) and the reply
parsing in ``_anthropic_stream`` (a body and a stream give the same events); this module is
the client. Reasoning, server-tool and MCP blocks are kept as parts of this client's
``provider`` key and sent back unchanged (see ``_anthropic_wire``). Context tokens: all three
input figures plus the output tokens.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Unpack

import httpx

from loopctl.api import ModelRequest, StreamEvent
from loopctl.providers._anthropic_stream import body_events, stream_events
from loopctl.providers._anthropic_wire import (
    messages_to_wire,
    tools_to_wire,
)
from loopctl.providers._common import ClientArgs, HttpProvider
from loopctl.providers._framing import Cursor

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096


class AnthropicClient(HttpProvider):
    """A Messages API client. ``api_key`` defaults to ``ANTHROPIC_API_KEY`` (required).

    ``max_tokens`` (required by the API) defaults to 4096; ``options`` are extra body fields
    (``temperature``, ``tool_choice``, ``thinking``, ``mcp_servers``, ...), a request's own
    ``options`` win over them. ``server_tools`` are tools Anthropic runs itself, in its form
    (``{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}``), advertised after
    the function tools; ``betas`` go in the ``anthropic-beta`` header (the MCP connector needs
    one). ``provider`` overrides the key the kept parts carry (default: from the host).
    """

    family = "anthropic"
    path = "v1/messages"
    key_env = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        betas: Sequence[str] = (),
        **kwargs: Unpack[ClientArgs],
    ) -> None:
        super().__init__(model, **kwargs)
        self.max_tokens = max_tokens
        self.betas = tuple(betas)

    def default_base_url(self) -> str:
        return DEFAULT_BASE_URL

    def requires_key(self, host: str | None) -> bool:
        return True

    def headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
            "x-api-key": self.api_key or "",
        }
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        system, messages = messages_to_wire(request.messages, request.system, self.provider)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
        }
        if system:
            body["system"] = system
        if tools := self.tools(request, tools_to_wire):
            body["tools"] = tools
        body.update(self.options)
        body.update(request.options)
        if self.streaming:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        lines = response.aiter_lines()
        return stream_events(self.info, lines, cursor, request.turn, self.provider)

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        return body_events(self.info, data, request.turn, self.provider)
