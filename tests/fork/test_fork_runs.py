"""Forking a recorded run (``loopctl-sim fork``, ``loopctl_sim.replay.fork.fork``) as a user
does it: the shipped trip trace of the sample travel agent, forked through the command line and
the Python API, the run going on over HTTP against the local model server (OpenAIClient with a
base URL) or with a scripted client; every fork then shown, diffed and replayed as a user would.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fork_agents import KEY, ROOT

from examples.model_server import ModelServer
from loopctl.providers import OpenAIClient
from loopctl_sim.cli import main
from loopctl_sim.replay import replay_agent
from loopctl_sim.replay.fork import (
    Edits,
    ForkDiverged,
    ForkPointError,
    branch_points,
    fork,
)
from loopctl_sim.replay.fork_edits import trace_sha256

TRIP = str(ROOT / "examples" / "travel_agent" / "traces" / "trip.jsonl")
AGENT = "examples.travel_agent.agent:build"
ROME = "Actually, fly me from Oslo to Rome instead."


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def model_args(server: ModelServer) -> list[str]:
    return ["--provider", "openai", "--model", "skyway-model-1", "--base-url", server.url]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # what the CLI's OpenAIClient sends


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def fork_header(path: Path) -> dict[str, Any]:
    found = [r for r in records(path) if r["type"] == "header" and "fork" in r["metadata"]]
    assert len(found) == 1
    fork_meta: dict[str, Any] = found[-1]["metadata"]["fork"]
    return fork_meta


def page_index(page: str) -> dict[str, Any]:
    """The HTML page's index block, unpacked as the browser unpacks it."""
    found = re.search(r'id="data-index">([^<]*)</script>', page)
    assert found is not None
    index: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(found.group(1))))
    return index


def replays(path: Path, agent: str = AGENT) -> Result:
    done = cli("replay", str(path), "--agent", agent)
    assert done.exit_code == 0, done.output
    assert done.output.startswith("ok:")
    return done


def test_api_fork_at_turn_2_with_an_injected_message_over_http(
    model_server: ModelServer, tmp_path: Path
) -> None:
    out = tmp_path / "rome.jsonl"
    client = OpenAIClient("skyway-model-1", base_url=model_server.url, api_key=KEY)
    done = fork(TRIP, turn=2, agent=AGENT, client=client, out=out, edits=Edits(inject=ROME))
    assert done.point.seq == 11  # right before turn 2's model call (the brain between turns)
    assert done.result.outcome.kind == "completed"
    assert "Rome" in (done.result.final_text or "")
    assert done.prefix.ok and done.prefix.records == 12
    # the model was asked over HTTP with the injected message
    assert any(ROME in json.dumps(r.body) for r in model_server.requests)
    meta = fork_header(out)
    parent = {"path": TRIP, "sha256": trace_sha256(TRIP), "at": 11}
    assert meta["parent"] == parent and meta["ancestors"] == [parent]
    assert meta["edits"] == [{"kind": "inject", "text": ROME}]
    lines = out.read_text().splitlines()
    assert lines[:12] == Path(TRIP).read_text().splitlines()[:12]  # the prefix as recorded
    inject = records(out)[13]
    assert inject["type"] == "feed" and inject["name"] == "inject"
    assert replay_agent(out, AGENT).ok


def test_cli_fork_shown_in_show_and_html_and_replays(
    model_server: ModelServer, tmp_path: Path
) -> None:
    out = tmp_path / "rome.jsonl"
    done = cli("fork", TRIP, "--turn", "2", "--agent", AGENT, *model_args(model_server),
               "--inject", ROME, "-o", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "forked" in done.output and "completed" in done.output
    shown = cli("show", str(out))
    assert shown.exit_code == 0
    assert f"fork of {TRIP} at seq 11" in shown.output
    assert f'edits: inject "{ROME}"' in shown.output
    assert f'injected: "{ROME}"' in shown.output
    page = tmp_path / "rome.html"
    assert cli("html", str(out), "-o", str(page)).exit_code == 0
    index = page_index(page.read_text())
    assert index["summary"]["forks"] == 1 and index["summary"]["resumes"] == 0
    recs = index["recs"]
    at = recs["seq"].index(12)  # the fork's header, on the run lane, marked
    assert recs["kind"][at] == "fork" and recs["tone"][at] == "warn"
    assert recs["label"][at].startswith(f"fork of {TRIP} at seq 11")
    replays(out)


def test_a_prefix_that_no_longer_replays_is_refused_and_nothing_written(
    model_server: ModelServer, tmp_path: Path
) -> None:
    out = tmp_path / "never.jsonl"
    done = cli("fork", TRIP, "--turn", "2", "--agent", "fork_agents:changed_prompt",
               *model_args(model_server), "--inject", ROME, "-o", str(out))  # fmt: skip
    assert done.exit_code == 1
    assert "no longer replays" in done.output and "nothing was forked" in done.output
    assert "divergence at seq 3" in done.output  # the first request: the system prompt differs
    assert "system" in done.output
    assert not out.exists()
    assert not model_server.requests  # no model was asked
    client = OpenAIClient("skyway-model-1", base_url=model_server.url, api_key=KEY)
    with pytest.raises(ForkDiverged) as caught:
        fork(TRIP, at=11, agent="fork_agents:changed_prompt", client=client, out=out)
    assert caught.value.divergence is caught.value.result.divergence
    assert caught.value.divergence.seq == 3 and caught.value.divergence.what == "request"
    assert not out.exists()


def test_a_replaced_tool_result_is_recorded_and_replays(
    model_server: ModelServer, tmp_path: Path
) -> None:
    out = tmp_path / "price.jsonl"
    call = "call_9efe6e7def2"  # turn 2's convert_price, recorded as "108.00 USD"
    done = cli("fork", TRIP, "--turn", "2", "--tool-result", f"{call}=999.00 USD",
               "--agent", AGENT, *model_args(model_server), "-o", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert fork_header(out)["parent"]["at"] == 16  # the call_tools step of turn 2
    assert fork_header(out)["edits"] == [
        {"kind": "tool_result", "call_id": call, "content": "999.00 USD"}
    ]
    fed = [r for r in records(out) if r["type"] == "feed" and r["seq"] > 16]
    assert fed[0]["name"] == "tool_results"
    assert fed[0]["args"]["message"]["parts"][0]["content"] == "999.00 USD"
    end = records(out)[-1]
    assert "999.00 USD" in end["outcome"]["final_text"]  # the model saw the replaced result
    shown = cli("show", str(out)).output
    assert f'{call} result "999.00 USD"' in shown
    assert f"result convert_price [{call}]: 999.00 USD" in shown
    ran = [r for r in records(out)[17:] if r["type"] == "io" and r["kind"].startswith("tool_")]
    assert not [r for r in ran if r["data"]["id"] == call]  # the tool did not run again
    replays(out)


def test_a_replaced_model_reply_is_recorded_and_replays(tmp_path: Path) -> None:
    out = tmp_path / "reply.jsonl"
    reply = "Let me stop here: SK610 at 100.0 EUR."
    done = cli("fork", TRIP, "--turn", "3", "--reply", reply, "--agent", AGENT,
               "--client", "fork_agents:scripted", "-o", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    meta = fork_header(out)
    assert meta["parent"]["at"] == 20  # turn 3's model call
    assert meta["edits"] == [{"kind": "reply", "turn": 3, "text": reply}]
    replies = [r for r in records(out) if r["type"] == "io" and r["kind"] == "model_reply"]
    assert replies[-1]["data"]["message"]["parts"][0]["text"] == reply
    assert records(out)[-1]["outcome"]["final_text"] == reply
    assert f'turn 3 reply "{reply}"' in cli("show", str(out)).output
    replays(out)


def test_changed_policy_and_options_are_recorded_and_replay(
    model_server: ModelServer, tmp_path: Path
) -> None:
    out = tmp_path / "short.jsonl"
    done = cli("fork", TRIP, "--turn", "2", "--max-turns", "2", "--option", "temperature=0.7",
               "--agent", AGENT, *model_args(model_server), "-o", str(out))  # fmt: skip
    assert done.exit_code == 1, done.output  # the run now ends at its turn limit
    assert "max_turns_exceeded" in done.output
    meta = fork_header(out)
    assert meta["settings"] == {"max_turns": 2, "options": {"temperature": 0.7}}
    steps = [r for r in records(out) if r["type"] == "step" and r["seq"] > 11]
    assert steps and all(s["policy"]["max_turns"] == 2 for s in steps)
    sent = [json.loads(json.dumps(r.body)) for r in model_server.requests]
    assert sent and all(body.get("temperature") == 0.7 for body in sent)
    shown = cli("show", str(out)).output
    assert 'max_turns=2, options {"temperature":0.7}' in shown
    replays(out)  # the fork's settings apply in its replay, the agent unchanged


def test_a_fork_of_a_fork_keeps_the_chain_and_diff_starts_at_the_branch(
    model_server: ModelServer, tmp_path: Path
) -> None:
    first, second = tmp_path / "rome.jsonl", tmp_path / "rome_gbp.jsonl"
    ok = cli("fork", TRIP, "--turn", "2", "--agent", AGENT, *model_args(model_server),
             "--inject", ROME, "-o", str(first))  # fmt: skip
    assert ok.exit_code == 0, ok.output
    ok = cli("fork", str(first), "--turn", "3", "--agent", AGENT, *model_args(model_server),
             "--inject", "And the price in GBP, please.", "-o", str(second))  # fmt: skip
    assert ok.exit_code == 0, ok.output
    meta = fork_header_last(second)
    grand = {"path": TRIP, "sha256": trace_sha256(TRIP), "at": 11}
    assert meta["ancestors"][0] == grand
    assert meta["ancestors"][1]["path"] == str(first)
    assert meta["ancestors"][1]["sha256"] == trace_sha256(first)
    assert meta["parent"] == meta["ancestors"][1]
    assert f"ancestors: {TRIP}@11 > {first}@" in cli("show", str(second)).output
    replays(second)

    diffed = cli("diff", TRIP, str(first))
    assert diffed.exit_code == 1
    lines = diffed.output.splitlines()
    assert lines[0] == f"{first} forks {TRIP} at seq 11: compared from the branch on"
    assert f"{TRIP}:13 (seq 12)" in diffed.output  # the parent's turn 2 model call
    assert f"{first}:14 (seq 13)" in diffed.output  # the fork's injected message
    as_json = json.loads(cli("diff", TRIP, str(first), "--json").output)
    assert as_json["branch"] == {"child": "b", "at": 11}
    back = cli("diff", str(second), TRIP).output  # either order, through the chain
    assert back.splitlines()[0] == f"{second} forks {TRIP} at seq 11: compared from the branch on"


def fork_header_last(path: Path) -> dict[str, Any]:
    """The last fork header (a fork of a fork holds its parent's too, in the prefix)."""
    found = [r for r in records(path) if r["type"] == "header" and "fork" in r["metadata"]]
    meta: dict[str, Any] = found[-1]["metadata"]["fork"]
    return meta


@pytest.mark.parametrize(
    ("at", "why", "nearest"),
    [
        ("13", "seq 13 cannot be a branch point: it is inside a model call (mid-stream)",
         "seq 12 (turn 2: call the model); seq 15 (after model_response)"),
        ("7", "seq 7 cannot be a branch point: it is inside a tool wave (mid-wave)",
         "seq 6 (turn 1: run tools); seq 11 (after tool_results)"),
        ("99", "seq 99 is not in the trace (its seqs: 0 to 37)",
         "seq 31 (turn 4: call the model)"),
        ("37", "seq 37 cannot be a branch point: the run ended there",
         "seq 31 (turn 4: call the model)"),
        ("0", "seq 0 cannot be a branch point: it is a run's header", "seq 1 (after accept_input)"),
    ],
)  # fmt: skip
def test_bad_branch_points_are_refused_with_the_nearest_named(
    tmp_path: Path, at: str, why: str, nearest: str
) -> None:
    out = tmp_path / "bad.jsonl"
    done = cli("fork", TRIP, "--at", at, "--agent", AGENT, "--client", "fork_agents:scripted",
               "-o", str(out))  # fmt: skip
    assert done.exit_code == 2
    assert f"error: {why}; nearest valid branch points: {nearest}" in done.output
    assert not out.exists()


def test_bad_edits_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "bad.jsonl"
    base = ["fork", TRIP, "--agent", AGENT, "--client", "fork_agents:scripted", "-o", str(out)]
    unknown = cli(*base, "--at", "16", "--tool-result", "call_nope=1")
    assert unknown.exit_code == 2
    assert "call_nope are not in the wave at seq 16 (its calls: call_9efe6e7def2)" in (
        unknown.output
    )
    mid_call = cli(*base, "--at", "12", "--inject", "hello")
    assert mid_call.exit_code == 2 and "the brain is awaiting_model" in mid_call.output
    no_model = cli("fork", TRIP, "--at", "11", "--agent", AGENT, "-o", str(out))
    assert no_model.exit_code == 2 and "give the model that goes on" in no_model.output
    assert not out.exists()
    with pytest.raises(ForkPointError) as caught:
        fork(TRIP, at=4 + 9, agent=AGENT, client=object(), out=out)  # type: ignore[arg-type]
    assert [p.seq for p in caught.value.nearest] == [12, 15]
    assert [p.seq for p in branch_points(TRIP)][:4] == [1, 2, 5, 6]


SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def test_secrets_in_edits_never_land_in_the_fork(tmp_path: Path) -> None:
    out, results = tmp_path / "secret.jsonl", tmp_path / "results.json"
    results.write_text(json.dumps({"call_9efe6e7def2": {"content": f"key {SECRET}"}}))
    done = cli("fork", TRIP, "--at", "16", "--tool-result", f"@{results}", "--agent", AGENT,
               "--client", "fork_agents:scripted", "--json", "-o", str(out))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["edits"][0]["call_id"] == "call_9efe6e7def2"
    again = tmp_path / "again.jsonl"
    done = cli("fork", TRIP, "--turn", "2", "--inject", f"my key is {SECRET}", "--agent", AGENT,
               "--client", "fork_agents:scripted", "-o", str(again))  # fmt: skip
    assert done.exit_code == 0, done.output
    for path in (out, again):
        assert SECRET not in path.read_text()
    assert 'edits: inject "my key is [REDACTED]"' in cli("show", str(again)).output
    assert "[REDACTED]" in cli("show", str(out)).output


def test_a_trace_from_stdin_cannot_be_forked(tmp_path: Path) -> None:
    done = cli("fork", "-", "--at", "11", "--agent", AGENT, "--client", "fork_agents:scripted",
               "-o", str(tmp_path / "x.jsonl"))  # fmt: skip
    assert done.exit_code == 2
    assert "a fork names its parent by its file" in done.output


def test_a_fork_of_a_fork_branched_earlier_is_diffed_from_the_earlier_branch(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    scripted = ["--agent", AGENT, "--client", "fork_agents:scripted"]
    assert cli("fork", TRIP, "--turn", "3", *scripted, "-o", str(first)).exit_code == 0
    # the second fork branches from the first before the first's own branch point
    done = cli("fork", str(first), "--at", "1", "--inject", "One more thing.", *scripted,
               "-o", str(second))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert [a["at"] for a in fork_header(second)["ancestors"]] == [19, 1]
    for parent in (TRIP, str(first)):
        diffed = cli("diff", parent, str(second))
        assert diffed.output.splitlines()[0] == (
            f"{second} forks {parent} at seq 1: compared from the branch on"
        )
        assert f"{parent}:3 (seq 2)" in diffed.output  # turn 1's model call, not asked again
        assert f"{second}:4 (seq 3)" in diffed.output  # the injected message
    replays(second)


def test_a_missing_turn_key_or_client_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "x.jsonl"
    base = ["fork", TRIP, "--agent", AGENT, "-o", str(out)]
    late = cli(*base, "--turn", "9", "--client", "fork_agents:scripted")
    assert late.exit_code == 2
    assert "turn 9: the trace has no 'call the model' step of that turn (its turns that have " \
        "one: 1, 2, 3, 4)" in late.output  # fmt: skip
    not_a_client = cli(*base, "--at", "11", "--client", "fork_agents:wrap_up")
    assert not_a_client.exit_code == 2 and "--client 'fork_agents:wrap_up'" in not_a_client.output
    monkeypatch.delenv("OPENAI_API_KEY")
    no_key = cli(*base, "--at", "11", "--provider", "openai", "--model", "m")
    assert no_key.exit_code == 2 and "OPENAI_API_KEY" in no_key.output
    assert not out.exists()
