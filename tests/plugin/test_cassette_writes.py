"""Re-recording never loses the committed cassette: it is replaced only by a completed recording.

What a user meets: ``--loopctl-record-mode=rewrite`` (or ``all``) with the provider down, with
a test that fails, with a full disk, and with the pytest process killed (kill -9) while the
model stalls. Each time the cassette that was there is left byte for byte, and no temporary file
is left for the next run (or ``git add``) to trip over.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpcore  # noqa: F401  # imported before pytester's inline runs (see below)
import httpx
import pytest
from fake_streams import FakeStreams, Text

from loopctl import BareLoop, Completed
from loopctl.providers import OpenAIClient
from loopctl_sim.plugin.cassettes import CassetteNotWritten, CassetteWriteError, use_cassette
from loopctl_sim.trace.files import TEMP_SUFFIX

pytest_plugins = ["pytester"]
# pytester forgets the modules an inline run imported first: an httpcore imported there would
# come back as a second module, whose errors httpx no longer maps to its own.

ARGS = ("-p", "no:cacheprovider", "-p", "no:asyncio")
ROOT = Path(__file__).resolve().parents[2]

#: The user's test: the agent must answer; the model's URL comes from the environment.
SUITE = """
import os

import pytest

from loopctl import BareLoop, Completed
from loopctl.providers import OpenAIClient


@pytest.mark.loopctl_cassette
def test_answer():
    client = OpenAIClient("fake-model", api_key="sk-test-recording-key-000",
                          base_url=os.environ["MODEL_URL"], timeout=TIMEOUT)
    result = BareLoop(client).run_sync("Say hello.")
    assert isinstance(result.outcome, Completed), result.error
    assert result.final_text == "Hello!"
"""


def write_suite(where: Path, timeout: float = 30.0) -> Path:
    test = where / "test_agent.py"
    test.write_text(SUITE.replace("TIMEOUT", repr(timeout)))
    return where / "cassettes" / "test_agent" / "test_answer.yaml"


def record(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes]:
    """The committed cassette: recorded once against a live server."""
    cassette = write_suite(pytester.path)
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        monkeypatch.setenv("MODEL_URL", server.url)
        pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    return cassette, cassette.read_bytes()


def temporaries(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.name.endswith(TEMP_SUFFIX)]


@pytest.mark.parametrize("mode", ["rewrite", "all"])
def test_an_unreachable_provider_leaves_the_cassette(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    cassette, before = record(pytester, monkeypatch)  # the server is gone now
    result = pytester.runpytest(*ARGS, f"--loopctl-record-mode={mode}")
    result.assert_outcomes(failed=1)
    assert cassette.read_bytes() == before
    result.stdout.fnmatch_lines(["*CassetteNotWritten*the cassette there is unchanged*"])
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)  # and it still replays


def test_a_failing_test_does_not_replace_the_cassette_a_passing_one_does(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    cassette, before = record(pytester, monkeypatch)
    with FakeStreams("openai", [Text(["Good", "bye!"])]) as server:  # the model changed
        monkeypatch.setenv("MODEL_URL", server.url)
        pytester.runpytest(*ARGS, "--loopctl-record-mode=rewrite").assert_outcomes(failed=1)
        assert len(server.requests) == 1  # it recorded, and the test failed on the answer
    assert cassette.read_bytes() == before

    with FakeStreams("openai", [Text(["Hello", "!"])]) as server:
        monkeypatch.setenv("MODEL_URL", server.url)
        pytester.runpytest(*ARGS, "--loopctl-record-mode=rewrite").assert_outcomes(passed=1)
    assert cassette.read_bytes() != before and b"Hello" in cassette.read_bytes()
    assert temporaries(pytester.path) == []


async def test_a_write_that_fails_keeps_the_old_cassette(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk while the cassette is written (``all`` records every request again)."""
    cassette = tmp_path / "answer.yaml"
    with FakeStreams("openai", [Text(["Hel", "lo!"]), Text(["Hi", "!"])]) as server:
        client = OpenAIClient(
            "fake-model", api_key="sk-test-recording-key-000", base_url=server.url
        )
        with use_cassette(cassette, record_mode="once"):
            await BareLoop(client).run("Say hello.")
        before = cassette.read_bytes()

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        no_space = r"No space left.*unchanged"
        with (
            pytest.raises(CassetteWriteError, match=no_space) as failed,
            use_cassette(cassette, record_mode="all"),
        ):
            monkeypatch.setattr(os, "fsync", full)
            result = await BareLoop(client).run("Say hello.")
        monkeypatch.undo()
    assert isinstance(result.outcome, Completed) and result.final_text == "Hi!"
    assert failed.value.errno == errno.ENOSPC
    assert cassette.read_bytes() == before
    assert temporaries(tmp_path) == []


async def test_a_block_that_raises_keeps_the_old_cassette(tmp_path: Path) -> None:
    cassette = tmp_path / "answer.yaml"
    cassette.write_text("interactions: []\nversion: 1\n")
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        client = OpenAIClient(
            "fake-model", api_key="sk-test-recording-key-000", base_url=server.url
        )
        with (
            pytest.warns(CassetteNotWritten, match="RuntimeError: checked afterwards"),
            pytest.raises(RuntimeError),
            use_cassette(cassette, record_mode="rewrite"),
        ):
            await BareLoop(client).run("Say hello.")
            raise RuntimeError("checked afterwards")
    assert cassette.read_text() == "interactions: []\nversion: 1\n"


@pytest.mark.parametrize("mode", ["rewrite", "all"])
def test_kill_9_while_recording_leaves_the_cassette(tmp_path: Path, mode: str) -> None:
    """pytest is killed while the model stalls mid-recording: the old cassette is whole, no
    temporary file is left, and the next run replays it."""
    cassette = write_suite(tmp_path, timeout=600.0)
    cassette.parent.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    command = [sys.executable, "-m", "pytest", *ARGS, "-q", "test_agent.py"]
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        env["MODEL_URL"] = server.url
        done = subprocess.run(
            [*command, "--loopctl-record-mode=once"], cwd=tmp_path, env=env, capture_output=True
        )
        assert done.returncode == 0, done.stdout.decode()[-2000:]
    before = cassette.read_bytes()

    with FakeStreams("openai", [], stall=True) as server:
        env["MODEL_URL"] = server.url
        child = subprocess.Popen(
            [*command, f"--loopctl-record-mode={mode}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert server.stalled.wait(120), "the recording never reached the model"
            assert cassette.read_bytes() == before  # mid-recording: still there
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert cassette.read_bytes() == before
    assert temporaries(tmp_path) == []
    env["MODEL_URL"] = "http://127.0.0.1:9/v1"  # nothing listens: the replay needs no server
    replay = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True)
    assert replay.returncode == 0, replay.stdout.decode()[-2000:]


def test_a_temporary_left_by_a_dead_writer_is_cleaned_up(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer killed between writing its temporary file and renaming it leaves the file; the
    next session of that cassette deletes it (a live writer's file is left alone)."""
    cassette, before = record(pytester, monkeypatch)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = cassette.with_name(f"{cassette.name}.{dead.pid}-0badf00d{TEMP_SUFFIX}")
    stale.write_text("interactions: [cut")
    live = cassette.with_name(f"{cassette.name}.{os.getpid()}-0123abcd{TEMP_SUFFIX}")
    live.write_text("being written")
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)
    assert not stale.exists() and live.exists()
    live.unlink()
    assert cassette.read_bytes() == before


def test_a_full_disk_is_an_error_of_the_test_and_keeps_the_cassette(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the plugin, ``all`` on a disk that fills up while the cassette is written."""
    cassette, before = record(pytester, monkeypatch)
    full_disk = SUITE.replace(
        "    result = BareLoop",
        "    import errno\n\n    def full(fd):\n"
        "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n\n"
        "    os.fsync = full  # this pytest process's disk is full from now on\n"
        "    result = BareLoop",
    ).replace("TIMEOUT", "30.0")
    (pytester.path / "test_agent.py").write_text(full_disk)
    with FakeStreams("openai", [Text(["Hello", "!"])]) as server:
        monkeypatch.setenv("MODEL_URL", server.url)
        result = pytester.runpytest_subprocess(*ARGS, "--loopctl-record-mode=all")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*CassetteWriteError*No space left on device*unchanged*"])
    assert cassette.read_bytes() == before
    assert temporaries(pytester.path) == []


async def test_a_failed_call_retried_successfully_still_writes_the_cassette(
    tmp_path: Path,
) -> None:
    """A request that failed in the transport and was then sent again and answered (a retry)
    leaves a complete recording: the cassette is written. One never answered does not."""
    cassette = tmp_path / "retried.yaml"
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "Hi"}]}
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        async with httpx.AsyncClient() as http:
            with use_cassette(cassette, record_mode="rewrite") as recording:
                with pytest.raises(httpx.ConnectError):  # nothing listens on port 9
                    await http.post("http://127.0.0.1:9/v1/chat/completions", json=body)
                answer = await http.post(f"{server.url}/chat/completions", json=body)
            assert answer.status_code == 200 and len(recording) == 1
    assert "Hel" in cassette.read_text()

    other = tmp_path / "unanswered.yaml"
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        async with httpx.AsyncClient() as http:
            with (
                pytest.warns(CassetteNotWritten, match="ConnectError"),
                use_cassette(other, record_mode="rewrite"),
            ):
                await http.post(f"{server.url}/chat/completions", json=body)
                with pytest.raises(httpx.ConnectError):
                    await http.post("http://127.0.0.1:9/v1/other", json=body)
    assert not other.exists()


async def test_the_warning_quotes_no_secret(tmp_path: Path) -> None:
    """Why a cassette was not written quotes the failure, scrubbed like the cassette."""
    key = "sk-proj-" + "quotedInTheFailure0123456789"
    with FakeStreams("openai", [Text(["Hel", "lo!"])]) as server:
        client = OpenAIClient(
            "fake-model", api_key="sk-test-recording-key-000", base_url=server.url
        )
        with (
            pytest.warns(CassetteNotWritten) as warned,
            pytest.raises(AssertionError),
            use_cassette(tmp_path / "answer.yaml", record_mode="rewrite"),
        ):
            await BareLoop(client).run("Say hello.")
            raise AssertionError(f"the agent leaked {key}")
    (message,) = [str(w.message) for w in warned if w.category is CassetteNotWritten]
    assert key not in message and "the agent leaked [REDACTED" in message
