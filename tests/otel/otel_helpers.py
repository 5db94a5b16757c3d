"""What the OpenTelemetry tests share: an SDK provider whose spans land in memory, and the
spans as a tree a test can read (name, parent's name, attributes, events, times)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from loopctl.api import ModelReply, Usage
from loopctl.core import LoopError, Message, ToolCall
from loopctl.driver.config import RetryConfig, RunConfig
from loopctl.driver.loop import BareLoop
from loopctl.testing import ScriptedClient
from loopctl.tools import tool

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "traces" / "driver"


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@dataclass(frozen=True)
class Node:
    name: str
    parent: str | None
    attributes: dict[str, Any]
    events: list[str]
    start: int
    end: int
    status: str


def tree(spans: Sequence[ReadableSpan]) -> list[Node]:
    """The spans in start order, each with its parent's name."""
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    out = [
        Node(
            s.name,
            None if s.parent is None else names[s.parent.span_id],
            dict(s.attributes or {}),
            [e.name for e in s.events],
            s.start_time or 0,
            s.end_time or 0,
            s.status.status_code.name,
        )
        for s in spans
    ]
    # a parent before its children when they start at the same instant
    return sorted(out, key=lambda n: (n.start, n.parent is not None))


started: list[str] = []


@tool
async def slow(n: int) -> str:
    """Wait a little, so the calls of one wave overlap."""
    started.append(f"s{n}")
    await asyncio.sleep(0.01)
    return f"done {n}"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("no luck")


def _client() -> ScriptedClient:
    calls = [ToolCall(id=f"c{n}", name="slow", arguments={"n": n}) for n in (1, 2)]
    return ScriptedClient(
        [
            LoopError(kind="rate_limited", message="slow down", retryable=True, status=429),
            ModelReply(
                message=Message.assistant("two at once", calls),
                usage=Usage(input_tokens=11, output_tokens=7),
                stop_reason="tool_use",
            ),
            Message.assistant("", [ToolCall(id="c3", name="broken", arguments={})]),
            ModelReply(
                message=Message.assistant("done"), usage=Usage(input_tokens=30, output_tokens=2)
            ),
        ]
    )


async def run_scripted(observers: list[Any]) -> None:
    async def no_sleep(_: float) -> None:
        return None

    loop = BareLoop(
        _client(),
        tools=[slow, broken],
        config=RunConfig(retry=RetryConfig(max_retries=2)),
        observers=observers,
        sleep=no_sleep,
        rng=lambda: 0.0,
    )
    await loop.run("go")
