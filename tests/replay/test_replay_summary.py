"""A feed record's brain summary (and a continuing header's) is checked by replay, not only
shown: a summary altered in a shipped trace, in any field, is a divergence named ``summary`` at
its line that names the field, at machine level (every feed, and with ``--digest-every``) and at
driver level; a flipped byte that breaks the line instead is a ``TraceFormatError`` naming file
and line. Nothing is left unnoticed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopctl_sim import replay_driver, replay_trace
from loopctl_sim.cli import main as sim_main
from loopctl_sim.trace import BrainSummary, TraceFormatError

SHIPPED = Path(__file__).resolve().parents[2] / "examples" / "support_agent" / "traces"
TRACES = ["refund.jsonl", "session.jsonl"]
FIELDS = list(BrainSummary.__struct_fields__)


def other(field: str, value: Any) -> Any:
    """A value the field's type allows that differs: what a flipped digit or letter gives."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + ("x" if value[-1:] != "x" else "y")
    return 1 if field == "turn" else "lookup_order#0123456789abcdef"  # null: a value instead


def shown(value: Any) -> str:
    """A field's value as a divergence quotes it."""
    return value if isinstance(value, str) else json.dumps(value)


def summaries(lines: list[str]) -> list[tuple[int, str]]:
    """(index, record type) of every line holding a brain summary."""
    out = []
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("brain") is not None:
            out.append((i, record["type"]))
    return out


def altered(lines: list[str], index: int, field: str) -> tuple[list[str], Any, Any]:
    """The trace's lines with one summary field of line ``index`` changed in place (the line's
    other bytes as they are)."""
    line = lines[index]
    brain_text = re.search(r'"brain":(\{[^}]*\})', line)
    assert brain_text is not None
    brain = json.loads(brain_text.group(1))
    before = brain[field]
    brain[field] = other(field, before)
    new_brain = json.dumps(brain, separators=(",", ":"))
    new_line = line[: brain_text.start(1)] + new_brain + line[brain_text.end(1) :]
    return [*lines[:index], new_line, *lines[index + 1 :]], before, brain[field]


def cases() -> list[tuple[str, int, str]]:
    out = []
    for name in TRACES:
        lines = (SHIPPED / name).read_text().splitlines()
        for index, _ in summaries(lines):
            out += [(name, index, field) for field in FIELDS]
    return out


CASES = cases()


def test_the_shipped_traces_hold_summaries_in_feeds_and_continuing_headers() -> None:
    kinds = {
        kind for name in TRACES for _, kind in summaries((SHIPPED / name).read_text().splitlines())
    }
    assert kinds == {"feed", "header"}
    assert len(CASES) > 100


@pytest.mark.parametrize(
    ("trace", "index", "field"), CASES, ids=[f"{t}:{i + 1}:{f}" for t, i, f in CASES]
)
def test_an_altered_summary_field_is_a_named_divergence(
    tmp_path: Path, trace: str, index: int, field: str
) -> None:
    lines, before, after = altered((SHIPPED / trace).read_text().splitlines(), index, field)
    path = tmp_path / trace
    path.write_text("\n".join(lines) + "\n")
    for result in (replay_trace(path), replay_trace(path, digest_every=32), replay_driver(path)):
        found = result.divergence
        assert found is not None, f"{field} {before!r} -> {after!r} went unnoticed"
        assert (found.what, found.line, found.seq) == ("summary", index + 1, index)
        assert f"{field} {shown(after)} -> {shown(before)}" in found.message
        assert "the digest matches, so the record's summary was altered" in found.message
        assert found.expected["brain"][field] == after and found.actual["brain"][field] == before


def test_every_byte_flip_inside_a_summary_is_caught(tmp_path: Path) -> None:
    """Each byte of the summaries of the first run's feeds, with its low bit flipped: replay
    reports a summary divergence, or refuses the line as malformed with file and line."""
    lines = (SHIPPED / "refund.jsonl").read_bytes().split(b"\n")
    path = tmp_path / "flipped.jsonl"
    outcomes: dict[str, int] = {}
    for index, line in enumerate(lines):
        found = re.search(rb'"brain":\{([^}]*)\}', line)
        if found is None:
            continue
        for at in range(found.start(1), found.end(1)):
            flipped = bytearray(line)
            flipped[at] ^= 1
            path.write_bytes(b"\n".join([*lines[:index], bytes(flipped), *lines[index + 1 :]]))
            try:
                result = replay_trace(path)
            except TraceFormatError as error:
                assert (error.path, error.line) == (str(path), index + 1)
                outcomes["malformed"] = outcomes.get("malformed", 0) + 1
                continue
            assert result.divergence is not None, (index + 1, bytes(flipped[found.start(1) :]))
            assert (result.divergence.what, result.divergence.line) == ("summary", index + 1)
            outcomes["summary"] = outcomes.get("summary", 0) + 1
    assert outcomes["summary"] > 50 and outcomes["malformed"] > 50  # both ways were exercised


def test_the_cli_reports_it_and_exits_1(tmp_path: Path) -> None:
    lines = (SHIPPED / "refund.jsonl").read_text().splitlines()
    index = next(i for i, kind in summaries(lines) if kind == "feed" and '"turns":1' in lines[i])
    changed, _, _ = altered(lines, index, "turns")
    path = tmp_path / "refund.jsonl"
    path.write_text("\n".join(changed) + "\n")
    for extra in ([], ["--driver"], ["--agent", "examples.support_agent.agent:build"]):
        result = CliRunner().invoke(sim_main, ["replay", str(path), *extra])
        assert result.exit_code == 1, result.output
        assert f"divergence at seq {index} ({path}:{index + 1})" in result.output
        assert "what differs: summary" in result.output and "turns 2 -> 1" in result.output


def test_the_shipped_traces_replay_unchanged() -> None:
    for name in TRACES:
        for result in (replay_trace(SHIPPED / name), replay_driver(SHIPPED / name)):
            assert result.ok and result.complete, result.divergence
