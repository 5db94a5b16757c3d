"""Messages: the conversation as plain, frozen data.

A message is a role and a list of parts; a part is a discriminated union on ``kind``. Every
form the engine writes (snapshots, traces, provider fixtures) encodes them with these models.

Tool results ride one user-role message holding every result of one exchange (the seeds'
provider convention); provider clients convert to each wire format.

Two parts hold what only a provider understands, so that it survives a turn: ``ThinkingPart``
(the model's reasoning, with the signature or encrypted data its provider checks when it comes
back) and ``ProviderPart`` (a block as the provider sent it: a server tool's call and result,
citations, a signature riding a tool call). Both name the ``provider`` that wrote them; a client
sends them back only to that provider, in the form it requires, and leaves them out for any
other. The brain keeps them as data: they change none of its decisions.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from msgspec.structs import force_setattr

from loopctl.core.data import Data

Role = Literal["system", "user", "assistant"]


class TextPart(Data, frozen=True, kw_only=True, tag_field="kind", tag="text"):
    """Plain text, in any role."""

    kind: ClassVar[Literal["text"]] = "text"
    text: str


class ToolCall(Data, frozen=True, kw_only=True, tag_field="kind", tag="tool_call"):
    """A call the model asked for; only in assistant messages."""

    kind: ClassVar[Literal["tool_call"]] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = {}


class ToolResult(Data, frozen=True, kw_only=True, tag_field="kind", tag="tool_result"):
    """The answer to one call; only in user messages."""

    kind: ClassVar[Literal["tool_result"]] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False

    @classmethod
    def answering(cls, call: ToolCall, content: str, *, is_error: bool = False) -> ToolResult:
        """The result of ``call`` (its id and name) holding ``content``: what a tool, hook or
        middleware answers."""
        return cls(call_id=call.id, name=call.name, content=content, is_error=is_error)


class ThinkingPart(Data, frozen=True, kw_only=True, tag_field="kind", tag="thinking"):
    """The model's reasoning, kept so that it can go back to the provider that wrote it.

    Anthropic requires its thinking blocks back, unchanged, in a tool-use turn; DeepSeek its
    ``reasoning_content`` after tool calls; OpenAI's Responses API its reasoning items when
    nothing is stored on its side. ``text`` is the reasoning as shown (empty when it is only
    encrypted); ``signature`` the opaque token the provider checks (Anthropic's ``signature``,
    a Responses item's ``encrypted_content``); ``redacted`` the encrypted data of Anthropic's
    ``redacted_thinking``; ``data`` the provider's own form when sending it back needs more
    than these (a Responses reasoning item, the fields of an OpenAI-compatible message).
    """

    kind: ClassVar[Literal["thinking"]] = "thinking"
    provider: str = ""
    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    data: dict[str, Any] | None = None


class ProviderPart(Data, frozen=True, kw_only=True, tag_field="kind", tag="provider"):
    """A block only its provider understands, exactly as the provider sent it (``data``).

    A server tool's call and result (Anthropic ``server_tool_use`` / ``web_search_tool_result``,
    MCP blocks, OpenAI built-in tool items), citations of the text before it, a signature that
    rides a tool call. Never dispatched to the tool registry, never sent to another provider.
    """

    kind: ClassVar[Literal["provider"]] = "provider"
    provider: str
    data: dict[str, Any]


Part = TextPart | ToolCall | ToolResult | ThinkingPart | ProviderPart


class Message(Data, frozen=True, kw_only=True):
    """One message of the conversation: a role and its parts."""

    role: Role
    parts: tuple[Part, ...] = ()

    def __post_init__(self) -> None:
        # Any sequence of parts is kept as a tuple, as a restored message holds them.
        if type(self.parts) is not tuple:
            force_setattr(self, "parts", tuple(self.parts))

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", parts=(TextPart(text=text),))

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def assistant(
        cls, text: str = "", tool_calls: list[ToolCall] | tuple[ToolCall, ...] = ()
    ) -> Message:
        parts: list[TextPart | ToolCall] = [TextPart(text=text)] if text else []
        parts.extend(tool_calls)
        return cls(role="assistant", parts=tuple(parts))

    @classmethod
    def from_results(cls, results: list[ToolResult] | tuple[ToolResult, ...]) -> Message:
        """A user message holding one exchange's results."""
        return cls(role="user", parts=tuple(results))

    # The properties tell parts apart by ``kind``, a class attribute of each part class.

    @property
    def text(self) -> str:
        """All text parts joined (no separator: streamed text is one piece split arbitrarily)."""
        return "".join([p.text for p in self.parts if p.kind == "text"])

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if p.kind == "tool_call"]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [p for p in self.parts if p.kind == "tool_result"]

    @property
    def thinking(self) -> list[ThinkingPart]:
        return [p for p in self.parts if p.kind == "thinking"]
