"""``loopctl-sim otel`` as a user runs it: an endpoint's secrets never printed (its
``user:pass@``, its ``--header`` values, a collector's echo of them), and ``-o`` that replaces its
file whole or not at all, failing with one clear line."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from otel_helpers import DRIVER
from otel_server import Collector

from loopctl_sim.cli import main
from loopctl_sim.view.otel_spans import OtlpError, Redactor, send_otlp, shown_url

TRACE = str(DRIVER / "basic.jsonl")
PASSWORD = "hunter2-Pa55word"
KEY = "collector-key-0123456789"  # no built-in secret shape: only --header says it is one
CLI = [sys.executable, "-c", "from loopctl_sim.cli import main; main()"]  # as loopctl-sim
SECRETS = (PASSWORD, KEY, base64.b64encode(f"bob:{PASSWORD}".encode()).decode())


def _endpoint(collector: Collector) -> str:
    return collector.url.replace("http://", f"http://bob:{PASSWORD}@")


def _clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text
    assert "bob" not in text  # the whole userinfo goes


def test_success_prints_no_password_and_sends_the_credentials() -> None:
    with Collector(200) as collector:
        endpoint = _endpoint(collector)
        args = ["otel", TRACE, "--endpoint", endpoint, "--header", f"x-api-key={KEY}"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    _clean(result.output)
    assert f"sent 6 spans to http://[REDACTED]@127.0.0.1:{collector.port}" in result.output
    [(path, headers, body)] = collector.received
    assert path == "/v1/traces" and headers["x-api-key"] == KEY
    assert headers["authorization"] == f"Basic {SECRETS[2]}"  # the userinfo still authenticates
    assert len(json.loads(body)["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 6


def test_a_401_that_echoes_the_credentials_prints_none_of_them() -> None:
    with Collector(401, "unauthorized; you sent {headers}") as collector:
        args = ["otel", TRACE, "--endpoint", _endpoint(collector)]
        args += ["--header", f"x-api-key={KEY}", "--header", f"Authorization=Token {KEY}x"]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    [(_, headers, _)] = collector.received
    assert headers["x-api-key"] == KEY  # it was sent, and echoed back...
    _clean(result.output)  # ...and is printed nowhere
    assert f"{KEY}x" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: http://[REDACTED]@127.0.0.1")
    assert "HTTP 401: unauthorized; you sent" in lines[0] and "[REDACTED]" in lines[0]


def test_an_unreachable_or_malformed_endpoint_prints_no_password(tmp_path: Path) -> None:
    for endpoint in (f"http://bob:{PASSWORD}@127.0.0.1:9", f"http://bob:{PASSWORD}@[::1"):
        result = CliRunner().invoke(main, ["otel", TRACE, "--endpoint", endpoint])
        assert result.exit_code == 2
        _clean(result.output)
        assert result.output.startswith("error: http://[REDACTED]@") and "Traceback" not in (
            result.output
        )
    # a header given without its name is not echoed either
    result = CliRunner().invoke(main, ["otel", TRACE, "--header", KEY])
    assert result.exit_code == 2 and KEY not in result.output


def test_the_python_api_redacts_too() -> None:
    with Collector(403, "denied {headers}") as collector, pytest.raises(OtlpError) as caught:
        send_otlp(b"{}", _endpoint(collector), headers={"x-api-key": KEY})
    _clean(str(caught.value))
    assert shown_url("https://u:p%40ss@h:1/v1/traces?x=1") == "https://[REDACTED]@h:1/v1/traces?x=1"
    redact = Redactor("http://u:p%40ssword@h", {"Authorization": "Bearer tok-12345"})
    assert redact("p@ssword p%40ssword tok-12345 keep") == "[REDACTED] [REDACTED] [REDACTED] keep"


def test_output_replaces_the_old_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    out.write_text("x" * 100_000)  # longer than the new output: nothing of it may remain
    result = CliRunner().invoke(main, ["otel", TRACE, "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert len(json.loads(out.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 6
    assert os.listdir(tmp_path) == ["spans.json"]  # no temporary file left beside it


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "spans.json"
    out.write_text("the old spans\n")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)  # the disk fills up as the spans are flushed
    result = CliRunner().invoke(main, ["otel", TRACE, "-o", str(out)])
    assert result.exit_code == 2
    assert result.output == f"error: cannot write {out}: No space left on device\n"
    assert out.read_text() == "the old spans\n"
    assert os.listdir(tmp_path) == ["spans.json"]


def test_write_errors_are_one_line_from_the_command_line(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "spans.json"
    run = [*CLI, "otel", TRACE, "-o", str(missing)]
    done = subprocess.run(run, capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: cannot write {missing}: No such file or directory\n"
    unreadable = [*CLI, "otel", str(tmp_path / "none.jsonl")]
    done = subprocess.run(unreadable, capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: cannot read ")
