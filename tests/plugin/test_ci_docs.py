"""docs/ci.md, run as written: every file it shows is written into a project, every command it
shows is run there (in order, as a subprocess), and every output it shows is what came out.

The project is the one the page describes: the sample agent of examples/support_agent copied
as the package ``shop``. The one liberty taken is the model: a command that records with
``OPENAI_API_KEY=sk-...`` gets the local fake OpenAI server instead (``OPENAI_BASE_URL``
pointing at it, its key in ``OPENAI_API_KEY``); every other command runs with neither set, as
CI would. And pytest's plugin autoloading is off but for loopctl's plugin (named in
``PYTEST_PLUGINS``): the development environment's other plugins would take most of the time.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from fake_openai import FAKE_KEY, FakeOpenAI

from loopctl_sim.plugin.offline import blocked_hint

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "ci.md"
EXAMPLE = ROOT / "examples" / "support_agent"
BIN = Path(sys.executable).parent
CASSETTE = "tests/cassettes/test_support_agent/test_order_status.yaml"


def blocks() -> list[tuple[str, str, bool]]:
    """The page's code blocks: the language, the text, and whether the block follows the one
    before it directly (nothing but blank lines between: a command's output)."""
    page = PAGE.read_text(encoding="utf-8")
    found: list[tuple[str, str, bool]] = []
    end = 0
    for match in re.finditer(r"^```(\w+)\n(.*?)^```", page, re.S | re.M):
        found.append((match.group(1), match.group(2), not page[end : match.start()].strip()))
        end = match.end()
    return found


def project(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "shop" / "__init__.py").write_text("")
    return tmp_path


def run(command: str, cwd: Path, server: FakeOpenAI) -> tuple[int, str]:
    words = shlex.split(command)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "OPENAI_", "ANTHROPIC_", "LOOPCTL_", "COV_"))
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", PYTEST_PLUGINS="loopctl_sim.plugin.pytest_plugin"
    )
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        assert (name, value) == ("OPENAI_API_KEY", "sk-..."), "the page records with a key"
        env.update(OPENAI_API_KEY=FAKE_KEY, OPENAI_BASE_URL=server.url)
    done = subprocess.run(
        [str(BIN / words[0]), *words[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def shown_in(text: str, output: str) -> list[str]:
    """The lines of ``text`` that are not in ``output`` (compared without the indentation)."""
    seen = {line.strip() for line in output.splitlines()}
    return [line for line in text.splitlines() if line.strip() and line.strip() not in seen]


def test_every_command_of_the_ci_page_runs(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    root = project(tmp_path)
    items = blocks()
    written: Path | None = None
    ran: list[str] = []
    for index, (kind, text, _) in enumerate(items):
        first = text.splitlines()[0]
        after = items[index + 1] if index + 1 < len(items) else ("", "", False)
        if kind in ("python", "toml") and first.startswith("# "):
            written = root / first[2:].strip()
            written.parent.mkdir(parents=True, exist_ok=True)
            written.write_text(text, encoding="utf-8")
        elif kind == "diff":
            assert written is not None
            old = [line[1:] for line in text.splitlines() if line.startswith("-")]
            new = [line[1:] for line in text.splitlines() if line.startswith("+")]
            source = written.read_text(encoding="utf-8")
            assert "\n".join(old) in source
            written.write_text(source.replace("\n".join(old), "\n".join(new)), encoding="utf-8")
        elif kind == "console":
            for line in text.splitlines():
                command = line.removeprefix("$ ")
                before = len(fake_openai.requests)
                code, output = run(command, root, fake_openai)
                ran.append(command)
                if after[0] == "text" and after[2]:  # the output the page shows: a failure
                    assert code != 0, output
                    assert shown_in(after[1], output) == [], output
                else:
                    assert code == 0, output
                recorded = "--loopctl-record-mode" in command
                assert len(fake_openai.requests) == before + (2 if recorded else 0), output
    assert ran == [
        "OPENAI_API_KEY=sk-... pytest --loopctl-record-mode=once tests/test_support_agent.py",
        "pytest tests/test_support_agent.py",
        "pytest tests/test_support_agent.py",
        "OPENAI_API_KEY=sk-... pytest --loopctl-record-mode=rewrite tests/test_support_agent.py",
        "loopctl-sim replay shop/traces/refund.jsonl --agent shop.agent:build",
    ]
    cassette = (root / CASSETTE).read_text(encoding="utf-8")
    assert FAKE_KEY not in cassette
    assert "It is late." in cassette  # re-recorded with the changed prompt


def test_the_blocked_call_shown_is_what_the_plugin_writes() -> None:
    (shown,) = [t for k, t, _ in blocks() if k == "text" and t.startswith("network access")]
    error = "network access blocked in tests: resolve api.openai.com:443"
    assert shown.rstrip("\n") == f"{error}\n{blocked_hint('tests/test_x.py::test_y', False)}"
