"""`loopctl-sim export-test`: a trace becomes a pytest regression test that runs green."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl_sim import fuzz as fz
from loopctl_sim.cli.export_cmd import export_test as export_command
from loopctl_sim.replay.export import export_test, regression_test_name, write_test

pytest_plugins = ["pytester"]

TRACES = Path(__file__).resolve().parent.parent / "traces"
INNER = ("-p", "no:cacheprovider", "-p", "no:asyncio")


def test_regression_test_name() -> None:
    assert regression_test_name("bug-report 12.jsonl") == "test_bug_report_12_replays"
    assert regression_test_name("/x/3.jsonl") == "test_t_3_replays"
    assert regression_test_name("class.jsonl") == "test_class_replays"


def test_the_text_embeds_the_trace_and_the_recorded_end() -> None:
    text = export_test(TRACES / "basic.jsonl")
    compile(text, "generated.py", "exec")
    assert "TRACE_LINES = [" in text
    assert "EXPECTED_OUTCOME = {'kind': 'completed'" in text
    assert "def test_basic_replays(tmp_path: Path) -> None:" in text
    assert "check_trace(trace)" in text  # the brain's promises along the trace, too
    assert "check_trace" not in export_test(TRACES / "basic.jsonl", invariants=False)


@pytest.mark.parametrize("name", ["basic.jsonl", "cancel.jsonl", "crash_restore.jsonl"])
def test_an_embedded_export_runs_green(pytester: pytest.Pytester, name: str) -> None:
    write_test(TRACES / name, pytester.path / "test_regression.py")
    result = pytester.runpytest(*INNER)
    result.assert_outcomes(passed=1)


def test_a_referencing_export_runs_green_and_catches_a_change(pytester: pytest.Pytester) -> None:
    trace = pytester.path / "reports" / "bug.jsonl"
    trace.parent.mkdir()
    shutil.copy(TRACES / "basic.jsonl", trace)
    (pytester.path / "tests").mkdir()
    out = write_test(trace, pytester.path / "tests" / "test_bug.py", embed=False)
    assert "TRACE_LINES" not in out.read_text()
    assert "'../reports/bug.jsonl'" in out.read_text()
    pytester.runpytest(*INNER).assert_outcomes(passed=1)
    # a brain that decided differently (here: a damaged digest) turns the test red
    lines = trace.read_text().splitlines()
    i = next(i for i, line in enumerate(lines) if '"type":"end"' in line)
    lines[i] = lines[i].replace('"digest":"', '"digest":"f', 1)
    trace.write_text("\n".join(lines) + "\n")
    result = pytester.runpytest(*INNER)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*divergence at seq*"])


def test_a_fuzz_failure_exports_to_a_test(pytester: pytest.Pytester, tmp_path: Path) -> None:
    case = fz.make_case(5)
    trace = tmp_path / "seed-5.jsonl"
    trace.write_text(fz.check_case(case).trace)
    write_test(trace, pytester.path / "test_seed5.py")
    pytester.runpytest(*INNER).assert_outcomes(passed=1)  # two runs: the faulted one, the heal


def test_a_trace_without_an_end_still_exports(pytester: pytest.Pytester) -> None:
    lines = (TRACES / "basic.jsonl").read_text().splitlines()
    cut = pytester.path / "cut.jsonl"
    cut.write_text("\n".join(lines[:6]) + "\n")
    text = export_test(cut)
    assert "COMPLETE = False" in text
    (pytester.path / "test_cut.py").write_text(text)
    pytester.runpytest(*INNER).assert_outcomes(passed=1)


def test_export_command(tmp_path: Path) -> None:
    trace = tmp_path / "basic.jsonl"
    shutil.copy(TRACES / "basic.jsonl", trace)
    res = CliRunner().invoke(export_command, [str(trace)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "test_basic.py").exists()
    assert "wrote" in res.output
    out = tmp_path / "elsewhere.py"
    res = CliRunner().invoke(export_command, [str(trace), "-o", str(out), "--reference"])
    assert res.exit_code == 0 and "TRACE = Path(__file__).parent" in out.read_text()


def test_a_full_disk_names_the_test_file_and_keeps_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error named the trace that was read (``refund.jsonl: No space left on device``),
    not the test file that could not be written."""
    import os

    trace = tmp_path / "basic.jsonl"
    shutil.copy(TRACES / "basic.jsonl", trace)
    out = tmp_path / "test_old.py"
    out.write_text("the old test\n")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the disk fills up as the test is flushed
    res = CliRunner().invoke(export_command, [str(trace), "-o", str(out)])
    assert res.exit_code == 2
    assert res.output.strip() == f"error: {out}: No space left on device"
    assert out.read_text() == "the old test\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["basic.jsonl", "test_old.py"]


def test_export_command_on_a_bad_trace(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"no": "header"}\n')
    res = CliRunner().invoke(export_command, [str(bad)])
    assert res.exit_code == 2
    assert "bad.jsonl:1" in res.output
