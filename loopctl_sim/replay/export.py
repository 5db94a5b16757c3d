"""Turn a trace (a user's bug report, a fuzz failure) into a pytest regression test.

``export_test(trace)`` writes a test module that replays the trace (against the brain, or the
user's agent) and asserts it does not diverge and ends as recorded; the trace is embedded (one
self-contained file to commit) or referenced by its path. A fuzz failure's trace saved beside its
scenario (``seed-N.min.jsonl`` and ``.yaml``) becomes another test (``export_fuzz_test``): its
replay would pass while the agent still fails the same way, the wrong way round for a regression
test, so the test runs every check of a fuzz seed on the scenario instead: red while the bug is
there, green once it is fixed.

The generated test imports only public names of ``loopctl_sim``, and every value taken from
outside (file names, the agent, the trace's lines) is written as a Python literal (``repr``),
never spliced into the code or a docstring.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from loopctl_sim.sim.scenario import load_scenario
from loopctl_sim.trace import EndRecord, HeaderRecord, TraceReader, lines_of, open_for_reading
from loopctl_sim.trace.files import write_atomically


@dataclass
class ExportInfo:
    """What was read from the trace to write the test."""

    runs: int = 0
    outcome: Any = None  # the last run's, as JSON
    final_digest: str | None = None
    complete: bool = False
    scrubbed: bool = False
    lines: list[str] = field(default_factory=list)
    fuzz: bool = False  # a fuzz campaign's run (its first header's metadata holds ``fuzz_seed``)


def _read(path: str | os.PathLike[str]) -> ExportInfo:
    info = ExportInfo()
    reader = TraceReader(path)
    for record in reader:
        if isinstance(record, HeaderRecord):
            info.fuzz = info.fuzz or (info.runs == 0 and "fuzz_seed" in record.metadata)
            # a header holding a started brain resumes the run under way (a replay counts it
            # among ``resumes``); any other starts a run
            if record.snapshot is None or not record.snapshot.started:
                info.runs += 1
            info.complete = False
            info.scrubbed = info.scrubbed or record.scrubbed
        elif isinstance(record, EndRecord):
            info.outcome = None if record.outcome is None else to_jsonable_python(record.outcome)
            info.final_digest = record.digest
            info.complete = True
        elif getattr(record, "scrubbed", False):
            info.scrubbed = True
    # keep exactly the lines the reader accepted (a truncated last line is dropped; a
    # compressed trace cut short gives only whole lines)
    with open_for_reading(path) as f:
        lines = [line.decode("utf-8").rstrip("\r\n") for line in lines_of(f)]
    info.lines = [line for line in lines if line.strip()]
    if any("truncated last line" in w for w in reader.warnings):
        info.lines = info.lines[:-1]
    return info


def regression_test_name(path: str | os.PathLike[str]) -> str:
    """A valid test function name from a trace's file name."""
    stem = Path(path).name.removesuffix(".jsonl").removesuffix(".json")
    name = re.sub(r"\W+", "_", stem).strip("_").lower() or "trace"
    if name[0].isdigit():
        name = f"t_{name}"
    return f"test_{name}_replays"


def export_test(
    trace: str | os.PathLike[str],
    *,
    embed: bool = True,
    trace_ref: str | None = None,
    invariants: bool = True,
    agent: str | None = None,
    tools: str = "live",
) -> str:
    """The text of a pytest module reproducing ``trace``: read from ``trace_ref`` (default: the
    path as given, relative to the test file) unless embedded; ``invariants`` also checks the
    brain's promises at every step (``check_trace``); with ``agent`` (``module:factory``) it
    replays against the user's agent (``tools`` as ``loopctl-sim replay --tools``), else against
    the brain alone."""
    info = _read(trace)
    name = regression_test_name(trace)
    source = os.fspath(trace)
    replay = "replay_agent" if agent is not None else "replay_trace"
    names = ", ".join(n for n in ("check_trace" if invariants else "", replay) if n)
    if agent is not None:
        about = [
            f"It replays the recorded run against the agent {agent}: the model answers from the",
            "trace, the agent's tools, hooks, middleware and compactor run live. A change in the",
            "agent's behaviour fails it, naming the first divergence in the agent's terms.",
        ]
    else:
        about = [
            "It replays the recorded run against the brain (machine level, no model, no tools)",
            "and checks that every step and feed is decided again exactly as recorded, and that",
            "the run ends as it did. A failure prints the first divergence.",
        ]
    out: list[str] = [
        '"""Regression test generated by `loopctl-sim export-test` from the trace SOURCE names.',
        "",
        *about,
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from pathlib import Path",
        "",
        f"from loopctl_sim import {names}",
        "",
        f"SOURCE = {Path(source).name!r}",
    ]
    if agent is not None:
        out += [f"AGENT = {agent!r}", f"TOOLS = {tools!r}", ""]
    if embed:
        out.append("TRACE_LINES = [")
        out += [f"    {line!r}," for line in info.lines]
        out += ["]", ""]
    else:
        ref = trace_ref if trace_ref is not None else source
        out += [f"TRACE = Path(__file__).parent / {ref!r}", ""]
    out += [
        f"EXPECTED_RUNS = {info.runs!r}",
        f"EXPECTED_OUTCOME = {(info.outcome if info.complete else None)!r}",
        f"EXPECTED_DIGEST = {(info.final_digest if info.complete else None)!r}",
        f"COMPLETE = {info.complete!r}",
        "",
        "",
        f"def {name}(tmp_path: Path) -> None:",
    ]
    if embed:
        out += [
            '    trace = tmp_path / "trace.jsonl"',
            '    trace.write_text("\\n".join(TRACE_LINES) + "\\n", encoding="utf-8")',
        ]
    else:
        out.append("    trace = TRACE")
    call = "replay_agent(trace, AGENT, tools=TOOLS)" if agent is not None else "replay_trace(trace)"
    out += [
        f"    result = {call}",
        "    assert result.ok, result.summary()",
        "    assert result.runs == EXPECTED_RUNS",
        "    assert result.complete == COMPLETE",
        "    if COMPLETE:",
        "        assert result.outcome == EXPECTED_OUTCOME, result.outcome",
        "        assert result.final_digest == EXPECTED_DIGEST",
    ]
    if invariants:
        out += ["    problems = check_trace(trace)", "    assert problems == [], problems"]
    out += [""]
    if info.scrubbed:
        out.insert(
            5,
            "Note: secrets were scrubbed from this trace: they are compared by their placeholders.",
        )
    return "\n".join(out)


def fuzz_scenario(trace: str | os.PathLike[str]) -> Path | None:
    """The scenario a fuzz failure's trace was saved with (``seed-N.min.yaml`` beside
    ``seed-N.min.jsonl``), when ``trace`` is a fuzz run's and the file is there; else None."""
    path = Path(trace)
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
    beside = path.with_name(stem + ".yaml")
    if not beside.is_file() or not _read(path).fuzz:
        return None
    return beside


@dataclass(frozen=True)
class FuzzChecks:
    """The campaign's checks a fuzz failure's test runs again, as ``loopctl-sim run`` took
    them."""

    checks: tuple[str, ...] = ()
    deterministic: bool | None = None
    crash_at: float = 0.5
    tool_exceptions: bool = True
    level: str = "machine"


def export_fuzz_test(
    trace: str | os.PathLike[str],
    scenario: str | os.PathLike[str],
    *,
    agent: str | None = None,
    checks: FuzzChecks = FuzzChecks(),
) -> str:
    """The text of a pytest module running every check of a fuzz seed on ``scenario`` (embedded)
    with ``checks``, against ``agent``: the scenario's own agent runs only when named here (a
    scenario file runs no code on its own), so one naming an agent without ``agent``, or none
    with it, is a ``ValueError``."""
    loaded = load_scenario(scenario)
    if loaded.agent is not None and agent is None:
        raise ValueError(
            f"{scenario} names the agent {loaded.agent}: name the agent the test runs with "
            f"--agent {loaded.agent}"
        )
    if loaded.agent is None and agent is not None:
        raise ValueError(f"{scenario} is a built-in world (it names no agent): drop --agent")
    text = Path(scenario).read_text(encoding="utf-8")
    name = regression_test_name(trace)[: -len("_replays")] + "_no_longer_fails"
    config = (
        f"FuzzConfig(level={checks.level!r}, checks={checks.checks!r}, "
        f"deterministic={checks.deterministic!r}, "
        f"check_tool_exceptions={checks.tool_exceptions!r})"
    )
    out = [
        '"""Regression test generated by `loopctl-sim export-test` from the fuzz failure SOURCE',
        "names.",
        "",
        "It runs the failure's scenario (SCENARIO_LINES, the reproducer the campaign saved) with",
        "every check of a fuzz seed and the campaign's own checks (CONFIG): it fails, naming the",
        "failure, while the bug is there, and passes once it is fixed.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from pathlib import Path",
        "",
        "from loopctl_sim.fuzz import FuzzConfig, check_scenario",
        "from loopctl_sim.sim import load_scenario",
        "",
        f"SOURCE = {Path(trace).name!r}",
        f"AGENT = {agent!r}",
        f"CONFIG = {config}",
        f"CRASH_AT = {checks.crash_at!r}",
        f"FOUND = {loaded.description!r}",
        "SCENARIO_LINES = [",
        *(f"    {line!r}," for line in text.splitlines()),
        "]",
        "",
        "",
        f"def {name}(tmp_path: Path) -> None:",
        '    path = tmp_path / "scenario.yaml"',
        '    path.write_text("\\n".join(SCENARIO_LINES) + "\\n", encoding="utf-8")',
        "    scenario = load_scenario(path)",
        "    if AGENT is not None:",
        '        scenario = scenario.model_copy(update={"agent": AGENT})',
        "    result = check_scenario(scenario, CONFIG, crash_at=CRASH_AT)",
        '    assert result.failure is None, f"{result.failure} (the campaign found: {FOUND})"',
        "",
    ]
    return "\n".join(out)


def write_test(
    trace: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    embed: bool = True,
    invariants: bool = True,
    agent: str | None = None,
    tools: str = "live",
    scenario: str | os.PathLike[str] | None = None,
    checks: FuzzChecks = FuzzChecks(),
) -> Path:
    """Write the test for ``trace`` (``export_fuzz_test``'s with a ``scenario``) to ``output``,
    by default ``test_<trace name>.py`` beside the trace, atomically; returns its path."""
    trace_path = Path(trace)
    if output is None:
        output = trace_path.with_name(regression_test_name(trace_path)[: -len("_replays")] + ".py")
    out = Path(output)
    if scenario is not None:
        text = export_fuzz_test(trace_path, scenario, agent=agent, checks=checks)
    else:
        ref = None
        if not embed:
            ref = os.path.relpath(trace_path.resolve(), out.resolve().parent)
        text = export_test(
            trace_path, embed=embed, trace_ref=ref, invariants=invariants, agent=agent, tools=tools
        )
    write_atomically(out, text)
    return out
