"""The state diagram in docs/brain.md is generated from the brain's tables and kept current."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from loopctl.core import FEED_TYPES, FEEDS, STEP_TRANSITIONS, TRANSITIONS
from loopctl.core.machine import STATES

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "brain.md"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "brain_diagram", ROOT / "scripts" / "brain_diagram.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("brain_diagram", module)
    spec.loader.exec_module(module)
    return module


script = _load_script()


def _committed_block(text: str) -> str:
    start, stop = text.index(script.BEGIN), text.index(script.END)
    return text[start : stop + len(script.END)]


def test_committed_diagram_matches_the_tables() -> None:
    assert _committed_block(DOC.read_text(encoding="utf-8")) == script.block()
    assert script.main(["--check"]) == 0


def test_every_table_edge_is_drawn_and_nothing_else() -> None:
    drawn: set[tuple[str, str, str]] = set()
    for line in script.mermaid().splitlines():
        match = re.fullmatch(r"\s+(\w+) --> (\w+): (.+)", line)
        if match:
            source, target, labels = match.groups()
            drawn |= {(source, label, target) for label in labels.split(", ")}
    table = {(s, f.name, t) for (s, f), tr in TRANSITIONS.items() for t in tr.targets}
    table |= {(s, "next_step", t) for s, tr in STEP_TRANSITIONS.items() for t in tr.targets}
    assert drawn == table


def test_check_fails_on_a_stale_doc_and_write_fixes_it(tmp_path: Path) -> None:
    doc = tmp_path / "brain.md"
    doc.write_text(f"# Title\n\n{script.BEGIN}\nold picture\n{script.END}\n\ntail\n", "utf-8")
    assert script.main(["--check", "--doc", str(doc)]) == 1
    assert script.main(["--write", "--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert script.main(["--check", "--doc", str(doc)]) == 0
    assert text.startswith("# Title\n\n") and text.endswith("\n\ntail\n")
    assert "old picture" not in text and "stateDiagram-v2" in text


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(ValueError, match="markers not found"):
        script.replace_block("no markers here", script.block())


def test_the_docs_feed_table_names_the_valid_states() -> None:
    """The hand-written 'valid in' column agrees with TRANSITIONS."""
    rows = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `(\w+)\(.*?\)` \| ([a-z_, ]+) \|", line)
        if match and match.group(1) in FEEDS:
            rows[match.group(1)] = set(match.group(2).split(", "))
    assert set(rows) == set(FEEDS)
    for feed, states in rows.items():
        assert states == {s for s in STATES if (s, FEED_TYPES[feed]) in TRANSITIONS}, feed
