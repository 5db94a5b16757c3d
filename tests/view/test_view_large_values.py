"""Divergences in large values read in a few lines: a 10 KB tool result that changed in one
character names the path and the character (``content[8123:]``) and shows an excerpt of each side
around it, and a compactor that keeps other messages says how many and which one differs first.
Driven through ``loopctl-sim replay --agent`` and ``diff`` as a user runs them, against an agent
whose trace is recorded through the real driver (``view_big_agent``)."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from view_big_agent import CHANGED_AT, LONG_PROMPT, build_long_prompt, record, report_text
from view_helpers import invoke, lines, write_lines

from loopctl_sim.replay import replay_agent
from loopctl_sim.replay.explain import SNIPPET, SPAN, excerpt_pair, snippets
from loopctl_sim.view.fields import leaf_diff

PATH = f"message.parts[0].content[{CHANGED_AT}:]"
#: What a report of one changed character may take, at most (the result alone is 10,000).
BOUND = 3000


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("big") / "report.jsonl")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_unchanged_agent_replays(trace: Path) -> None:
    result = invoke(["replay", str(trace), "--agent", "view_big_agent:build"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("columns", [None, 250])
def test_one_character_of_a_10kb_result_reads_in_a_few_lines(
    trace: Path, columns: int | None
) -> None:
    result = invoke(["replay", str(trace), "--agent", "view_big_agent:build_one_char"], columns)
    assert result.exit_code == 1
    out = result.output
    assert len(out) < BOUND, len(out)
    assert out.count("region=north") < 12  # excerpts, not the 400-row result
    flat = _flat(out)
    assert "tool `fetch_report` returned `" in flat and f"from character {CHANGED_AT}" in flat
    # both sides shown, each around the difference: the trace's 0246 against the agent's 0X46
    assert "row 0246: units=722" in flat and "row 0X46: units=722" in flat
    if columns is not None:  # a wide terminal: each cell of the field table on one line
        row = next(line for line in out.splitlines() if line.startswith("message."))
        path, expected, actual = re.split(r"\s{3,}", row.strip())
        assert path == PATH and "row 0246: units=722" in expected and "row 0X46" in actual
    assert "--json holds it whole" in flat
    whole = json.loads(
        invoke(["replay", "--json", str(trace), "--agent", "view_big_agent:build_one_char"]).output
    )
    assert len(whole["divergence"]["diff"]) > 20_000  # JSON keeps everything


def test_the_python_report_is_bounded_too(trace: Path) -> None:
    report = replay_agent(trace, "view_big_agent:build_one_char")
    assert report.divergence is not None
    text = report.divergence.report(str(trace))
    assert len(text) < BOUND and PATH in text
    assert len(report.summary()) < BOUND


def test_a_compactor_that_keeps_one_message_fewer(trace: Path) -> None:
    result = invoke(["replay", str(trace), "--agent", "view_big_agent:build_no_note"])
    assert result.exit_code == 1
    out = result.output.splitlines()
    assert out[0].endswith("turn 2: the compactor kept 3 messages, the trace's 4")
    assert out[1:5] == [
        "  first differing message: compacted[1]",
        '    agent: assistant: call fetch_report({"region": "south"}) [c1]',
        "    trace: user: [2 messages cut]",
        "  context after: 2531 -> 2523 tokens",
    ]
    assert "with other arguments" not in result.output and len(result.output) < 2 * BOUND


def test_a_compactor_that_words_its_note_otherwise(trace: Path) -> None:
    result = invoke(["replay", str(trace), "--agent", "view_big_agent:build_other_note"])
    assert result.exit_code == 1
    out = result.output.splitlines()
    assert out[0].endswith("turn 2: the compacted history differs in message 1 of 4")
    assert out[2:4] == [
        "    agent: user: [2 messages dropped]",
        "    trace: user: [2 messages cut]",
    ]
    assert "with other arguments" not in result.output


def test_diff_of_two_traces_that_differ_in_one_character(trace: Path, tmp_path: Path) -> None:
    records = lines(trace)
    feed = next(r for r in records if r.get("name") == "tool_results")
    feed["args"]["message"]["parts"][0]["content"] = report_text(CHANGED_AT)
    other = write_lines(tmp_path / "other.jsonl", records)
    result = invoke(["diff", str(trace), str(other)], 250)
    assert result.exit_code == 1
    assert len(result.output) < BOUND
    row = next(line for line in result.output.splitlines() if line.startswith("args."))
    path, a, b = re.split(r"\s{3,}", row.strip())
    assert path == f"args.{PATH}" and "row 0246: units=722" in a and "row 0X46: units=722" in b


def test_the_page_shows_the_path_and_both_excerpts(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    result = invoke(
        ["replay", str(trace), "--agent", "view_big_agent:build_one_char", "--html", str(out)]
    )
    assert result.exit_code == 1 and out.exists()
    block = re.search(r'id="data-index">([^<]*)</script>', out.read_text())
    assert block is not None
    index = json.loads(gzip.decompress(base64.b64decode(block.group(1))))
    [field] = index["divergence"]["fields"]
    assert field["where"] == PATH
    assert "0246" in field["expected_excerpt"] and "0X46" in field["actual_excerpt"]
    assert len(field["expected_excerpt"]) < 200 and len(field["actual_excerpt"]) < 200


def test_excerpts_are_bounded_however_long_the_difference() -> None:
    a, b = "same start " + "a" * 50_000, "same start " + "b" * 70_000
    was, now = snippets(a, b)
    assert len(was) < 150 and len(now) < 150
    assert was.startswith("same start aaa") and now.startswith("same start bbb")
    short = excerpt_pair("x\ny", "x\nz")
    assert short == ("x\\ny", "x\\nz")  # one line each
    [diff] = leaf_diff({"c": "k" * 100 + "1"}, {"c": "k" * 100 + "2"})
    assert diff.where == "c[100:]" and all(len(s) < 100 for s in diff.excerpts())
    assert leaf_diff({"c": "cut"}, {"c": "dropped"})[0].where == "c"  # short: whole, no offset


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.text(), st.text(), st.text())
def test_snippets_stay_bounded_and_start_at_the_difference(same: str, a: str, b: str) -> None:
    was, now = snippets(same + a, same + b)
    bound = 2 * SNIPPET + SPAN + 6
    if same + a != same + b:
        assert len(was) <= bound and len(now) <= bound


def test_a_word_changed_in_a_long_one_line_prompt(tmp_path: Path) -> None:
    trace = record(tmp_path / "prompt.jsonl", build_long_prompt)
    unchanged = invoke(["replay", str(trace), "--agent", "view_big_agent:build_long_prompt"])
    assert unchanged.exit_code == 0, unchanged.output
    result = invoke(["replay", str(trace), "--agent", "view_big_agent:build_long_prompt_changed"])
    assert result.exit_code == 1 and len(result.output) < BOUND
    out = result.output.splitlines()
    at = LONG_PROMPT.index("precise", len(LONG_PROMPT) - 40)
    assert out[0].endswith("turn 1: the request's system prompt differs")
    assert out[1] == f"  (from character {at}; the trace's is 6224 characters, the agent's 6224)"
    assert out[2].startswith("  -...") and "be precise about units" in out[2]
    assert out[3].startswith("  +...") and "be careful about units" in out[3]
