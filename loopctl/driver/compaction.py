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


def plan_cut(messages: Sequence[Message], keep_head: int, keep_tail: int) -> tuple[int, int] | None:
    """The middle ``[start, end)`` to cut, or None when fewer than two messages could go.

    The head never ends on an assistant message whose calls would lose their results, and the
    tail never starts on a results message whose calls were cut.
    """
    n = len(messages)
    start = min(keep_head, n)
    while (
        0 < start < n and messages[start - 1].role == "assistant" and messages[start - 1].tool_calls
    ):
        start -= 1
    end = max(n - keep_tail, start)
    while end < n and messages[end].role == "user" and messages[end].tool_results:
        end += 1
    if end - start < 2:
        return None
    return start, end


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
        text = f"[loopctl] {end - start} earlier messages were removed to fit the context window."
        summary = await self._summary(messages[start:end])
        if summary:
            text += f" Summary of what they said:\n{summary}"
        return [*messages[:start], Message.user(text), *messages[end:]]

    async def _summary(self, middle: Sequence[Message]) -> str | None:
        """What the marker says of the cut messages (nothing: they are dropped)."""
        return None


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


class SummarizingCompactor(MiddleOutCompactor):
    """Like ``MiddleOutCompactor``, but the cut middle is summarized by a model call."""

    def __init__(
        self,
        client: ApiClient,
        keep_head: int = 2,
        keep_tail: int = 6,
        prompt: str = SUMMARY_PROMPT,
    ) -> None:
        super().__init__(keep_head, keep_tail)
        self.client = client
        self.prompt = prompt

    async def _summary(self, middle: Sequence[Message]) -> str | None:
        request = ModelRequest(messages=(Message.user(self.prompt + render_transcript(middle)),))
        events = [event async for event in self.client.stream(request)]
        return fold_events(events).message.text.strip()
