"""ddmin and scenario shrinking (loopctl_sim.fuzz.shrink)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_sim.fuzz.shrink import ddmin, shrink_scenario
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.machine import simulate
from loopctl_sim.sim.scenario import ReplyScenario, Scenario


def test_ddmin_finds_the_two_needed_elements() -> None:
    calls: list[list[int]] = []

    def fails(xs: list[int]) -> bool:
        calls.append(xs)
        return 3 in xs and 7 in xs

    assert ddmin(list(range(20)), fails) == [3, 7]
    assert all(isinstance(c, list) for c in calls)


def test_ddmin_keeps_order_and_is_one_minimal() -> None:
    items = list("abcdefghij")
    result = ddmin(items, lambda xs: {"b", "e", "i"} <= set(xs))
    assert result == ["b", "e", "i"]
    for i in range(len(result)):
        smaller = result[:i] + result[i + 1 :]
        assert not {"b", "e", "i"} <= set(smaller)


def test_ddmin_may_remove_everything() -> None:
    assert ddmin([1, 2, 3], lambda xs: True) == []


def test_ddmin_single_culprit_and_empty_input() -> None:
    assert ddmin(list(range(100)), lambda xs: 42 in xs) == [42]
    assert ddmin([], lambda xs: True) == []


def test_ddmin_respects_its_budget() -> None:
    count = 0

    def fails(xs: list[int]) -> bool:
        nonlocal count
        count += 1
        return 5 in xs and 50 in xs

    result = ddmin(list(range(64)), fails, max_tests=3)
    assert count <= 3
    assert 5 in result and 50 in result  # still failing, just not minimal


def _scenario() -> Scenario:
    replies = [
        ReplyScenario(text=f"step {i}", calls=[{"name": "add", "arguments": {"a": i, "b": 1}}])
        for i in range(8)
    ]
    replies.append(ReplyScenario(text="done"))
    return Scenario(
        name="s",
        input="go",
        tools={"add": {"builtin": "add"}},
        model=replies,
        faults=[
            Fault(kind="network", model_call=2, times=3),
            Fault(kind="tool_exception", tool_call=4),
            Fault(kind="inject", step=3, text="hi"),
        ],
        max_retries=1,
    )


def test_shrink_scenario_keeps_only_what_the_failure_needs() -> None:
    # "the failure": the run fails with a network error (needs the network fault, 2+ times)
    def fails(sc: Scenario) -> bool:
        outcome = simulate(sc.world()).outcome
        return outcome.kind == "failed" and outcome.error.kind == "network"  # type: ignore[union-attr]

    sc = _scenario()
    assert fails(sc)
    result = shrink_scenario(sc, fails)
    small = result.scenario
    assert fails(small)
    assert [f.kind for f in small.faults] == ["network"]
    assert small.faults[0].times == 2  # max_retries=1: two failures are enough
    # the fault was lowered to the first request, so no reply is needed before it
    assert small.faults[0].model_call == 1 and small.model == []
    assert result.tests > 0
    assert small.tools == {}
    assert "to 0 replies, 1 faults and 0 tools" in result.summary()


def test_shrink_pins_call_ids_so_removing_replies_does_not_rename_calls() -> None:
    sc = _scenario()
    seen: list[list[str]] = []

    def fails(candidate: Scenario) -> bool:
        ids = [c.id for r in candidate.model for c in r.calls]
        seen.append([i for i in ids if i is not None])
        return any(i == "call_5_1" for i in ids)

    small = shrink_scenario(sc, fails).scenario
    assert [c.id for r in small.model for c in r.calls] == ["call_5_1"]


@given(
    n=st.integers(0, 40),
    needed=st.sets(st.integers(0, 39), max_size=5),
)
@settings(max_examples=60, deadline=None)
def test_ddmin_on_a_monotone_failure_finds_exactly_the_needed_elements(
    n: int, needed: set[int]
) -> None:
    needed = {x for x in needed if x < n}
    assert ddmin(list(range(n)), lambda xs: needed <= set(xs)) == sorted(needed)
