"""A fuzz failure's reproducers, the way a user runs them (issues 30 and 31): every printed
command reproduces the failure as printed, a test exported from it is red until the bug is
fixed, a tool's undeclared exception is a finding with no check of the user's, and what a
campaign writes (its files, its state, its output) keeps an ``--input`` secret out and never
leaves half a file in place of a whole one. Everything runs in a copy of the sample agent
(``shop_project``), through the command line."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from shop_project import AGENT, CHECKS, add, edit, forget, make_project, plant_splitting_compactor

from loopctl.tools import tool
from loopctl_sim import fuzz as fz
from loopctl_sim.cli import main
from loopctl_sim.fuzz.case import scenario_yaml
from loopctl_sim.fuzz.checks import Failure
from loopctl_sim.fuzz.state import CampaignState, StateError
from loopctl_sim.trace import TraceReader

CHECK = "shop.checks:only_delivered_orders_are_refunded"
TASK = "Please refund order A-1002, I changed my mind."
STATUS_CHECK = 'if order is None or order["status"] != "delivered":'
#: The planted bug of lookup_order: an unknown order id raises KeyError, not a ToolError.
KEY_ERROR = (
    "    order = ORDERS.get(order_id)\n    if order is None:\n"
    '        raise ToolError(f"there is no order {order_id}")\n    return json',
    "    order = ORDERS[order_id]\n    return json",
)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from make_project(tmp_path, monkeypatch)


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def printed(text: str, label: str) -> list[list[str]]:
    """The commands a fuzz run printed after ``label:`` (``rerun``, ``run``, ...), split."""
    found = []
    for line in text.splitlines():
        head, sep, command = line.strip().partition(":")
        if sep and head == label:
            words = shlex.split(command)
            assert words[0] == "loopctl-sim", line
            found.append(words[1:])
    return found


def pytest_file(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run one generated test file with pytest in a process of its own, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


# --- 30.4 and 30.6: the printed commands reproduce; the exported test is red until fixed ------


def test_every_printed_command_reproduces_a_check_failure_and_its_test_is_red_until_fixed(
    project: Path,
) -> None:
    (project / "shop" / "checks.py").write_text(CHECKS)
    edit(project, STATUS_CHECK, "if order is None:")  # the planted bug: no status check
    out = project / "out"
    args = ["--agent", AGENT, "--check", CHECK, "--deterministic", "--input", TASK]
    code, text = cli("fuzz", *args, "--seeds", "0:40", "--faults", "none", "--out", str(out))
    assert code == 1, text
    assert "FAIL seed" in text
    failing = [line for line in text.splitlines() if line.startswith("FAIL seed")]
    first = failing[0].split(": ", 1)[1]
    assert first.startswith(f"check ({CHECK})")
    # the rerun: the same seed, the same options, the same failure
    rerun = printed(text, "rerun")[0]
    assert rerun[rerun.index("--check") + 1] == CHECK and "--deterministic" in rerun
    code, again = cli(*rerun, "--out", str(project / "again"), "--no-progress")
    assert code == 1 and first in again, again
    # the scenario, run as printed: the check named, the same failure (not "every check passed")
    runs = printed(text, "run")
    assert runs and all(r[2:4] == ["--agent", AGENT] and CHECK in r for r in runs)
    for command in runs:
        code, ran = cli(*command)
        assert code == 1, ran
        assert f"FAIL check ({CHECK})" in ran and "not delivered: ['A-1002']" in ran
    # the replay commands replay the failing run against the agent (it still fails the same way)
    for command in printed(text, "replay"):
        code, replayed = cli(*command)
        assert code == 0, replayed
    # the exported test: red while the bug is there ...
    test_command = printed(text, "test")[0]
    assert CHECK in test_command
    code, wrote = cli(*test_command)
    assert code == 0 and "with the campaign's checks" in wrote, wrote
    exported = Path(wrote.split("wrote ", 1)[1].split(" (", 1)[0])
    red = pytest_file(exported, project)
    assert red.returncode == 1, red.stdout
    assert "not delivered" in red.stdout and "1 failed" in red.stdout
    # ... green once it is fixed
    edit(project, "if order is None:", STATUS_CHECK)
    green = pytest_file(exported, project)
    assert green.returncode == 0, green.stdout + green.stderr
    assert "1 passed" in green.stdout


def test_an_escape_found_by_the_built_in_checks_exports_a_test_red_until_fixed(
    project: Path,
) -> None:
    plant_splitting_compactor(project)
    out = project / "out"
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:40", "--out", str(out))
    assert code == 1 and "exception (ProtocolError)" in text, text
    command = printed(text, "run")[0]
    code, ran = cli(*command)
    assert code == 1 and "ProtocolError" in ran, ran
    code, wrote = cli(*printed(text, "test")[0], "-o", str(project / "test_repro.py"))
    assert code == 0, wrote
    red = pytest_file(project / "test_repro.py", project)
    assert red.returncode == 1 and "ProtocolError" in red.stdout, red.stdout
    edit(project, "        compactor=LastMessages(),\n", "")
    green = pytest_file(project / "test_repro.py", project)
    assert green.returncode == 0, green.stdout + green.stderr


def test_the_replay_test_is_still_there_for_the_asking(project: Path) -> None:
    (project / "shop" / "checks.py").write_text(CHECKS)
    edit(project, STATUS_CHECK, "if order is None:")
    out = project / "out"
    code, text = cli(
        "fuzz", "--agent", AGENT, "--check", CHECK, "--input", TASK, "--seeds", "0:40",
        "--faults", "none", "--out", str(out),
    )  # fmt: skip
    assert code == 1
    trace = printed(text, "test")[0][1]
    code, wrote = cli("export-test", trace, "--agent", AGENT, "--replay")
    assert code == 0 and "replays the trace" in wrote
    # a scenario that names an agent needs the agent named: a file runs none on its own
    code, refused = cli("export-test", trace, "--no-agent", "-o", str(project / "t.py"))
    assert code == 2 and "--agent" in refused
    # and a test that cannot import a check it names is no test: said at once
    code, refused = cli("export-test", trace, "--agent", AGENT, "--check", "shop.nope:check")
    assert code == 2 and "cannot import 'shop.nope'" in refused
    assert not (project / "t.py").exists()


TICKETS = """
    opened = [0]

    @tool
    def ticket(subject: str) -> str:
        \"\"\"Open a support ticket (the planted bug: numbered by a counter of this loop's,
        which a restarted process starts again).\"\"\"
        opened[0] += 1
        return f"ticket #{opened[0]} opened: {subject}"

    return BareLoop(
        client,
        tools=[lookup_order, shipping_quote, refund, ticket],"""


def test_a_crash_restore_failure_is_reproduced_where_the_crash_struck(project: Path) -> None:
    edit(
        project,
        "    return BareLoop(\n        client,\n"
        "        tools=[lookup_order, shipping_quote, refund],",
        TICKETS.strip("\n"),
    )
    out = project / "out"
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:40", "--out", str(out))
    assert code == 1 and "crash-restore (differs)" in text, text
    runs = printed(text, "run")
    assert runs and all("--crash-at" in command for command in runs)
    for command in runs:
        code, ran = cli(*command)
        assert code == 1 and "FAIL crash-restore (differs)" in ran, ran


def test_an_invariant_failures_traces_replay_up_to_where_the_checker_stopped_the_run(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.core import LoopMachine
    from loopctl_sim.props import invariants as inv

    real = inv.check_machine

    def planted(machine: LoopMachine, policy: object = None) -> list[str]:
        if machine.turns_taken >= 3:
            return ["shape: planted bug: three turns"]
        return real(machine, policy)  # type: ignore[arg-type]

    monkeypatch.setattr(inv, "check_machine", planted)
    out = project / "out"
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:6", "--out", str(out))
    assert code == 1 and "invariant (shape)" in text, text
    replays = printed(text, "replay")
    assert replays
    for command in replays:  # the checker's stop is not how the run ended: no end record
        code, replayed = cli(*command)
        assert code == 0, replayed
    for trace in out.glob("*.jsonl"):
        assert '"Violation"' not in trace.read_text()


def test_a_built_in_worlds_failure_exports_a_test_of_its_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    case = fz.make_case(5)
    (tmp_path / "seed-5.jsonl").write_text(fz.check_case(case).trace)
    (tmp_path / "seed-5.yaml").write_text(scenario_yaml(case.scenario))
    # the project's agent is not the built-in world's: it is left out, not refused
    (tmp_path / "pyproject.toml").write_text(f'[tool.loopctl]\nagent = "{AGENT}"\n')
    out = tmp_path / "test_seed_5.py"
    code, wrote = cli(
        "export-test", str(tmp_path / "seed-5.jsonl"), "--driver", "--crash-at", "0.3",
        "-o", str(out),
    )  # fmt: skip
    assert code == 0, wrote
    text = out.read_text()
    assert "AGENT = None" in text and "level='driver'" in text and "CRASH_AT = 0.3" in text
    ran = pytest_file(out, tmp_path)  # the built-in world passes this seed: green
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_a_driver_level_campaign_prints_driver_commands() -> None:
    failed = fz.CaseResult(
        seed=3,
        failure=Failure("crash-restore", "differs", "crash at step 4: ..."),
        files=["out/seed-3.jsonl", "out/seed-3.yaml"],
        crash_at=0.25,
    )
    from loopctl_sim.cli.fuzz_report import failure_lines

    lines = failure_lines(
        failed, "loopctl-sim fuzz --seeds 3:4 --level driver", None, level="driver"
    )
    assert "  run:    loopctl-sim run out/seed-3.yaml --driver --checks --crash-at 0.25" in lines
    assert "  test:   loopctl-sim export-test out/seed-3.jsonl --driver --crash-at 0.25" in lines


# --- 30.8: a tool's undeclared exception is a finding; faults are marked in the trace ---------


def test_a_tool_that_crashes_on_allowed_input_is_found_without_a_check(project: Path) -> None:
    # the planted bug: an unknown order id raises KeyError instead of a ToolError
    edit(
        project,
        *KEY_ERROR,
    )
    out = project / "out"
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:10", "--out", str(out))
    assert code == 1, text
    assert "FAIL seed" in text and "tool-exception (lookup_order:KeyError)" in text
    assert "does not declare" in text
    code, ran = cli(*printed(text, "run")[0])
    assert code == 1 and "tool-exception (lookup_order:KeyError)" in ran, ran
    # the check can be turned off, and the printed commands say so
    code, quiet = cli("fuzz", "--agent", AGENT, "--seeds", "0:10", "--no-tool-exceptions")
    assert code == 0, quiet
    # a tool that declares the exception refuses on purpose: no finding
    edit(project, "@tool\ndef lookup_order", "@tool(raises=KeyError)\ndef lookup_order")
    code, declared = cli("fuzz", "--agent", AGENT, "--seeds", "0:10", "--out", str(out))
    assert code == 0, declared


#: An agent module that quiets loopctl's logging (crashes are seen through the observer seam,
#: not the dispatcher's warnings: quiet logging must hide none).
LOUDNESS = 'logging.getLogger("loopctl").setLevel(logging.CRITICAL)\n'


def test_a_crash_is_found_where_the_agent_quiets_loopctls_logging(project: Path) -> None:
    edit(project, *KEY_ERROR)
    add(project, LOUDNESS, before="@tool\ndef lookup_order")
    edit(project, "import json\n", "import json\nimport logging\n")
    try:
        code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:10")
        assert code == 1 and "tool-exception (lookup_order:KeyError)" in text, text
        assert logging.getLogger("loopctl.tools").getEffectiveLevel() == logging.CRITICAL
    finally:
        logging.getLogger("loopctl").setLevel(logging.NOTSET)


def test_a_hook_that_raises_is_found(project: Path) -> None:
    edit(
        project,
        'if call.name == "refund" and isinstance(amount, int | float) and amount > REFUND_LIMIT:',
        'if call.name == "refund" and amount > REFUND_LIMIT:',
    )  # the planted bug: a string amount (the model sends one) is compared with an int
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:60", "--out", "out")
    assert code == 1, text
    assert "pre-tool hook refunds_within_limit raised TypeError" in text


def test_raises_takes_exception_classes_only() -> None:
    @tool(raises=(ValueError, ZeroDivisionError))
    def divide(a: int, b: int) -> float:
        """a / b."""
        return a / b

    assert ValueError in divide.raises and ZeroDivisionError in divide.raises
    with pytest.raises(TypeError, match="exception classes"):
        tool(raises="ValueError")(divide.fn)  # type: ignore[call-overload]


SCENARIO = f"""
name: faulted-lookup
agent: {AGENT}
input: Please refund order A-1001.
model:
  - calls: [{{name: lookup_order, arguments: {{order_id: A-1001}}}}]
  - calls: [{{name: lookup_order, arguments: {{order_id: A-1001}}}}]
  - text: done
faults:
  - {{kind: tool_exception, tool: lookup_order}}
"""


def test_the_trace_marks_the_results_a_fault_altered(project: Path) -> None:
    path = project / "s.yaml"
    path.write_text(SCENARIO)
    trace = project / "t.jsonl"
    code, text = cli("run", str(path), "--agent", AGENT, "--trace", str(trace))
    assert code == 0, text
    results = [r.data for r in TraceReader(trace) if r.type == "io" and r.kind == "tool_result"]
    assert [r.get("fault") for r in results] == ["tool_exception", None]
    assert results[0]["is_error"] and not results[1]["is_error"]


# --- 31.5: an --input secret stays out of everything a campaign writes and prints ---------------

SECRET = "sk-proj-Zq8xW3vB6nM1kL9pR4tY"


def test_an_input_secret_lands_in_no_file_and_no_output(project: Path) -> None:
    edit(
        project,
        *KEY_ERROR,
    )  # a KeyError that echoes what the model sent: the model copies the key from the task
    out, state = project / "out", project / "state.jsonl"
    task = f"My API key is {SECRET}, look up my order with it."
    code, text = cli(
        "fuzz", "--agent", AGENT, "--seeds", "0:20", "--faults", "none", "--input", task,
        "--out", str(out), "--state", str(state),
    )  # fmt: skip
    assert code == 1 and "FAIL seed" in text, text
    assert SECRET not in text and "[REDACTED" in text and "secrets scrubbed" in text
    written = sorted(out.iterdir())
    assert any(p.name.endswith(".min.yaml") for p in written)
    for path in [*written, state]:
        assert SECRET not in path.read_text(), path
    assert any("[REDACTED" in p.read_text() for p in written if p.suffix == ".yaml")
    # the same command resumes the campaign from its (scrubbed) state
    code, again = cli(
        "fuzz", "--agent", AGENT, "--seeds", "0:20", "--faults", "none", "--input", task,
        "--out", str(out), "--state", str(state),
    )  # fmt: skip
    assert code == 1 and "resuming" in again and SECRET not in again, again


def test_a_quoted_input_secret_is_not_printed_in_the_rerun_command(project: Path) -> None:
    """The rerun command quotes the --input for a shell; scrubbing the quoted line could not see
    ``password='a b c'`` any more (it became ``password='"'"'a b c'"'"'``)."""
    edit(project, *KEY_ERROR)
    task = "My db password='correct horse battery staple', look up my order A-1001."
    code, text = cli(
        "fuzz", "--agent", AGENT, "--seeds", "0:6", "--faults", "none", "--input", task
    )  # fmt: skip
    assert code == 1 and "FAIL seed" in text, text
    assert "correct horse" not in text and "battery staple" not in text
    reruns = printed(text, "rerun")
    assert reruns
    for words in reruns:  # the printed command still parses, its input scrubbed
        given = words[words.index("--input") + 1]
        assert given.startswith("My db password='[REDACTED") and given.endswith("order A-1001.")


def test_a_tools_error_cannot_drive_the_terminal(project: Path) -> None:
    """A tool's exception quoted what it read (an OSC title change, a bidi override): the
    failure line printed it raw."""
    edit(
        project,
        "    order = ORDERS.get(order_id)\n",
        "    order = ORDERS.get(order_id)\n    if order is None:\n"
        '        raise RuntimeError("page said \\x1b]0;PWNED\\x07 \\u202e")\n',
    )
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:6", "--faults", "none")
    assert code == 1 and "FAIL seed" in text, text
    assert "\x1b" not in text and "\u202e" not in text
    assert "page said \\x1b]0;PWNED\\x07 \\u202e" in text


# --- 31.7: --state and --out: clear errors, nothing half-written in place of a whole file ------


def test_a_state_or_out_that_cannot_be_written_is_a_clear_error(project: Path) -> None:
    (project / "a-dir").mkdir()
    code, text = cli("fuzz", "--seeds", "0:2", "--state", str(project / "a-dir"))
    assert code == 2 and "is a directory" in text and "Traceback" not in text
    (project / "a-file").write_text("mine")
    code, text = cli("fuzz", "--seeds", "0:2", "--out", str(project / "a-file"))
    assert code == 2 and "is a file" in text
    assert (project / "a-file").read_text() == "mine"
    # a failure's file that cannot be written: the error names it, no traceback
    edit(project, *KEY_ERROR)
    (project / "out" / "seed-0.yaml").mkdir(parents=True)
    code, text = cli("fuzz", "--agent", AGENT, "--seeds", "0:1", "--out", str(project / "out"))
    assert code == 2 and "seed-0.yaml: cannot write" in text and "Traceback" not in text, text


def test_a_failed_write_keeps_the_old_file_whole(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl_sim.fuzz.campaign import OutputError, write_files

    out = project / "out"
    write_files(str(out), {"seed-1.yaml": "the old campaign's\n"})

    def full_disk(fd: int) -> None:  # the new file's data cannot all reach the disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OutputError, match=r"seed-1\.yaml: cannot write: No space left"):
        write_files(str(out), {"seed-1.yaml": "the new campaign's, much longer\n"})
    monkeypatch.undo()
    assert (out / "seed-1.yaml").read_text() == "the old campaign's\n"
    assert sorted(p.name for p in out.iterdir()) == ["seed-1.yaml"]  # no temporary left


def test_a_state_that_cannot_record_keeps_its_whole_lines(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl_sim.fuzz.executors import Chunk

    path = project / "state.jsonl"
    config = fz.FuzzConfig()
    with CampaignState.open(path, seeds=range(4), config=config, out=None, chunk_size=2) as st:
        st.record(Chunk(0, (0, 1)), fz.CampaignSummary())
        before = path.read_bytes()

        def full(fd: int, data: object) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "write", full)  # the state writes with os.write
        with pytest.raises(StateError, match="cannot record chunk 1: No space left"):
            st.record(Chunk(1, (2, 3)), fz.CampaignSummary())
        monkeypatch.undo()
    assert path.read_bytes() == before
    with CampaignState.open(path, seeds=range(4), config=config, out=None, chunk_size=2) as st:
        assert set(st.finished()) == {0}


# --- 31.10, 31.12, 31.13: hostile file names, alias bombs, a scenario's agent -----------------

TRACES = Path(__file__).resolve().parent.parent / "traces"


@pytest.mark.parametrize("name", ['a"""b.jsonl', "a\\x.jsonl", "it's {x} \\N.jsonl"])
def test_export_writes_a_test_that_compiles_whatever_the_file_name(
    tmp_path: Path, name: str
) -> None:
    trace = tmp_path / name
    trace.write_bytes((TRACES / "basic.jsonl").read_bytes())
    out = tmp_path / "test_hostile.py"
    code, text = cli("export-test", str(trace), "--no-agent", "-o", str(out))
    assert code == 0, text
    source = out.read_text()
    compile(source, str(out), "exec")
    assert f"SOURCE = {name!r}" in source
    ran = pytest_file(out, tmp_path)
    assert ran.returncode == 0, ran.stdout


def bomb(levels: int) -> str:
    lines = [
        "name: bomb",
        "input: hi",
        "model:",
        "  - calls:",
        "    - name: add",
        "      arguments:",
    ]
    lines.append('        a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]')
    for i in range(1, levels):
        lines.append(f"        a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb(10))
    assert len(path.read_bytes()) < 700
    code, text = cli("run", str(path))
    assert code == 2 and f"{path}: refused" in text and "aliases" in text, text
    recursive = tmp_path / "rec.yaml"
    recursive.write_text(
        "name: r\ninput: hi\nmodel:\n  - calls:\n    - name: add\n      arguments: &x {a: *x}\n"
    )
    code, text = cli("run", str(recursive))
    assert code == 2 and "recursive alias" in text
    # a few aliases are fine: a scenario may repeat itself
    small = tmp_path / "small.yaml"
    small.write_text(
        bomb(3).replace("name: add", "name: echo") + "tools: {echo: {builtin: echo}}\n"
    )
    code, text = cli("run", str(small))
    assert code == 0, text


def test_a_session_scenario_with_an_alias_bomb_is_refused_naming_the_file(tmp_path: Path) -> None:
    """Session scenarios are read through the same alias bound as scenarios (``safe_yaml``)."""
    from loopctl_sim.fuzz.sessions import SessionScenarioError, load_session_scenario

    lines = ["agent: examples.support_agent.agent:build", "turns:", "  - text: hi", "    x:"]
    lines.append('      a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]')
    for i in range(1, 10):
        lines.append(f"      a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    path = tmp_path / "session-bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SessionScenarioError, match="aliases expand it") as caught:
        load_session_scenario(path)
    assert str(path) in str(caught.value)


EVIL = """
import pathlib

pathlib.Path("imported").write_text("the scenario ran code")


def build(**kwargs):
    raise SystemExit("not reached")
"""


def test_a_scenario_names_an_agent_but_runs_none_unless_told(project: Path) -> None:
    (project / "helpers.py").write_text(EVIL)
    scenario = project / "repro.yaml"
    scenario.write_text("name: r\nagent: helpers:build\ninput: hi\nmodel: []\n")
    code, text = cli("run", str(scenario))
    assert code == 2 and "does not run code on its own" in text and "--agent" in text
    code, text = cli("run", str(scenario), "--checks")
    assert code == 2 and "--trust-agent" in text
    assert not (project / "imported").exists()
    getpid = project / "pid.yaml"
    getpid.write_text("name: p\nagent: os:getpid\ninput: hi\nmodel: []\n")
    code, text = cli("run", str(getpid))
    assert code == 2 and "os:getpid" in text
    # named on the command line, the user's own agent runs in its place
    code, text = cli("run", str(scenario), "--agent", AGENT)
    assert code == 0 and not (project / "imported").exists(), text
    # trusted, the file's agent is imported (and here it is the hostile one)
    code, text = cli("run", str(scenario), "--trust-agent")
    assert (project / "imported").exists()
    forget()


def test_the_projects_own_agent_is_trusted(project: Path) -> None:
    (project / "pyproject.toml").write_text(f'[tool.loopctl]\nagent = "{AGENT}"\n')
    scenario = project / "repro.yaml"
    scenario.write_text(f"name: r\nagent: {AGENT}\ninput: hi\nmodel: []\n")
    code, text = cli("run", str(scenario))
    assert code == 0, text
