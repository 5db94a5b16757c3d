"""Campaigns on a Dask cluster (issue 20): a real ``LocalCluster`` of two worker processes on this
machine (one for the module) gives the same summary, the same failing seeds and the same files
as one process (the built-in world and an agent's campaign); a worker killed mid-campaign loses no
seed and counts none twice; an agent that does not import on the workers, an unreachable
scheduler and a missing ``distributed`` are each one clear error.

The planted bug is a user check (``--check``) that fails seed 13: a check is imported by module
name where the seeds run, so unlike a monkeypatch it reaches the worker processes.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner
from shop_project import AGENT, EXAMPLE, make_project

from loopctl_sim import fuzz as fz
from loopctl_sim.cli import main
from loopctl_sim.fuzz.agent_case import agent_profile
from loopctl_sim.fuzz.cluster import ClusterError, ClusterSpec, DaskCluster, parse_cluster
from loopctl_sim.fuzz.executors import WorkerSetupError
from loopctl_sim.fuzz.state import CampaignState

SEEDS = range(24)
PLANTED = 13
CHECK = "cluster_plant:planted"
PLANT = f'''
def planted(result, trace):
    """The planted bug: seed {PLANTED} fails, wherever it runs."""
    assert trace[0].metadata.get("fuzz_seed") != {PLANTED}, "planted bug: seed {PLANTED}"
'''


@pytest.fixture(scope="module")
def plant_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plant")
    (folder / "cluster_plant.py").write_text(PLANT)
    return folder


@pytest.fixture(scope="module")
def config(plant_dir: Path) -> fz.FuzzConfig:
    return fz.FuzzConfig(checks=(CHECK,), cwd=str(plant_dir), max_shrink_tests=60)


@pytest.fixture(scope="module")
def one_process(
    config: fz.FuzzConfig, tmp_path_factory: pytest.TempPathFactory
) -> tuple[fz.CampaignSummary, Path]:
    """The reference: the seeds in this process (``--workers 1``), failures written to ``out``."""
    out = tmp_path_factory.mktemp("one")
    return fz.run_campaign(SEEDS, config, out=str(out)), out


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskCluster]:
    """A LocalCluster of two worker processes for the whole module, stopped at its end."""
    with DaskCluster(ClusterSpec(None, 2)) as started:
        yield started


def counts(s: fz.CampaignSummary) -> tuple[object, ...]:
    return (s.seeds, s.runs, s.steps, s.faults, s.scheduled, s.enabled, s.outcomes, s.notes)


def failing(s: fz.CampaignSummary) -> list[tuple[int, str]]:
    return [(r.seed, str(r.failure)) for r in s.failures]


def seen_by(seen: Counter[int]) -> Callable[[fz.CaseResult], None]:
    return lambda r: seen.update([r.seed])


def texts(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_the_cluster_has_two_worker_processes(cluster: DaskCluster) -> None:
    pids = cluster.client.run(os.getpid)
    assert len(pids) == 2 and len(set(pids.values())) == 2
    assert os.getpid() not in pids.values()
    assert cluster.workers == 2 and "LocalCluster" in cluster.where


def test_a_cluster_gives_the_summary_failures_and_files_of_one_process(
    cluster: DaskCluster,
    config: fz.FuzzConfig,
    one_process: tuple[fz.CampaignSummary, Path],
    tmp_path: Path,
) -> None:
    one, one_out = one_process
    assert [r.seed for r in one.failures] == [PLANTED]
    for size in (5, 1):  # chunk sizes that do not divide the seeds, and one seed a chunk
        out = tmp_path / f"chunks-{size}"
        seen: Counter[int] = Counter()
        spread = fz.run_campaign(
            SEEDS, config, out=str(out), executor=cluster, chunk_size=size, on_result=seen_by(seen)
        )
        assert counts(spread) == counts(one)
        assert failing(spread) == failing(one)
        assert sorted(seen) == list(SEEDS) and set(seen.values()) == {1}
        # the failing seed's trace, scenario and shrunk reproducer, written here by the client
        assert texts(out) == texts(one_out)
        assert [Path(f).name for f in spread.failures[0].files] == [
            Path(f).name for f in one.failures[0].files
        ]
        assert all(Path(f).parent == out for f in spread.failures[0].files)


def test_a_worker_killed_mid_campaign_loses_no_seed_and_counts_none_twice(
    cluster: DaskCluster,
    config: fz.FuzzConfig,
    one_process: tuple[fz.CampaignSummary, Path],
    tmp_path: Path,
) -> None:
    pids = cluster.client.run(os.getpid)
    seen: Counter[int] = Counter()
    killed: list[int] = []

    def on_result(r: fz.CaseResult) -> None:
        seen[r.seed] += 1
        if not killed:  # the first chunk is back: the others are out on the two workers
            victim = sorted(pids.values())[0]
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    with CampaignState.open(
        tmp_path / "state.json", seeds=SEEDS, config=config, out=None, chunk_size=2
    ) as state:
        summary = fz.run_campaign(SEEDS, config, executor=cluster, state=state, on_result=on_result)
    one, _ = one_process
    assert killed and not psutil.pid_exists(killed[0])
    assert counts(summary) == counts(one) and failing(summary) == failing(one)
    assert sorted(seen) == list(SEEDS) and set(seen.values()) == {1}
    # the state holds every chunk once; a resume finds the whole campaign done
    lines = (tmp_path / "state.json").read_text().splitlines()[1:]
    assert len(lines) == len(SEEDS) // 2
    with CampaignState.open(
        tmp_path / "state.json", seeds=SEEDS, config=config, out=None, chunk_size=7
    ) as again:
        assert again.chunk_size == 2 and len(again.finished()) == len(SEEDS) // 2
        resumed = fz.run_campaign(SEEDS, config, executor=cluster, state=again)
    assert counts(resumed) == counts(one) and failing(resumed) == failing(one)
    cluster.client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def fuzz_planted(out: Path, one_process: tuple[fz.CampaignSummary, Path], *extra: str) -> str:
    """``loopctl-sim fuzz`` on the seeds with the planted check and ``extra``: it exits 1,
    prints the summary of one process and writes the files one process writes."""
    args = ["fuzz", "--seeds", "0:24", "--check", CHECK, "--no-progress", "--out", str(out)]
    result = CliRunner().invoke(main, [*args, *extra])
    assert result.exit_code == 1, result.output
    assert f"FAIL seed {PLANTED}:" in result.output
    one, one_out = one_process
    totals = f"{one.seeds} seeds, {one.runs} simulated runs, {one.steps} steps checked; "
    assert f"{totals}{len(one.failures)} failing seed(s)" in result.output
    assert texts(out) == texts(one_out)
    return result.output


def test_the_command_runs_on_a_cluster_by_address(
    cluster: DaskCluster,
    plant_dir: Path,
    one_process: tuple[fz.CampaignSummary, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(plant_dir)
    address = cluster.client.scheduler.address
    assert address.startswith("tcp://127.0.0.1:")
    out = tmp_path / "out"
    output = fuzz_planted(out, one_process, "--cluster", address, "--chunk-size", "4")
    assert f"Dask cluster at {address}, 2 worker(s)" in output
    assert f"replay: loopctl-sim replay {out / f'seed-{PLANTED}.min.jsonl'}" in output


def test_the_command_starts_and_stops_a_local_cluster(
    plant_dir: Path,
    one_process: tuple[fz.CampaignSummary, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(plant_dir)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    output = fuzz_planted(tmp_path / "out", one_process, "--cluster", "local:2")
    assert "LocalCluster at tcp://127.0.0.1:" in output and "2 worker(s)" in output
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, "the LocalCluster's processes outlived the command"


def test_an_agent_campaign_on_the_cluster_gives_the_summary_of_one_process(
    cluster: DaskCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for project in make_project(tmp_path, monkeypatch):  # the sample agent, as package shop
        agent = fz.FuzzConfig(agent=AGENT, shrink=False, cwd=str(project))
        one = fz.run_campaign(range(6), agent)
        spread = fz.run_campaign(range(6), agent, executor=cluster, chunk_size=2)
        assert counts(spread) == counts(one) and spread.moves == one.moves
        assert spread.seeds == 6 and spread.moves and one.ok


AGENT_GUARD = """
import os

if os.getpid() != {pid}:
    raise ImportError("planted: the package is installed on the client only")
"""


def test_an_agent_that_does_not_import_on_the_workers_is_one_clear_error(
    cluster: DaskCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "onlyhere", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "onlyhere" / "__init__.py").write_text(AGENT_GUARD.format(pid=os.getpid()))
    monkeypatch.chdir(tmp_path)
    address = cluster.client.scheduler.address
    result = CliRunner().invoke(
        main,
        [
            *("fuzz", "--agent", "onlyhere.agent:build", "--seeds", "0:8", "--no-progress"),
            *("--cluster", address),
        ],
    )
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output
    for worker in cluster.client.nthreads():
        assert f"worker {worker}:" in errors[0]
    assert "installed on the client only" in errors[0]
    assert f"on host {socket.gethostname()}" in errors[0]
    assert "importable where the seeds run" in errors[0]
    for name in [m for m in sys.modules if m == "onlyhere" or m.startswith("onlyhere.")]:
        del sys.modules[name]
    agent_profile.cache_clear()


def test_a_job_that_cannot_set_up_on_a_worker_stops_the_campaign_with_one_error(
    cluster: DaskCluster, config: fz.FuzzConfig
) -> None:
    missing = dataclasses.replace(config, checks=("no_such_module_here:check",))
    with pytest.raises(WorkerSetupError) as caught:
        fz.run_campaign(SEEDS, missing, executor=cluster, chunk_size=1)
    assert "no_such_module_here" in str(caught.value) and "on host" in str(caught.value)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_an_unreachable_scheduler_is_one_line_naming_its_address() -> None:
    address = f"tcp://127.0.0.1:{unused_port()}"
    result = CliRunner().invoke(
        main, ["fuzz", "--seeds", "0:4", "--cluster", address, "--connect-timeout", "0.5"]
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"error: cannot reach the Dask scheduler at {address}"
    )


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("local:3", ClusterSpec(None, 3)),
        ("tcp://10.0.0.5:8786", ClusterSpec("tcp://10.0.0.5:8786")),
        ("scheduler:8786", ClusterSpec("tcp://scheduler:8786")),
        ("tls://sched.example:8786", ClusterSpec("tls://sched.example:8786")),
        ("  tcp://[::1]:8786 ", ClusterSpec("tcp://[::1]:8786")),
    ],
)
def test_parse_cluster(text: str, spec: ClusterSpec) -> None:
    assert parse_cluster(text) == spec


def test_parse_cluster_local_is_one_worker_per_core() -> None:
    assert parse_cluster("local") == ClusterSpec(None, max(1, os.cpu_count() or 1))


@pytest.mark.parametrize("text", ["local:0", "local:x", "tcp://host", "http//x:1", "", "8786"])
def test_parse_cluster_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="--cluster"):
        parse_cluster(text)


def test_the_command_refuses_workers_with_a_cluster() -> None:
    result = CliRunner().invoke(main, ["fuzz", "--workers", "2", "--cluster", "local:2"])
    assert result.exit_code == 2 and "choose one" in result.output


def test_without_distributed_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed: ImportError
    with pytest.raises(ClusterError, match=r"pip install 'loopctl\[dask\]'"):
        DaskCluster(ClusterSpec(None, 1)).open()
    result = CliRunner().invoke(main, ["fuzz", "--seeds", "0:2", "--cluster", "local:1"])
    assert result.exit_code == 2
    assert "error: --cluster needs Dask distributed: pip install 'loopctl[dask]'" in result.output


def test_loopctl_sim_imports_no_dask_until_a_cluster_is_asked_for() -> None:
    code = (
        "import sys, loopctl_sim.cli, loopctl_sim.fuzz.cluster; "
        "assert 'distributed' not in sys.modules and 'dask' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
