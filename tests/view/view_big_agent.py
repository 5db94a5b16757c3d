"""An agent whose tool returns a 10 KB report and whose own compactor keeps the last messages:
what the divergence-report tests replay, unchanged (``build``) and changed (``build_one_char``:
one character of the report differs; ``build_no_note``: the compactor leaves no note of the
cut, one message fewer; ``build_other_note``: it words its note of the cut otherwise;
``build_long_prompt`` and ``build_long_prompt_changed``: a 6 KB one-line system prompt, one
word changed).
``record`` writes its trace through the real driver, the model's side scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

from loopctl import (
    ApiClient,
    BareLoop,
    LoopObserver,
    Message,
    RunConfig,
    SessionConfig,
    ToolCall,
    tool,
)
from loopctl.core import CompactReason
from loopctl.driver import plan_cut
from loopctl.testing import ScriptedClient
from loopctl.tools import Tool
from loopctl_sim import TraceRecorder

#: Where ``build_one_char`` changes the report (the 10 KB result's 8,123rd character).
CHANGED_AT = 8123


def report_text(changed_at: int | None = None) -> str:
    """A 10,000-character report; with ``changed_at``, one character there differs."""
    rows = "".join(f"row {i:04d}: units={i * 7 % 1000:03d} region=north\n" for i in range(400))
    text = rows[:10_000]
    if changed_at is not None:
        swapped = "X" if text[changed_at] != "X" else "Y"
        text = text[:changed_at] + swapped + text[changed_at + 1 :]
    return text


def _report_tool(changed_at: int | None) -> Tool[..., str]:
    @tool(name="fetch_report")
    def fetch_report(region: str) -> str:
        """The sales report of a region, as text."""
        return report_text(changed_at)

    return fetch_report


class KeepLast:
    """A compactor of the user's own: the first message, a note of what was cut, the last
    ``keep`` messages."""

    def __init__(self, keep: int, note: str | None = "cut") -> None:
        self.keep, self.note = keep, note

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        cut = plan_cut(messages, keep_head=1, keep_tail=self.keep)
        if cut is None:
            return None
        start, end = cut
        if self.note is None:
            return [*messages[:start], *messages[end:]]
        return [
            *messages[:start],
            Message.user(f"[{end - start} messages {self.note}]"),
            *messages[end:],
        ]


def _build(
    client: ApiClient | None,
    observers: Sequence[LoopObserver],
    changed_at: int | None = None,
    note: str | None = "cut",
    prompt: str = "You read sales reports.",
) -> BareLoop:
    assert client is not None, "the model's side is always given: scripted or from the trace"
    return BareLoop(
        client,
        tools=[_report_tool(changed_at)],
        config=RunConfig(max_turns=8),
        session=SessionConfig(system_prompt=prompt, context_window=6000),
        compactor=KeepLast(2, note),
        observers=observers,
    )


def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
    return _build(client, observers)


def build_one_char(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    return _build(client, observers, changed_at=CHANGED_AT)


def build_no_note(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    return _build(client, observers, note=None)


def build_other_note(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    return _build(client, observers, note="dropped")


#: A system prompt of 6 KB on one line (``build_long_prompt``), and the same with one word
#: changed near its end (``build_long_prompt_changed``).
LONG_PROMPT = "You read sales reports. " + "Always be precise about units. " * 200
CHANGED_PROMPT = LONG_PROMPT[:-40] + LONG_PROMPT[-40:].replace("precise", "careful", 1)


def build_long_prompt(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    return _build(client, observers, prompt=LONG_PROMPT)


def build_long_prompt_changed(
    client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
) -> BareLoop:
    return _build(client, observers, prompt=CHANGED_PROMPT)


def record(path: Path, factory: Callable[..., BareLoop] = build) -> Path:
    """Record a run of ``factory`` to ``path``: three reports read one after the other (the
    context passes the compaction threshold on the way), then an answer."""
    calls = [
        Message.assistant("", [ToolCall(id=f"c{i}", name="fetch_report", arguments={"region": r})])
        for i, r in enumerate(["north", "south", "east"])
    ]
    replies = [*calls, Message.assistant("Sales are steady in every region.")]
    with path.open("w") as out:
        recorder = TraceRecorder(out, created="2026-12-01T00:00:00+00:00")
        asyncio.run(factory(ScriptedClient(replies), [recorder]).run("How are sales?"))
    return path
