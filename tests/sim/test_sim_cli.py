"""``loopctl-sim`` via CliRunner: exit codes, output, JSON, errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sim_helpers import SCENARIOS, lines, write_lines

from loopctl_sim.cli import COMMANDS, main


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def trace(tmp_path: Path, runner: CliRunner) -> Path:
    path = tmp_path / "run.jsonl"
    result = runner.invoke(
        main, ["run", str(SCENARIOS / "rate_limited.yaml"), "--trace", str(path), "--created", "t"]
    )
    assert result.exit_code == 0, result.output
    return path


def test_run_prints_a_summary_and_writes_the_trace(trace: Path, runner: CliRunner) -> None:
    result = runner.invoke(main, ["run", str(SCENARIOS / "basic.yaml")])
    assert result.exit_code == 0
    assert result.output.startswith("basic: completed; 6 steps")
    assert trace.exists() and lines(trace)[0]["created"] == "t"


def test_run_json(runner: CliRunner) -> None:
    result = runner.invoke(main, ["run", str(SCENARIOS / "overloaded.yaml"), "--json"])
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["ok"] and data["expected"] == "failed"
    assert data["outcome"]["error"]["kind"] == "overloaded" and data["retries"] == 2


def test_run_exits_1_when_the_outcome_is_not_the_expected_one(
    tmp_path: Path, runner: CliRunner
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ninput: hi\nexpect: cancelled\n")
    result = runner.invoke(main, ["run", str(path)])
    assert result.exit_code == 1 and "unexpected outcome: completed" in result.output


def test_run_with_a_bad_scenario_exits_2_naming_the_field(
    tmp_path: Path, runner: CliRunner
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: s\ninput: hi\nfaults: [{kind: crash}]\n")
    result = runner.invoke(main, ["run", str(path)])
    assert result.exit_code == 2
    assert f"error: {path}: faults.0: Value error, a crash fault needs step" in result.output
    assert "Traceback" not in result.output


def test_replay_ok(trace: Path, runner: CliRunner) -> None:
    result = runner.invoke(main, ["replay", str(trace)])
    assert result.exit_code == 0
    n = len(lines(trace))
    assert result.output.startswith(
        f"ok: {trace}: {n} records replayed (1 run(s), 0 resume(s), 6 steps, 7 feeds"
    )


def test_replay_json(trace: Path, runner: CliRunner) -> None:
    result = runner.invoke(main, ["replay", str(trace), "--json"])
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["ok"] and data["divergence"] is None
    assert data["outcome"]["kind"] == "completed"


def test_replay_divergence_exits_1_with_a_diff(
    trace: Path, tmp_path: Path, runner: CliRunner
) -> None:
    records = lines(trace)
    seq = next(r["seq"] for r in records if r["type"] == "step")
    records[seq]["policy"]["max_turns"] = 0
    edited = tmp_path / "edited.jsonl"
    write_lines(edited, records)
    result = runner.invoke(main, ["replay", str(edited)])
    assert result.exit_code == 1
    assert f"divergence at seq {seq} ({edited}:{seq + 1})" in result.output
    assert '+  "kind": "done"' in result.output
    data = json.loads(runner.invoke(main, ["replay", str(edited), "--json"]).output)
    assert data["divergence"]["seq"] == seq and data["divergence"]["what"] == "step"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            '{"seq": 0, "type": "header", "format": "loopctl-trace", "version": 9}\n',
            ":1: trace format version 9 is not supported",
        ),
        ("garbage\n", ":1: not valid JSON"),
        ("", "empty trace"),
    ],
)
def test_replay_of_malformed_input_exits_2_without_traceback(
    tmp_path: Path, runner: CliRunner, content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    result = runner.invoke(main, ["replay", str(path)])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_replay_of_a_truncated_header_only_exits_2(tmp_path: Path, runner: CliRunner) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text('{"seq": 0, "type": "hea')
    result = runner.invoke(main, ["replay", str(path)])
    assert result.exit_code == 2 and f"{path}:1: no complete record" in result.output
    assert runner.invoke(main, ["show", str(path)]).exit_code == 2


def test_replay_until_prints_the_state_there(trace: Path, runner: CliRunner) -> None:
    seq = next(r["seq"] for r in lines(trace) if r.get("name") == "model_response")
    result = runner.invoke(main, ["replay", str(trace), "--until", str(seq)])
    assert result.exit_code == 0
    state_json = result.output[: result.output.rindex("}") + 1]
    state = json.loads(state_json)
    assert state["state"] == {"kind": "awaiting_tools", "turn": 1}
    assert f"stopped at seq {seq}" in result.output
    data = json.loads(
        runner.invoke(main, ["replay", str(trace), "--until", str(seq), "--json"]).output
    )
    assert data["stopped_at"] == seq and data["machine"]["turns_taken"] == 1


def test_replay_until_past_the_end(trace: Path, runner: CliRunner) -> None:
    result = runner.invoke(main, ["replay", str(trace), "--until", "999"])
    assert result.exit_code == 0 and "the trace ends before seq 999" in result.output


def test_show_prints_a_timeline(trace: Path, runner: CliRunner) -> None:
    result = runner.invoke(main, ["show", str(trace)])
    assert result.exit_code == 0
    out = result.output
    for expected in (
        'user: "What is 2 + 3 + 10?"',
        "turn 1: call the model",
        "model error HTTP 429: rate_limited",
        "retry 1 after 2.5s",
        'call add({"a":2,"b":3}) [call_1_1]',
        "result add [call_1_1]: 5",
        'run ended: completed: "2 + 3 + 10 = 15."',
    ):
        assert expected in out, expected


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("context_overflow", "compaction (emergency): 5 messages -> 4"),
        ("crash_restore", "crash at step 2; restored from a"),
        ("tool_exception", "result ERROR add [call_1_1]: tool 'add' raised RuntimeError"),
        ("tool_hang", "cancel: tool 'add' hung"),
        ("network_retries_exhausted", "ERROR: network: connection reset by peer"),
        ("context_overflow_noop", "compaction (emergency): nothing to cut"),
        ("manual_compaction", 'injected: "Please show your working."'),
    ],
)
def test_show_names_faults_and_recoveries(
    tmp_path: Path, runner: CliRunner, scenario: str, expected: str
) -> None:
    path = tmp_path / "t.jsonl"
    runner.invoke(main, ["run", str(SCENARIOS / f"{scenario}.yaml"), "--trace", str(path)])
    result = runner.invoke(main, ["show", str(path)])
    assert result.exit_code == 0 and expected in result.output


def test_show_of_malformed_input_exits_2(tmp_path: Path, runner: CliRunner) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("{}\n")
    result = runner.invoke(main, ["show", str(path)])
    assert result.exit_code == 2 and f"{path}:1: invalid record" in result.output


def test_diff_same_and_different(tmp_path: Path, runner: CliRunner) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    for path, created in ((a, "t1"), (b, "t2")):
        runner.invoke(
            main, ["run", str(SCENARIOS / "basic.yaml"), "--trace", str(path), "--created", created]
        )
    runner.invoke(main, ["run", str(SCENARIOS / "tool_exception.yaml"), "--trace", str(c)])
    same = runner.invoke(main, ["diff", str(a), str(b)])
    assert same.exit_code == 0 and same.output.startswith("same:")
    different = runner.invoke(main, ["diff", str(a), str(c)])
    assert different.exit_code == 1
    assert "traces diverge at" in different.output and f"{a}:1 (seq 0)" in different.output
    data = json.loads(runner.invoke(main, ["diff", str(a), str(c), "--ignore-io", "--json"]).output)
    assert not data["same"] and data["divergence"]["a"]["seq"] == 0  # the header's metadata


def test_diff_finds_the_first_different_brain_record(tmp_path: Path, runner: CliRunner) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    runner.invoke(main, ["run", str(SCENARIOS / "basic.yaml"), "--trace", str(a)])
    records = lines(a)
    seq = next(r["seq"] for r in records if r.get("name") == "tool_results")
    records[seq]["digest"] = "0" * 16
    write_lines(b, records)
    data = json.loads(runner.invoke(main, ["diff", str(a), str(b), "--json"]).output)
    assert data["divergence"]["a"]["seq"] == seq
    assert '+  "digest": "0000000000000000"' in data["divergence"]["diff"]


def test_diff_of_traces_of_different_length(tmp_path: Path, runner: CliRunner) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    runner.invoke(main, ["run", str(SCENARIOS / "basic.yaml"), "--trace", str(a)])
    b.write_text("".join(a.read_text().splitlines(keepends=True)[:-1]))
    result = runner.invoke(main, ["diff", str(a), str(b)])
    assert result.exit_code == 1 and f"{b}: ended" in result.output


def test_schema_prints_json_schema(runner: CliRunner) -> None:
    result = runner.invoke(main, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert "HeaderRecord" in schema["$defs"] and schema["discriminator"]["propertyName"] == "type"


def test_show_marks_a_resume_after_a_crash(runner: CliRunner) -> None:
    trace = SCENARIOS.parent.parent / "tests" / "traces" / "driver" / "crash_restore.jsonl"
    result = runner.invoke(main, ["show", str(trace)])
    assert result.exit_code == 0
    assert result.output.count("run resumed from a snapshot") == 2
    assert "state awaiting_tools, turns 1" in result.output


def test_replay_until_is_machine_level_only(trace: Path, runner: CliRunner) -> None:
    result = runner.invoke(main, ["replay", str(trace), "--driver", "--until", "3"])
    assert result.exit_code == 2 and "machine level only" in result.output


def test_replay_many_traces_for_ci(tmp_path: Path, trace: Path, runner: CliRunner) -> None:
    corpus_dir = SCENARIOS.parent.parent / "tests" / "traces" / "driver"
    ok = runner.invoke(main, ["replay", str(corpus_dir), str(trace)])
    n = len(list(corpus_dir.glob("*.jsonl"))) + 1
    assert ok.exit_code == 0 and f"{n} of {n} traces replayed without divergence" in ok.output
    records = lines(trace)
    records[2]["policy"]["max_turns"] = 0
    bad = tmp_path / "bad.jsonl"
    write_lines(bad, records)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("nope\n")
    mixed = runner.invoke(main, ["replay", str(trace), str(bad), "--json"])
    data = json.loads(mixed.output)
    assert mixed.exit_code == 1 and (data["replayed"], data["passed"]) == (2, 1)
    worst = runner.invoke(main, ["replay", str(trace), str(bad), str(broken)])
    assert worst.exit_code == 2 and f"error: {broken}:1: not valid JSON" in worst.output
    assert runner.invoke(main, ["replay", str(trace), str(bad), "--until", "3"]).exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runner.invoke(main, ["replay", str(empty)]).exit_code == 2


@pytest.mark.parametrize("scenario", ["crash_restore", "context_overflow", "tool_hang"])
def test_diff_brain_only_machine_vs_driver_trace(runner: CliRunner, scenario: str) -> None:
    traces = SCENARIOS.parent.parent / "tests" / "traces"
    a, b = traces / f"{scenario}.jsonl", traces / "driver" / f"{scenario}.jsonl"
    same = runner.invoke(main, ["diff", str(a), str(b), "--brain-only"])
    assert same.exit_code == 0, same.output
    assert runner.invoke(main, ["diff", str(a), str(b), "--ignore-io"]).exit_code == 1


def test_the_group_holds_every_command(runner: CliRunner) -> None:
    for command in COMMANDS:
        assert command.name is not None
        assert main.commands[command.name] is command
    help_text = runner.invoke(main, ["--help"]).output
    for name in ("replay", "show", "diff", "run", "schema"):
        assert name in help_text


def test_replay_digest_every_still_names_the_first_divergent_feed(
    trace: Path, tmp_path: Path, runner: CliRunner
) -> None:
    """Checkpoints compare the digest every N feeds; a mismatch is replayed feed by feed."""
    ok = runner.invoke(main, ["replay", str(trace), "--digest-every", "32", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.output)["ok"]
    records = lines(trace)
    seq = next(r["seq"] for r in records if r.get("name") == "accept_input")
    records[seq]["args"]["input"]["parts"][0]["text"] += " (edited)"  # the brain differs from here
    edited = tmp_path / "edited.jsonl"
    write_lines(edited, records)
    exact = json.loads(runner.invoke(main, ["replay", str(edited), "--json"]).output)
    fast = runner.invoke(main, ["replay", str(edited), "--digest-every", "1000", "--json"])
    assert fast.exit_code == 1
    assert json.loads(fast.output)["divergence"] == exact["divergence"]
    assert exact["divergence"]["seq"] == seq


@pytest.mark.parametrize("args", [["--digest-every", "0"], ["--driver", "--digest-every", "4"]])
def test_replay_digest_every_is_checked(trace: Path, runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(main, ["replay", str(trace), *args])
    assert result.exit_code == 2 and "Traceback" not in result.output
