"""A new user's agent (``bookshop_agent``: four tools, both hooks, a middleware, its own
compactor, the loop settings) over HTTP with SSE to a host that streams
``delta.reasoning_content``, through every workflow the docs promise: ``loopctl run --agent
--trace``, replay unchanged (``--agent`` and ``[tool.loopctl]``), each change in plain words,
``--update``, ``export-test``, a failure escaping the run, ``fuzz`` with a planted bug and its
printed reproducers, kill -9 then ``resume``."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from acceptance_helpers import BIN, HERE, ROOT, agent_env, cli, end_digest, kinds, records
from bookshop_agent import ANSWER, CARD, SPEC, TASK, ReasoningServer, build
from click.testing import CliRunner

from loopctl_sim.cli import main as loopctl_sim_cli

KEY = "sk-proj-bookshopKEY" + "0123456789abcdefABCDEF"


def env_for(server: ReasoningServer | None = None, **extra: str) -> dict[str, str]:
    """The command's environment: the agent's own client at ``server``, and ``extra``."""
    env = {k: v for k, v in agent_env().items() if not k.startswith("BOOKSHOP_")}
    if server is not None:
        env.update(BOOKSHOP_URL=server.url, BOOKSHOP_KEY=KEY)
    env.update({f"BOOKSHOP_{k}": v for k, v in extra.items()})
    return env


@pytest.fixture(scope="module")
def shop_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run recorded from the command line, the model over HTTP."""
    trace = tmp_path_factory.mktemp("shop") / "shop.jsonl"
    with ReasoningServer() as server:
        done = cli("loopctl", "run", TASK, "--agent", SPEC, "--trace", str(trace),
                   env=env_for(server))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == ANSWER
        assert len(server.requests) == 4
        sent_back = server.requests[1]["messages"][2]
        assert sent_back["reasoning_content"] == "I should check stock and shipping."
    return trace


def test_the_trace_keeps_reasoning_and_no_key(shop_trace: Path) -> None:
    text = shop_trace.read_text(encoding="utf-8")
    assert KEY not in text
    replies = kinds(shop_trace, "model_reply")
    thinking = [p for p in replies[0]["data"]["message"]["parts"] if p["kind"] == "thinking"]
    assert thinking[0]["text"] == "I should check stock and shipping."
    assert thinking[0]["data"] == {"reasoning_content": "I should check stock and shipping."}
    results = {r["data"]["name"]: r["data"]["content"] for r in kinds(shop_trace, "tool_result")}
    assert "************1111" in results["lookup_stock"] and CARD not in results["lookup_stock"]
    assert "[email]" in results["catalog_dump"] and len(results["catalog_dump"]) > 10_000
    assert kinds(shop_trace, "compaction"), "the agent's compactor ran"


def test_unchanged_agent_replays_by_name_and_from_pyproject(
    shop_trace: Path, tmp_path: Path
) -> None:
    named = cli("loopctl-sim", "replay", str(shop_trace), "--agent", SPEC, env=env_for())
    assert named.returncode == 0, named.stdout + named.stderr
    (tmp_path / "pyproject.toml").write_text(f'[tool.loopctl]\nagent = "{SPEC}"\n')
    plain = cli("loopctl-sim", "replay", str(shop_trace), env=env_for(), cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert f"agent {SPEC}" in plain.stdout


def test_a_model_named_on_the_command_line_replays_and_updates(tmp_path: Path) -> None:
    """``loopctl run --agent ... --model shelf-9`` gives the factory that client: the trace
    says so, and the unchanged agent (whose own client names shelf-1) replays and updates
    against it, the recorded model kept."""
    trace = tmp_path / "given.jsonl"
    with ReasoningServer() as server:
        done = cli("loopctl", "run", TASK, "--agent", SPEC, "--provider", "openai",
                   "--model", "shelf-9", "--base-url", server.url, "--trace", str(trace),
                   env={**env_for(), "OPENAI_API_KEY": KEY})  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert {body["model"] for body in server.requests} == {"shelf-9"}
    header = next(records(trace))
    assert header["metadata"]["model_from"] == "--model"
    replayed = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, env=env_for())
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    nine = env_for(MAX_TURNS="9")
    updated = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, "--update", env=nine)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    again = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, env=nine)
    assert again.returncode == 0, again.stdout + again.stderr
    assert kinds(trace, "model_request")[0]["data"]["context"]["model"] == "shelf-9"


def test_a_builtin_agents_trace_replays_in_a_project_naming_its_agent(tmp_path: Path) -> None:
    """README's ``loopctl run ... --trace run.jsonl`` then ``loopctl-sim replay run.jsonl``,
    in a project whose pyproject.toml names its own agent: the trace is the built-in agent's,
    so it replays against the brain (a note says why); ``--agent`` still replays it against
    the project's agent."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.loopctl]\nagent = "{SPEC}"\n')
    trace = tmp_path / "run.jsonl"
    with ReasoningServer() as server:
        done = cli("loopctl", "run", "What is 2 + 40?", "--provider", "openai",
                   "--model", "shelf-1", "--base-url", server.url, "--trace", str(trace),
                   env={**env_for(), "OPENAI_API_KEY": KEY}, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
    plain = cli("loopctl-sim", "replay", str(trace), env=env_for(), cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert f"recorded by loopctl run's built-in agent, not {SPEC}" in plain.stderr
    theirs = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, env=env_for(), cwd=tmp_path)
    assert theirs.returncode == 1
    assert "the agent's settings differ from the trace's" in theirs.stdout


#: Each change, made through the agent's environment, and what the replay says of it.
CHANGES = {
    "TEMP=0.9": "turn 1: the request's options differ\n  temperature: 0.3 -> 0.9",
    "MODEL=shelf-2": "turn 1: the request's model differs\n  (value): shelf-1 -> shelf-2",
    "PROMPT=Be brief.": "turn 1: the request's system prompt differs",
    "MAX_TURNS=9": "the agent's settings differ from the trace's: max_turns 6 -> 9",
    "TAG=summary": "the compacted history differs in message 1 of 4",
    "BLURB=changed": "turn 2: tool `catalog_dump` returned `...ecommending, number 20. changed",
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_change_is_named_and_bounded(
    shop_trace: Path, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, value = change.split("=", 1)
    monkeypatch.setenv("BOOKSHOP_" + name, value)
    monkeypatch.syspath_prepend(str(HERE))
    done = CliRunner().invoke(loopctl_sim_cli, ["replay", str(shop_trace), "--agent", SPEC])
    assert done.exit_code == 1, done.output
    assert CHANGES[change] in done.stdout
    assert len(done.stdout) < 4000, "a 10 KB result is not printed whole"


def test_update_keeps_the_model_and_export_test_is_red_until_fixed(
    shop_trace: Path, tmp_path: Path
) -> None:
    trace = tmp_path / "shop.jsonl"
    trace.write_bytes(shop_trace.read_bytes())
    nine = env_for(MAX_TURNS="9")
    updated = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, "--update", env=nine)
    assert updated.returncode == 0, updated.stdout + updated.stderr
    again = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, env=nine)
    assert again.returncode == 0, again.stdout + again.stderr
    assert kinds(trace, "model_reply") == kinds(shop_trace, "model_reply")  # model, durations
    assert [r["data"]["context"] for r in kinds(trace, "model_request")[:1]] == [
        r["data"]["context"] for r in kinds(shop_trace, "model_request")[:1]
    ]

    test = tmp_path / "test_shop_trace.py"
    exported = cli("loopctl-sim", "export-test", str(shop_trace), "--agent", SPEC, "-o", str(test),
                   env=env_for())  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    green = _pytest(test, env_for())
    assert green.returncode == 0, green.stdout
    red = _pytest(test, env_for(BLURB="changed"))
    assert red.returncode == 1 and "catalog_dump" in red.stdout


def _pytest(test: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)]
    return subprocess.run(command, env=env, cwd=test.parent, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip


def test_a_failure_escaping_loopctl_run_is_one_line_recorded_and_replayed(tmp_path: Path) -> None:
    """The planted compactor keeps a result without its call: the engine's ProtocolError
    escapes the run. ``loopctl run`` says so in one line (the traceback with ``-v``), the trace
    ends with it, and its replay exits 0 while the bug is there and 1 once it is fixed."""
    trace = tmp_path / "raised.jsonl"
    with ReasoningServer() as server:
        env = env_for(server, BUG="split", WINDOW="2000")
        done = cli("loopctl", "run", TASK, "--agent", SPEC, "--trace", str(trace), env=env)
        verbose = cli("loopctl", "run", TASK, "--agent", SPEC, "-v", env=env)
    assert done.returncode == 1
    assert done.stderr.startswith("error: the run raised ProtocolError: compaction_result()")
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert done.stderr.rstrip().endswith(f"the trace {trace} ends with it")
    assert verbose.returncode == 1 and "Traceback (most recent call last)" in verbose.stderr
    assert KEY not in done.stderr + verbose.stderr
    end = [r for r in records(trace) if r["type"] == "end"][-1]
    assert end["error"]["type"] == "ProtocolError"

    buggy = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC,
                env=env_for(BUG="split", WINDOW="2000"))  # fmt: skip
    assert buggy.returncode == 0, buggy.stdout + buggy.stderr
    assert "the run ended as the trace's did" in buggy.stdout + buggy.stderr
    fixed = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, env=env_for(WINDOW="2000"))
    assert fixed.returncode == 1
    assert "(the failure no longer happens)" in fixed.stdout


def test_fuzz_finds_an_undeclared_exception_and_its_commands_reproduce_it(tmp_path: Path) -> None:
    """``split_bill`` declares ValueError; the planted ZeroDivisionError on ``people=0`` is a
    finding by default. Every printed command reproduces it; the exported test is red until
    the fix and green after."""
    out = tmp_path / "failures"
    buggy = env_for(BUG="zerodiv")
    campaign = cli("loopctl-sim", "fuzz", "--agent", SPEC, "--seeds", "0:30", "--out", str(out),
                   "--input", "Split 30 among 0 people.", "--no-progress", env=buggy,
                   cwd=tmp_path)  # fmt: skip
    assert campaign.returncode == 1, campaign.stdout + campaign.stderr
    lines = campaign.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAIL seed"))
    assert "tool-exception (split_bill:ZeroDivisionError)" in lines[at]
    commands: dict[str, list[str]] = {}
    for line in lines[at + 1 : at + 8]:
        label, _, command = line.strip().partition(":")
        if label in ("rerun", "replay", "run", "test"):
            commands.setdefault(label, shlex.split(command))  # the first replay: the whole trace
    assert set(commands) == {"rerun", "replay", "run", "test"}

    rerun = cli(*commands["rerun"], "--out", str(tmp_path / "again"), env=buggy, cwd=tmp_path)
    assert rerun.returncode == 1 and "ZeroDivisionError" in rerun.stdout
    replay = cli(*commands["replay"], env=buggy, cwd=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    run = cli(*commands["run"], env=buggy, cwd=tmp_path)
    assert run.returncode == 1 and "ZeroDivisionError" in run.stdout + run.stderr
    test = tmp_path / "test_seed.py"
    exported = cli(*commands["test"], "-o", str(test), env=buggy, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert _pytest(test, buggy).returncode == 1

    fixed = env_for()
    assert cli(*commands["run"], env=fixed, cwd=tmp_path).returncode == 0
    assert cli(*commands["replay"], env=fixed, cwd=tmp_path).returncode == 1
    assert _pytest(test, fixed).returncode == 0


def test_kill_9_then_resume_reaches_the_uninterrupted_digest(tmp_path: Path) -> None:
    """The run is killed while its third model call waits; ``resume`` against the model
    (restarted on the same port: the host's reasoning is recorded under it) ends where the
    uninterrupted run did, and the resumed trace replays."""
    whole, trace = tmp_path / "whole.jsonl", tmp_path / "killed.jsonl"
    with ReasoningServer() as server:
        port = server.port
        done = cli("loopctl", "run", TASK, "--agent", SPEC, "--trace", str(whole),
                   env=env_for(server))  # fmt: skip
        assert done.returncode == 0, done.stderr
    with ReasoningServer(hold_from=3, port=port) as server:
        command = [str(BIN / "loopctl"), "run", TASK, "--agent", SPEC, "--trace", str(trace)]
        child = subprocess.Popen(command, env=env_for(server), cwd=ROOT, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            while len(server.requests) < 3:  # the third model call waits, unanswered
                assert child.poll() is None, "the run ended before its third model call"
                server.released.wait(0.05)
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait()
    assert end_digest(trace) is None
    with ReasoningServer(port=port) as server:
        resumed = cli("loopctl-sim", "resume", str(trace), "--agent", SPEC, env=env_for(server))
        assert len(server.requests) == 2  # the call the kill cut, and the answer
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert end_digest(trace) == end_digest(whole)
    replayed = cli("loopctl-sim", "replay", str(trace), "--agent", SPEC, env=env_for())
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_replay_html_is_written_with_and_without_a_divergence(
    shop_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(HERE))
    clean, diverged = tmp_path / "clean.html", tmp_path / "diverged.html"
    args = ["replay", str(shop_trace), "--agent", SPEC, "--html"]
    assert CliRunner().invoke(loopctl_sim_cli, [*args, str(clean)]).exit_code == 0
    monkeypatch.setenv("BOOKSHOP_BLURB", "changed")
    assert CliRunner().invoke(loopctl_sim_cli, [*args, str(diverged)]).exit_code == 1
    for page in (clean, diverged):
        assert page.read_text(encoding="utf-8").lower().startswith("<!doctype html>")
    index = re.search(r'id="data-index">(.*?)</script>', diverged.read_text(encoding="utf-8"), re.S)
    assert index is not None
    divergence = json.loads(gzip.decompress(base64.b64decode(index.group(1).strip())))["divergence"]
    assert "tool `catalog_dump` returned" in divergence["message"]


def test_otel_export_of_the_trace_matches_the_live_observer(tmp_path: Path) -> None:
    """The same run seen live by a default ``OtelObserver`` and exported from its trace by
    ``loopctl-sim otel``: the same span names, parents, statuses, attributes and events."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from loopctl.otel import OtelObserver
    from loopctl.providers import OpenAIClient
    from loopctl_sim import TraceRecorder

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace, spans_file = tmp_path / "otel.jsonl", tmp_path / "spans.json"
    with ReasoningServer() as server:
        recorder = TraceRecorder(trace)
        client = OpenAIClient("shelf-1", base_url=server.url, api_key=KEY)
        observers = [recorder, OtelObserver(tracer_provider=provider)]
        try:
            assert build(client, observers).run_sync(TASK).final_text == ANSWER
        finally:
            recorder.close()
    done = CliRunner().invoke(loopctl_sim_cli, ["otel", str(trace), "-o", str(spans_file)])
    assert done.exit_code == 0, done.output

    live = exporter.get_finished_spans()
    names = {s.context.span_id: s.name for s in live if s.context is not None}

    def plain(attributes: Any) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}

    seen = sorted(
        repr((s.name, names.get(s.parent.span_id) if s.parent else None,
              s.status.status_code.name, sorted(plain(s.attributes).items()),
              [(e.name, sorted(plain(e.attributes).items())) for e in s.events]))
        for s in live
    )  # fmt: skip
    exported = [
        span
        for resource in json.loads(spans_file.read_text(encoding="utf-8"))["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    by_id = {s["spanId"]: s["name"] for s in exported}
    status = {0: "UNSET", 1: "OK", 2: "ERROR"}

    def value(v: dict[str, Any]) -> Any:
        ((kind, x),) = v.items()
        if kind == "arrayValue":
            return [value(i) for i in x.get("values", [])]
        return int(x) if kind == "intValue" else x

    def attrs(items: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return sorted((a["key"], value(a["value"])) for a in items)

    shown = sorted(
        repr((s["name"], by_id.get(s.get("parentSpanId", "")),
              status[s.get("status", {}).get("code", 0)], attrs(s.get("attributes", [])),
              [(e["name"], attrs(e.get("attributes", []))) for e in s.get("events", [])]))
        for s in exported
    )  # fmt: skip
    assert shown == seen
    chats = [s for s in live if s.name.startswith("chat ")]
    assert len(chats) == 4
    assert all((s.attributes or {}).get("gen_ai.request.model") == "shelf-1" for s in chats)
