"""Messages: the conversation as plain, frozen data.

A message is a role and a list of parts; a part is a discriminated union on ``kind``. One
``TypeAdapter`` (``MESSAGES``) serializes lists of messages, so snapshots, traces and provider
fixtures all share one encoding.

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

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from loopctl.core.built import built

__all__ = [
    "MESSAGES",
    "Message",
    "Part",
    "ProviderPart",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCall",
    "ToolResult",
]

Role = Literal["system", "user", "assistant"]


class TextPart(BaseModel):
    """Plain text, in any role."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["text"] = "text"
    text: str


class ToolCall(BaseModel):
    """A call the model asked for; only in assistant messages."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolResult(BaseModel):
    """The answer to one call; only in user messages."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool = False

    @classmethod
    def answering(cls, call: ToolCall, content: str, *, is_error: bool = False) -> ToolResult:
        """The result of ``call`` (its id and name) holding ``content``: what a tool, hook or
        middleware answers. Built without a second validation from a ``ToolCall`` (its id and
        name are valid) and a ``str`` (validated, a result cost 10,000 instructions,
        cachegrind); anything else is validated, with its errors. ``is_error`` is among the
        fields set only when it is true, as when given by keyword only then."""
        if (
            cls is ToolResult
            and type(call) is ToolCall
            and type(content) is str
            and type(is_error) is bool
        ):
            values = {
                "kind": "tool_result",
                "call_id": call.id,
                "name": call.name,
                "content": content,
                "is_error": is_error,
            }
            return built(ToolResult, values, _ERROR_GIVEN if is_error else _OK_GIVEN)
        if is_error:
            return cls(call_id=call.id, name=call.name, content=content, is_error=is_error)
        return cls(call_id=call.id, name=call.name, content=content)


class ThinkingPart(BaseModel):
    """The model's reasoning, kept so that it can go back to the provider that wrote it.

    Anthropic requires its thinking blocks back, unchanged, in a tool-use turn; DeepSeek its
    ``reasoning_content`` after tool calls; OpenAI's Responses API its reasoning items when
    nothing is stored on its side. ``text`` is the reasoning as shown (empty when it is only
    encrypted); ``signature`` the opaque token the provider checks (Anthropic's ``signature``,
    a Responses item's ``encrypted_content``); ``redacted`` the encrypted data of Anthropic's
    ``redacted_thinking``; ``data`` the provider's own form when sending it back needs more
    than these (a Responses reasoning item, the fields of an OpenAI-compatible message).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["thinking"] = "thinking"
    provider: str = ""
    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    data: dict[str, Any] | None = None


class ProviderPart(BaseModel):
    """A block only its provider understands, exactly as the provider sent it (``data``).

    A server tool's call and result (Anthropic ``server_tool_use`` / ``web_search_tool_result``,
    MCP blocks, OpenAI built-in tool items), citations of the text before it, a signature that
    rides a tool call. Never dispatched to the tool registry, never sent to another provider.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["provider"] = "provider"
    provider: str
    data: dict[str, Any]


Part = Annotated[
    TextPart | ToolCall | ToolResult | ThinkingPart | ProviderPart, Field(discriminator="kind")
]


class Message(BaseModel):
    """One message of the conversation: a role and its parts.

    The constructors (``system``, ``user``, ``assistant``, ``from_results``) build the message
    without a second validation when what they are handed is already valid: a ``str`` text,
    ``ToolCall`` / ``ToolResult`` instances (which validation would keep as they are). Anything
    else (a subclass, a str subclass, a dict) goes through the validator, with its
    errors. ``Message.user("hi")`` cost 24,500 instructions validated, ``assistant`` with a text
    and a call 31,000 (cachegrind); every scripted reply, tool result and input pays it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    role: Role
    parts: tuple[Part, ...] = ()

    @classmethod
    def system(cls, text: str) -> Message:
        if cls is Message and type(text) is str:
            return message_of("system", (text_part(text),))
        return cls(role="system", parts=(TextPart(text=text),))

    @classmethod
    def user(cls, text: str) -> Message:
        if cls is Message and type(text) is str:
            return message_of("user", (text_part(text),))
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def assistant(
        cls, text: str = "", tool_calls: list[ToolCall] | tuple[ToolCall, ...] = ()
    ) -> Message:
        if cls is Message and type(text) is str and _ONLY_CALLS.issuperset(map(type, tool_calls)):
            calls = tuple(tool_calls)
            return message_of("assistant", (text_part(text), *calls) if text else calls)
        parts: list[TextPart | ToolCall] = [TextPart(text=text)] if text else []
        parts.extend(tool_calls)
        return cls(role="assistant", parts=tuple(parts))

    @classmethod
    def from_results(cls, results: list[ToolResult] | tuple[ToolResult, ...]) -> Message:
        """A user message holding one exchange's results."""
        if cls is Message and _ONLY_RESULTS.issuperset(map(type, results)):
            return message_of("user", tuple(results))
        return cls(role="user", parts=tuple(results))

    # The properties tell parts apart by ``kind`` (each part class has its own literal), not
    # isinstance: a pydantic class's isinstance goes through ABCMeta, about 1,100 instructions
    # a miss (cachegrind).

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


_TEXT_GIVEN: Final = {"text"}
_OK_GIVEN: Final = {"call_id", "name", "content"}
# The exact part classes the constructors take as they are (checked by ``map(type, ...)`` in C:
# a generator over the parts cost a Python frame a message).
_ONLY_CALLS: Final = frozenset({ToolCall})
_ONLY_RESULTS: Final = frozenset({ToolResult})
_ERROR_GIVEN: Final = {"call_id", "name", "content", "is_error"}
_MESSAGE_GIVEN: Final = {"role", "parts"}


def text_part(text: str) -> TextPart:
    """``TextPart(text=text)`` for a ``str`` the caller has checked, without a second
    validation (the constructors here, the fold of a reply's text)."""
    return built(TextPart, {"kind": "text", "text": text}, _TEXT_GIVEN)


def message_of(role: Role, parts: tuple[Part, ...]) -> Message:
    """``Message(role=role, parts=parts)`` for parts that are valid instances already, without
    a second validation (the constructors here, the fold of a reply)."""
    return built(Message, {"role": role, "parts": parts}, _MESSAGE_GIVEN)


MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
