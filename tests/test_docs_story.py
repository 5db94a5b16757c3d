"""The walk-through at the top of docs/testing.md, run as written: every ``$`` command of the
section, in order, in a copy of the repository's examples (the agent is edited where the page
says it is), each with the outcome the page describes."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "testing.md"
SECTION = "## Your agent, from a bug report to a green test"


def commands() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```console\n(.*?)```", section, flags=re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    program = {
        "loopctl-sim": [sys.executable, "-c", "from loopctl_sim.cli import main; main()"],
        "pytest": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
    }[argv[0]]
    return subprocess.run(
        program + argv[1:], cwd=cwd, capture_output=True, text=True, check=False, env=os.environ
    )


def test_the_story_runs_as_written(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    agent = tmp_path / "examples" / "support_agent" / "agent.py"
    trace = tmp_path / "examples" / "support_agent" / "traces" / "refund.jsonl"
    original_agent, original_trace = agent.read_text(), trace.read_text()
    cmds = commands()
    assert [c.split()[0:2] for c in cmds] == [
        ["loopctl-sim", "show"],
        ["loopctl-sim", "replay"],
        ["loopctl-sim", "export-test"],
        ["pytest", "-q"],
        ["pytest", "-q"],
        ["loopctl-sim", "replay"],
    ]
    shown = run(cmds[0], tmp_path)
    assert shown.returncode == 0 and "lookup_order" in shown.stdout
    replayed = run(cmds[1], tmp_path)
    assert replayed.returncode == 0 and replayed.stdout.startswith("ok: "), replayed.stdout
    exported = run(cmds[2], tmp_path)
    assert exported.returncode == 0 and (tmp_path / "test_refund_trace.py").exists()
    green = run(cmds[3], tmp_path)
    assert green.returncode == 0, green.stdout
    # step 4: amounts in cents
    agent.write_text(original_agent.replace('"amount": 800', '"amount": 80000'))
    red = run(cmds[4], tmp_path)
    assert red.returncode == 1
    assert "turn 1: tool `lookup_order` returned" in red.stdout and "80000" in red.stdout
    # step 5: approving needs a real model here; the trace is left as it was
    update = run(cmds[5], tmp_path)
    assert update.returncode == 1 and "needs a real model" in update.stdout, update.stdout
    assert trace.read_text() == original_trace
    # ... a bug: revert, and the test is green again
    agent.write_text(original_agent)
    assert run(cmds[4], tmp_path).returncode == 0
    # ... a change the model never sees is approved in one command
    agent.write_text(original_agent.replace("max_turns=12", "max_turns=20"))
    assert run(cmds[4], tmp_path).returncode == 1
    approved = run(cmds[5], tmp_path)
    assert approved.returncode == 0 and approved.stdout.startswith("updated "), approved.stdout
    assert run(cmds[4], tmp_path).returncode == 1  # the exported test embeds the old trace...
    assert run(cmds[1], tmp_path).returncode == 0  # ...the updated trace replays
