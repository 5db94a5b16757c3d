"""Planted driver bugs, one at a time: the property layer (``DriverMachine`` and its
``DriverWatch``) must find each.

Each fixture patches the real driver (``loopctl.driver``) for the one test: a method of
``BareLoop`` or a function the driver's modules call, replaced by a buggy version. The machine
then runs under fixed settings (derandomized, a bounded number of examples, no shrinking), so a
test is deterministic and takes seconds; it asserts that the run fails and that the failure
names the property that caught the bug (its problem code). Every plant also counts how often it
fired: a plant that stops matching the driver (a refactoring moved the code it patches) fails
loudly instead of passing for the wrong reason.

Without any plant the same settings pass (``test_the_unpatched_driver_passes``), so what fails
below is the bug.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis.stateful import run_state_machine_as_test
from planting import HUNT, NEVER_FIRED, Plant, plant_function, without_local_constants

import loopctl.driver.model as driver_model
from loopctl.api import ApiError
from loopctl.core import (
    AwaitingModel,
    AwaitingTools,
    Fail,
    Feed,
    LoopError,
    Message,
    ToolResult,
    ToolResults,
)
from loopctl.driver import BareLoop, build_policy
from loopctl.tools import Dispatcher
from loopctl_sim.props import invariants as inv
from loopctl_sim.props.driver_machine import DriverMachine


def hunt(machine: type[DriverMachine] = DriverMachine) -> str:
    """Run the machine under ``HUNT``; the text of the failure it finds."""
    with pytest.raises(AssertionError) as info:
        run_state_machine_as_test(machine, settings=HUNT)
    return str(info.value)


@pytest.fixture(autouse=True)
def _same_examples_in_any_order(monkeypatch: pytest.MonkeyPatch) -> None:
    without_local_constants(monkeypatch)


# --- the plants ----------------------------------------------------------------------------------


@pytest.fixture
def completion_order(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """Tool results returned in completion order instead of call order."""
    plant = Plant()
    real = Dispatcher.run

    async def dispatch(self: Dispatcher, calls: Any, **kwargs: Any) -> list[ToolResult]:
        async def one(call: Any) -> ToolResult:
            results: list[ToolResult] = await real(self, [call], **kwargs)
            return results[0]

        tasks = [asyncio.ensure_future(one(call)) for call in calls]
        for task in tasks:  # a crash in one leaves the others' outcomes unread: read them
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        results = [await done for done in asyncio.as_completed(tasks)]
        if [r.call_id for r in results] != [c.id for c in calls]:
            plant.fired += 1
        return results

    monkeypatch.setattr(Dispatcher, "run", dispatch)
    yield plant


def _on_resume_with_pending_calls(
    monkeypatch: pytest.MonkeyPatch, plant: Plant, instead: Callable[..., Any]
) -> None:
    """Patch ``BareLoop`` so that the first ``CallTools`` of a run resumed in ``AwaitingTools``
    (the calls pending at a crash) goes to ``instead(loop, step, policy, cancel, real)``."""
    real_run = BareLoop.run
    real_call_tools = BareLoop._call_tools

    async def run(self: BareLoop, input: Any = None, cancel: Any = None) -> Any:
        self._planted = input is None and isinstance(self.machine.state, AwaitingTools)  # type: ignore[attr-defined]
        return await real_run(self, input, cancel)

    async def call_tools(self: BareLoop, step: Any, policy: Any, cancel: Any) -> None:
        if getattr(self, "_planted", False):
            self._planted = False  # type: ignore[attr-defined]
            plant.fired += 1
            await instead(self, step, policy, cancel, real_call_tools)
            return
        await real_call_tools(self, step, policy, cancel)

    monkeypatch.setattr(BareLoop, "run", run)
    monkeypatch.setattr(BareLoop, "_call_tools", call_tools)


@pytest.fixture
def resume_skips_pending(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """A resume answers the pending calls as interrupted instead of dispatching them again."""
    plant = Plant()

    async def skip(loop: BareLoop, step: Any, policy: Any, cancel: Any, real: Any) -> None:
        results = [
            ToolResult(call_id=c.id, name=c.name, content="interrupted", is_error=True)
            for c in step.calls
        ]
        loop._feed(ToolResults(Message.from_results(results)))

    _on_resume_with_pending_calls(monkeypatch, plant, skip)
    yield plant


@pytest.fixture
def resume_dispatches_twice(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """A resume dispatches the pending calls twice (once more before the real dispatch)."""
    plant = Plant()

    async def twice(loop: BareLoop, step: Any, policy: Any, cancel: Any, real: Any) -> None:
        await loop._dispatcher().run(step.calls)  # cut off by a cancel as the real dispatch is
        await real(loop, step, policy, cancel)

    _on_resume_with_pending_calls(monkeypatch, plant, twice)
    yield plant


@pytest.fixture
def one_retry_too_many(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The retry count is off by one: one retry more than ``max_retries``."""
    return plant_function(
        monkeypatch,
        driver_model,
        "retry_delay",
        lambda real, e, a, c, d: real(
            e, a, c.model_copy(update={"max_retries": c.max_retries + 1}), d
        ),
    )


@pytest.fixture
def one_retry_too_few(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The retry count is off by one: it gives up one retry early."""
    return plant_function(
        monkeypatch,
        driver_model,
        "retry_delay",
        lambda real, e, a, c, d: None if a + 1 >= c.max_retries else real(e, a, c, d),
    )


@pytest.fixture
def retry_after_ignored(monkeypatch: pytest.MonkeyPatch) -> Plant:
    """The server's retry-after is ignored: the backoff alone decides the delay."""
    return plant_function(
        monkeypatch,
        driver_model,
        "retry_delay",
        lambda real, e, a, c, d: real(ApiError(e.error, should_retry=e.should_retry), a, c, d),
    )


def _patch_feed(monkeypatch: pytest.MonkeyPatch, plant: Plant, change: Callable[..., bool]) -> None:
    """``BareLoop._feed`` through ``change(loop, name, args, plant)``, which returns True when
    it took the feed over (the real feed is then not given) and counts that in ``plant`` before
    it feeds anything (a feed may raise the watch's failure)."""
    real = BareLoop._feed

    def feed(self: BareLoop, fed: Feed) -> None:
        if not change(self, fed.name, fed.args(), plant):
            real(self, fed)

    monkeypatch.setattr(BareLoop, "_feed", feed)


@pytest.fixture
def overflow_fails_the_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """A context overflow fails the run instead of becoming an emergency compaction."""
    plant = Plant()
    real = BareLoop._feed

    def change(loop: BareLoop, name: str, args: Any, plant: Plant) -> bool:
        if name != "set_context_tokens" or not isinstance(loop.machine.state, AwaitingModel):
            return False
        plant.fired += 1
        error = LoopError(kind="context_overflow", message="the context is too long")
        real(loop, Fail(error))
        return True

    _patch_feed(monkeypatch, plant, change)
    yield plant


@pytest.fixture
def estimate_not_updated(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """The context estimate is not updated after tool results: the results are fed without
    the driver's count (None keeps the brain's)."""
    plant = Plant()
    real = BareLoop._feed

    def change(loop: BareLoop, name: str, args: Any, plant: Plant) -> bool:
        if name != "tool_results" or args.get("context_tokens") is None:
            return False
        plant.fired += 1
        real(loop, ToolResults(args["message"]))
        return True

    _patch_feed(monkeypatch, plant, change)
    yield plant


@pytest.fixture
def stale_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """The policy cache is keyed without the run config: a changed config is not seen."""
    plant = Plant()

    def policy(self: BareLoop) -> Any:
        key = (self.session, self.registry, self._compact_requested)
        cached = getattr(self, "_planted_cache", None)
        if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
            if cached[2] is not self.config:
                plant.fired += 1
            return cached[1]
        fresh = build_policy(
            self.session, self.config, tools=self.registry.names(), compact_now=key[2]
        )
        self._planted_cache = (key, fresh, self.config)  # type: ignore[attr-defined]
        return fresh

    monkeypatch.setattr(BareLoop, "policy", policy)
    yield plant


@pytest.fixture
def policy_cached_past_a_request(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """The policy cache is keyed on the configs and the registry only: a compaction a hook or
    ``before_step`` requested (``request_compaction``) is not in the next step's policy, and
    once cached with it, the request outlives the compaction."""
    plant = Plant()

    def policy(self: BareLoop) -> Any:
        key = (self.session, self.config, self.registry)
        cached = getattr(self, "_planted_cache", None)
        if cached is not None and cached[0] == key:
            if cached[1].compact_now != self._compact_requested:
                plant.fired += 1
            return cached[1]
        fresh = build_policy(
            self.session,
            self.config,
            tools=self.registry.names(),
            compact_now=self._compact_requested,
        )
        self._planted_cache = (key, fresh)  # type: ignore[attr-defined]
        return fresh

    monkeypatch.setattr(BareLoop, "policy", policy)
    yield plant


@pytest.fixture
def resume_drops_carried_results(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """A resumed run's result leaves out the tool results the restored brain carried over from
    before the restore (it reports what its own body fed, from the exchange it finished on)."""
    plant = Plant()
    real_run = BareLoop.run
    real_finalize = BareLoop._finalize

    async def run(self: BareLoop, input: Any = None, cancel: Any = None) -> Any:
        resuming = input is None and self.machine.started
        self._planted_before = self.machine.pending if resuming else ()  # type: ignore[attr-defined]
        return await real_run(self, input, cancel)

    def finalize(self: BareLoop) -> Any:
        result = real_finalize(self)
        carried = [m for m in getattr(self, "_planted_before", ()) if m.tool_results]
        if not carried:
            return result
        plant.fired += 1
        kept = tuple(m for m in result.messages if not any(m is c for c in carried))
        return result.model_copy(update={"messages": kept})

    monkeypatch.setattr(BareLoop, "run", run)
    monkeypatch.setattr(BareLoop, "_finalize", finalize)
    yield plant


@pytest.fixture
def compactor_error_swallowed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Plant]:
    """A compactor that raises is taken for one that found nothing to cut (a no-op), so the
    run goes on as if nothing broke."""
    plant = Plant()
    real = BareLoop._compact

    async def compact(self: BareLoop, step: Any, cancel: Any) -> None:
        user = self.compactor

        class Swallowing:
            async def compact(self, messages: Any, reason: Any) -> Any:
                try:
                    return await user.compact(messages, reason)
                except Exception:
                    plant.fired += 1
                    return None

        self.compactor = Swallowing()
        try:
            await real(self, step, cancel)
        finally:
            self.compactor = user

    monkeypatch.setattr(BareLoop, "_compact", compact)
    yield plant


# --- the tests -----------------------------------------------------------------------------------


def test_the_unpatched_driver_passes() -> None:
    run_state_machine_as_test(DriverMachine, settings=HUNT)


#: Each planted bug (its fixture) and the codes of the properties that may catch it first.
PLANTED = [
    ("completion_order", {inv.InvariantCode.RESULT_ORDER}),
    ("resume_skips_pending", {inv.InvariantCode.DISPATCH_ONCE}),
    ("resume_dispatches_twice", {inv.InvariantCode.DISPATCH_ONCE}),
    # one attempt more than allowed: the attempt bound stops it, or the retry check sees it
    ("one_retry_too_many", {inv.InvariantCode.RETRY, inv.InvariantCode.RUNAWAY}),
    ("one_retry_too_few", {inv.InvariantCode.RETRY}),
    ("retry_after_ignored", {inv.InvariantCode.RETRY_AFTER}),
    ("overflow_fails_the_run", {inv.InvariantCode.OVERFLOW}),
    ("estimate_not_updated", {inv.InvariantCode.ESTIMATE}),
    ("stale_policy", {inv.InvariantCode.POLICY}),
    # not in the step's policy, or cached with it: the request outlives the compaction and the
    # brain compacts again and again (the step bound stops it)
    ("policy_cached_past_a_request", {inv.InvariantCode.POLICY, inv.InvariantCode.RUNAWAY}),
    ("resume_drops_carried_results", {inv.InvariantCode.RUN_MESSAGES}),
    ("compactor_error_swallowed", {inv.InvariantCode.COMPACTION}),
]


@pytest.mark.parametrize(("bug", "codes"), PLANTED, ids=[bug for bug, _ in PLANTED])
def test_the_property_layer_finds_the_planted_bug(
    bug: str, codes: set[str], request: pytest.FixtureRequest
) -> None:
    plant: Plant = request.getfixturevalue(bug)
    text = hunt()
    assert plant.fired, NEVER_FIRED
    assert any(f"{code}:" in text for code in codes), text
