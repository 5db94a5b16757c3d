"""use_cassette (loopctl_sim.plugin.cassettes): record modes, streams in pieces, loud misses."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from vcr.errors import CannotOverwriteExistingCassetteException

from loopctl import BareLoop, Completed, Failed
from loopctl.providers import OpenAIClient
from loopctl_sim.plugin.cassettes import CassetteSession, split_events, use_cassette
from loopctl_sim.plugin.misses import MAX_DIFF_LINES, CassetteMiss, nearest_request
from loopctl_sim.plugin.modes import (
    RECORD_MODES,
    check_record_mode,
    current_record_mode,
    pop_record_mode,
    push_record_mode,
)

URL = "https://api.example.com/v1/chat/completions"
EVENTS = [
    b'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]


class Server:
    """An httpx MockTransport standing in for the model server; it counts what it is sent."""

    def __init__(self, body: bytes = b"".join(EVENTS), ctype: str = "text/event-stream") -> None:
        self.seen: list[dict[str, Any]] = []
        self.body = body
        self.ctype = ctype

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(json.loads(request.content))
        headers = {"content-type": self.ctype}
        return httpx.Response(200, headers=headers, stream=httpx.ByteStream(self.body))

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handler))


def ask(client: httpx.Client, prompt: str) -> list[bytes]:
    """POST a prompt; the body as the client received it, piece by piece."""
    with client.stream("POST", URL, json={"messages": [{"role": "user", "content": prompt}]}) as r:
        return list(r.iter_raw())


def record(path: Path, *prompts: str, mode: str = "once") -> Server:
    server = Server()
    with use_cassette(path, record_mode=mode):
        for prompt in prompts:
            ask(server.client(), prompt)
    return server


# --- record modes ------------------------------------------------------------------------------


def test_once_records_a_new_cassette_then_replays_it(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "tape.yaml"
    assert len(record(path, "hi").seen) == 1
    assert len(yaml.safe_load(path.read_text())["interactions"]) == 1
    server = Server()
    with use_cassette(path, record_mode="once") as cassette:
        assert b"".join(ask(server.client(), "hi")) == b"".join(EVENTS)
    assert server.seen == [] and cassette.all_played


def test_none_never_records(tmp_path: Path) -> None:
    server = Server()
    with pytest.raises(CassetteMiss, match="does not exist yet"), use_cassette(tmp_path / "t.yaml"):
        ask(server.client(), "hi")
    assert server.seen == [] and not (tmp_path / "t.yaml").exists()


def test_new_episodes_adds_what_the_cassette_lacks(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    record(path, "one")
    server = Server()
    with use_cassette(path, record_mode="new_episodes"):
        ask(server.client(), "one")
        ask(server.client(), "two")
    assert [s["messages"][0]["content"] for s in server.seen] == ["two"]
    assert len(yaml.safe_load(path.read_text())["interactions"]) == 2


@pytest.mark.parametrize(("mode", "kept"), [("all", 2), ("rewrite", 1)])
def test_all_records_again_and_rewrite_starts_afresh(tmp_path: Path, mode: str, kept: int) -> None:
    path = tmp_path / "t.yaml"
    record(path, "old", "new", mode="new_episodes")
    assert len(record(path, "new", mode=mode).seen) == 1  # sent to the server again
    prompts = [
        json.loads(i["request"]["body"])["messages"][0]["content"]
        for i in yaml.safe_load(path.read_text())["interactions"]
    ]
    assert sorted(prompts) == (["new", "old"] if kept == 2 else ["new"])


def test_the_record_mode_follows_the_pytest_session(tmp_path: Path) -> None:
    assert current_record_mode() == "none"  # this session's --loopctl-record-mode
    push_record_mode("once")
    try:
        assert current_record_mode() == "once"
        assert len(record(tmp_path / "t.yaml", "hi", mode=None).seen) == 1  # type: ignore[arg-type]
    finally:
        pop_record_mode()
    assert current_record_mode() == "none"


def test_an_unknown_record_mode_is_refused() -> None:
    assert RECORD_MODES == ("none", "once", "new_episodes", "all", "rewrite")
    with pytest.raises(ValueError, match="use one of none, once"):
        check_record_mode("sometimes")
    with pytest.raises(ValueError, match="sometimes"):
        CassetteSession("x.yaml", record_mode="sometimes").__enter__()


# --- streams in pieces -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "ctype", "pieces"),
    [
        (b"".join(EVENTS), "text/event-stream; charset=utf-8", EVENTS),
        (
            b"data: a\r\n\r\ndata: b\r\n\r\n",
            "text/event-stream",
            [b"data: a\r\n\r\n", b"data: b\r\n\r\n"],
        ),
        (b'{"a":1}\n{"b":2}\n', "application/x-ndjson", [b'{"a":1}\n', b'{"b":2}\n']),
        (b'{"a":1}\n{"b":2}\n', "application/json", [b'{"a":1}\n{"b":2}\n']),
        (b"", "text/event-stream", []),
    ],
)
def test_split_events(body: bytes, ctype: str, pieces: list[bytes]) -> None:
    assert split_events(body, ctype) == pieces


def test_a_replayed_stream_arrives_event_by_event(tmp_path: Path) -> None:
    record(tmp_path / "t.yaml", "hi")
    with use_cassette(tmp_path / "t.yaml"):
        assert ask(Server().client(), "hi") == EVENTS


async def test_an_async_client_gets_the_pieces_too(tmp_path: Path) -> None:
    record(tmp_path / "t.yaml", "hi")
    body = {"messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient(transport=httpx.MockTransport(Server().handler)) as client:
        with use_cassette(tmp_path / "t.yaml"):
            async with client.stream("POST", URL, json=body) as response:
                assert [p async for p in response.aiter_raw()] == EVENTS


# --- misses ------------------------------------------------------------------------------------


def test_a_swallowed_miss_is_raised_when_the_block_ends(tmp_path: Path) -> None:
    record(tmp_path / "t.yaml", "What is the capital of France?")
    session = use_cassette(tmp_path / "t.yaml")
    # the innermost block swallows the miss, as a client or a driver might
    with pytest.raises(CassetteMiss) as caught, session, contextlib.suppress(Exception):
        ask(Server().client(), "What is the capital of Spain?")
    assert isinstance(caught.value, CannotOverwriteExistingCassetteException)  # vcrpy's, too
    report = str(caught.value)
    assert report.startswith(f"loopctl cassette miss: POST {URL}")
    assert "reason: no recorded request has this method, path and body" in report
    assert '-      "content": "What is the capital of France?",' in report
    assert '+      "content": "What is the capital of Spain?",' in report
    assert len(session.misses) == 1


def test_a_miss_hidden_behind_what_it_caused_is_the_error(tmp_path: Path) -> None:
    record(tmp_path / "t.yaml", "one")
    with pytest.raises(CassetteMiss) as caught, use_cassette(tmp_path / "t.yaml"):
        try:
            ask(Server().client(), "two")
        except Exception as error:
            raise RuntimeError("the run failed") from error
    assert isinstance(caught.value.__context__, RuntimeError)


def test_a_repeated_request_is_a_miss_unless_repeats_are_allowed(tmp_path: Path) -> None:
    record(tmp_path / "t.yaml", "hi")
    with pytest.raises(CassetteMiss, match="already played"), use_cassette(tmp_path / "t.yaml"):
        ask(Server().client(), "hi")
        ask(Server().client(), "hi")
    with use_cassette(tmp_path / "t.yaml", allow_playback_repeats=True) as cassette:
        ask(Server().client(), "hi")
        ask(Server().client(), "hi")
    assert cassette.play_count == 2


def test_the_report_shows_a_scrubbed_request(tmp_path: Path) -> None:
    key = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0" * 2
    record(tmp_path / "t.yaml", "hi")
    with pytest.raises(CassetteMiss) as caught, use_cassette(tmp_path / "t.yaml"):
        ask(Server().client(), f"my key is {key}")
    assert key not in str(caught.value)
    assert "[REDACTED" in str(caught.value)


def test_the_diff_is_cut_short() -> None:
    class Req:
        method, path = "POST", "/v1/x"

        def __init__(self, body: Any) -> None:
            self.body = json.dumps(body).encode()

    recorded = [Req({"n": list(range(200))}), Req({"other": 1})]
    sent = Req({"n": list(range(1000, 1200))})
    assert nearest_request(sent, recorded)[0] == 0  # type: ignore[index]
    assert nearest_request(sent, []) is None

    class Tape:
        _path = "t.yaml"
        requests = recorded
        play_counts: dict[int, int] = {}

    from vcr.request import Request

    from loopctl_sim.plugin.misses import describe_miss

    live = Request("POST", "https://h/v1/x", sent.body, {})
    lines = describe_miss(live, Tape(), "none").splitlines()
    assert lines[-1].strip().startswith("... (") and lines[-1].endswith("more lines)")
    assert len(lines) < MAX_DIFF_LINES + 10


# --- through a whole loop ----------------------------------------------------------------------


async def test_a_miss_inside_a_loop_run_becomes_a_failed_run_and_still_fails(
    tmp_path: Path,
) -> None:
    """The driver turns the miss into Failed(provider) as it must for a broken stream; the
    session keeps it and raises it when the block ends."""
    client = OpenAIClient("gpt-4o-mini", api_key="k", base_url="https://api.example.com/v1")
    result: Any = None
    with pytest.raises(CassetteMiss, match="does not exist yet"):  # noqa: SIM117
        with use_cassette(tmp_path / "none.yaml"):
            result = await BareLoop(client).run("hi")
    assert isinstance(result.outcome, Failed)
    assert "CassetteMiss" in result.outcome.error.message
    assert not isinstance(result.outcome, Completed)


def test_the_machinery_is_public_from_the_plugin_package() -> None:
    import loopctl_sim.plugin as plugin

    assert len(plugin.__all__) == len(set(plugin.__all__))
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None, name
    assert plugin.use_cassette is use_cassette
    assert plugin.CassetteMiss is CassetteMiss
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = plugin.nothing
