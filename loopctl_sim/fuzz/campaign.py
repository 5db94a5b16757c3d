"""Fault-injection campaigns: many seeded worlds, checked at every step.

A campaign takes a range of seeds; each seed becomes one case, of one of three targets:

- the built-in world at machine level (``loopctl_sim.fuzz.case``: a scenario of about 20 turns
  with scripted replies, builtin tools and a swarm of random faults, the brain driven by the
  machine-level simulator), checked five ways (``loopctl_sim.fuzz.checks``: invariants at every
  step and feed, determinism, exact crash/restore, liveness with a heal run, nothing raises);
- the same world at driver level (``FuzzConfig.level = "driver"``): the real ``BareLoop``'s
  retries, dispatch, compaction and resume, the same checks made from outside the driver;
- the user's own agent (``FuzzConfig.agent``: ``loopctl_sim.fuzz.agent_case`` and
  ``agent_checks``): their loop, the exploring model, their tools live or simulated, with the
  checks of the built-in world plus: no tool call runs twice, nothing escapes the run.

This module owns what happens around the cases: parsing the command line's seed and fault
ranges, what a failing seed leaves behind (its trace and scenario saved to ``out``, then shrunk
with ``loopctl_sim.fuzz.shrink`` to a minimal scenario whose trace ``loopctl-sim replay`` replays
(``--agent``, with ``CaseResult.replay_tools``, for an agent) and whose YAML ``loopctl-sim run``
runs), and the summary of a whole campaign. Where the seeds run, in this process or spread over
``workers`` processes in chunks, is ``loopctl_sim.fuzz.executors``. A passing seed's trace is
dropped as soon as it is checked: a campaign keeps only counts and its failures.

``CaseResult`` and ``FuzzConfig`` are re-exported here for the command line's imports.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from loopctl_sim.fuzz.agent_case import case_for
from loopctl_sim.fuzz.agent_checks import check_agent_case, scripted
from loopctl_sim.fuzz.case import (
    ALL_FAULTS,
    DEFAULT_CONFIG,
    FuzzCase,
    FuzzConfig,
    scenario_yaml,
)
from loopctl_sim.fuzz.checks import CaseResult, Failure, check_case, crash_variant
from loopctl_sim.fuzz.executors import chunks, default_chunk_size, run_here, run_in_processes
from loopctl_sim.fuzz.shrink import ShrinkResult, shrink_scenario
from loopctl_sim.sim.scenario import Scenario

__all__ = [
    "CampaignSummary",
    "CaseResult",
    "FuzzConfig",
    "parse_faults",
    "parse_seeds",
    "run_campaign",
    "run_seed",
]


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


#: The failures the first run (and its heal run and checks) finds alone: shrinking them need
#: not run the determinism twin and the crash variant.
_FIRST_RUN: Final = frozenset({"invariant", "exception", "livelock", "heal", "check", "tool-twice"})


def _oracle_config(config: FuzzConfig, failure: Failure) -> FuzzConfig:
    quiet = dataclasses.replace(config, shrink=False)
    if failure.kind in _FIRST_RUN:
        return dataclasses.replace(quiet, check_determinism=False, check_crash=False)
    if failure.kind == "nondeterminism":
        return dataclasses.replace(quiet, check_crash=False)
    return quiet


def _shrink(case: FuzzCase, base: Scenario, failure: Failure, config: FuzzConfig) -> ShrinkResult:
    quiet = _oracle_config(config, failure)

    def fails(candidate: Scenario) -> bool:
        found = check(case, candidate, quiet).failure
        return found is not None and found.signature == failure.signature

    return shrink_scenario(base, fails, max_tests=config.max_shrink_tests)


def run_seed(seed: int, config: FuzzConfig = DEFAULT_CONFIG, out: str | None = None) -> CaseResult:
    """Check one seed; on failure save the trace and scenario to ``out`` and shrink them.

    An agent's case is shrunk in its written-out form (the replies the exploring model gave, as
    a script: ``agent_checks.scripted``); the shrunk scenario and its trace are the reproducer,
    and ``CaseResult.replay_tools`` says how the trace replays against the agent."""
    case = case_for(seed, config)
    result = check(case, None, config)
    failure = result.failure
    if failure is None:
        result.trace = ""
        result.script = []
        return result
    files: list[str] = []
    if out is not None:
        d = Path(out)
        d.mkdir(parents=True, exist_ok=True)
        base = d / f"seed-{seed}"
        Path(f"{base}.jsonl").write_text(result.trace, encoding="utf-8")
        Path(f"{base}.yaml").write_text(scenario_yaml(case.scenario), encoding="utf-8")
        files += [f"{base}.jsonl", f"{base}.yaml"]
    start = _shrink_start(case, result, failure, config) if config.shrink else None
    if start is not None:
        small = _shrunk(case, start, failure, config, result)
        if out is not None:
            again = check(case, small, dataclasses.replace(config, check_crash=False))
            result.replay_tools = again.replay_tools
            base = Path(out) / f"seed-{seed}.min"
            Path(f"{base}.jsonl").write_text(again.trace, encoding="utf-8")
            Path(f"{base}.yaml").write_text(scenario_yaml(small), encoding="utf-8")
            files += [f"{base}.jsonl", f"{base}.yaml"]
    result.files = files
    result.trace = ""
    result.script = []
    return result


def _shrink_start(
    case: FuzzCase, result: CaseResult, failure: Failure, config: FuzzConfig
) -> Scenario | None:
    """What shrinking starts from: the case's scenario, an agent's written out as a script
    (None, with a note, when the script does not fail the same way)."""
    if case.scenario.agent is None:
        return case.scenario
    start = scripted(case.scenario, result.script)
    again = check(case, start, _oracle_config(config, failure)).failure
    if again is None or again.signature != failure.signature:
        result.notes.append(
            "not shrunk: the run written out as a script does not fail the same way (the agent "
            "is not deterministic)"
        )
        return None
    return start


def _shrunk(
    case: FuzzCase, start: Scenario, failure: Failure, config: FuzzConfig, result: CaseResult
) -> Scenario:
    shrunk = _shrink(case, start, failure, config)
    result.shrunk = shrunk.summary()
    small = shrunk.scenario.model_copy(
        update={"description": f"fuzz seed {case.seed}, shrunk ({shrunk.summary()}): {failure}"}
    )
    if failure.kind == "crash-restore":
        steps = check(case, small, dataclasses.replace(config, check_crash=False)).steps
        small = crash_variant(case, small, steps)
    return small


@dataclass
class CampaignSummary:
    """A whole campaign in counts (what ran, what struck, how runs ended) and its failing seeds.

    Only counts and failures are kept, never a passing seed's trace, and the counts do not
    depend on the order cases arrive in: one process and many give the same summary.
    """

    seeds: int = 0
    runs: int = 0
    steps: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    enabled: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[CaseResult] = field(default_factory=list)
    #: the exploring model's moves (an agent's campaign)
    moves: Counter[str] = field(default_factory=Counter)
    #: what some seeds could not check (each note, with the number of seeds it applies to)
    notes: Counter[str] = field(default_factory=Counter)
    #: the faults the seeds scheduled, by kind (``faults``: those that struck)
    scheduled: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, r: CaseResult) -> None:
        self.seeds += 1
        self.runs += r.runs
        self.steps += r.steps
        self.faults.update(r.faults)
        self.enabled.update(r.enabled)
        self.outcomes[r.outcome] += 1
        self.moves.update(r.moves)
        self.notes.update(r.notes)
        self.scheduled.update(r.scheduled)
        if r.failure is not None:
            self.failures.append(r)

    def fault_rows(self) -> list[tuple[str, int, int, int]]:
        """``(kind, faults scheduled, times they struck, seeds that enabled the kind)`` for
        every kind that any seed enabled (a fault with ``times: 3`` strikes up to 3 times; one
        placed past the end of its run never does)."""
        return [
            (kind, self.scheduled[kind], self.faults[kind], self.enabled[kind])
            for kind in ALL_FAULTS
            if self.enabled[kind] or self.faults[kind]
        ]

    def lines(self) -> list[str]:
        out = [
            f"{self.seeds} seeds, {self.runs} simulated runs, {self.steps} steps checked; "
            f"{len(self.failures)} failing seed(s)",
            "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items())),
            "faults that struck, by kind:",
        ]
        for kind, scheduled, struck, enabled in self.fault_rows():
            out.append(
                f"  {kind:<20} {struck:>7}  ({scheduled} scheduled; enabled in {enabled} seeds)"
            )
        if self.moves:
            out.append(
                "the model's moves: " + ", ".join(f"{k} {v}" for k, v in sorted(self.moves.items()))
            )
        for note, seeds in sorted(self.notes.items()):
            out.append(f"note ({seeds} seeds): {note}")
        return out


def _run_seeds(seeds: Sequence[int], config: FuzzConfig, out: str | None) -> list[CaseResult]:
    """One chunk's job (module-level, so that it pickles for a worker process)."""
    return [run_seed(s, config, out) for s in seeds]


def run_campaign(
    seeds: Iterable[int],
    config: FuzzConfig = DEFAULT_CONFIG,
    *,
    workers: int = 1,
    out: str | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    chunk_size: int | None = None,
) -> CampaignSummary:
    """Check every seed (in ``workers`` processes, in chunks); ``on_result`` sees each case."""
    seed_list = list(seeds)
    summary = CampaignSummary()

    def take(results: Iterable[CaseResult]) -> None:
        for r in results:
            summary.add(r)
            if on_result is not None:
                on_result(r)

    size = chunk_size or default_chunk_size(len(seed_list), workers)
    parts = chunks(seed_list, size)
    job = functools.partial(_run_seeds, config=config, out=out)
    if workers <= 1:
        run_here(job, parts, take)
    else:
        run_in_processes(job, parts, take, workers)
    summary.failures.sort(key=lambda r: r.seed)
    return summary
