"""The ``loopctl run`` command, through click's CliRunner with a MockTransport-backed client."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from loopctl.cli import CliDeps, calculator, evaluate, main, read_file


def sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def text_reply(*pieces: str) -> bytes:
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return sse(*chunks)


def call_reply(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> bytes:
    frag = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": [frag]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )


class Server:
    """Answers requests in order from a script; remembers the request bodies."""

    def __init__(self, *replies: bytes | httpx.Response | Exception) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, httpx.Response):
            return reply
        return httpx.Response(200, content=reply)


async def no_sleep(seconds: float) -> None:
    return None


def invoke(server: Server, *args: str) -> Result:
    deps = CliDeps(
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)), sleep=no_sleep
    )
    return CliRunner().invoke(main, ["run", *args], obj=deps)


@pytest.fixture
def openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


def test_streams_the_answer(openai_key: None) -> None:
    server = Server(text_reply("Hello", " there", "!"))
    result = invoke(server, "Say hello", "--model", "gpt-4o-mini")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hello there!\n"
    assert server.bodies[0]["model"] == "gpt-4o-mini"
    assert {t["function"]["name"] for t in server.bodies[0]["tools"]} == {
        "calculator",
        "read_file",
    }


def test_a_calculator_round_trip(openai_key: None) -> None:
    server = Server(
        call_reply("calculator", {"expression": "17 * 23"}), text_reply("17 * 23 = 391")
    )
    result = invoke(server, "What is 17*23?", "--model", "m", "--system", "Be exact.")
    assert result.exit_code == 0, result.output
    assert "17 * 23 = 391" in result.stdout
    second = server.bodies[1]["messages"]
    assert second[0] == {"role": "system", "content": "Be exact."}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "391"}


def test_ollama_provider_and_base_url() -> None:
    lines = [
        {"model": "llama3.2", "message": {"role": "assistant", "content": "Hi"}, "done": False},
        {"model": "llama3.2", "message": {"role": "assistant", "content": ""}, "done": True,
         "done_reason": "stop", "prompt_eval_count": 3, "eval_count": 1},
    ]  # fmt: skip
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, content=body)

    deps = CliDeps(http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    args = ["run", "hi", "--provider", "ollama", "--model", "llama3.2"]
    result = CliRunner().invoke(main, [*args, "--base-url", "http://gpu:11434"], obj=deps)
    assert result.exit_code == 0, result.output
    assert result.stdout == "Hi\n"
    assert seen == ["http://gpu:11434/api/chat"]


@pytest.mark.parametrize(
    "provider, env_var",
    [("openai", "OPENAI_API_KEY"), ("anthropic", "ANTHROPIC_API_KEY")],
)
def test_a_missing_key_is_one_line_and_exit_2(provider: str, env_var: str) -> None:
    result = invoke(Server(), "hi", "--provider", provider, "--model", "m")
    assert result.exit_code == 2
    assert env_var in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_an_unreachable_server_is_one_line_and_exit_2() -> None:
    refused = [httpx.ConnectError("connection refused") for _ in range(5)]
    result = invoke(
        Server(*refused), "hi", "--provider", "ollama", "--model", "llama3.2", "--base-url",
        "http://127.0.0.1:9",
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: cannot connect to Ollama at http://127.0.0.1:9")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_refused_credentials_name_the_variable(openai_key: None) -> None:
    body = {"error": {"message": "Incorrect API key", "type": "invalid_request_error",
                      "code": "invalid_api_key", "param": None}}  # fmt: skip
    result = invoke(Server(httpx.Response(401, json=body)), "hi", "--model", "m")
    assert result.exit_code == 2
    assert "OPENAI_API_KEY" in result.stderr


def test_turn_limit_exits_1(openai_key: None) -> None:
    server = Server(call_reply("calculator", {"expression": "1+1"}))
    result = invoke(server, "loop", "--model", "m", "--max-turns", "1")
    assert result.exit_code == 1
    assert "stopped after 1 turns" in result.stderr


def test_trace_is_written(openai_key: None, tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    result = invoke(Server(text_reply("ok")), "hi", "--model", "m", "--trace", str(out))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["type"] == "header"
    assert records[-1]["type"] == "end"
    assert "test-key" not in out.read_text()


# --- the example tools -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression, value",
    [
        ("1 + 2", 3),
        ("17 * 23", 391),
        ("(1 + 2) * -3", -9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("2 ** 10", 1024),
        ("+1.5", 1.5),
    ],
)
def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value
    assert calculator(expression) == str(value)


@pytest.mark.parametrize(
    "expression, needle",
    [
        ("__import__('os').system('true')", "unsupported"),
        ("a + 1", "unsupported"),
        ("[1, 2]", "unsupported"),
        ("'a' * 3", "unsupported"),
        ("True + 1", "unsupported"),
        ("1 / 0", "division by zero"),
        ("2 ** 100000", "exponent"),
        ("10.0 ** 400", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 +", "not an arithmetic expression"),
    ],
)
def test_calculator_refuses_everything_else(expression: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        evaluate(expression)


def test_read_file_reads_under_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("hello")
    (tmp_path.parent / "secret.txt").write_text("no")
    os.symlink(tmp_path.parent / "secret.txt", tmp_path / "link.txt")
    monkeypatch.chdir(tmp_path)
    assert read_file("sub/notes.txt") == "hello"
    assert read_file("./sub/../sub/notes.txt") == "hello"
    for outside in ("../secret.txt", str(tmp_path.parent / "secret.txt"), "link.txt"):
        with pytest.raises(PermissionError, match="outside the current directory"):
            read_file(outside)
    with pytest.raises(FileNotFoundError):
        read_file("missing.txt")


def test_read_file_truncates_large_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.txt").write_text("x" * 100_010)
    monkeypatch.chdir(tmp_path)
    text = read_file("big.txt")
    assert text.startswith("x" * 100_000)
    assert text.endswith("[truncated at 100000 bytes]")


def test_text_before_a_tool_call_ends_its_line(openai_key: None) -> None:
    frag = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculator", "arguments": '{"expression": "17*23"}'},
    }
    first = sse(
        {"choices": [{"index": 0, "delta": {"content": "Let me compute."}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [frag]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )
    result = invoke(Server(first, text_reply("391")), "17*23?", "--model", "m")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Let me compute.\n391\n"
