"""Secrets never land in a trace, whatever path they take, and a scrubbed trace still replays.

A run puts credentials of every shape through every path a trace records: the user's input, the
model's text, a tool call's arguments, a tool's output, a provider error's message, the final
text, request options and headers, a system prompt. Every byte of the trace is then searched for
them. The same trace replays at machine level, through the driver and against the agent: where a
live value is a secret, it is scrubbed with the same key and compared by its placeholder.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from loopctl import BareLoop, LoopError, Message, RunConfig, SessionConfig, ToolCall, tool
from loopctl.driver import RetryConfig
from loopctl.testing import ScriptedClient
from loopctl_sim import (
    Scrubber,
    TraceRecorder,
    read_trace,
    replay_agent,
    replay_driver,
    replay_trace,
)
from loopctl_sim.trace import TraceWriter

SECRETS = {
    "openai": "sk-proj-" + "A1b2C3d4E5f6G7h8",
    "anthropic": "sk-ant-api03-" + "Z9y8X7w6V5u4",
    "bearer": "abcDEF123456ghiJKL",  # after "Bearer "
    "github": "ghp_" + "0123456789abcdefghijABCDEFGHIJ0123",
    "github_pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop",
    "slack": "xoxb-" + "123456789012-abcdefABCDEF",
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N",
    "google": "AIza" + "SyA1234567890abcdefghijklmnopqrstuv",
    "custom": "acme-" + "7731-4412-9981",  # a user pattern's shape
}
ALL = " ".join(f"Bearer {v}" if name == "bearer" else v for name, v in SECRETS.items())

USER_PATTERN = r"acme-\d{4}-\d{4}-\d{4}"


@tool
def fetch(url: str, token: str) -> str:
    """Fetch a URL with a token (it echoes the URL and keys of its own, as a careless tool
    would)."""
    return f"fetched {url}; keys seen: {ALL}"


@tool(name="fetch")
def fetch_echoing(url: str, token: str) -> str:
    """Fetch a URL with a token, echoing the token."""
    return f"fetched {url} with {token}"


def agent(client: object = None, observers: Sequence[object] = ()) -> BareLoop:
    return BareLoop(
        client,  # type: ignore[arg-type]
        [fetch],
        RunConfig(retry=RetryConfig(max_retries=2)),
        SessionConfig(
            system_prompt=f"Use the service key {SECRETS['openai']}.",
            options={
                "extra_headers": {"Authorization": f"Bearer {SECRETS['bearer']}"},
                "api_key": SECRETS["anthropic"],
            },
        ),
        observers=list(observers),  # type: ignore[arg-type]
    )


def script() -> ScriptedClient:
    return ScriptedClient(
        [
            LoopError(
                kind="auth", message=f"401: key {SECRETS['github']} is invalid", retryable=True
            ),
            Message.assistant(
                f"I will call it with {SECRETS['slack']}.",
                [
                    ToolCall(
                        id="c1",
                        name="fetch",
                        arguments={"url": f"https://x/?k={SECRETS['aws']}", "token": ALL},
                    )
                ],
            ),
            Message.assistant(f"Done; your JWT {SECRETS['jwt']} and {SECRETS['custom']}."),
        ]
    )


def record(path: Path, scrubber: Scrubber) -> None:
    recorder = TraceRecorder(TraceWriter(path, scrubber=scrubber))
    loop = agent(script(), [recorder])
    result = loop.run_sync(f"my keys: {ALL}")
    recorder.close()
    assert result.completed


@pytest.fixture(params=["with a key", "without a key"])
def scrubber(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Scrubber:
    """The scrubber of the environment (the replays build theirs from it)."""
    monkeypatch.setenv("LOOPCTL_SCRUB_PATTERNS", USER_PATTERN)
    if request.param == "with a key":
        monkeypatch.setenv("LOOPCTL_SCRUB_KEY", "a key that is never written")
        return Scrubber(b"a key that is never written", [USER_PATTERN])
    monkeypatch.delenv("LOOPCTL_SCRUB_KEY", raising=False)
    return Scrubber(None, [USER_PATTERN])


def test_no_byte_of_the_trace_holds_a_secret(tmp_path: Path, scrubber: Scrubber) -> None:
    path = tmp_path / "run.jsonl"
    record(path, scrubber)
    raw = path.read_bytes()
    for name, secret in SECRETS.items():
        assert secret.encode() not in raw, name
        assert secret[4:-2].encode() not in raw, name  # nor a recognisable piece of it
    assert b"a key that is never written" not in raw
    records = read_trace(path)
    kinds = {r.type for r in records if getattr(r, "scrubbed", False)}
    assert {"step", "feed", "io", "end"} <= kinds  # every kind that held one says so
    header = records[0]
    assert header.scrub_key == scrubber.key_id  # type: ignore[union-attr]
    text = raw.decode()
    if scrubber.key is not None:
        assert "[REDACTED:" in text
        # the same secret, wherever it appears, has the same placeholder
        assert text.count(scrubber.placeholder(SECRETS["aws"])) >= 3
    else:
        assert "[REDACTED]" in text and "[REDACTED:" not in text


def test_a_scrubbed_trace_replays_at_every_level(tmp_path: Path, scrubber: Scrubber) -> None:
    path = tmp_path / "run.jsonl"
    record(path, scrubber)
    for replay in (replay_trace, replay_driver):
        result = replay(path)
        assert result.ok and result.complete, result.summary()
        assert any("scrubbed" in note for note in result.notes), result.notes
    live = replay_agent(path, agent)
    assert live.ok and live.complete, live.summary()


def test_a_tool_given_a_secret_argument_gets_its_placeholder_in_agent_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a trace cannot hold it cannot hand back: a live tool is called with the placeholder
    the model's recorded call holds. A tool whose output depends on a secret argument diverges
    (and says so without showing the secret); answered from the trace, it replays."""
    monkeypatch.setenv("LOOPCTL_SCRUB_KEY", "k")
    monkeypatch.setenv("LOOPCTL_SCRUB_PATTERNS", USER_PATTERN)
    path = tmp_path / "run.jsonl"
    recorder = TraceRecorder(TraceWriter(path, scrubber=Scrubber(b"k", [USER_PATTERN])))
    echoing = agent(script(), [recorder]).replace(tools=[fetch_echoing])
    assert echoing.run_sync(f"my keys: {ALL}").completed
    recorder.close()

    def build(client: object = None, observers: tuple[object, ...] = ()) -> BareLoop:
        return agent(client, observers).replace(tools=[fetch_echoing])

    d = replay_agent(path, build).divergence
    assert d is not None and "tool `fetch` returned" in d.message
    shown = d.report() + repr(d.to_json())
    for secret in SECRETS.values():
        assert secret not in shown
    assert replay_agent(path, build, tools="recorded").ok


def test_a_different_secret_in_a_live_tool_output_is_a_divergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPCTL_SCRUB_KEY", "k")
    monkeypatch.setenv("LOOPCTL_SCRUB_PATTERNS", USER_PATTERN)
    path = tmp_path / "run.jsonl"
    record(path, Scrubber(b"k", [USER_PATTERN]))
    assert replay_agent(path, agent).ok
    global ALL
    saved, ALL = ALL, ALL.replace(SECRETS["aws"], "AKIA" + "ZZZZZZZZZZZZZZZZ")
    try:
        d = replay_agent(path, agent).divergence
    finally:
        ALL = saved
    assert d is not None and "tool `fetch` returned" in d.message
    assert "[REDACTED:" in d.message and "AKIAZZZZ" not in d.report()


def test_another_key_compares_secrets_by_where_they_stand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPCTL_SCRUB_PATTERNS", USER_PATTERN)
    path = tmp_path / "run.jsonl"
    record(path, Scrubber(b"the recording key", [USER_PATTERN]))
    monkeypatch.setenv("LOOPCTL_SCRUB_KEY", "another key")
    result = replay_agent(path, agent)
    assert result.ok, result.summary()
    assert any("another key" in note for note in result.notes), result.notes


def test_no_key_set_is_named_as_such_not_as_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOPCTL_SCRUB_PATTERNS", USER_PATTERN)
    monkeypatch.delenv("LOOPCTL_SCRUB_KEY", raising=False)
    monkeypatch.delenv("LOOPCTL_SCRUB_KEY_FILE", raising=False)
    path = tmp_path / "run.jsonl"
    record(path, Scrubber(b"the recording key", [USER_PATTERN]))
    result = replay_agent(path, agent)
    assert result.ok, result.summary()
    assert not any("another key" in note for note in result.notes), result.notes
    assert any("no LOOPCTL_SCRUB_KEY is set" in note for note in result.notes), result.notes
