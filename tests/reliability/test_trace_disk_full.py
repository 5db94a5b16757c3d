"""A trace that cannot be written does not take the run down (issue 31, item 7).

The disk is full after N bytes: a file object (monkeypatched in for the writer's own) writes what
fits and raises ``OSError(ENOSPC)``, as a full filesystem does. The run goes on and returns its
result, the tools it was asked for all run, the failure is reported once (a warning of the
``loopctl.trace`` logger, ``recorder.error``; ``loopctl run`` prints one line and the answer),
and the trace file ends at a whole record, which replays.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.cli import CliDeps
from loopctl.cli import main as loopctl_main
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceRecorder, read_trace, replay_trace
from loopctl_sim.trace import TraceReader, TraceWriteError, TraceWriter
from loopctl_sim.trace import writer as writer_module


class FullDisk:
    """A text file on a disk with ``room`` bytes left: a write takes what fits, then raises
    ENOSPC (the bytes before stay in the file, a torn line, as a real full disk leaves it)."""

    def __init__(self, path: str, room: int) -> None:
        self.file = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self.room = room
        self.name = path

    def write(self, text: str) -> int:
        data = text.encode()
        if len(data) > self.room:
            part = data[: self.room].decode("utf-8", errors="ignore")
            self.file.write(part)
            self.file.flush()
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.file.write(text)
        self.room -= len(data)
        return len(text)

    def flush(self) -> None:
        self.file.flush()

    def fileno(self) -> int:
        return self.file.fileno()

    def close(self) -> None:
        self.file.close()


def full_after(monkeypatch: pytest.MonkeyPatch, room: int) -> None:
    """Every trace opened from now on is on a disk with ``room`` bytes left."""
    monkeypatch.setattr(
        writer_module, "open_for_writing", lambda path, append=False: FullDisk(str(path), room)
    )


RAN: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    RAN.append(key)
    return f"value of {key}"


def script() -> ScriptedClient:
    return ScriptedClient(
        [
            Message.assistant(
                "one", tool_calls=[ToolCall(id="a", name="lookup", arguments={"key": "x"})]
            ),
            Message.assistant(
                "two", tool_calls=[ToolCall(id="b", name="lookup", arguments={"key": "y"})]
            ),
            Message.assistant("both looked up"),
        ]
    )


def whole_size(tmp_path: Path) -> int:
    """The size of the run's whole trace."""
    path = tmp_path / "whole.jsonl"
    recorder = TraceRecorder(path)
    BareLoop(script(), [lookup], observers=[recorder]).run_sync("look x and y up")
    recorder.close()
    RAN.clear()
    return path.stat().st_size


@pytest.mark.parametrize("share", [0.05, 0.5, 0.8, 0.97])
def test_a_full_disk_loses_the_trace_not_the_run(
    share: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    room = int(whole_size(tmp_path) * share)
    full_after(monkeypatch, room)
    path = tmp_path / "run.jsonl"
    recorder = TraceRecorder(path)
    loop = BareLoop(script(), [lookup], observers=[recorder])
    with caplog.at_level(logging.WARNING, logger="loopctl.trace"):
        result = loop.run_sync("look x and y up")
        recorder.close()
    assert result.outcome.kind == "completed" and result.final_text == "both looked up"
    assert RAN == ["x", "y"]  # every tool ran once
    RAN.clear()
    # reported once, clearly
    assert isinstance(recorder.error, TraceWriteError)
    assert recorder.error.errno == errno.ENOSPC
    warnings = [r for r in caplog.records if r.name == "loopctl.trace"]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert f"cannot write the trace {path}: No space left on device" in message
    assert "whole records" in message and "the run goes on" in message
    # the trace ends at a whole record: every line reads, nothing torn
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n")
    assert len(data) <= room
    if data:
        reader = TraceReader(path)
        records = list(reader)
        assert not reader.warnings
        assert len(records) == recorder.error.records
        assert replay_trace(path).ok  # an incomplete run replays up to its last record


class FullDiskBinary:
    """``FullDisk`` for bytes: what a gzip-compressed trace is written through."""

    def __init__(self, path: str, room: int) -> None:
        self.file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self.room = room

    def write(self, data: bytes) -> int:
        if len(data) > self.room:
            self.file.write(bytes(data[: self.room]))
            self.file.flush()
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.file.write(data)
        self.room -= len(data)
        return len(data)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def test_a_compressed_trace_on_a_full_disk_keeps_its_whole_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disks: list[FullDiskBinary] = []

    def full_gzip(path: str, append: bool = False) -> io.TextIOWrapper:
        disks.append(FullDiskBinary(str(path), 1500))
        binary = gzip.GzipFile(fileobj=disks[-1], mode="wb")
        return io.TextIOWrapper(binary, encoding="utf-8", write_through=True)

    monkeypatch.setattr(writer_module, "open_for_writing", full_gzip)
    path = tmp_path / "run.jsonl.gz"
    recorder = TraceRecorder(path)
    result = BareLoop(script(), [lookup], observers=[recorder]).run_sync("look x and y up")
    recorder.close()
    disks[0].close()
    assert result.final_text == "both looked up" and RAN == ["x", "y"]
    RAN.clear()
    assert isinstance(recorder.error, TraceWriteError) and recorder.error.records is None
    reader = TraceReader(path)
    records = list(reader)  # every record read is whole; the cut is reported, not raised
    assert records and records[0].type == "header"
    assert replay_trace(path).ok


def test_the_writer_raises_a_typed_error_and_then_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full_after(monkeypatch, 10)
    writer = TraceWriter(tmp_path / "t.jsonl")
    with pytest.raises(TraceWriteError) as first:
        writer.header(None)
    assert first.value.records == 0 and (tmp_path / "t.jsonl").read_bytes() == b""
    with pytest.raises(TraceWriteError) as again:
        writer.io("note")
    assert again.value is first.value
    writer.close()  # closing a failed writer is quiet


class Server:
    """An OpenAI-compatible server in a MockTransport: answers in order from a script."""

    def __init__(self, *replies: bytes) -> None:
        self.replies = list(replies)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=self.replies.pop(0))


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def calculator_call(call_id: str, expression: str) -> bytes:
    frag = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "calculator", "arguments": json.dumps({"expression": expression})},
    }
    return sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": [frag]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )


def text(answer: str) -> bytes:
    return sse(
        {"choices": [{"index": 0, "delta": {"content": answer}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    )


def run_cli(tmp_path: Path, *args: str) -> Result:
    server = Server(calculator_call("c1", "1+1"), calculator_call("c2", "2+2"), text("2 and 4"))
    deps = CliDeps(http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)))
    return CliRunner().invoke(loopctl_main, ["run", "add", "--model", "m", *args], obj=deps)


def test_loopctl_run_prints_the_answer_and_one_line_about_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    whole = tmp_path / "whole.jsonl"
    assert run_cli(tmp_path, "--trace", str(whole)).exit_code == 0
    full_after(monkeypatch, whole.stat().st_size // 2)
    path = tmp_path / "run.jsonl"
    result = run_cli(tmp_path, "--trace", str(path))
    assert result.exit_code == 0, result.output
    assert "2 and 4" in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"warning: cannot write the trace {path}: No space left on device")
    assert "Traceback" not in result.output
    assert path.read_bytes().endswith(b"\n") and read_trace(path)


def test_loopctl_run_refuses_a_trace_it_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    result = run_cli(tmp_path, "--trace", str(tmp_path / "missing" / "run.jsonl"))
    assert result.exit_code == 2
    assert "cannot write the trace" in result.stderr and "Traceback" not in result.output
