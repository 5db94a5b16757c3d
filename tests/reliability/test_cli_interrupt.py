"""``loopctl run`` against a real local server: Ctrl-C and SIGTERM cancel the run (its trace ends
with the cancel feed and the end record, and replays), a second Ctrl-C aborts, a retry after a
dropped stream is shown as a retry, a ``.gz`` trace is written compressed."""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl.cli import main
from loopctl.driver import CancelSignal
from loopctl.terminal import Interrupts
from loopctl_sim import read_trace, replay_driver, replay_trace
from tests.reliability.local_server import Answer, LocalServer, local_server, text_chunks

KEY = "sk-test-" + "0123456789abcdef"


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with local_server() as s:
        yield s


def start_cli(server: LocalServer, trace: Path, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    args = ["run", "tell me a long story", "--model", "m", "--base-url", server.base_url]
    # Started as from a terminal: Ctrl-C at Python's own handler, even when this pytest runs in
    # a non-interactive shell's background, where SIGINT is ignored and children inherit that.
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from loopctl.cli import main; sys.exit(main())"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, *args, "--trace", str(trace)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def slow_story() -> Answer:
    return Answer(text_chunks(*[f"word{i} " for i in range(200)]), gap=0.1)


@pytest.mark.parametrize(
    ("signum", "code", "name"), [(signal.SIGINT, 130, "Ctrl-C"), (signal.SIGTERM, 143, "SIGTERM")]
)
def test_a_signal_cancels_the_run_and_the_trace_ends_and_replays(
    server: LocalServer, tmp_path: Path, signum: int, code: int, name: str
) -> None:
    [answer] = server.script(slow_story())
    trace = tmp_path / "run.jsonl"
    proc = start_cli(server, trace, tmp_path)
    assert answer.started.wait(timeout=120)  # the answer is streaming
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert f"interrupted ({name}): the run was cancelled" in err
    assert "Traceback" not in err
    records = read_trace(trace)
    assert records[-1].type == "end" and records[-1].outcome.kind == "cancelled"  # type: ignore[union-attr]
    names = [getattr(r, "name", None) for r in records]
    assert "cancel" in names and names[-2] == "discard_pending"
    for result in (replay_trace(trace), replay_driver(trace)):
        assert result.ok and result.complete, result.divergence and result.divergence.report()


def test_two_quick_ctrl_cs_end_the_process_with_130(server: LocalServer, tmp_path: Path) -> None:
    [answer] = server.script(slow_story())
    trace = tmp_path / "run.jsonl"
    proc = start_cli(server, trace, tmp_path)
    assert answer.started.wait(timeout=120)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert replay_driver(trace).ok  # whether it got to its end record or not


class _Loop:
    """Enough of an event loop for ``Interrupts``: what it was handed to run."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def call_soon_threadsafe(self, fn: object) -> None:
        self.calls.append(fn)

    def is_closed(self) -> bool:
        return False


def test_the_first_signal_cancels_and_a_second_aborts() -> None:
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN when pytest runs in the background
    cancel = CancelSignal()
    interrupts = Interrupts(cancel)
    loop = _Loop()
    interrupts.attach(loop)  # type: ignore[arg-type]
    with interrupts:
        interrupts._handle(signal.SIGINT, None)
        assert loop.calls == [cancel.cancel] and interrupts.signum == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            interrupts._handle(signal.SIGINT, None)
    assert interrupts.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is before  # given back


def test_a_signal_before_the_loop_runs_aborts() -> None:
    interrupts = Interrupts(CancelSignal())
    with pytest.raises(KeyboardInterrupt):
        interrupts._handle(signal.SIGTERM, None)


def cli(server: LocalServer, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        main,
        ["run", "q", "--model", "m", "--base-url", server.base_url, *args],
        env={"OPENAI_API_KEY": KEY},
    )
    return result.exit_code, result.stdout, result.stderr


def test_a_retried_stream_shows_as_a_retry_and_only_the_answer_reaches_stdout(
    server: LocalServer,
) -> None:
    server.script(
        Answer(text_chunks("Hel", "partial ", "x"), drop_after=2),
        Answer(text_chunks("The answer is 42.")),
    )
    code, out, err = cli(server)
    assert code == 0, err
    assert out == "The answer is 42.\n"  # not "partial The answer is 42."
    assert "retrying: attempt 1 failed (network:" in err and "attempt 2 in" in err


def test_a_gz_trace_is_written_compressed_and_replays(server: LocalServer, tmp_path: Path) -> None:
    server.script(Answer(text_chunks("compressed")))
    trace = tmp_path / "run.jsonl.gz"
    code, out, err = cli(server, "--trace", str(trace), "--snapshot-every", "1")
    assert code == 0, err
    assert out == "compressed\n"
    text = gzip.decompress(trace.read_bytes()).decode()
    assert '"type":"end"' in text and '"kind":"snapshot"' in text
    for result in (replay_trace(trace), replay_driver(trace)):
        assert result.ok and result.complete


def test_snapshot_every_needs_a_trace(server: LocalServer) -> None:
    code, _, err = cli(server, "--snapshot-every", "3")
    assert code == 2 and "--snapshot-every goes with --trace" in err


def test_asyncio_is_untouched_after_the_command(server: LocalServer) -> None:
    """The handlers are given back: after the command, SIGINT and SIGTERM are handled as they
    were before it (Python's Ctrl-C handler at a terminal, ignored in a background job), so a
    later asyncio.run hears Ctrl-C as usual."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    server.script(Answer(text_chunks("done")))
    code, out, err = cli(server)
    assert (code, out) == (0, "done\n"), err
    assert {s: signal.getsignal(s) for s in before} == before
    asyncio.run(asyncio.sleep(0))
