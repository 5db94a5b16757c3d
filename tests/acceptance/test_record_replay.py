"""A user's agent recorded through a real provider client over HTTP, then replayed, changed,
updated and exported: issue 30's workflow, run as the user ran it (the ``loopctl-sim`` command
in a subprocess, the public API), against the local model server."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from acceptance_helpers import AGENT, KEY, ROOT, TRIP, agent_env, cli, client_for, kinds, record
from click.testing import CliRunner

from examples.model_server import ModelServer
from examples.travel_agent.agent import MODEL, build
from loopctl import ApiClient, BareLoop, LoopObserver
from loopctl_sim import load_agent, replay_agent
from loopctl_sim.cli import main as loopctl_sim_cli


@pytest.mark.parametrize("api", ["openai", "anthropic", "responses"])
@pytest.mark.parametrize("stream", [True, False], ids=["sse", "whole"])
def test_the_server_speaks_each_wire_format(
    model_server: ModelServer, api: str, stream: bool
) -> None:
    """The travel agent reaches the same answer through each provider client, streamed or
    whole: the server's bodies are the providers' real shapes, which loopctl's clients read."""
    result = build(client=client_for(model_server, api, stream=stream)).run_sync(TRIP)
    assert result.outcome.kind == "completed"
    assert result.final_text == (
        "Your trip from Oslo to Paris: done: search_flights, weather_forecast, convert_price; "
        "cheapest SK610 at 100.0 EUR; converted 108.00 USD. the city guide lists 32 sights."
    )
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    sent = model_server.requests
    assert len(sent) == 4 and {r.body["model"] for r in sent} == {MODEL}
    assert all(bool(r.body.get("stream")) is stream for r in sent)
    if api == "openai" and stream:
        assert all(r.body["stream_options"] == {"include_usage": True} for r in sent)
    assert all(r.body.get("temperature") == 0.2 for r in sent)


def test_the_server_wants_a_key(model_server: ModelServer) -> None:
    """Like a provider: no key (or a wrong one) is a 401 in the provider's error shape, which
    the client reports as refused credentials."""
    chat = httpx.post(f"{model_server.url}/chat/completions", json={"model": MODEL})
    assert chat.status_code == 401 and chat.json()["error"]["code"] == "invalid_api_key"
    messages = httpx.post(
        f"{model_server.root}/v1/messages", json={"model": MODEL}, headers={"x-api-key": "no"}
    )
    assert messages.status_code == 401
    assert messages.json()["error"]["type"] == "authentication_error"
    done = cli(
        "loopctl", "run", TRIP, "--agent", AGENT,
        env=agent_env(model_server, SKYWAY_API_KEY="sk-wrong-key-0123456789"),
    )  # fmt: skip
    assert done.returncode == 2
    assert "refused the credentials" in done.stderr
    assert "sk-wrong-key-0123456789" not in done.stderr


@pytest.mark.parametrize("api", ["openai", "anthropic", "responses"])
def test_an_unchanged_agent_replays_its_own_http_trace(
    model_server: ModelServer, tmp_path: Path, api: str
) -> None:
    """Issue 30, item 1: recorded through a provider client, the trace names the model and
    the provider; the unchanged agent replays it clean, without asking the model."""
    trace = tmp_path / "trip.jsonl"
    record(model_server, trace, api=api)
    context = kinds(trace, "model_request")[0]["data"]["context"]
    assert context["model"] == MODEL and context["provider"]
    asked = len(model_server.requests)

    done = cli("loopctl-sim", "replay", str(trace), "--agent", AGENT)

    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok: {trace}") and "outcome completed" in done.stdout
    assert len(model_server.requests) == asked  # a replay asks no model
    assert KEY not in trace.read_text(encoding="utf-8")


@pytest.mark.parametrize(("api", "status"), [("openai", 429), ("anthropic", 529)])
def test_a_retried_http_error_is_recorded_and_replays(
    model_server: ModelServer, tmp_path: Path, api: str, status: int
) -> None:
    """The provider refuses the second call once (a rate limit, an overload, ``retry-after:
    0``): the agent retries, the trace holds the error and the retry, and it replays clean."""
    model_server.fail(2, status)
    trace = tmp_path / "retried.jsonl"
    result = record(model_server, trace, api=api)
    assert result.outcome.kind == "completed"
    assert len(model_server.requests) == 5
    errors = kinds(trace, "model_error")
    assert [e["data"]["error"]["status"] for e in errors] == [status]
    assert len(kinds(trace, "retry")) == 1
    done = cli("loopctl-sim", "replay", str(trace), "--agent", AGENT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(model_server.requests) == 5


#: Each change a user makes to the agent, and what the replay says of it.
CHANGES = {
    "model": "the request's model differs\n  (value): skyway-model-1 -> skyway-model-2",
    "prompt": "the request's system prompt differs",
    "tool_output": "tool `weather_forecast` returned",
    "tool_schema": "tool spec `weather_forecast` changed its schema",
    "new_tool": "the agent's settings differ from the trace's: tools",
    "temperature": "the request's options differ\n  temperature: 0.2 -> 0.9",
    "pre_hook": 'returned `... 468.0}], "passenger": "P1234567"}`',
    "post_hook": "tool `city_guide` returned",
    "compactor": "the compacted history differs",
    "max_turns": "the agent's settings differ from the trace's: max_turns 8 -> 3",
}


@pytest.fixture(scope="module")
def trip_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("trip") / "trip.jsonl"
    with ModelServer(api_key=KEY) as server:
        record(server, trace)
    return trace


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_change_is_named_in_plain_words(trip_trace: Path, change: str) -> None:
    """``loopctl-sim replay --agent`` of each changed agent (through click's runner: the same
    command, in this process) exits 1 and says what changed."""
    args = ["replay", str(trip_trace), "--agent", f"travel_variants:{change}"]
    done = CliRunner().invoke(loopctl_sim_cli, args)
    assert done.exit_code == 1, done.output
    assert done.stdout.startswith("divergence at seq")
    assert CHANGES[change] in done.stdout
    if change == "new_tool":
        assert "seat_map" in done.stdout


def test_a_changed_model_is_caught_by_the_api_too(trip_trace: Path) -> None:
    result = replay_agent(trip_trace, "travel_variants:model")
    assert result.divergence is not None
    assert result.divergence.what == "request"
    assert "skyway-model-1 -> skyway-model-2" in result.summary()
    assert replay_agent(trip_trace, AGENT).divergence is None


def test_update_keeps_model_provider_and_timings(trip_trace: Path, tmp_path: Path) -> None:
    """``--update`` of a changed tool: without ``--force`` it says which request needs a real
    model; with it, the new trace keeps the model, the provider, the model's durations and
    the header's time, and the changed agent then replays it clean."""
    trace = tmp_path / "trip.jsonl"
    trace.write_bytes(trip_trace.read_bytes())
    agent = "travel_variants:tool_output"

    refused = cli("loopctl-sim", "replay", str(trace), "--agent", agent, "--update")
    assert refused.returncode == 1
    assert "needs a real model" in refused.stdout + refused.stderr
    assert trace.read_bytes() == trip_trace.read_bytes()

    forced = cli("loopctl-sim", "replay", str(trace), "--agent", agent, "--update", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr

    again = cli("loopctl-sim", "replay", str(trace), "--agent", agent)
    assert again.returncode == 0, again.stdout + again.stderr
    before, after = kinds(trip_trace, "model_request"), kinds(trace, "model_request")
    assert after[0]["data"]["context"]["model"] == MODEL
    assert after[0]["data"]["context"]["provider"] == before[0]["data"]["context"]["provider"]
    durations = [r["duration_s"] for r in kinds(trip_trace, "model_reply")]
    assert [r["duration_s"] for r in kinds(trace, "model_reply")] == durations
    assert all(d is not None and d > 0 for d in durations)
    first = trace.read_text(encoding="utf-8").splitlines()[0]
    assert (
        first.split('"created":')[1][:27]
        == (trip_trace.read_text(encoding="utf-8").splitlines()[0].split('"created":')[1][:27])
    )
    assert "snow" in trace.read_text(encoding="utf-8")


def test_export_test_writes_a_test_that_passes(trip_trace: Path, tmp_path: Path) -> None:
    """``export-test --agent`` of an HTTP-recorded trace: the test it writes is green."""
    test_file = tmp_path / "test_trip.py"
    done = cli(
        "loopctl-sim", "export-test", str(trip_trace), "--agent", AGENT, "-o", str(test_file)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert test_file.is_file()
    ran = cli("pytest", "-q", "-p", "no:cacheprovider", str(test_file), cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_the_trace_marker_replays_it(trip_trace: Path, tmp_path: Path) -> None:
    test_file = tmp_path / "test_marked.py"
    test_file.write_text(
        "import pytest\n\n"
        f"@pytest.mark.loopctl_trace({str(trip_trace)!r}, agent={AGENT!r})\n"
        "def test_trip(loopctl_trace_results):\n"
        "    assert loopctl_trace_results[0].divergence is None\n",
        encoding="utf-8",
    )
    ran = cli("pytest", "-q", "-p", "no:cacheprovider", str(test_file), cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_plain_replay_uses_the_pyproject_agent(trip_trace: Path, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.loopctl]\nagent = "{AGENT}"\n', encoding="utf-8"
    )
    done = cli("loopctl-sim", "replay", str(trip_trace), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"agent {AGENT}" in done.stdout


def test_the_shipped_traces_are_current_and_replay() -> None:
    """``examples/travel_agent/traces`` (recorded through OpenAIClient, AnthropicClient and
    ``loopctl run --agent``) record the same again, and replay against the agent."""
    checked = cli("python", "examples/travel_agent/record.py", "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    done = cli("loopctl-sim", "replay", "examples/travel_agent/traces", "--agent", AGENT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split(":")[0] for line in done.stdout.splitlines()] == ["ok"] * 3


def test_a_trace_naming_no_model_replays_whatever_the_agent_names() -> None:
    """The support agent's traces were recorded through a scripted client (no model named);
    with a key in the environment its factory builds a real client naming ``gpt-4o-mini``, and
    the traces still replay clean: only a model the trace names is compared."""
    env = agent_env(None, OPENAI_API_KEY=KEY)
    done = cli(
        "loopctl-sim", "replay", "examples/support_agent/traces",
        "--agent", "examples.support_agent.agent:build", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_factory_is_asked_for_its_own_model_once_and_only_when_needed(
    trip_trace: Path,
) -> None:
    """Replay calls the factory without a client (to read its model) once per replay, and not
    at all for a trace that names no model (one recorded through a scripted client)."""
    calls: list[bool] = []

    def factory(
        client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
    ) -> BareLoop:
        calls.append(client is None)
        return build(client, observers)

    assert replay_agent(trip_trace, factory).divergence is None
    assert calls.count(True) == 1 and calls.count(False) == 1

    calls.clear()
    shop = load_agent("examples.support_agent.agent:build")

    def support(
        client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()
    ) -> BareLoop:
        calls.append(client is None)
        loop: BareLoop = shop(client, observers)
        return loop

    scripted = ROOT / "examples" / "support_agent" / "traces" / "session.jsonl"
    assert replay_agent(scripted, support).divergence is None
    assert calls and not any(calls)
