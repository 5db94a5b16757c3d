"""Secrets in the paths this issue added: periodic snapshot records, a resume's header, gzip
traces, and what ``loopctl run`` says on stderr (an error echoing a key, a retry notice). Every
byte written is searched for them (the paths of ``tests/trace/test_trace_secrets.py`` - tool
arguments and output, model and final text, provider errors, headers, request options, the
system prompt - are searched there, and again here inside the snapshots)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl.cli import main
from loopctl_sim import TraceRecorder, replay_driver, replay_trace
from loopctl_sim.trace import TraceWriter
from tests.reliability.local_server import Answer, LocalServer, local_server, text_chunks
from tests.trace.test_trace_secrets import ALL, SECRETS, USER_PATTERN, agent, script

KEY = "sk-proj-" + "Zz9Yy8Xx7Ww6Vv5Uu4"


def all_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_snapshot_records_hold_no_secret(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPCTL_SCRUB_PATTERNS", USER_PATTERN)
    path = tmp_path / name
    recorder = TraceRecorder(TraceWriter(path), snapshot_every=1)
    loop = agent(script(), [recorder])
    loop.run_sync(f"my keys: {ALL}")
    recorder.close()
    raw = all_bytes(path)
    assert b'"kind":"snapshot"' in raw
    for label, secret in SECRETS.items():
        assert secret.encode() not in raw, label
    snapshots = [json.loads(line) for line in raw.splitlines() if b'"kind":"snapshot"' in line]
    assert snapshots and all(s["scrubbed"] for s in snapshots)
    assert replay_trace(path).ok and replay_driver(path).ok


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with local_server() as s:
        yield s


def test_loopctl_run_says_no_secret_on_stderr(server: LocalServer, tmp_path: Path) -> None:
    """A 401 that echoes the key, and a retry after a stream that echoed it, are reported with
    the key scrubbed."""
    echo = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}})
    server.script(
        Answer(text_chunks(f"your key is {KEY} ", "x"), drop_after=1),
        Answer(status=401, body=echo, content_type="application/json"),
    )
    result = CliRunner().invoke(
        main,
        [
            "run",
            "q",
            "--model",
            "m",
            "--base-url",
            server.base_url,
            "--trace",
            str(tmp_path / "t.jsonl"),
            "-v",
        ],
        env={"OPENAI_API_KEY": KEY},
    )
    assert result.exit_code == 2, result.output
    assert "retrying:" in result.stderr and "error:" in result.stderr
    assert KEY not in result.stderr and KEY[8:] not in result.stderr
    assert KEY not in (tmp_path / "t.jsonl").read_text()
