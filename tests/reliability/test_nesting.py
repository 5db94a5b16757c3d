"""One nesting limit at the door where a model's reply enters: what the engine accepts, it can
write and read back; anything deeper (or a number JSON cannot hold) is a clear provider error.

Cases: the fold at the limit, one above and at 5,000 levels; a whole run at each of those with a
trace recorded, which then reads back, replays at machine and driver level, and whose brain saves,
restores and digests; the trace reader's own limit agrees with the door's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from loopctl import BareLoop, Failed, LoopMachine, tool
from loopctl.api import (
    ApiError,
    ModelRequest,
    PartEvent,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    fold_events,
)
from loopctl.core import ProviderPart
from loopctl.core.values import MAX_NESTING, value_problem
from loopctl_sim import TraceRecorder, read_trace, replay_driver, replay_trace

#: pydantic's JSON parser, which reads every trace line, reads values this deep at most.
_MAX_DEPTH = 201


def nested_text(depth: int) -> str:
    """Arguments JSON ``depth`` levels deep (``{"x": 0}`` is 1), built as text: no recursion."""
    return '{"x":' * depth + "0" + "}" * depth


def call_events(raw: str, call_id: str = "c1") -> list[StreamEvent]:
    return [
        ToolCallStart(index=0, id=call_id, name="echo"),
        ToolCallDelta(index=0, arguments=raw),
        ToolCallEnd(index=0),
        StopEvent(reason="tool_use"),
    ]


def json_depth(text: str) -> int:
    """The deepest bracket nesting of a JSON text, strings skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "}]":
            depth -= 1
    return deepest


# --- the fold ---------------------------------------------------------------------------------


def test_the_fold_accepts_arguments_at_the_limit() -> None:
    reply = fold_events(call_events(nested_text(MAX_NESTING)))
    [call] = reply.message.tool_calls
    assert value_problem(call.arguments) is None


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 300, 5_000])
def test_the_fold_refuses_deeper_arguments_as_a_provider_error(depth: int) -> None:
    with pytest.raises(ApiError) as caught:
        fold_events(call_events(nested_text(depth)))
    error = caught.value.error
    assert error.kind == "provider"
    assert error.retryable is False
    assert f"more than {MAX_NESTING} levels deep" in error.message
    assert "tool 'echo'" in error.message


@pytest.mark.parametrize(
    "number",
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "1e999",
        "-2E+400",
        "1" + "0" * 400 + ".5",  # too many digits for a float: infinity, no exponent at all
        "-" + "9" * 250 + ".0e60",  # a two-digit exponent past the float range
    ],
)
def test_the_fold_refuses_numbers_json_cannot_hold(number: str) -> None:
    with pytest.raises(ApiError) as caught:
        fold_events(call_events('{"x": [1, ' + number + "]}"))
    assert caught.value.error.retryable is False
    assert "JSON cannot represent" in caught.value.error.message


def test_a_big_but_finite_exponent_is_accepted() -> None:
    reply = fold_events(call_events('{"x": 1.5e300, "note": "NaN in a string is text"}'))
    assert reply.message.tool_calls[0].arguments["x"] == 1.5e300


def test_long_numbers_that_are_finite_are_accepted() -> None:
    big = "7" * 400  # an int: any size is held
    reply = fold_events(call_events('{"n": ' + big + ', "f": 0.' + "1" * 300 + "}"))
    arguments = reply.message.tool_calls[0].arguments
    assert arguments["n"] == int(big) and 0.1 < arguments["f"] < 0.2


def test_a_provider_part_nested_too_deep_is_refused() -> None:
    data: Any = 0
    for _ in range(MAX_NESTING + 1):
        data = {"x": data}
    with pytest.raises(ApiError) as caught:
        fold_events([TextDelta(text="hi"), PartEvent(part=ProviderPart(provider="p", data=data))])
    assert "provider part's data" in caught.value.error.message


def test_a_provider_part_at_the_limit_is_kept() -> None:
    data: Any = 0
    for _ in range(MAX_NESTING - 1):
        data = {"x": data}
    reply = fold_events([PartEvent(part=ProviderPart(provider="p", data={"x": data}))])
    assert len(reply.message.parts) == 1


# --- whole runs, recorded ---------------------------------------------------------------------


@tool
def echo(x: Any) -> str:
    """Answer with how deep x is."""
    depth, value = 0, x
    while isinstance(value, dict):
        depth, value = depth + 1, value["x"]
    return f"depth {depth}"


class RawClient:
    """Streams a tool call with these raw arguments, then a final answer; counts attempts."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        if self.calls == 1:
            for event in call_events(self.raw):
                yield event
            return
        yield TextDelta(text="done")
        yield StopEvent(reason="end_turn")


def record(tmp_path: Path, raw: str) -> tuple[Any, RawClient, Path, LoopMachine]:
    path = tmp_path / "deep.jsonl"
    client = RawClient(raw)
    recorder = TraceRecorder(path)
    loop = BareLoop(client, tools=[echo], observers=[recorder])
    result = asyncio.run(loop.run("go deep"))
    recorder.close()
    return result, client, path, loop.machine


def check_readable(path: Path, machine: LoopMachine) -> None:
    """The trace reads back and replays at both levels; the brain saves, restores, digests."""
    records = read_trace(path)
    assert records[-1].type == "end"
    deepest = max(json_depth(line) for line in path.read_text().splitlines())
    assert deepest <= _MAX_DEPTH
    machine_level = replay_trace(path)
    assert machine_level.ok, machine_level.divergence
    driver_level = replay_driver(path)
    assert driver_level.ok, driver_level.divergence
    assert machine_level.final_digest == driver_level.final_digest == machine.digest()
    text = machine.model_dump_json()
    assert LoopMachine.model_validate_json(text) == machine
    assert LoopMachine.model_validate(machine.model_dump()) == machine


def test_a_run_at_the_limit_completes_and_reads_back(tmp_path: Path) -> None:
    result, _client, path, machine = record(tmp_path, nested_text(MAX_NESTING))
    assert result.final_text == "done"
    assert machine.history[2].tool_results[0].content == f"depth {MAX_NESTING - 1}"  # x: one in
    check_readable(path, machine)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 5_000])
def test_a_run_one_above_or_far_above_fails_clearly_and_reads_back(
    tmp_path: Path, depth: int
) -> None:
    result, client, path, machine = record(tmp_path, nested_text(depth))
    assert isinstance(result.outcome, Failed)
    assert result.error is not None and result.error.kind == "provider"
    assert "cannot hold" in result.error.message
    assert client.calls == 1  # not retried
    check_readable(path, machine)


def test_the_deepest_record_of_a_run_at_the_limit_fits_the_readers_limit(tmp_path: Path) -> None:
    """The writer and the reader agree: a run at the door's limit writes no line deeper than
    the trace reader reads (pydantic's 201 levels)."""
    _, _, path, _ = record(tmp_path, nested_text(MAX_NESTING))
    lines = path.read_text().splitlines()
    depths = [json_depth(line) for line in lines]
    assert max(depths) <= _MAX_DEPTH
    assert max(depths) >= MAX_NESTING  # the arguments themselves are in the trace
    assert all(json.loads(line)["seq"] == i for i, line in enumerate(lines))
