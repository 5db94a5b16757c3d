"""Compaction: how the hands shrink the conversation when the brain asks for it.

The brain decides *when* (threshold, emergency line, a manual request); a ``ContextCompactor``
decides *how*. It receives history plus pending and returns a shorter, provider-valid list, or
None when there is nothing it can cut (the driver then feeds ``compaction_noop``).

Both shipped compactors cut the same way (``plan_cut``): keep a head and a tail, replace the
middle by one marker message, and move each cut point so that no tool call is separated from its
result. ``SummarizingCompactor`` asks the model to summarize the middle instead of just dropping it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from loopctl.api import ApiClient, ModelRequest, fold_events
from loopctl.core import CompactReason, Message, TextPart, ToolCall, ToolResult


class ContextCompactor(Protocol):
    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None: ...


def _opens_exchange(message: Message) -> bool:
    return message.role == "assistant" and bool(message.tool_calls)


def _answers_exchange(message: Message) -> bool:
    return message.role == "user" and bool(message.tool_results)


def plan_cut(messages: Sequence[Message], keep_head: int, keep_tail: int) -> tuple[int, int] | None:
    """The middle ``[start, end)`` to cut, or None when fewer than two messages could go.

    The head never ends on an assistant message whose calls would lose their results, and the
    tail never starts on a results message whose calls were cut.
    """
    n = len(messages)
    start = min(keep_head, n)
    while 0 < start < n and _opens_exchange(messages[start - 1]):
        start -= 1
    end = max(n - keep_tail, start)
    while end < n and _answers_exchange(messages[end]):
        end += 1
    if end - start < 2:
        return None
    return start, end


def _marker(cut: int, summary: str | None) -> Message:
    text = f"[loopctl] {cut} earlier messages were removed to fit the context window."
    if summary:
        text += f" Summary of what they said:\n{summary}"
    return Message.user(text)


class MiddleOutCompactor:
    """Keep the first ``keep_head`` and last ``keep_tail`` messages; drop the middle."""

    def __init__(self, keep_head: int = 2, keep_tail: int = 6) -> None:
        self.keep_head = keep_head
        self.keep_tail = keep_tail

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        cut = plan_cut(messages, self.keep_head, self.keep_tail)
        if cut is None:
            return None
        start, end = cut
        return [*messages[:start], _marker(end - start, None), *messages[end:]]


def render_transcript(messages: Sequence[Message]) -> str:
    """A plain-text rendering of messages, for a summarizer prompt."""
    lines: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                lines.append(f"{message.role}: {part.text}")
            elif isinstance(part, ToolCall):
                lines.append(f"{message.role} called {part.name}({part.arguments})")
            elif isinstance(part, ToolResult):
                flag = " (error)" if part.is_error else ""
                lines.append(f"result of {part.name}{flag}: {part.content}")
    return "\n".join(lines)


SUMMARY_PROMPT = (
    "Summarize the following part of a conversation between a user, an assistant and its tools. "
    "Keep every fact, decision, file name and number the assistant may still need; be brief.\n\n"
)


class SummarizingCompactor:
    """Like ``MiddleOutCompactor``, but the cut middle is summarized by a model call."""

    def __init__(
        self,
        client: ApiClient,
        keep_head: int = 2,
        keep_tail: int = 6,
        prompt: str = SUMMARY_PROMPT,
    ) -> None:
        self.client = client
        self.keep_head = keep_head
        self.keep_tail = keep_tail
        self.prompt = prompt

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        cut = plan_cut(messages, self.keep_head, self.keep_tail)
        if cut is None:
            return None
        start, end = cut
        request = ModelRequest(
            messages=(Message.user(self.prompt + render_transcript(messages[start:end])),)
        )
        events = [event async for event in self.client.stream(request)]
        summary = fold_events(events).message.text.strip()
        return [*messages[:start], _marker(end - start, summary or None), *messages[end:]]
