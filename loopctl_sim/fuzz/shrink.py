"""Shrinking a failing world to a minimal reproducer: delta debugging (``ddmin``, Zeller and
Hildebrandt, 2002: remove chunks of a list, halving the chunk size whenever no chunk can go; the
result is 1-minimal), with the deterministic simulator as the oracle.

``shrink_scenario`` applies it to one list of units (the scripted replies, the faults and the
tools, so a reply and the fault it needs shrink together; an agent's tools are its own and
stay), then lowers each fault's ``times`` and place. A removed reply shifts the later ones,
which is fine: the oracle re-runs every candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from loopctl_sim.sim.scenario import ReplyScenario, Scenario

T = TypeVar("T")

#: The most oracle runs one shrink may spend (each is one simulated run).
DEFAULT_MAX_TESTS: Final = 2_000


class _Budget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def spend(self) -> bool:
        if self.used >= self.limit:
            return False
        self.used += 1
        return True


def ddmin(
    items: Sequence[T],
    fails: Callable[[list[T]], bool],
    *,
    max_tests: int = DEFAULT_MAX_TESTS,
    _budget: _Budget | None = None,
) -> list[T]:
    """A 1-minimal sublist of ``items`` (order kept) for which ``fails`` (assumed true of
    ``items``) still holds; after ``max_tests`` calls, the smallest failing list found."""
    budget = _budget or _Budget(max_tests)
    current = list(items)
    n = 2
    while len(current) >= 2:
        size = len(current)
        chunk = -(-size // n)  # ceil
        subsets = [current[i : i + chunk] for i in range(0, size, chunk)]
        reduced = False
        # try each subset alone, then each complement
        for subset in subsets:
            if len(subsets) > 1 and budget.spend() and fails(subset):
                current, n, reduced = subset, 2, True
                break
        if not reduced:
            for i in range(len(subsets)):
                complement = [x for j, s in enumerate(subsets) if j != i for x in s]
                if budget.spend() and fails(complement):
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if budget.used >= budget.limit:
            break
        if not reduced:
            if n >= size:
                break
            n = min(size, 2 * n)
    if len(current) == 1 and budget.spend() and fails([]):
        return []
    return current


@dataclass(frozen=True)
class ShrinkResult:
    """The smallest failing scenario found, the oracle runs it took, and where it started."""

    scenario: Scenario
    tests: int
    original: Scenario

    def summary(self) -> str:
        a, b = self.original, self.scenario
        return (
            f"shrunk from {len(a.model)} replies, {len(a.faults)} faults and {len(a.tools)} "
            f"tools to {len(b.model)} replies, {len(b.faults)} faults and {len(b.tools)} tools "
            f"in {self.tests} runs"
        )


_Unit = tuple[str, int]


def _build(scenario: Scenario, units: Sequence[_Unit]) -> Scenario:
    keep = {kind: [i for k, i in units if k == kind] for kind in ("reply", "fault", "tool")}
    tools = list(scenario.tools.items())
    return scenario.model_copy(
        update={
            "model": [scenario.model[i] for i in keep["reply"]],
            "faults": [scenario.faults[i] for i in keep["fault"]],
            "tools": dict(tools[i] for i in keep["tool"]),
        }
    )


def _pin_ids(replies: Sequence[ReplyScenario]) -> list[ReplyScenario]:
    """Give every call its current default id, so removing a reply does not rename the calls
    of the ones after it (ids default to the reply's position)."""
    out = []
    for index, reply in enumerate(replies):
        calls = [
            c if c.id is not None else c.model_copy(update={"id": f"call_{index + 1}_{j + 1}"})
            for j, c in enumerate(reply.calls)
        ]
        out.append(reply.model_copy(update={"calls": calls}))
    return out


#: Rounds of removing units and lowering faults (each round only if the last lowered one).
_ROUNDS: Final = 4
_PLACES: Final = ("step", "model_call", "tool_call")


def _units(scenario: Scenario) -> list[_Unit]:
    units: list[_Unit] = [("reply", i) for i in range(len(scenario.model))]
    units += [("fault", i) for i in range(len(scenario.faults))]
    if scenario.agent is None:
        # an agent's tools are its own: the scenario's entries only say how they run (a tool
        # removed from them would run live, faults and all), so they are kept
        units += [("tool", i) for i in range(len(scenario.tools))]
    return units


def _lower_faults(
    best: Scenario, fails: Callable[[Scenario], bool], budget: _Budget
) -> Scenario | None:
    """``best`` with each fault's ``times`` and place (step, model call, tool call) as low as
    it can go and still fail; None when nothing could be lowered. Places are tried at a few
    points from 1 up (1, 2, 3, a quarter, a half, three quarters, one less), not one by one."""
    faults = list(best.faults)
    changed = False
    for i in range(len(faults)):
        fault = faults[i]
        trials: list[dict[str, int]] = [{"times": t} for t in range(1, fault.times)]
        for place in _PLACES:
            value = getattr(fault, place)
            if value is not None and value > 1:
                points = {1, 2, 3, value // 4, value // 2, 3 * value // 4, value - 1}
                trials += [{place: p} for p in sorted(p for p in points if 1 <= p < value)]
        for update in trials:
            if any(getattr(faults[i], k) <= v for k, v in update.items()):
                continue  # already as low (an earlier trial of this fault got there)
            if not budget.spend():
                return best if changed else None
            trial = [*faults[:i], faults[i].model_copy(update=update), *faults[i + 1 :]]
            candidate = best.model_copy(update={"faults": trial})
            if fails(candidate):
                faults, best, changed = trial, candidate, True
    return best if changed else None


def shrink_scenario(
    scenario: Scenario, fails: Callable[[Scenario], bool], *, max_tests: int = DEFAULT_MAX_TESTS
) -> ShrinkResult:
    """The smallest sub-scenario for which ``fails`` (assumed true of ``scenario``, and
    deterministic) holds. Removing units and lowering the faults alternate while either finds
    something: a fault that strikes earlier may need fewer replies before it."""
    budget = _Budget(max_tests)
    base = scenario.model_copy(update={"model": _pin_ids(scenario.model)})
    if not fails(base):  # pinning ids changed nothing for the run: it must still fail
        base = scenario
    best = base
    units = _units(best)

    def test(candidate: list[_Unit]) -> bool:
        return fails(_build(best, candidate))

    for _ in range(_ROUNDS):
        kept = ddmin(units, test, max_tests=max_tests, _budget=budget)
        best = _build(best, kept)
        lowered = _lower_faults(best, fails, budget)
        if lowered is None or budget.used >= budget.limit:
            break
        best = lowered  # a fault now strikes earlier: replies it needed no longer may be
        units = _units(best)
    return ShrinkResult(best, budget.used, scenario)
