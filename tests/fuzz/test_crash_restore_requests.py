"""A crash does not lose what the run was asked (issue 30, item 2): a manual compaction requested
at the step a crash strikes is still honoured by the restored run, so a correct agent passes the
crash/restore check; and when a restored run does differ, the failure names the first message,
field and values that differ, not only "the history differs"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from shop_project import AGENT, add, edit, make_project

from loopctl.core import Message, ToolCall
from loopctl_sim import fuzz as fz
from loopctl_sim import replay_agent
from loopctl_sim.fuzz.campaign import run_seed
from loopctl_sim.fuzz.checks import history_difference
from loopctl_sim.sim import AgentWorld, run_agent
from loopctl_sim.sim.faults import Fault
from loopctl_sim.trace import StepRecord, read_trace

SAMPLE = "examples.support_agent.agent:build"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from make_project(tmp_path, monkeypatch)


def _script() -> list[Message]:
    look = ToolCall(id="c1", name="lookup_order", arguments={"order_id": "A-1001"})
    again = ToolCall(id="c2", name="lookup_order", arguments={"order_id": "A-1002"})
    return [
        Message.assistant("Let me look.", tool_calls=[look]),
        Message.assistant("And the other.", tool_calls=[again]),
        Message.assistant("Both orders are on their way."),
    ]


def _world(faults: list[Fault]) -> AgentWorld:
    return AgentWorld(
        agent=SAMPLE,
        input="Where are A-1001 and A-1002?",
        script=_script(),
        explore=None,
        faults=faults,
    )


def _manual_compactions(path: Path) -> int:
    return sum(
        1
        for r in read_trace(path)
        if isinstance(r, StepRecord) and r.step.kind == "compact" and r.step.reason == "manual"
    )


@pytest.mark.parametrize("step", [1, 2, 3, 4])
@pytest.mark.parametrize("crash_first", [False, True])
def test_a_compaction_requested_where_a_crash_strikes_survives_the_restore(
    step: int, crash_first: bool, tmp_path: Path
) -> None:
    compact, crash = Fault(kind="compact_now", step=step), Fault(kind="crash", step=step)
    whole = run_agent(_world([compact]), tmp_path / "whole.jsonl")
    faults = [crash, compact] if crash_first else [compact, crash]
    trace = tmp_path / "crashed.jsonl"
    crashed = run_agent(_world(faults), trace)
    assert crashed.crashes == 1
    assert _manual_compactions(tmp_path / "whole.jsonl") == _manual_compactions(trace) == 1
    assert crashed.machine.history == whole.machine.history
    assert crashed.digest == whole.digest
    # the restored run's request is in its trace, and the trace replays against the agent
    replayed = replay_agent(trace, SAMPLE)
    assert replayed.ok, replayed.summary()


def test_the_sample_agent_passes_the_seeds_that_lost_the_request() -> None:
    """Seeds 10 and 25 of a compact_now campaign failed the crash/restore check on the sample
    agent (a request made at the crash's step was lost across the restore)."""
    from loopctl_sim.cli import main

    result = CliRunner().invoke(
        main,
        [
            "fuzz",
            "--agent",
            SAMPLE,
            "--faults",
            "compact_now",
            "--seeds",
            "10:11",
            "--no-progress",
            "--no-shrink",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "0 failing seed(s)" in result.output


def test_history_difference_names_the_first_differing_message_and_field() -> None:
    a = [Message.user("hi"), Message.assistant("the total is " + "9" * 500)]
    b = [Message.user("hi"), Message.assistant("the total is " + "8" * 500)]
    text = history_difference(a, b, "uninterrupted", "with the crash")
    assert text is not None
    assert text.startswith("message 1 (2 messages uninterrupted, 2 with the crash) differs at ")
    assert "parts[0].text" in text and "uninterrupted" in text and "with the crash" in text
    assert len(text) < 300  # bounded: a long value is cut, not printed whole
    shorter = history_difference(a, a[:1], "uninterrupted", "crashed")
    assert shorter is not None and shorter.startswith("message 1 (2 messages uninterrupted, 1 ")
    assert "is only uninterrupted: assistant (text)" in shorter


def test_history_difference_names_messages_that_differ_only_in_a_values_python_type() -> None:
    """A tuple and a list write the same JSON, yet the messages are unequal: still one line."""

    def calling(value: object) -> list[Message]:
        call = ToolCall(id="c1", name="add", arguments={"a": value})
        return [Message.assistant(tool_calls=[call])]

    text = history_difference(calling((1,)), calling([1]), "uninterrupted", "with the crash")
    assert text.startswith("message 0 (1 messages uninterrupted, 1 with the crash) differs at ")
    assert "type only" in text


NUMBERING_MIDDLEWARE = '''
def numbered():
    """The planted bug: a tool middleware that numbers the results it saw in this process (a
    restarted process counts from one again)."""
    seen = []

    async def middleware(call, next_tool):
        result = await next_tool(call)
        seen.append(call.id)
        return result.model_copy(update={"content": f"{result.content} (#{len(seen)})"})

    return middleware
'''


def test_a_restored_run_that_differs_is_reported_by_message_and_field(project: Path) -> None:
    add(project, NUMBERING_MIDDLEWARE)
    edit(
        project,
        "        observers=observers,\n",
        "        observers=observers,\n        middleware=[numbered()],\n",
    )
    cfg = fz.FuzzConfig(agent=AGENT, faults=("compact_now",), shrink=False)
    for seed in range(40):
        found = run_seed(seed, cfg)
        if found.failure is not None and found.failure.kind == "crash-restore":
            break
    else:
        raise AssertionError("no seed found the planted bug")
    assert found.failure.code == "differs"
    message = found.failure.message
    assert "the history differs from the uninterrupted run's: message " in message, message
    assert " differs at parts[0].content: " in message, message
    assert "uninterrupted" in message and "with the crash" in message
