"""``loopctl-sim resume`` of a run whose model ``loopctl run`` named (``--agent X --model M``,
and the built-in agent): killed with SIGKILL while it waits for the model, resumed with the
recorded provider and model, it ends with the uninterrupted run's brain; ``export-test`` of it
writes a test that passes on the unchanged agent. Mistakes are one line (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from acceptance_helpers import (
    AGENT,
    KEY,
    ROOT,
    TRIP,
    agent_env,
    cli,
    end_digest,
    killed_at_second_call,
)

from examples.model_server import ModelServer
from loopctl.providers import OpenAIClient
from loopctl_sim import resume_trace

MODEL = "skyway-model-9"  # not the travel agent's own model: only --model names it
READ = "Please read the file notes.txt"


def _env(**extra: str) -> dict[str, str]:
    """No SKYWAY_*: the travel agent's own client is unused; the key loopctl run reads."""
    env = agent_env(None, OPENAI_API_KEY=KEY)
    env.pop("OPENAI_BASE_URL", None)
    env.update(extra)
    return env


def _exported_test_passes(trace: Path, tmp_path: Path, *args: str, cwd: Path = ROOT) -> None:
    """``export-test TRACE`` writes a test, and pytest runs it green."""
    test = tmp_path / "test_exported.py"
    wrote = cli("loopctl-sim", "export-test", str(trace), "-o", str(test), *args, cwd=cwd,
                env=_env())  # fmt: skip
    assert wrote.returncode == 0, wrote.stderr
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        env=_env(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


def test_agent_given_model_resumes_with_model_to_the_uninterrupted_digest(
    model_server: ModelServer, tmp_path: Path
) -> None:
    named = ["--agent", AGENT, "--provider", "openai", "--model", MODEL,
             "--base-url", model_server.url]  # fmt: skip
    whole = tmp_path / "whole.jsonl"
    done = cli("loopctl", "run", TRIP, *named, "--trace", str(whole), env=_env())
    assert done.returncode == 0, done.stderr
    cut = tmp_path / "cut.jsonl"
    killed_at_second_call(model_server, [TRIP, *named], cut, ROOT, _env())

    resumed = cli("loopctl-sim", "resume", str(cut), "--agent", AGENT, "--model", MODEL,
                  "--base-url", model_server.url, "--json", env=_env())  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["outcome"]["kind"] == "completed"
    assert end_digest(cut) == end_digest(whole) is not None
    assert model_server.requests, "the resumed run called the model"
    assert {r.body["model"] for r in model_server.requests} == {MODEL}
    assert KEY not in cut.read_text(encoding="utf-8")
    replayed = cli("loopctl-sim", "replay", str(cut), "--agent", AGENT, env=_env())
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    _exported_test_passes(cut, tmp_path, "--agent", AGENT)


def test_without_model_the_run_goes_on_with_the_recorded_one(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """No ``--model``: the trace's provider and model, the key from the environment; refused
    in one line when the key is missing or the client would reach another server."""
    named = ["--agent", AGENT, "--model", MODEL, "--base-url", model_server.url]
    cut = tmp_path / "cut.jsonl"
    killed_at_second_call(model_server, [TRIP, *named], cut, ROOT, _env())
    before = cut.read_bytes()

    no_key = _env()
    del no_key["OPENAI_API_KEY"]
    refusals: list[tuple[dict[str, str], list[str], str]] = [
        (no_key, [], "set the OPENAI_API_KEY environment variable"),
        (_env(), [], f"was reached at 127.0.0.1:{model_server.url.split(':')[2].split('/')[0]}"),
    ]
    for env, args, message in refusals:
        refused = cli("loopctl-sim", "resume", str(cut), "--agent", AGENT, *args, env=env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert refused.stderr.startswith("error: ") and message in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Traceback" not in refused.stderr
        assert cut.read_bytes() == before  # nothing written, nothing lost
    assert model_server.requests == []

    resumed = cli("loopctl-sim", "resume", str(cut), "--agent", AGENT,
                  env=_env(OPENAI_BASE_URL=model_server.url))  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert {r.body["model"] for r in model_server.requests} == {MODEL}
    assert end_digest(cut) is not None


def test_builtin_agent_trace_resumes_with_the_builtin_agent(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """A project whose pyproject names another agent: the built-in agent's trace resumes with
    the built-in agent (its read_file tool reads the project's file) and exports a green test."""
    (tmp_path / "pyproject.toml").write_text(f'[tool.loopctl]\nagent = "{AGENT}"\n')
    (tmp_path / "notes.txt").write_text("hello world\n" * 10, encoding="utf-8")
    args = [READ, "--model", MODEL, "--base-url", model_server.url, "--system", "Be brief."]
    whole = tmp_path / "whole.jsonl"
    done = cli("loopctl", "run", *args, "--trace", str(whole), env=_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "notes.txt: 120 characters" in done.stdout
    cut = tmp_path / "cut.jsonl"
    killed_at_second_call(model_server, args, cut, tmp_path, _env())

    resumed = cli("loopctl-sim", "resume", str(cut), "--base-url", model_server.url,
                  env=_env(), cwd=tmp_path)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "built-in agent" in resumed.stderr
    assert end_digest(cut) == end_digest(whole) is not None
    assert [r.body["model"] for r in model_server.requests] == [MODEL]
    system = model_server.requests[0].body["messages"][0]
    assert system == {"role": "system", "content": "Be brief."}
    _exported_test_passes(cut, tmp_path, cwd=tmp_path)


def test_trace_of_the_agents_own_client_takes_model_only_with_its_options(
    tmp_path: Path,
) -> None:
    """A trace recorded with the agent's own client: ``--base-url`` alone names nothing."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("", encoding="utf-8")
    refused = cli("loopctl-sim", "resume", str(trace), "--agent", AGENT, "--base-url",
                  "http://127.0.0.1:9/v1", env=_env())  # fmt: skip
    assert refused.returncode == 2
    assert "need --model" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert os.path.getsize(trace) == 0


def test_resume_trace_takes_the_client_from_python(
    model_server: ModelServer, tmp_path: Path
) -> None:
    """``resume_trace(path, agent, client=...)``: the public API's way to the same resume."""
    named = ["--agent", AGENT, "--model", MODEL, "--base-url", model_server.url]
    whole = tmp_path / "whole.jsonl"
    done = cli("loopctl", "run", TRIP, *named, "--trace", str(whole), env=_env())
    assert done.returncode == 0, done.stderr
    cut = tmp_path / "cut.jsonl"
    killed_at_second_call(model_server, [TRIP, *named], cut, ROOT, _env())

    client = OpenAIClient(MODEL, base_url=model_server.url, api_key=KEY)
    resumed = resume_trace(cut, AGENT, client=client)
    assert resumed.result is not None and resumed.result.outcome.kind == "completed"
    assert end_digest(cut) == end_digest(whole) is not None
    assert {r.body["model"] for r in model_server.requests} == {MODEL}
