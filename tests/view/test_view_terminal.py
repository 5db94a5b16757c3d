"""``show``, ``diff`` and ``replay`` as a person reads them: at 80 and 120 columns with colour
off, no line wider than the terminal, no escape codes; colour only when forced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from view_helpers import ANSI, DRIVER, TRACES, invoke, lines, write_lines

WIDTHS = [80, 120]


def _check_layout(output: str, width: int) -> list[str]:
    out = output.splitlines()
    assert not ANSI.search(output), "colour is off: no escape codes"
    too_wide = [line for line in out if len(line) > width]
    assert not too_wide, too_wide
    return out


def _edited(tmp_path: Path) -> Path:
    """basic's driver trace with the tool's result changed: the brain's digest differs there."""
    records = lines(DRIVER / "basic.jsonl")
    feed = next(r for r in records if r.get("name") == "tool_results")
    feed["args"]["message"]["parts"][0]["content"] = "6"
    return write_lines(tmp_path / "edited.jsonl", records)


@pytest.mark.parametrize("width", WIDTHS)
def test_show_wraps_to_the_width_with_a_hanging_indent(width: int) -> None:
    result = invoke(["show", "--full", str(DRIVER / "tool_exception.jsonl")], width)
    assert result.exit_code == 0, result.output
    out = _check_layout(result.output, width)
    assert out[0].startswith("    0  run started (")
    # a wrapped line continues under the text column, never under the seq column
    continued = [line for line in out if not line[:5].strip()]
    assert all(line.startswith(" " * 7) for line in continued)
    text = " ".join(" ".join(line.split()) for line in out)
    assert "result ERROR add [call_1_1]: tool 'add' raised RuntimeError: disk full" in text


def test_show_unwrapped_when_piped_without_columns() -> None:
    result = invoke(["show", str(DRIVER / "max_turns.jsonl")])
    out = result.output.splitlines()
    assert any(len(line) > 120 for line in out)  # the header's metadata on one line
    assert "         result ERROR broken [call_1_2]: tool 'broken' raised RuntimeError" in out[6]


@pytest.mark.parametrize("width", WIDTHS)
def test_show_full_keeps_whole_texts(tmp_path: Path, width: int) -> None:
    records = lines(TRACES / "basic.jsonl")
    long_text = "word " * 60 + "END"
    records[1]["args"]["input"]["parts"][0]["text"] = long_text
    path = write_lines(tmp_path / "long.jsonl", records)
    cut = invoke(["show", str(path)], width).output
    assert "END" not in cut and "..." in cut
    whole = invoke(["show", "--full", str(path)], width)
    _check_layout(whole.output, width)
    assert " ".join(whole.output.split()).count("word") == 60 and "END" in whole.output


@pytest.mark.parametrize(
    ("args", "seqs"),
    [
        (["--turn", "2"], [12, 15, 16, 19, 20, 21]),
        (["--turn", "3-3"], [22, 25, 26, 27, 28]),
        (["--kind", "crash,resume"], [6, 7, 20, 21]),
        (["--kind", "tool_call"], [9, 17]),
        (["--kind", "io", "--turn", "1"], [3, 4, 6, 9, 10]),
        (["--kind", "run"], [0, 6, 7, 20, 21, 28]),
    ],
)
def test_show_filters_by_turn_and_kind(args: list[str], seqs: list[int]) -> None:
    result = invoke(["show", *args, str(DRIVER / "crash_restore.jsonl")], 120)
    assert result.exit_code == 0, result.output
    shown = [int(line[:5]) for line in result.output.splitlines() if line[:5].strip()]
    assert shown == seqs


def test_show_rejects_a_bad_turn_range() -> None:
    result = invoke(["show", "--turn", "4-2", str(DRIVER / "basic.jsonl")])
    assert result.exit_code == 2 and "--turn: expected N or A-B" in result.output


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_counts_differences_and_shows_both_outcomes(width: int) -> None:
    a, b = DRIVER / "basic.jsonl", DRIVER / "max_turns.jsonl"
    result = invoke(["diff", str(a), str(b)], width)
    assert result.exit_code == 1
    out = _check_layout(result.output, width)
    assert out[0] == "traces diverge at" and out[1] == f"  {a}:1 (seq 0)"
    assert "differing fields (2):" in out
    data = json.loads(invoke(["diff", str(a), str(b), "--json"]).output)
    counted = next(line for line in out if "compared records differ" in line)
    assert counted.startswith(f"{data['differing']} of {data['compared']} compared records")
    assert data["differing"] > 1 and data["outcomes"]["b"] == [{"kind": "max_turns_exceeded"}]
    joined = " ".join(result.output.split())
    assert 'completed: "2 + 3 + 10 = 15."' in joined and "max_turns_exceeded" in joined


@pytest.mark.parametrize("width", WIDTHS)
def test_diff_of_the_same_records(width: int) -> None:
    a = TRACES / "crash_restore.jsonl"
    result = invoke(["diff", "--brain-only", str(a), str(DRIVER / "crash_restore.jsonl")], width)
    assert result.exit_code == 0
    out = _check_layout(result.output, width)
    assert out[0].startswith("same:") and "outcomes:" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_replay_divergence_shows_fields_and_the_policy(tmp_path: Path, width: int) -> None:
    result = invoke(["replay", str(_edited(tmp_path))], width)
    assert result.exit_code == 1
    out = _check_layout(result.output, width)
    text = " ".join(result.output.split())
    assert out[0].startswith("divergence at seq 9") and text.startswith("divergence at seq 9 (")
    assert "policy in force: max_turns=10, context_window=128000," in text
    assert "differing fields (1):" in text and "digest e8461b5bac4c4da2" in text
    assert "feeds before it: seq 1 (line 2): accept_input" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_replay_step_divergence_lists_the_step_fields(tmp_path: Path, width: int) -> None:
    records = lines(TRACES / "basic.jsonl")
    step = next(r for r in records if r["type"] == "step")
    step["policy"]["max_turns"] = 0  # the brain now answers done instead of call_llm
    result = invoke(["replay", str(write_lines(tmp_path / "e.jsonl", records))], width)
    out = _check_layout(result.output, width)
    rows = {
        line.split()[0]: line.split()[1:] for line in out if line.startswith(("kind ", "turn "))
    }
    assert rows["kind"] == ["call_llm", "done"]
    assert rows["turn"] == ["1", "(absent)"]
    assert "policy in force: max_turns=0," in " ".join(result.output.split())


def test_colour_only_when_the_terminal_has_it(tmp_path: Path) -> None:
    path = str(DRIVER / "tool_exception.jsonl")
    assert not ANSI.search(invoke(["show", path], 80).output)
    coloured = invoke(["show", path], 80, colour=True).output
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == invoke(["show", path], 80).output
    assert ANSI.search(invoke(["replay", str(_edited(tmp_path))], 80, colour=True).output)
