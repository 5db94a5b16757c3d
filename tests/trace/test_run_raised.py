"""How a run ended is in its trace, also when an exception escaped it (issue 30, item 5).

A compactor that splits a tool call from its result makes the brain refuse its answer with a
``ProtocolError`` that escapes ``run()``. The trace ends with an end record holding the error's
type and message (scrubbed), so replaying it against the same agent reproduces the failure and
exits 0; against the fixed agent the replay names the failure that no longer happens (exit 1);
an agent that raises something else is a divergence naming both. A harness's simulated crash
(a ``BaseException``) is not recorded: a killed process writes nothing.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopctl import BareLoop, Message, ProtocolError
from loopctl.driver import StepPoint
from loopctl.observe import LoopObserver
from loopctl_sim import TraceRecorder, read_trace, replay_agent, replay_trace
from loopctl_sim.trace import EndRecord, RunError, trace_json_schema

AGENT = '''
from loopctl import BareLoop, LoopObserver, Message, ToolCall, tool
from loopctl.testing import FunctionClient

SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def answer(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < 3:
        call = ToolCall(id=f"c{turn}", name="add", arguments={"a": turn, "b": 1})
        return Message.assistant(f"adding {turn}", tool_calls=[call])
    return Message.assistant("done adding")


class LastMessages:
    """The bug: keeps the last three messages, even a result without its call."""

    async def compact(self, messages, reason):
        return list(messages[-3:]) if len(messages) > 3 else None


def compact_before_step_5(point):
    # the fifth step starts a turn after two exchanges: five messages to compact
    compact_before_step_5.seen = getattr(compact_before_step_5, "seen", 0) + 1
    if compact_before_step_5.seen % 5 == 0:
        point.request_compaction()


def _build(compactor, client=None, observers=(), **kwargs):
    compact_before_step_5.seen = 0
    return BareLoop(
        client or FunctionClient(answer),
        tools=[add],
        compactor=compactor,
        observers=observers,
        before_step=compact_before_step_5,
        **kwargs,
    )


def build(client=None, observers=(), **kwargs):
    return _build(LastMessages(), client, observers, **kwargs)


def build_fixed(client=None, observers=(), **kwargs):
    return _build(None, client, observers, **kwargs)


class Budget(LoopObserver):
    """Another bug: an observer whose budget check raises when the run compacts, with a key in
    its message."""

    def io(self, event):
        if event.kind == "compaction":
            raise KeyError(f"no budget for key {SECRET}")


def build_raising(client=None, observers=(), **kwargs):
    return _build(None, client, [*observers, Budget()], **kwargs)
'''


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The agent module ``splitting_agent`` in a fresh directory (cwd and import path)."""
    (tmp_path / "splitting_agent.py").write_text(textwrap.dedent(AGENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    import importlib
    import sys

    sys.modules.pop("splitting_agent", None)
    yield importlib.import_module("splitting_agent")
    sys.modules.pop("splitting_agent", None)


def record(loop_factory: Any, path: Path) -> Exception:
    """Run the agent once, recorded to ``path``; the exception that escaped it."""
    recorder = TraceRecorder(path)
    loop: BareLoop = loop_factory(observers=[recorder])
    try:
        loop.run_sync("add things")
    except Exception as exc:
        return exc
    finally:
        recorder.close()
    raise AssertionError("the run did not raise")


def test_the_trace_ends_with_the_exception_that_escaped_the_run(agent: Any, tmp_path: Path) -> None:
    path = tmp_path / "split.jsonl"
    error = record(agent.build, path)
    assert isinstance(error, ProtocolError) and "compacted history is not valid" in str(error)
    end = read_trace(path)[-1]
    assert isinstance(end, EndRecord)
    assert end.error == RunError(type="ProtocolError", message=str(error))
    assert end.outcome is None  # the exit door was not taken: the brain was not terminal
    # machine replay reads it: the brain rebuilt from the records is the one the end names
    assert replay_trace(path).ok
    # and the timeline says how the run ended
    from loopctl_sim.cli import main

    shown = CliRunner().invoke(main, ["show", str(path), "--kind", "end"])
    assert shown.exit_code == 0, shown.output
    assert "run ended by an exception: ProtocolError: " in shown.output


def test_replaying_a_failure_that_happens_again_exits_0(agent: Any, tmp_path: Path) -> None:
    path = tmp_path / "split.jsonl"
    record(agent.build, path)
    replayed = replay_agent(path, agent.build)
    assert replayed.ok and replayed.complete, replayed.summary()
    assert any("ProtocolError" in note and "escaped it again" in note for note in replayed.notes)
    # the same through the command line, the agent named as module:factory
    from loopctl_sim.cli import main

    result = CliRunner().invoke(
        main, ["replay", str(path), "--agent", "splitting_agent:build"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "escaped it again" in result.output
    # and with the compactor answered from the trace (its answer made the recorded run raise)
    again = replay_agent(path, agent.build, compactor="recorded")
    assert again.ok and again.complete, again.summary()


def test_a_failure_that_no_longer_happens_is_a_named_divergence(agent: Any, tmp_path: Path) -> None:
    path = tmp_path / "split.jsonl"
    record(agent.build, path)
    replayed = replay_agent(path, agent.build_fixed)
    assert replayed.divergence is not None
    assert replayed.divergence.what == "exception"
    assert "the failure no longer happens" in replayed.divergence.message
    assert "ProtocolError" in replayed.divergence.message
    from loopctl_sim.cli import main

    result = CliRunner().invoke(
        main, ["replay", str(path), "--agent", "splitting_agent:build_fixed"]
    )
    assert result.exit_code == 1
    assert "the failure no longer happens" in result.output


def test_another_exception_is_a_divergence_naming_both(agent: Any, tmp_path: Path) -> None:
    path = tmp_path / "split.jsonl"
    record(agent.build, path)

    replayed = replay_agent(path, agent.build_raising)
    assert replayed.divergence is not None and replayed.divergence.what == "exception"
    message = replayed.divergence.message
    assert message.startswith("the agent raised KeyError: ")
    assert "the trace's run raised ProtocolError: " in message
    assert agent.SECRET not in message  # the live side's key is scrubbed from the report


def test_a_secret_in_the_escaped_error_is_scrubbed(agent: Any, tmp_path: Path) -> None:
    path = tmp_path / "raising.jsonl"
    error = record(agent.build_raising, path)
    assert isinstance(error, KeyError) and agent.SECRET in str(error)
    text = path.read_text()
    assert agent.SECRET not in text
    end = read_trace(path)[-1]
    assert isinstance(end, EndRecord) and end.error is not None and end.scrubbed
    assert end.error.type == "KeyError"
    # the same failure replays (the live message scrubbed alike)
    replayed = replay_agent(path, agent.build_raising)
    assert replayed.ok and replayed.complete, replayed.summary()


def test_an_end_without_an_error_is_written_as_before() -> None:
    end = EndRecord(seq=3, outcome=None, digest="0123456789abcdef")
    assert json.loads(end.model_dump_json()) == {
        "seq": 3,
        "type": "end",
        "outcome": None,
        "digest": "0123456789abcdef",
        "scrubbed": False,
    }
    # an old end record reads as one without an error
    assert EndRecord.model_validate_json(end.model_dump_json()).error is None


def test_the_schema_describes_the_error() -> None:
    schema = trace_json_schema()
    end = schema["$defs"]["EndRecord"]["properties"]
    assert "error" in end and "error" not in schema["$defs"]["EndRecord"].get("required", [])
    assert set(schema["$defs"]["RunError"]["properties"]) == {"type", "message"}
    from loopctl_sim.cli import main

    printed = CliRunner().invoke(main, ["schema"])
    assert printed.exit_code == 0 and '"RunError"' in printed.output


def test_a_long_message_is_cut() -> None:
    error = RunError.of(ValueError("x" * 10_000))
    assert len(error.message) == 2000 and error.message.endswith("…")


class Killed(BaseException):
    """What a harness raises to simulate a killed process."""


def test_a_simulated_kill_is_not_recorded(tmp_path: Path) -> None:
    from loopctl.testing import ScriptedClient

    def kill(point: StepPoint) -> None:
        raise Killed

    path = tmp_path / "killed.jsonl"
    recorder = TraceRecorder(path)
    told: list[Exception] = []

    class Told(LoopObserver):
        def run_raised(self, machine: Any, error: Exception) -> None:
            told.append(error)

    loop = BareLoop(
        ScriptedClient([Message.assistant("hi")]), observers=[recorder, Told()], before_step=kill
    )
    with pytest.raises(Killed):
        loop.run_sync("hello")
    recorder.close()
    assert [r.type for r in read_trace(path)] == ["header", "feed"]  # no end record
    assert told == []


def test_an_observer_without_the_hook_does_not_hide_the_exception() -> None:
    """An observer written without the ``LoopObserver`` base (no ``run_raised``)."""
    from loopctl.testing import ScriptedClient

    class Plain:
        def run_started(self, machine: Any, input: Any) -> None: ...
        def step(self, policy: Any, step: Any, machine: Any) -> None: ...
        def feed(self, name: str, args: Any, machine: Any) -> None: ...
        def io(self, event: Any) -> None: ...
        def run_ended(self, machine: Any) -> None: ...

    def refuse(point: StepPoint) -> None:
        raise LookupError("the hook's own bug")

    loop = BareLoop(
        ScriptedClient([Message.assistant("hi")]),
        observers=[Plain()],  # type: ignore[list-item]
        before_step=refuse,
    )
    with pytest.raises(LookupError, match="the hook's own bug"):
        loop.run_sync("hello")


def test_update_keeps_a_failure_that_happens_again(agent: Any, tmp_path: Path) -> None:
    """``--update`` re-records a trace whose run raised when the agent raises the same again,
    and leaves it as it was when the agent raises something else."""
    from loopctl_sim import update_trace

    path = tmp_path / "split.jsonl"
    record(agent.build, path)
    updated = update_trace(path, agent.build)
    assert updated.ok, updated.summary()
    end = read_trace(path)[-1]
    assert isinstance(end, EndRecord) and end.error is not None
    assert end.error.type == "ProtocolError"
    before = path.read_bytes()
    refused = update_trace(path, agent.build_raising)
    assert not refused.ok
    assert "the agent raised KeyError: " in refused.message
    assert "(the trace's run raised ProtocolError: " in refused.message
    assert agent.SECRET not in refused.message
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if "loopctl-tmp" in p.name] == []
