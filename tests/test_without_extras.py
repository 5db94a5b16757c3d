"""``pip install loopctl`` (no extras) gives working ``loopctl`` and ``loopctl-sim`` commands: the
README's first command runs on such an install, so nothing they import at start may need an
extra (hypothesis is the ``sim`` extra's, OpenTelemetry the ``otel`` one's, vcrpy the
``cassettes`` one's). Each case runs the command in a fresh interpreter where those packages
cannot be imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACE = "examples/support_agent/traces/refund.jsonl"

#: Runs ``main`` of the module named by argv[1] with argv[2:], the extras made unimportable.
_RUNNER = """
import sys
for name in ("hypothesis", "opentelemetry", "vcr", "mcp", "distributed", "playwright"):
    sys.modules[name] = None  # an import of it raises ImportError, as on a plain install
module, *args = sys.argv[1:]
sys.argv = [module, *args]
main = __import__(module, fromlist=["main"]).main
main()
"""


@pytest.mark.parametrize(
    "command",
    [
        ["loopctl_sim.cli", "show", TRACE],
        ["loopctl_sim.cli", "replay", TRACE, "--agent", "examples.support_agent.agent:build"],
        ["loopctl_sim.cli", "fuzz", "--builtin", "--seeds", "0:3", "--no-shrink"],
        ["loopctl.cli", "--help"],
    ],
    ids=["show", "replay-agent", "fuzz", "loopctl"],
)
def test_the_commands_run_without_the_extras(command: list[str], tmp_path: Path) -> None:
    args = [a if a != TRACE else str(ROOT / TRACE) for a in command]
    if "fuzz" in args:
        args += ["--out", str(tmp_path / "failures")]
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
