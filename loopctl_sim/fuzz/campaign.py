"""Fault-injection campaigns: many seeded worlds (``fuzz.case``, or the user's agent:
``fuzz.agent_case``), each checked (``fuzz.checks``, ``fuzz.agent_checks``) where an executor
runs it (``fuzz.executors``).

This module owns what happens around the cases: parsing the seed and fault ranges, what a
failing seed leaves behind (its trace and scenario in ``out``, shrunk to a minimal reproducer
that ``loopctl-sim replay`` and ``run`` take) and the summary. A passing seed's trace is dropped
once checked: a campaign keeps only counts and its failures.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from loopctl_sim.errors import SimError
from loopctl_sim.fuzz.agent_case import agent_profile, case_for
from loopctl_sim.fuzz.agent_checks import check_agent_case, scripted
from loopctl_sim.fuzz.case import ALL_FAULTS, DEFAULT_CONFIG, FuzzCase, FuzzConfig, scenario_yaml
from loopctl_sim.fuzz.checks import CaseResult, Failure, check_case, crash_variant
from loopctl_sim.fuzz.executors import (
    Chunk,
    Executor,
    WorkerSetupError,
    chunks,
    default_chunk_size,
    in_processes,
    run_here,
)
from loopctl_sim.fuzz.shrink import shrink_scenario
from loopctl_sim.fuzz.state import CampaignState, CampaignSummary
from loopctl_sim.fuzz.user_checks import load_function
from loopctl_sim.sim.agent import AgentError
from loopctl_sim.sim.scenario import Scenario, safe_yaml
from loopctl_sim.trace import scrub_text
from loopctl_sim.trace.files import write_atomically

# --- parsing the command line's ranges -------------------------------------------------------


def parse_seeds(text: str) -> range | list[int]:
    """``"0:10000"`` (half-open), ``"7"``, or ``"1,5,9"``."""
    text = text.strip()
    try:
        if ":" in text:
            start, _, stop = text.partition(":")
            a, b = int(start or 0), int(stop)
            if b < a:
                raise ValueError
            return range(a, b)
        if "," in text:
            return [int(x) for x in text.split(",") if x.strip()]
        return [int(text)]
    except ValueError:
        raise ValueError(f"bad seed range {text!r}: use START:STOP, N or N,M,...") from None


def parse_faults(text: str) -> tuple[str, ...]:
    """``"all"``, ``"none"`` or a comma list of fault kinds."""
    text = text.strip()
    if text == "all":
        return ALL_FAULTS
    if text in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in ALL_FAULTS]
    if unknown:
        raise ValueError(f"unknown fault kinds {unknown}; known: {', '.join(ALL_FAULTS)}")
    return tuple(k for k in ALL_FAULTS if k in kinds)


# --- seeds, shrinking, files -------------------------------------------------------------------


def check(case: FuzzCase, scenario: Scenario | None, config: FuzzConfig) -> CaseResult:
    """``check_case`` for the built-in world, ``check_agent_case`` for an agent's case."""
    sc = scenario if scenario is not None else case.scenario
    if sc.agent is not None:
        return check_agent_case(case, scenario, config)
    return check_case(case, scenario, config)


def check_scenario(
    scenario: Scenario, config: FuzzConfig = DEFAULT_CONFIG, *, crash_at: float = 0.5
) -> CaseResult:
    """Every check of a fuzz seed on one scenario (a saved reproducer, as ``loopctl-sim run
    --checks`` and an exported test run it), the crash striking at ``crash_at`` of the run;
    ``config`` gives the campaign's checks, the scenario its faults and turns."""
    return check(FuzzCase(seed=0, scenario=scenario, crash_at=crash_at, enabled=()), None, config)


#: The failures the first run (and its heal run and checks) finds alone: shrinking them need
#: not run the determinism twin and the crash variant.
_FIRST_RUN: Final = frozenset(
    {"invariant", "exception", "livelock", "heal", "check", "tool-twice", "tool-exception"}
)


def _fails_alike(case: FuzzCase, candidate: Scenario, failure: Failure, config: FuzzConfig) -> bool:
    """The shrinker's oracle: ``candidate`` fails as ``failure`` did, checked only as far as
    that failure needs (a first-run failure needs no twin and no crash variant)."""
    quiet = dataclasses.replace(config, shrink=False)
    if failure.kind in _FIRST_RUN:
        quiet = dataclasses.replace(quiet, check_determinism=False, check_crash=False)
    elif failure.kind == "nondeterminism":
        quiet = dataclasses.replace(quiet, check_crash=False)
    found = check(case, candidate, quiet).failure
    return found is not None and found.signature == failure.signature


def run_seed(seed: int, config: FuzzConfig = DEFAULT_CONFIG, out: str | None = None) -> CaseResult:
    """Check one seed; on failure save the trace and scenario to ``out`` and shrink them (an
    agent's case in its written-out form: ``agent_checks.scripted``)."""
    result, files = seed_files(seed, config, keep=out is not None)
    if out is not None and files:
        result.files = write_files(out, files)
    return result


def seed_files(seed: int, config: FuzzConfig, *, keep: bool) -> tuple[CaseResult, dict[str, str]]:
    """``run_seed`` without writing anything: a failing seed's files (with ``keep``) by name,
    with their texts. A worker on another machine cannot write into the client's ``out``: it
    sends them back and the client writes them (``write_files``), where any executor does."""
    case = case_for(seed, config)
    result = check(case, None, config)
    failure = result.failure
    files: dict[str, str] = {}
    if failure is not None:
        if keep:
            files[f"seed-{seed}.jsonl"] = result.trace
            files[f"seed-{seed}.yaml"] = scenario_yaml(case.scenario)
            if files[f"seed-{seed}.yaml"] != scenario_yaml(case.scenario, scrubbed=False):
                result.notes.append(_SCRUBBED)
        start = _shrink_start(case, result, failure, config) if config.shrink else None
        if start is not None:
            small = _shrunk(case, start, failure, config, result)
            if keep:
                again = check(case, small, dataclasses.replace(config, check_crash=False))
                result.first_replay_tools = result.replay_tools
                result.replay_tools = again.replay_tools
                files[f"seed-{seed}.min.jsonl"] = again.trace
                files[f"seed-{seed}.min.yaml"] = _saved(case, small, failure, config, result)
    result.trace = ""
    result.script = []
    _scrub_result(result)
    return result, files


def _scrub_result(result: CaseResult) -> None:
    """What a failing seed reports (stdout, the state file) scrubbed as its trace is: an
    ``--input`` secret the agent echoed into an exception must not reach them in clear."""
    failure = result.failure
    if failure is not None:
        result.failure = Failure(failure.kind, failure.code, scrub_text(failure.message))
    result.notes = [scrub_text(note) for note in result.notes]
    if result.shrunk is not None:
        result.shrunk = scrub_text(result.shrunk)


class OutputError(OSError, SimError):
    """A failure's file that cannot be written (``--out`` not a folder, a full disk); the
    message names the file. The file it would have replaced is left as it was."""


def write_files(out: str, files: Mapping[str, str]) -> list[str]:
    """Write a seed's files (``seed_files``) into ``out``, each atomically (a failed write leaves
    an earlier campaign's file whole); their paths, in order."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(
            f"--out {folder}: cannot create the folder: {exc.strerror or exc}"
        ) from None
    paths = []
    for name, text in files.items():
        path = folder / name
        try:
            write_atomically(path, text)
        except OSError as exc:
            raise OutputError(f"{path}: cannot write: {exc.strerror or exc}") from None
        paths.append(str(path))
    return paths


def _saved(
    case: FuzzCase, small: Scenario, failure: Failure, config: FuzzConfig, result: CaseResult
) -> str:
    """The shrunk scenario's YAML, its secrets scrubbed (``scenario_yaml``). A scenario that
    held one (an ``--input`` secret, and what the model copied of it) is checked again as
    saved: the note says whether it still fails the same way."""
    text = scenario_yaml(small)
    if text == scenario_yaml(small, scrubbed=False):
        return text
    saved = Scenario.model_validate(safe_yaml(text))
    if _SCRUBBED not in result.notes:
        result.notes.append(_SCRUBBED)
    if not _fails_alike(case, saved, failure, config):
        result.notes.append(
            "scrubbed, the shrunk scenario does not fail the same way: rerun the seed (rerun:) "
            "with the secret"
        )
    return text


#: The note of a failing seed whose saved scenarios lost a secret.
_SCRUBBED: Final = "the saved scenarios hold secrets scrubbed, as the traces do"


def _shrink_start(
    case: FuzzCase, result: CaseResult, failure: Failure, config: FuzzConfig
) -> Scenario | None:
    """What shrinking starts from: the case's scenario, an agent's written out as a script
    (None, with a note, when the script does not fail the same way)."""
    if case.scenario.agent is None:
        return case.scenario
    start = scripted(case.scenario, result.script)
    if not _fails_alike(case, start, failure, config):
        result.notes.append(
            "not shrunk: the run written out as a script does not fail the same way (the agent "
            "is not deterministic)"
        )
        return None
    return start


def _shrunk(
    case: FuzzCase, start: Scenario, failure: Failure, config: FuzzConfig, result: CaseResult
) -> Scenario:
    shrunk = shrink_scenario(
        start, lambda c: _fails_alike(case, c, failure, config), max_tests=config.max_shrink_tests
    )
    result.shrunk = shrunk.summary()
    small = shrunk.scenario.model_copy(
        update={"description": f"fuzz seed {case.seed}, shrunk ({shrunk.summary()}): {failure}"}
    )
    if failure.kind == "crash-restore":
        steps = check(case, small, dataclasses.replace(config, check_crash=False)).steps
        small = crash_variant(case, small, steps)
    return small


@dataclass
class ChunkResult:
    """What a chunk's job sends back: its results in seed order, failing seeds' files by seed."""

    chunk: Chunk
    results: list[CaseResult]
    files: dict[int, dict[str, str]] = field(default_factory=dict)


def prepare(config: FuzzConfig) -> None:
    """Import what the seeds need before the first one runs: an agent or a check that does not
    import where the chunk runs (a cluster's worker) is one clear error, not a failing seed."""
    try:
        if config.agent is not None:
            agent_profile(config.agent, config.cwd)
        for spec in config.checks:
            load_function(spec, config.cwd)
    except (AgentError, ValueError) as exc:
        raise WorkerSetupError(
            f"{exc}; the modules of the agent and the checks must be importable where the "
            "seeds run (install the project there, or put it on PYTHONPATH) (on host "
            f"{socket.gethostname()}, process {os.getpid()})"
        ) from None


def run_chunk(chunk: Chunk, config: FuzzConfig, keep_files: bool) -> ChunkResult:
    """One chunk's job, wherever it runs (module-level, so that it pickles for a worker)."""
    prepare(config)
    results: list[CaseResult] = []
    files: dict[int, dict[str, str]] = {}
    for seed in chunk.seeds:
        result, found = seed_files(seed, config, keep=keep_files)
        results.append(result)
        if found:
            files[seed] = found
    return ChunkResult(chunk, results, files)


def run_campaign(
    seeds: Iterable[int],
    config: FuzzConfig = DEFAULT_CONFIG,
    *,
    workers: int = 1,
    out: str | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    chunk_size: int | None = None,
    executor: Executor | None = None,
    state: CampaignState | None = None,
) -> CampaignSummary:
    """Check every seed, in chunks: here, in ``workers`` processes, or on ``executor``;
    ``on_result`` sees each case as its chunk comes back. With ``state``, the chunks it holds
    are not run again and each is recorded once its failures' files are written. A chunk counts
    once, and a summary is sums and a sorted list: it is the same for every executor, order of
    completion and resumption."""
    seed_list = list(seeds)
    if state is not None:
        size = state.chunk_size
    else:
        size = chunk_size or default_chunk_size(len(seed_list), workers)
    summary = CampaignSummary()
    done = state.finished() if state is not None else {}
    for part in done.values():
        summary.merge(part)
    seen = set(done)

    def take(got: ChunkResult) -> None:
        if got.chunk.index in seen:
            return
        seen.add(got.chunk.index)
        part = CampaignSummary()
        for r in got.results:
            if out is not None and r.seed in got.files:
                r.files = write_files(out, got.files[r.seed])
            part.add(r)
        if state is not None:
            state.record(got.chunk, part)
        summary.merge(part)
        if on_result is not None:
            for r in got.results:
                on_result(r)

    job = functools.partial(run_chunk, config=config, keep_files=out is not None)
    run = executor or (run_here if workers <= 1 else in_processes(workers))
    run(job, [p for p in chunks(seed_list, size) if p.index not in seen], take)
    if summary.seeds != len(seed_list):
        raise RuntimeError(f"{len(seed_list) - summary.seeds} seeds did not come back")
    return summary
