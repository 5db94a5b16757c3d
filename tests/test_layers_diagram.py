"""The package diagrams in docs/architecture.md are drawn from the code's imports and current."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import grimp

ROOT = Path(__file__).resolve().parent.parent


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "layers_diagram", ROOT / "scripts" / "layers_diagram.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("layers_diagram", module)
    spec.loader.exec_module(module)
    return module


script = _load_script()
GRAPH = grimp.build_graph("loopctl", "loopctl_sim")


def test_the_committed_diagrams_are_current() -> None:
    assert script.main(["--check"]) == 0


def test_every_arrow_points_down_the_layers() -> None:
    """The boxes are listed top layer first: no arrow may point to a box above its source."""
    for boxes in script.DIAGRAMS.values():
        for importer, imported in script.arrows(GRAPH, boxes):
            assert boxes.index(importer) < boxes.index(imported), (importer, imported)


def test_every_subpackage_has_a_box() -> None:
    for root in ("loopctl", "loopctl_sim"):
        found = {
            m
            for m in GRAPH.find_children(root)
            if (ROOT / m.replace(".", "/")).is_dir() or m in script.DIAGRAMS[root]
        }
        assert found <= set(script.DIAGRAMS[root]), found - set(script.DIAGRAMS[root])


def test_a_stale_block_is_found(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    stale = doc.replace("loopctl_sim_sim --> loopctl_sim_trace", "loopctl_sim_trace --> x")
    assert script.render(stale, GRAPH) == doc
