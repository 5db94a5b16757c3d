"""Trace strings never drive the terminal: a crafted trace (every free-text field, and its file
name, carrying a window-title change, clear-screen, an OSC-8 link, a C1 CSI and right-to-left
overrides) printed by ``show``, ``diff``, ``replay`` (its divergence reports, notes and JSON) and
``html`` shows each control character as its escape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import CONTROL, TERMINAL_PAYLOAD, hostile_trace
from hypothesis import given, settings
from hypothesis import strategies as st
from view_helpers import DRIVER, ROOT, invoke, lines, write_lines

from loopctl.terminal import visible
from loopctl_sim.view.term import visible_json

REFUND = ROOT / "examples" / "support_agent" / "traces" / "refund.jsonl"
SHOWN = "\\x1b]0;pwned-title\\x07\\x1b[2J"  # the payload's start, as it prints
NAMED = TERMINAL_PAYLOAD.replace("/", "_")  # in a file name


def _raw(output: str) -> list[str]:
    return sorted({repr(c) for c in output if c in CONTROL})


@pytest.fixture(scope="module")
def crafted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("crafted")
    trace, carried = hostile_trace(
        DRIVER / "tool_exception.jsonl", folder / "x.jsonl", TERMINAL_PAYLOAD, frozenset({"kind"})
    )
    assert carried > 50
    named = folder / f"bug{NAMED}.jsonl"
    trace.rename(named)
    return named


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--full"],
        ["--kind", "header,step,feed,io,end"],  # every record, the echoing io ones too
        ["--full", "--kind", "io"],
    ],
)
@pytest.mark.parametrize("columns", [None, 80])
def test_show_prints_control_characters_as_escapes(
    crafted: Path, args: list[str], columns: int | None
) -> None:
    result = invoke(["show", *args, str(crafted)], columns)
    assert result.exit_code == 0, result.output
    assert _raw(result.output) == []
    assert SHOWN in result.output.replace("\n", "").replace(" ", "")
    assert "\\u202egnp.exe\\u2066x\\u2069" in result.output.replace("\n", "").replace(" ", "")


def test_diff_prints_control_characters_as_escapes(crafted: Path) -> None:
    result = invoke(["diff", str(DRIVER / "tool_exception.jsonl"), str(crafted)], 100)
    assert result.exit_code == 1
    assert _raw(result.output) == [] and SHOWN in result.output.replace("\n", "")
    as_json = invoke(["diff", "--json", str(DRIVER / "tool_exception.jsonl"), str(crafted)])
    assert _raw(as_json.output) == []
    data = json.loads(as_json.output)  # still the same JSON, its strings whole
    assert data["divergence"]["b"]["path"] == str(crafted)


def test_replay_reports_print_control_characters_as_escapes(crafted: Path) -> None:
    result = invoke(["replay", str(crafted)], 100)
    assert result.exit_code == 1 and "divergence at seq" in result.output
    assert _raw(result.output) == [] and SHOWN in result.output.replace("\n", "")
    as_json = invoke(["replay", "--json", str(crafted)])
    assert _raw(as_json.output) == [] and json.loads(as_json.output)["path"] == str(crafted)
    driver = invoke(["replay", "--driver", str(crafted)], 100)
    assert _raw(driver.output) == [] and driver.exit_code in (1, 2)


def test_a_tool_result_in_the_agents_divergence_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = lines(REFUND)
    feed = next(r for r in records if r.get("name") == "tool_results")
    feed["args"]["message"]["parts"][0]["content"] = "ok " + TERMINAL_PAYLOAD
    edited = write_lines(tmp_path / f"t{NAMED}.jsonl", records)
    monkeypatch.chdir(ROOT)
    agent = "examples.support_agent.agent:build"
    result = invoke(["replay", str(edited), "--agent", agent], 100)
    assert result.exit_code == 1 and "tool `lookup_order` returned" in result.output
    assert _raw(result.output) == [] and SHOWN in result.output.replace("\n", "")


def test_html_and_errors_name_a_crafted_file_with_escapes(crafted: Path, tmp_path: Path) -> None:
    out = tmp_path / f"page{NAMED}.html"
    result = invoke(["html", str(crafted), "-o", str(out)])
    assert result.exit_code == 0 and out.exists()
    assert _raw(result.output) == [] and "wrote " in result.output
    bad = tmp_path / f"bad{NAMED}.jsonl"
    bad.write_text("{not json\n")
    for args in (["show", str(bad)], ["replay", str(bad)], ["html", str(bad)]):
        failed = invoke(args)
        assert failed.exit_code == 2 and _raw(failed.output) == [], args


def test_visible_keeps_text_and_escapes_only_controls() -> None:
    assert visible("naïve 中文 🙂 tab\there\nnext") == "naïve 中文 🙂 tab\there\nnext"
    assert visible("a\x1b[31mb\rc\u202ed\x9b") == "a\\x1b[31mb\\rc\\u202ed\\x9b"
    text = json.dumps({"k": "x\x1b\u202e\x9b"}, ensure_ascii=False)
    assert json.loads(visible_json(text)) == {"k": "x\x1b\u202e\x9b"}
    assert _raw(visible_json(text)) == []


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.text())
def test_visible_leaves_no_control_character_and_keeps_the_rest(text: str) -> None:
    shown = visible(text)
    assert _raw(shown) == []
    if not _raw(text):
        assert shown == text
    payload = json.dumps({"k": text}, ensure_ascii=False)
    assert json.loads(visible_json(payload)) == {"k": text}
