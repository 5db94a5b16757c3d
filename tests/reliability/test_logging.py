"""Library code logs to the ``loopctl`` logger family, never to Python's last-resort handler.

A tool that raises is logged with its traceback (for whoever configured logging), but a program
that configured nothing must see nothing on stderr: the traceback's frames may hold secrets. The
``loopctl`` CLI decides what to show: one line by default, the traceback under ``-v``.

The library cases run in a subprocess: pytest's own log capture installs a root handler, which
would hide the last-resort handler this test is about.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import httpx
import pytest
from click.testing import CliRunner

from loopctl.cli import CliDeps, main
from tests.providers.test_provider_cli import Server, call_reply, no_sleep, text_reply

SECRET = "sk-live-0123456789abcdefSECRET"

_RAISING_TOOL = textwrap.dedent(
    f"""
    import asyncio
    from loopctl import BareLoop, Message, ToolCall, tool
    from loopctl.testing import ScriptedClient

    @tool
    def boom(x: int) -> str:
        \"\"\"Always raises.\"\"\"
        token = "{SECRET}"
        raise RuntimeError("it broke")

    client = ScriptedClient([
        Message.assistant(tool_calls=[ToolCall(id="c1", name="boom", arguments={{"x": 1}})]),
        Message.assistant("done"),
    ])
    result = asyncio.run(BareLoop(client, tools=[boom]).run("go"))
    print(result.final_text)
    """
)


def test_a_raising_tool_prints_nothing_to_stderr_without_logging_configured() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _RAISING_TOOL], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert proc.stderr == ""


def test_the_library_logger_has_a_null_handler() -> None:
    import loopctl  # noqa: F401  (importing the package installs it)

    handlers = logging.getLogger("loopctl").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_a_configured_logger_still_gets_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """The library keeps logging the whole failure; it only stopped choosing where it goes."""
    import asyncio

    from loopctl import BareLoop, Message, ToolCall, tool
    from loopctl.testing import ScriptedClient

    @tool
    def boom(x: int) -> str:
        """Always raises."""
        raise RuntimeError("it broke")

    client = ScriptedClient(
        [
            Message.assistant(tool_calls=[ToolCall(id="c1", name="boom", arguments={"x": 1})]),
            Message.assistant("done"),
        ]
    )
    with caplog.at_level(logging.WARNING, logger="loopctl"):
        asyncio.run(BareLoop(client, tools=[boom]).run("go"))
    [record] = [r for r in caplog.records if r.name.startswith("loopctl")]
    assert record.exc_info is not None and "it broke" in str(record.exc_info[1])


def _run_cli(*args: str) -> tuple[int, str, str]:
    """``loopctl run`` on a server asking for ``read_file`` on a missing path, then answering."""
    server = Server(call_reply("read_file", {"path": "no/such/file.txt"}), text_reply("ok"))
    deps = CliDeps(
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)), sleep=no_sleep
    )
    result = CliRunner().invoke(main, ["run", "hi", "--model", "m", *args], obj=deps)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_the_cli_shows_a_failing_tool_in_one_line(openai_key: None) -> None:
    code, out, err = _run_cli()
    assert code == 0, err
    assert out.strip() == "ok"
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    expected = "warning: tool read_file failed: FileNotFoundError: no such file: no/such/file.txt"
    assert lines == [expected]


def test_the_cli_shows_the_traceback_under_verbose(openai_key: None) -> None:
    code, _out, err = _run_cli("-v")
    assert code == 0, err
    assert "warning: tool read_file failed" in err
    assert "Traceback (most recent call last)" in err
    assert "FileNotFoundError: no such file" in err


def test_the_cli_removes_its_handler_after_the_run(openai_key: None) -> None:
    before = list(logging.getLogger("loopctl").handlers)
    _run_cli()
    assert logging.getLogger("loopctl").handlers == before
