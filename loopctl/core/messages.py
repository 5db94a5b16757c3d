"""Messages: the conversation as plain, frozen data.

A message is a role and a list of parts; a part is a discriminated union on ``kind``. One
``TypeAdapter`` (``MESSAGES``) serializes lists of messages, so snapshots, traces and provider
fixtures all share one encoding.

Tool results ride one user-role message holding every result of one exchange (the seeds'
provider convention); provider clients convert to each wire format.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

__all__ = [
    "MESSAGES",
    "Message",
    "Part",
    "Role",
    "TextPart",
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


Part = Annotated[TextPart | ToolCall | ToolResult, Field(discriminator="kind")]


class Message(BaseModel):
    """One message of the conversation: a role and its parts."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    role: Role
    parts: tuple[Part, ...] = ()

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

    @property
    def text(self) -> str:
        """All text parts joined (no separator: streamed text is one piece split arbitrarily)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [p for p in self.parts if isinstance(p, ToolResult)]


MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
