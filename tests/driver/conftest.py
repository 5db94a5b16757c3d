from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from loopctl.core import LoopMachine, MachinePolicy, MachineStep
from loopctl.observe import IoEvent, LoopObserver


class Recorder(LoopObserver):
    """Collects everything the driver reports, for assertions."""

    def __init__(self) -> None:
        self.steps: list[MachineStep] = []
        self.feeds: list[tuple[str, dict[str, Any]]] = []
        self.io_events: list[IoEvent] = []
        self.started = 0
        self.ended = 0

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        self.started += 1

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self.steps.append(step)

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        self.feeds.append((name, dict(args)))

    def io(self, event: IoEvent) -> None:
        self.io_events.append(event)

    def run_ended(self, machine: LoopMachine) -> None:
        self.ended += 1

    def feed_names(self) -> list[str]:
        return [name for name, _ in self.feeds]

    def io_kinds(self) -> list[str]:
        return [e.kind for e in self.io_events]


class FakeClock:
    """An injected sleep that records delays instead of waiting."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
