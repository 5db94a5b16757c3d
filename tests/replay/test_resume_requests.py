"""A request the trace holds survives a resume (issue 30, item 2): a manual compaction asked for
before a step that could not honour it (the brain was awaiting its tools) is in that step's
policy (``compact_now``); a process killed before the compaction ran is resumed with the request,
and the resumed run compacts where the uninterrupted one did. The caller's cancel signal stops
the resumed run (``cancel=``; ``loopctl-sim resume`` fires it on Ctrl-C), from either door."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.api import ModelRequest
from loopctl.driver import CancelSignal, StepPoint
from loopctl.testing import FunctionClient
from loopctl_sim import TraceRecorder, read_trace, replay_trace, resume_point, resume_trace
from loopctl_sim.replay import resume_trace_async
from loopctl_sim.trace import StepRecord


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def answer(request: ModelRequest) -> Message:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < 2:
        call = ToolCall(id=f"c{turn}", name="add", arguments={"a": turn, "b": 1})
        return Message.assistant(f"adding {turn}", tool_calls=[call])
    return Message.assistant("done adding")


def build(**kwargs: Any) -> BareLoop:
    return BareLoop(FunctionClient(answer), tools=[add], **kwargs)


def compact_at(step: int) -> Any:
    """A before_step hook that asks for a manual compaction before the ``step``-th step."""
    seen = 0

    def hook(point: StepPoint) -> None:
        nonlocal seen
        seen += 1
        if seen == step:
            point.request_compaction()

    return hook


def _steps(path: Path) -> list[str]:
    return [
        r.step.kind + (f":{r.step.reason.value}" if r.step.kind == "compact" else "")
        for r in read_trace(path)
        if isinstance(r, StepRecord)
    ]


def _compactions(path: Path) -> int:
    """How many compactions the trace's runs fed (a no-op or a result)."""
    return sum(1 for r in read_trace(path) if r.type == "feed" and "compaction" in r.name)


def test_a_pending_compaction_request_survives_a_kill_and_resume(tmp_path: Path) -> None:
    whole = tmp_path / "whole.jsonl"
    recorder = TraceRecorder(whole)
    loop = build(observers=[recorder], before_step=compact_at(2))  # step 2 runs the tools
    loop.run_sync("add things")
    recorder.close()
    assert _steps(whole)[:3] == ["call_llm", "call_tools", "compact:manual"]
    # the process is killed right after the call_tools step was recorded: the request is in its
    # policy, and the compaction that answers it is not in the trace
    lines = whole.read_text().splitlines(keepends=True)
    at = next(
        i
        for i, text in enumerate(lines)
        if '"type":"step"' in text and '"compact_now":true' in text
    )
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[: at + 1]))
    assert resume_point(cut).compact_requested

    resumed = resume_trace(cut, build)
    assert resumed.result is not None and resumed.result.outcome.kind == "completed"
    assert "compact:manual" in _steps(cut) and _compactions(cut) == 1
    assert replay_trace(cut).ok
    assert resumed.result.final_text == "done adding"
    assert read_trace(cut)[-1].digest == read_trace(whole)[-1].digest  # type: ignore[union-attr]


@pytest.mark.parametrize("step", [1, 3])
def test_a_request_answered_before_the_cut_is_not_made_again(step: int, tmp_path: Path) -> None:
    """A request the trace shows answered (its Compact(MANUAL) step recorded) is not pending."""
    whole = tmp_path / "whole.jsonl"
    recorder = TraceRecorder(whole)
    build(observers=[recorder], before_step=compact_at(step)).run_sync("add things")
    recorder.close()
    lines = whole.read_text().splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if '"reason":"manual"},"scrubbed"' in text)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[: at + 1]))
    assert not resume_point(cut).compact_requested
    resume_trace(cut, build)
    assert _compactions(cut) == _compactions(whole) == 1


@pytest.mark.parametrize("door", ["resume_trace", "resume_trace_async"])
def test_a_fired_cancel_signal_stops_the_resumed_run_and_is_recorded(
    door: str, tmp_path: Path
) -> None:
    whole = tmp_path / "whole.jsonl"
    recorder = TraceRecorder(whole)
    build(observers=[recorder]).run_sync("add things")
    recorder.close()
    lines = whole.read_text().splitlines(keepends=True)
    at = next(i for i, text in enumerate(lines) if '"kind":"call_tools"' in text)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[: at + 1]))  # killed as the first tool wave began
    cancel = CancelSignal()
    cancel.cancel()
    if door == "resume_trace":
        resumed = resume_trace(cut, build, cancel=cancel)
    else:
        resumed = asyncio.run(resume_trace_async(cut, build, cancel=cancel))
    assert resumed.result is not None and resumed.result.outcome.kind == "cancelled"
    assert resumed.dispatched == ["c0"]  # the cut wave is finished first, then the cancel
    feeds = [r.name for r in read_trace(cut) if r.type == "feed"]
    assert feeds[-3:] == ["tool_results", "cancel", "discard_pending"]
    assert replay_trace(cut).ok
