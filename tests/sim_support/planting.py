"""What the planted-bug tests share: the settings a hunt runs under and the counter a plant
keeps (``test_planted_bugs.py`` for the driver, ``test_planted_brain_bugs.py`` for the brain)."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.cache import LRUCache
from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants

#: Hunting a planted bug: the same examples every run (derandomized), no example database, stop
#: at the first failure (no shrinking), no timing: deterministic and seconds long.
HUNT = settings(
    max_examples=100,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
    print_blob=False,
)


def without_local_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hunt without hypothesis's constants from local code.

    Hypothesis mixes into its draws the literals of every local module loaded so far
    (``providers._get_local_constants``), so a derandomized hunt draws other examples when
    another test file was imported before it: a bug found with one file order was missed with
    another. With no local constants the examples depend on the strategies alone, in any order.
    """
    empty = Constants()
    monkeypatch.setattr(providers, "_get_local_constants", lambda: empty)
    # the cache of what each strategy may draw holds local constants too: a fresh one for the
    # hunt, and the old one back after it
    monkeypatch.setattr(providers, "CONSTANTS_CACHE", LRUCache(1024))


#: What a test says when its plant never fired.
NEVER_FIRED = "the plant never fired: the code it patches changed, update the plant"


class Plant:
    """Counts how often a planted bug fired: a plant that stops matching the code it patches
    (a refactoring moved it) must fail its test, not pass it for the wrong reason."""

    def __init__(self) -> None:
        self.fired = 0


def plant_function(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str, change: Callable[..., Any]
) -> Plant:
    """Replace ``module.name`` (a function the code under test calls by that name) by
    ``change(real, *args)``; the plant fires when the changed answer differs from the real one."""
    plant = Plant()
    real = vars(module)[name]

    def planted(*args: Any) -> Any:
        got = change(real, *args)
        if got != real(*args):
            plant.fired += 1
        return got

    monkeypatch.setattr(module, name, planted)
    return plant
