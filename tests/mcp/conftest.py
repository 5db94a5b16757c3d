"""Real MCP servers for the tests: the SDK-written notes server (stdio, or streamable HTTP on a
free port of 127.0.0.1) and the published ``mcp-server-time``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl.core import Message, ToolCall

NOTES_SERVER = str(Path(__file__).with_name("notes_server.py"))
SECRET = "sk-notes-credential-0123456789abcdef"


def call(i: int, name: str, **arguments: object) -> Message:
    """An assistant message making one tool call."""
    return Message.assistant(tool_calls=[ToolCall(id=f"c{i}", name=name, arguments=arguments)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_notes() -> Iterator[str]:
    """The notes server over streamable HTTP; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, NOTES_SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):  # until it listens (a readiness wait, not a timing assertion)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("the notes server exited") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
