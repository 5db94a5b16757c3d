"""docs/testing.md's fuzz and scenario sections hold what they say: both scenario files of
"Scenario files" load and run as described, the fault table names every kind, and the
exploring model's hypothesis example runs."""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from shop_project import ROOT, make_project

from loopctl_sim.sim import FaultKind, load_scenario, run_agent, simulate

DOC = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    return DOC.split(title, 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from make_project(tmp_path, monkeypatch)


def test_the_scenario_files_of_the_page_run_as_described(project: Path) -> None:
    builtin, agent = blocks(section("## Scenario files"), "yaml")
    (project / "builtin.yaml").write_text(builtin)
    world = load_scenario(project / "builtin.yaml")
    assert simulate(world.world()).outcome.kind == world.expect == "completed"
    (project / "agent.yaml").write_text(agent)
    sc = load_scenario(project / "agent.yaml")
    run = run_agent(sc.agent_world())
    assert run.outcome.kind == sc.expect == "completed" and run.crashes == 1
    assert sc.tools["shipping_quote"].mode == "simulated" and not sc.tools["refund"].faults


def test_the_fault_table_names_every_kind() -> None:
    table = section("### Faults").split("\n\n")[1]
    named = set(re.findall(r"`([a-z_]+)`", table.split("|")[0] + table))
    assert set(typing.get_args(FaultKind)) <= named


def test_the_hypothesis_example_runs(project: Path) -> None:
    code = next(b for b in blocks(section("### The exploring model in your own tests"), "python"))
    namespace: dict[str, object] = {}
    exec(compile(code, "docs/testing.md", "exec"), namespace)
    test = namespace["test_the_agent_survives_any_first_reply"]
    assert callable(test)
    test()
