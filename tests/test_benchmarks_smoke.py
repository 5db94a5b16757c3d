"""The benchmark entry point's smoke mode: structure, asserted tool counts, positive figures.

Never timings: the figures of a smoke run are meaningless (T = 10, one repeat, a shared machine).
Passes without the peers installed (CI installs only '.[dev]'): their rows are then skipped.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import sysconfig
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


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    """``python -m benchmarks --smoke`` once, in-process: (exit status, the JSON it wrote)."""
    out = tmp_path_factory.mktemp("bench") / "results.json"
    code = bench_main.main(["--smoke", "--json", str(out)])
    return code, json.loads(out.read_text())


def _check_row(row: dict[str, Any], turns: int) -> None:
    assert row["turns"] == turns
    assert row["tool_calls"] == row["expected_tool_calls"] == turns - 1
    assert row["final_text"] == bench_driver.FINAL_TEXT
    assert row["median_us_per_turn"] > 0
    assert row["runs_us_per_turn"] and all(x > 0 for x in row["runs_us_per_turn"])
    assert row["cpu_median_us_per_turn"] >= 0


def test_entry_point_smoke(smoke: tuple[int, dict[str, Any]]) -> None:
    code, data = smoke
    assert data["smoke"] is True
    assert set(data["sections"]) == set(bench_main.SECTIONS)
    for name in ("driver", "peers", "snapshot"):
        assert data["sections"][name]["status"] == "ok", data["sections"][name]
    # other engineers' sections: absent is a clean skip, present must run
    for name in ("brain", "replay", "fuzz"):
        assert data["sections"][name]["status"] in {"ok", "skipped"}, data["sections"][name]
    assert code == 0
    assert data["machine"]["nproc"] >= 1 and data["machine"]["python"]
    assert "loopctl" in data["machine"]["versions"]
    # which interpreter build ran (its PGO and LTO move the figures): the running one's
    assert data["machine"]["python_executable"] == os.path.realpath(sys.executable)
    assert data["machine"]["python_configure"] == sysconfig.get_config_var("CONFIG_ARGS")


def test_driver_smoke_structure(smoke: tuple[int, dict[str, Any]]) -> None:
    result = smoke[1]["sections"]["driver"]["result"]
    assert result["turns"] == [10]
    assert result["repeats"] == 1
    assert result["main_variant"] in result["variants"]
    assert set(result["variants"]) == set(bench_driver.VARIANTS)
    for variant in result["variants"].values():
        assert variant["growth"] is None  # one T only
        [row] = variant["rows"]
        _check_row(row, 10)
    reference = result["machine_reference_ms"]
    assert set(reference) == {"before", "after"}
    assert all(len(v) == 3 and all(ms > 0 for ms in v) for v in reference.values())
    assert [r["history_messages"] for r in result["history"]] == [0, 1_000]
    assert all(r["median_us_per_turn"] > 0 for r in result["history"])
    base = result["history"][0]
    assert base["growth"] == base["growth_of_medians"] == 1.0  # the first size against itself
    breakdown = result["breakdown"]
    assert breakdown["measured_us_per_turn"] > 0
    assert 0 < breakdown["measured_best_us_per_turn"] <= breakdown["measured_us_per_turn"]
    pieces = breakdown["pieces_us"]
    assert set(breakdown["in_the_turn"]) <= set(pieces)
    assert all(isinstance(pieces[k], float) for k in breakdown["in_the_turn"])
    assert {"observers", "validation", "dispatch, inline tool", "dispatch, thread tool"} <= set(
        pieces
    )
    assert isinstance(breakdown["rest_us"], float)


def test_snapshot_smoke_structure(smoke: tuple[int, dict[str, Any]]) -> None:
    result = smoke[1]["sections"]["snapshot"]["result"]
    rows = result["rows"]
    assert [r["messages"] for r in rows] == [10, 1_000]
    for r in rows:
        assert r["bytes"] > 0 and r["restore_ms"] > 0
        assert r["save_cold_ms"] > 0 and r["save_warm_ms"] > 0
        assert r["digest_cold_ms"] > 0 and r["digest_warm_ms"] > 0
    shapes = result["save_restore"]
    assert [r["shape"] for r in shapes] == ["between runs", "mid-run"]
    for r in shapes:
        assert r["messages"] == 1_000 and r["history"] + r["pending"] >= 999
        assert r["first_total_ms"] > 0 and r["total_ms"] > 0 and len(r["first_runs_total_ms"]) == 1
    between, mid = shapes
    assert between["pending"] == 0 and mid["history"] == 0


def test_peers_smoke_structure_with_or_without_peers(smoke: tuple[int, dict[str, Any]]) -> None:
    result = smoke[1]["sections"]["peers"]["result"]
    assert result["turns"] == [10] and result["repeats"] == 1
    assert set(result["tables"]) == {"sync", "async"}
    assert bench_peers.INLINE in result["tables"]["sync"]
    assert bench_peers.INLINE not in result["tables"]["async"]
    for table in result["tables"].values():
        assert "loopctl" in table
        for name, entry in table.items():
            assert name in {"loopctl", bench_peers.INLINE} or name in bench_peers.PEERS
            [row] = entry["rows"]
            _check_row(row, 10)
    for name in bench_peers.PEERS:
        ran = all(name in t for t in result["tables"].values())
        assert ran == (name not in result["skipped"]) == bench_peers.available(name)
    goals = smoke[1]["goals"]
    assert set(result["goals"]) == set(bench_peers.GOALS)
    for name in bench_peers.GOALS:
        judged = goals[f"driver_{name}_vs_peer"]
        if any(bench_peers.available(peer) for peer in bench_peers.PEERS):
            assert result["goals"][name]["10"]["fastest_peer"] in bench_peers.PEERS
            assert "(T = 10)" in judged["target"]  # a smoke run has no T = 100
            assert judged["met"] == (judged["ratio"] <= bench_peers.GOALS[name][2])
        else:
            assert judged["met"] is None


def test_smoke_goals_are_the_ratio_goals(smoke: tuple[int, dict[str, Any]]) -> None:
    """The goals block holds exactly the ratio goals; the sections' budgets sit beside it."""
    goals = smoke[1]["goals"]
    assert set(goals) == {
        "driver_sync_vs_peer",
        "driver_inline_vs_peer",
        "driver_async_vs_peer",
        "driver_flat",
        "traced_run",
    } - (set() if smoke[1]["sections"]["fuzz"]["status"] == "ok" else {"traced_run"})
    assert all(" us" not in g["target"] for g in goals.values())
    # a smoke run reaches 1,000 messages, not 10,000: the flatness goal is not judged
    assert goals["driver_flat"]["met"] is None
    assert goals["driver_flat"]["detail"] == "measured to 1,000 messages only"
    if "traced_run" in goals:
        driver = smoke[1]["sections"]["fuzz"]["result"]["driver"]
        assert driver["traced_cost_ratio"] > 0
        assert goals["traced_run"]["met"] == (driver["traced_cost_ratio"] <= 2.0)
    assert "budgets" in smoke[1]


@pytest.mark.parametrize(
    ("numerators", "denominators", "ratio", "difference"),
    [
        ([2.0], [1.0], 2.0, 1.0),
        # a slow phase doubles both runs of the middle round: it cancels out of the pair
        ([10.0, 40.0, 11.0], [10.0, 20.0, 10.0], 1.1, 1.0),
        # the ratio of the medians (20 / 10 = 2.0) would take the slow rounds for growth
        ([10.0, 20.0, 20.0, 10.0], [10.0, 20.0, 20.0, 10.0], 1.0, 0.0),
        ([30.0, 10.0], [10.0, 10.0], 2.0, 10.0),  # an even count: the mean of the middle two
    ],
)
def test_paired_statistics_take_the_median_of_the_rounds(
    numerators: list[float], denominators: list[float], ratio: float, difference: float
) -> None:
    assert bench_driver.paired_ratio(numerators, denominators) == pytest.approx(ratio)
    assert bench_driver.paired_difference(numerators, denominators) == pytest.approx(difference)


@pytest.mark.parametrize(("a", "b"), [([], []), ([1.0], [1.0, 2.0]), ([1.0, 2.0], [1.0])])
def test_paired_statistics_need_one_run_of_each_per_round(a: list[float], b: list[float]) -> None:
    with pytest.raises(ValueError, match="paired runs"):
        bench_driver.paired_ratio(a, b)
    with pytest.raises(ValueError, match="paired runs"):
        bench_driver.paired_difference(a, b)


def test_peer_goals_pair_the_runs_by_round() -> None:
    """The ratio against the fastest peer is the median of the rounds' ratios."""

    def row(runs: list[float]) -> dict[str, Any]:
        ordered = sorted(runs)
        return {
            "turns": 100,
            "runs_us_per_turn": runs,
            "median_us_per_turn": ordered[len(ordered) // 2],
            "cpu_median_us_per_turn": ordered[len(ordered) // 2],
        }

    peer = next(iter(bench_peers.PEERS))
    table = {
        # round 2 ran in a slow phase for both (the peer's median is from a quick round)
        "loopctl": {"rows": [row([40.0, 80.0, 42.0])], "growth": None},
        peer: {"rows": [row([1_000.0, 2_000.0, 1_050.0])], "growth": None},
    }
    judged = bench_peers.goals(table, "loopctl", 1 / 20)["100"]
    assert judged["fastest_peer"] == peer
    assert judged["ratio"] == 0.04  # rounds: 0.04, 0.04, 0.04
    assert judged["ratio_of_medians"] == round(42.0 / 1_050.0, 3)
    assert judged["met"] is True


def _peer_goal(ratio: float) -> dict[str, Any]:
    return {
        "100": {
            "fastest_peer": "pydantic-ai",
            "fastest_peer_us": 1_000.0,
            "loopctl_us": ratio * 1_000.0,
            "ratio": ratio,
        },
        "loopctl_growth": None,
    }


def test_peer_goals_are_ratios_judged_at_t_100() -> None:
    """1/20 with the worker-thread sync tool, 1/40 with an async or inline one."""
    ratios = {"sync": 0.047, "inline": 0.030, "async": 0.024}
    peers: dict[str, Any] = {
        "status": "ok",
        "result": {"goals": {k: _peer_goal(v) for k, v in ratios.items()}},
    }
    judged = bench_main.evaluate_goals({"peers": peers})
    assert judged["driver_sync_vs_peer"]["met"] is True  # 0.047 <= 1/20
    assert judged["driver_inline_vs_peer"]["met"] is False  # 0.030 > 1/40
    assert judged["driver_async_vs_peer"]["met"] is True  # 0.024 <= 1/40
    assert "1/20 (T = 100)" in judged["driver_sync_vs_peer"]["target"]
    assert "1/40 (T = 100)" in judged["driver_async_vs_peer"]["target"]
    assert judged["driver_sync_vs_peer"]["detail"].startswith("0.047 of pydantic-ai")


def test_flatness_and_tracing_are_paired_ratios() -> None:
    history = [
        {"history_messages": 0, "growth": 1.0},
        {"history_messages": 10_000, "growth": 1.12},
    ]
    driver: dict[str, Any] = {"status": "ok", "result": {"history": history}}
    fuzz: dict[str, Any] = {"status": "ok", "result": {"driver": {"traced_cost_ratio": 1.9}}}
    judged = bench_main.evaluate_goals({"driver": driver, "fuzz": fuzz})
    assert judged["driver_flat"]["met"] is False  # 1.12 > 1.1
    assert judged["driver_flat"]["detail"] == "1.12x"
    assert judged["traced_run"]["met"] is True  # 1.9 <= 2
    fuzz["result"]["driver"]["traced_cost_ratio"] = 6.5
    assert bench_main.evaluate_goals({"fuzz": fuzz})["traced_run"]["met"] is False


def test_measure_asserts_the_tool_count() -> None:
    """A subject that skips the tool fails the benchmark instead of reporting a figure."""

    def lazy(turns: int, counter: Any) -> Any:
        async def go() -> str:
            return str(bench_driver.FINAL_TEXT)  # never runs the tool

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


def test_entry_point_rejects_unknown_sections() -> None:
    with pytest.raises(SystemExit):
        bench_main.main(["--smoke", "--only", "nonsense"])


def test_bench_driver_refuses_fewer_than_one_repeat() -> None:
    with pytest.raises(SystemExit) as exc:
        bench_driver.main(["--repeats", "0"])
    assert exc.value.code == 2


def test_bench_driver_reports_the_repeats_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--repeats N`` reaches every table (smoke mode keeps its one repeat)."""
    seen: list[int] = []
    monkeypatch.setattr(bench_driver, "table", lambda p, t, r: seen.append(r) or {})
    monkeypatch.setattr(bench_driver, "history_growth", lambda t, s, r: seen.append(r) or [])
    bench_turn = importlib.import_module("benchmarks.bench_turn")
    monkeypatch.setattr(bench_turn, "run", lambda smoke: {})
    assert bench_driver.run(False, 7)["repeats"] == 7
    assert bench_driver.run(True, 7)["repeats"] == 1
    assert seen == [7, 7, 1, 1]
