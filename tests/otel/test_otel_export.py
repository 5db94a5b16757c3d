"""``loopctl-sim otel``: shipped traces as GenAI spans, checked through the SDK's in-memory
exporter: names, parent/child structure, attributes and timings (from the trace's durations);
content only when asked for, scrubbed; OTLP/JSON to a file and to a local endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from otel_helpers import DRIVER, Node, memory_provider, run_scripted, tree
from otel_server import Collector

from loopctl.otel import OtelObserver
from loopctl_sim.cli import main
from loopctl_sim.trace import TraceRecorder
from loopctl_sim.view.otel_spans import (
    OtlpError,
    export_spans,
    send_otlp,
    trace_to_spans,
    traces_url,
)

START = 1_767_225_600_000_000_000  # the corpus's created: 2026-01-01T00:00:00+00:00


def _records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DRIVER / f"{name}.jsonl").read_text().splitlines()]


def _spans(name: str, **options: Any) -> list[Any]:
    provider, exporter = memory_provider()
    trace_to_spans(DRIVER / f"{name}.jsonl", provider, **options)
    return tree(exporter.get_finished_spans())


def test_names_and_structure_of_a_run_with_a_wave() -> None:
    nodes = _spans("max_turns")
    assert [(n.name, n.parent) for n in nodes] == [
        ("invoke_agent max_turns", None),
        ("chat", "invoke_agent max_turns"),
        ("execute_tool echo", "invoke_agent max_turns"),
        ("execute_tool broken", "invoke_agent max_turns"),
        ("chat", "invoke_agent max_turns"),
        ("execute_tool echo", "invoke_agent max_turns"),
    ]
    run, chat, echo, broken = nodes[:4]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "max_turns"
    assert run.attributes["loopctl.outcome"] == "max_turns_exceeded"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 0
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert echo.attributes["gen_ai.tool.name"] == "echo"
    assert echo.attributes["gen_ai.tool.call.id"] == "call_1_1"
    assert echo.attributes["gen_ai.tool.type"] == "function"
    assert broken.status == "ERROR" and broken.attributes["error.type"] == "tool_error"
    assert echo.status == "UNSET" and "error.type" not in echo.attributes
    # the wave's two calls start together and each lasts its own recorded duration
    durations = {
        r["data"]["id"]: r["duration_s"]
        for r in _records("max_turns")
        if r.get("kind") == "tool_result"
    }
    assert echo.start == broken.start
    assert echo.end - echo.start == pytest.approx(durations["call_1_1"] * 1e9, abs=2)
    assert broken.end - broken.start == pytest.approx(durations["call_1_2"] * 1e9, abs=2)
    # every child inside the run
    assert all(run.start <= n.start <= n.end <= run.end for n in nodes)
    assert run.start == START


def test_a_model_call_spans_its_attempts_and_waits() -> None:
    records = _records("rate_limited")
    nodes = _spans("rate_limited")
    chat = nodes[1]
    assert chat.events == ["loopctl.model_error", "loopctl.retry"]
    error = next(r for r in records if r.get("kind") == "model_error")
    retry = next(r for r in records if r.get("kind") == "retry")
    reply = next(r for r in records if r.get("kind") == "model_reply")
    took = error["duration_s"] + retry["data"]["delay_s"] + reply["duration_s"]
    assert chat.end - chat.start == pytest.approx(took * 1e9, abs=3)
    assert chat.status == "UNSET" and chat.attributes["loopctl.attempts"] == 2


def test_a_failed_run() -> None:
    nodes = _spans("network_retries_exhausted")
    run = nodes[0]
    assert run.status == "ERROR" and run.attributes["error.type"] == "network"
    failed = [n for n in nodes if n.name == "chat" and n.status == "ERROR"]
    assert len(failed) == 1 and failed[0].attributes["error.type"] == "network"
    assert failed[0].events.count("loopctl.retry") == 3


@pytest.mark.parametrize(
    ("name", "events"),
    [
        ("crash_restore", ["loopctl.crash", "loopctl.resume", "loopctl.crash", "loopctl.resume"]),
        ("cancel", ["loopctl.cancel"]),
        ("threshold_compaction", ["loopctl.compaction", "loopctl.compaction_result"]),
        ("manual_compaction", ["loopctl.compaction", "loopctl.compaction_result"]),
    ],
)
def test_run_events(name: str, events: list[str]) -> None:
    run = _spans(name)[0]
    assert run.parent is None and run.events == events


def test_every_shipped_trace_exports_a_well_formed_tree() -> None:
    for path in sorted(DRIVER.glob("*.jsonl")):
        nodes = tree(export_spans(path))
        roots = [n for n in nodes if n.parent is None]
        assert len(roots) == 1, path
        assert all(n.start <= n.end for n in nodes), path
        tools = sum(1 for r in _records(path.stem) if r.get("kind") == "tool_call")
        assert sum(1 for n in nodes if n.name.startswith("execute_tool")) == tools, path


def test_content_only_when_asked_for_and_scrubbed(tmp_path: Path) -> None:
    records = _records("basic")
    result = next(r for r in records if r.get("kind") == "tool_result")
    result["data"]["content"] = "token sk-abcdefghijklmnop and Bearer abcdefghijkl12345"
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    quiet = tree(export_spans(path))
    content_keys = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.result",
        "gen_ai.tool.call.arguments",
    }
    assert not any(content_keys & set(n.attributes) for n in quiet)
    loud = tree(export_spans(path, capture_content=True))
    tool = next(n for n in loud if n.name == "execute_tool add")
    # the harness's scrubber (loopctl_sim.trace.scrub), as a trace's: "Bearer" stays readable
    assert tool.attributes["gen_ai.tool.call.result"] == "token [REDACTED] and Bearer [REDACTED]"
    assert json.loads(tool.attributes["gen_ai.tool.call.arguments"]) == {"a": 2, "b": 3}
    chat = next(n for n in loud if n.name == "chat")
    assert "What is 2 + 3 + 10?" in chat.attributes["gen_ai.input.messages"]
    assert "Let me add." in chat.attributes["gen_ai.output.messages"]


def test_cli_writes_otlp_json(tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    result = CliRunner().invoke(main, ["otel", str(DRIVER / "crash_restore.jsonl"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    body = json.loads(out.read_text())
    [resource] = body["resourceSpans"]
    attributes = {a["key"]: a["value"] for a in resource["resource"]["attributes"]}
    assert attributes["service.name"] == {"stringValue": "loopctl"}
    [scope] = resource["scopeSpans"]
    spans = scope["spans"]
    assert scope["scope"]["name"] == "loopctl" and len(spans) == 6
    run = next(s for s in spans if "parentSpanId" not in s)
    assert run["name"] == "invoke_agent crash_restore" and run["kind"] == 1
    assert all(s["traceId"] == run["traceId"] for s in spans)
    assert {s["parentSpanId"] for s in spans if s is not run} == {run["spanId"]}
    chat = next(s for s in spans if s["name"] == "chat")
    assert chat["kind"] == 3 and int(chat["endTimeUnixNano"]) > int(chat["startTimeUnixNano"])
    again = CliRunner().invoke(main, ["otel", str(DRIVER / "crash_restore.jsonl")])
    assert json.loads(again.output) == body  # the same trace, the same ids


@pytest.fixture
def collector() -> Iterator[Collector]:
    """An OTLP/HTTP endpoint on loopback that keeps what it receives."""
    with Collector() as endpoint:
        yield endpoint


def test_cli_sends_to_an_endpoint(collector: Collector) -> None:
    result = CliRunner().invoke(
        main,
        ["otel", str(DRIVER / "basic.jsonl"), "--endpoint", collector.url, "--header", "x-key=k1"],
    )
    assert result.exit_code == 0, result.output
    assert "sent 6 spans" in result.output
    [(path, headers, body)] = collector.received
    assert path == "/v1/traces" and headers["content-type"] == "application/json"
    assert headers["x-key"] == "k1"
    assert len(json.loads(body)["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 6


def test_an_endpoint_that_refuses_is_exit_2(collector: Collector) -> None:
    collector.status = 500
    result = CliRunner().invoke(
        main, ["otel", str(DRIVER / "basic.jsonl"), "--endpoint", collector.url]
    )
    assert result.exit_code == 2 and "HTTP 500" in result.output
    with pytest.raises(OtlpError, match="ConnectError"):
        send_otlp(b"{}", "http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [("http://h:4318", "http://h:4318/v1/traces"), ("http://h/v1/traces/", "http://h/v1/traces")],
)
def test_traces_url(endpoint: str, url: str) -> None:
    assert traces_url(endpoint) == url


def test_cli_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n")
    result = CliRunner().invoke(main, ["otel", str(bad)])
    assert result.exit_code == 2 and "not valid JSON" in result.output
    header = CliRunner().invoke(main, ["otel", str(DRIVER / "basic.jsonl"), "--header", "x"])
    assert header.exit_code == 2 and "--header: expected NAME=VALUE" in header.output


def _shape(nodes: list[Node]) -> list[tuple[Any, ...]]:
    """What must agree between a live run's spans and its exported trace: everything but
    times, and but the attributes only one side can know (the run's input is a header's)."""
    skip = {"loopctl.history_messages"}
    return [
        (
            n.name,
            n.parent,
            n.status,
            n.events,
            sorted((k, v) for k, v in n.attributes.items() if k not in skip),
        )
        for n in nodes
    ]


async def test_the_recorded_trace_exports_the_same_spans(tmp_path: Path) -> None:
    provider, exporter = memory_provider()
    path = tmp_path / "run.jsonl"
    recorder = TraceRecorder(path, metadata={"agent_name": "demo", "model": "m-1"})
    await run_scripted([recorder, OtelObserver(provider, agent_name="demo", model="m-1")])
    recorder.close()
    live = tree(exporter.get_finished_spans())
    exported = tree(export_spans(path))
    assert _shape(exported) == _shape(live)
