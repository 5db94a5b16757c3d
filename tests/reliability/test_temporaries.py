"""A killed rewrite leaves no litter for good (issue 31, item 8).

``--update`` and the in-place resume of a compressed trace write the new trace to a temporary
file beside the old one, named for the process that writes it
(``<name>.<pid>-<random>.loopctl-tmp``). A process killed with SIGKILL leaves that file behind,
and the old trace as it was; the next update or resume of the same trace removes the files of
processes that are gone and leaves those of a live process (a rewrite under way) alone. Tested
with leftovers made by hand and with a real ``loopctl-sim`` subprocess killed in the middle of a
tool.
"""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl_sim import TraceRecorder, read_trace, resume_trace, update_trace
from loopctl_sim.cli import main
from loopctl_sim.trace.files import (
    TEMP_SUFFIX,
    sweep_temporaries,
    temporary_beside,
    write_atomically,
)

AGENT = '''
import os
import time

from loopctl import BareLoop, Message, ToolCall, tool
from loopctl.testing import FunctionClient


@tool
def slow(n: int) -> int:
    """Work on n (with SLOW_MARKER set: say so in that file, then hang until killed)."""
    marker = os.environ.get("SLOW_MARKER")
    if marker:
        with open(marker, "w") as f:
            f.write("started")
        time.sleep(600)
    return n * 2


def answer(request):
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < 2:
        call = ToolCall(id=f"c{turn}", name="slow", arguments={"n": turn})
        return Message.assistant(f"turn {turn}", tool_calls=[call])
    return Message.assistant("done")


def build(client=None, observers=(), **kwargs):
    return BareLoop(client or FunctionClient(answer), tools=[slow], observers=observers, **kwargs)
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder holding the agent module ``slow_agent`` (cwd and import path)."""
    (tmp_path / "slow_agent.py").write_text(textwrap.dedent(AGENT))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLOW_MARKER", raising=False)
    sys.modules.pop("slow_agent", None)
    yield tmp_path
    sys.modules.pop("slow_agent", None)


def record(path: Path) -> None:
    import slow_agent  # type: ignore[import-not-found]

    recorder = TraceRecorder(path)
    slow_agent.build(observers=[recorder]).run_sync("work")
    recorder.close()


def dead_pid() -> int:
    """The id of a process that ran and is gone (reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(done.stdout)


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMP_SUFFIX in p.name)


def test_a_temporary_is_named_for_its_process_and_kept_while_it_runs(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl.gz"
    temp = Path(temporary_beside(trace))
    assert temp.parent == tmp_path and temp.name.startswith(f"t.jsonl.gz.{os.getpid()}-")
    assert temp.name.endswith(TEMP_SUFFIX + ".gz") and temp.read_bytes() == b""
    stale = tmp_path / f"t.jsonl.gz.{dead_pid()}-0badf00d{TEMP_SUFFIX}.gz"
    stale.write_bytes(b"half a trace")
    live = tmp_path / f"t.jsonl.gz.{os.getppid()}-0123abcd{TEMP_SUFFIX}.gz"
    live.write_bytes(b"a rewrite under way")
    other = tmp_path / "t.jsonl.gz.backup"
    other.write_bytes(b"the user's own file")
    assert sweep_temporaries(trace) == [os.fspath(stale)]
    assert temp.exists() and live.exists() and other.exists()  # a running process's are kept


def test_an_update_sweeps_what_a_killed_one_left(project: Path) -> None:
    trace = project / "run.jsonl"
    record(trace)
    stale = project / f"run.jsonl.{dead_pid()}-deadbeef{TEMP_SUFFIX}"
    stale.write_text('{"seq":0,"type":"hea')
    legacy = project / "run.jsonl.updating"  # the fixed name updates used to write to
    legacy.write_text('{"seq":0')
    result = update_trace(trace, "slow_agent:build")
    assert result.ok, result.summary()
    assert temporaries(project) == [] and not legacy.exists()
    assert read_trace(trace)[-1].type == "end"


def kill_in_the_tool(project: Path, *args: str) -> None:
    """Run ``loopctl-sim ARGS`` in a subprocess, SIGKILL it while its tool runs, reap it."""
    marker = project / "started"
    env = {**os.environ, "SLOW_MARKER": os.fspath(marker)}
    exe = shutil.which("loopctl-sim", path=os.path.dirname(sys.executable)) or "loopctl-sim"
    proc = subprocess.Popen(
        [exe, *args], cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        give_up = time.monotonic() + 300  # only against a hang: the tool says when it runs
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < give_up, "the subprocess never reached its tool"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
    marker.unlink()


def test_an_update_killed_in_a_tool_leaves_the_trace_and_the_next_one_sweeps(
    project: Path,
) -> None:
    trace = project / "run.jsonl"
    record(trace)
    before = trace.read_bytes()
    kill_in_the_tool(project, "replay", "run.jsonl", "--agent", "slow_agent:build", "--update")
    assert trace.read_bytes() == before  # the old trace is whole
    left = temporaries(project)
    assert len(left) == 1 and left[0].startswith("run.jsonl.") and left[0].endswith(TEMP_SUFFIX)
    result = update_trace(trace, "slow_agent:build")
    assert result.ok, result.summary()
    assert temporaries(project) == []


def test_a_compressed_resume_killed_in_a_tool_leaves_the_trace_and_the_next_one_sweeps(
    project: Path,
) -> None:
    whole = project / "whole.jsonl"
    record(whole)
    lines = whole.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"kind":"call_tools"' in line)
    trace = project / "cut.jsonl.gz"
    with gzip.open(trace, "wt", encoding="utf-8") as f:
        f.write("".join(lines[: at + 1]))  # killed while the first tool ran
    before = trace.read_bytes()
    kill_in_the_tool(project, "resume", "cut.jsonl.gz", "--agent", "slow_agent:build")
    assert trace.read_bytes() == before
    left = temporaries(project)
    assert len(left) == 1 and left[0].startswith("cut.jsonl.gz.") and left[0].endswith(".gz")
    resumed = resume_trace(trace, "slow_agent:build")
    assert resumed.result is not None and resumed.result.final_text == "done"
    assert temporaries(project) == []
    assert read_trace(trace)[-1].digest == read_trace(whole)[-1].digest  # type: ignore[union-attr]


def test_a_rewrite_keeps_the_mode_of_the_file_it_replaces(project: Path) -> None:
    """An updated trace and a page written again over a private one stay private (0o600), as a
    plain rewrite in place would leave them; the temporary they came from is gone."""
    trace = project / "run.jsonl"
    record(trace)
    trace.chmod(0o600)
    assert update_trace(trace, "slow_agent:build").ok
    page = project / "run.html"
    page.write_text("old page")
    page.chmod(0o600)
    result = CliRunner().invoke(main, ["html", "run.jsonl", "-o", "run.html"])
    assert result.exit_code == 0, result.output
    assert (trace.stat().st_mode & 0o777, page.stat().st_mode & 0o777) == (0o600, 0o600)
    assert "<html" in page.read_text() and temporaries(project) == []


def test_a_whole_file_write_sweeps_a_dead_writers_temporary_and_keeps_a_live_ones(
    tmp_path: Path,
) -> None:
    """Every whole-file writer (``loopctl-sim html``, spans, cassettes, tests, fuzz files) names
    its temporary as a trace rewrite does, so a killed one's leftovers go with the next write."""
    out = tmp_path / "spans.json"
    stale = tmp_path / f"spans.json.{dead_pid()}-0badf00d{TEMP_SUFFIX}"
    stale.write_text("cut")
    live = tmp_path / f"spans.json.{os.getppid()}-0123abcd{TEMP_SUFFIX}"
    live.write_text("being written")
    write_atomically(out, b"\x00\x01 bytes")
    assert out.read_bytes() == b"\x00\x01 bytes"
    assert temporaries(tmp_path) == [live.name]


def test_a_failed_whole_file_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "test_run.py"
    out.write_text("old")

    def interrupted(path: object, target: object) -> None:
        raise KeyboardInterrupt  # the user presses Ctrl-C as the file is moved into place

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomically(out, "new")
    assert out.read_text() == "old" and temporaries(tmp_path) == []
