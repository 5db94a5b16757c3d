"""The benchmark entry point's smoke mode: structure, asserted tool counts, positive figures.

Never timings: the figures of a smoke run are meaningless (T = 10, one repeat, a shared machine).
Passes without the peers installed (CI installs only '.[dev]'): their rows are then skipped.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

# ``benchmarks`` is not part of the installed package: import it from the checkout.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

bench_driver = importlib.import_module("benchmarks.bench_driver")
bench_peers = importlib.import_module("benchmarks.bench_peers")
bench_main = importlib.import_module("benchmarks.__main__")


def _check_row(row: dict[str, Any], turns: int) -> None:
    assert row["turns"] == turns
    assert row["tool_calls"] == row["expected_tool_calls"] == turns - 1
    assert row["final_text"] == bench_driver.FINAL_TEXT
    assert row["median_us_per_turn"] > 0
    assert row["runs_us_per_turn"] and all(x > 0 for x in row["runs_us_per_turn"])
    assert row["cpu_median_us_per_turn"] >= 0


def test_driver_smoke_structure() -> None:
    result = bench_driver.run(smoke=True)
    assert result["turns"] == [10]
    assert result["repeats"] == 1
    assert result["main_variant"] in result["variants"]
    for variant in result["variants"].values():
        assert variant["growth"] is None  # one T only
        [row] = variant["rows"]
        _check_row(row, 10)
    assert [r["history_messages"] for r in result["history"]] == [0, 1_000]
    assert all(r["median_us_per_turn"] > 0 for r in result["history"])
    variants = [r["variant"] for r in result["ablations"]["rows"]]
    assert variants == list(bench_driver.ABLATIONS)
    assert result["breakdown"]["per_turn_us"]
    assert all(isinstance(v, float) for v in result["breakdown"]["per_turn_us"].values())
    assert set(result["breakdown"]["per_turn_us_by_history_size"]) == {"10", "1000"}
    sizes = [r["messages"] for r in result["snapshot"]]
    assert sizes == [10, 1_000]
    for r in result["snapshot"]:
        assert r["bytes"] > 0 and r["save_ms"] > 0 and r["restore_ms"] > 0 and r["digest_ms"] > 0


def test_measure_asserts_the_tool_count() -> None:
    """A subject that skips the tool fails the benchmark instead of reporting a figure."""

    def lazy(turns: int, counter: Any) -> Any:
        async def go() -> str:
            return bench_driver.FINAL_TEXT  # never runs the tool

        return go

    with pytest.raises(AssertionError, match="tool ran 0 times"):
        bench_driver.measure(lazy, 10, 1)


def test_measure_asserts_the_final_text() -> None:
    def wrong(turns: int, counter: Any) -> Any:
        async def go() -> str:
            counter.n = turns - 1
            return "something else"

        return go

    with pytest.raises(AssertionError, match="final text"):
        bench_driver.measure(wrong, 10, 1)


def test_peers_smoke_structure_with_or_without_peers() -> None:
    result = bench_peers.run(smoke=True)
    assert result["turns"] == [10] and result["repeats"] == 1
    assert set(result["tables"]) == {"sync", "async"}
    for table in result["tables"].values():
        assert "loopctl" in table
        for name, entry in table.items():
            assert name == "loopctl" or name in bench_peers.PEERS
            [row] = entry["rows"]
            _check_row(row, 10)
    for name in bench_peers.PEERS:
        ran = all(name in t for t in result["tables"].values())
        assert ran == (name not in result["skipped"]) == bench_peers.available(name)
    assert "loopctl" in result["versions"]


def test_entry_point_smoke(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    code = bench_main.main(["--smoke", "--only", "driver", "snapshot", "brain", "--json", str(out)])
    data = json.loads(out.read_text())
    assert data["smoke"] is True
    assert set(data["sections"]) == {"driver", "snapshot", "brain"}
    for name in ("driver", "snapshot"):
        assert data["sections"][name]["status"] == "ok", data["sections"][name]
    # brain is another engineer's module: absent is a clean skip, present must run
    assert data["sections"]["brain"]["status"] in {"ok", "skipped"}, data["sections"]["brain"]
    assert code == 0
    assert data["machine"]["nproc"] >= 1 and data["machine"]["python"]
    assert "flat_driver" in data["goals"]


def test_entry_point_rejects_unknown_sections() -> None:
    with pytest.raises(SystemExit):
        bench_main.main(["--smoke", "--only", "nonsense"])
