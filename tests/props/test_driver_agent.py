"""``DriverMachine`` around a user's own agent: the sample support agent
(``examples/support_agent``), built by its factory, under the exploring model and the faults.

The first test runs the example of docs/testing.md exactly as the page shows it (the code block
is read from the page), under fixed settings. The others show what the machine does with an
agent: its simulated tools never run, its factory builds every body (crashes included), and a
bug in the agent's own parts (a compactor that splits a call from its result) is found.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from examples.support_agent import agent as shop
from loopctl.core import CompactReason, Message
from loopctl.driver import BareLoop
from loopctl_sim.props.driver_machine import DriverMachine
from loopctl_sim.sim.agent import AgentFactory

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"

#: Fixed settings: the same examples every run, no database.
FIXED = settings(
    max_examples=15,
    stateful_step_count=4,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _docs_example() -> dict[str, Any]:
    """The code block of docs/testing.md that starts with ``# tests/test_shop_properties.py``,
    run as a module would be."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"```python\n(# tests/test_shop_properties\.py\n.*?)```", text, re.S)
    assert found is not None, "docs/testing.md lost the DriverMachine example"
    namespace: dict[str, Any] = {"__name__": "test_shop_properties"}
    exec(compile(found.group(1), str(DOCS), "exec"), namespace)
    return namespace


def test_the_docs_example_runs_on_the_sample_agent() -> None:
    example = _docs_example()
    machine = example["ShopMachine"]
    assert issubclass(machine, DriverMachine) and machine.configs is None
    assert example["TestShop"].settings.max_examples == 20
    refunds = list(shop.REFUNDS)
    run_state_machine_as_test(machine, settings=FIXED)
    assert refunds == shop.REFUNDS  # refund is simulated: never run for real


class _Shop(DriverMachine):
    agent: ClassVar[str | AgentFactory | None] = shop.build  # a callable, or "module:factory"
    inputs = ("Where is my order A-1001?", "Refund order A-1003, please.")
    simulated = frozenset({"refund"})


def test_every_body_is_built_by_the_factory_and_runs_its_tools(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[BareLoop] = []

    def build(**kwargs: Any) -> BareLoop:
        loop = shop.build(**kwargs)
        built.append(loop)
        return loop

    class Counting(_Shop):
        agent = build

    executions: list[int] = []

    class Watching(Counting):
        def teardown(self) -> None:
            executions.append(sum(self.executions.values()))

    run_state_machine_as_test(Watching, settings=FIXED)
    assert built, "the factory was never called"
    assert all(loop.session.system_prompt == shop.SYSTEM_PROMPT for loop in built)
    assert sum(executions) > 0, "no live tool ever ran"


class _SplittingCompactor:
    """A user's compactor with a bug: it keeps the last message, which may be the results of a
    call it just cut off."""

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        return [messages[0], messages[-1]] if len(messages) > 2 else None


def _splitting_build(**kwargs: Any) -> BareLoop:
    return shop.build(**kwargs).replace(compactor=_SplittingCompactor())


def test_a_compactor_that_splits_a_call_from_its_result_is_found() -> None:
    class Buggy(_Shop):
        agent = _splitting_build

    hunt = settings(FIXED, max_examples=60, phases=[Phase.generate], report_multiple_bugs=False)
    with pytest.raises(Exception) as info:
        run_state_machine_as_test(Buggy, settings=hunt)
    assert "compacted history is not valid" in str(info.value), info.value
