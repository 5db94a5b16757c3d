"""``MachinePolicy``: the contract's defaults, its bounds, and that it is frozen."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from loopctl import MachinePolicy
from loopctl.core import MAX_LOOP_WINDOW


@pytest.mark.parametrize(
    ("field", "default"),
    [
        ("max_turns", 200),
        ("context_window", 128_000),
        ("compact_threshold", 0.8),
        ("emergency_threshold", 0.95),
        ("tools", ()),
        ("compact_now", False),
        ("loop_window", 12),
        ("loop_repeat_limit", 3),
        ("loop_action", "warn"),
    ],
)
def test_defaults_follow_the_contract(field: str, default: object) -> None:
    assert getattr(MachinePolicy(), field) == default


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_turns": -1},
        {"context_window": 0},
        {"compact_threshold": 0},
        {"emergency_threshold": 0},
        {"compact_threshold": 0.9, "emergency_threshold": 0.8},
        {"loop_window": 1},
        {"loop_window": MAX_LOOP_WINDOW + 1},
        {"loop_repeat_limit": 1},
        {"loop_action": "sometimes"},
        {"temperature": 0.2},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_out_of_bounds_settings_are_rejected(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        MachinePolicy(**overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_turns": 0},
        {"compact_threshold": 0.9, "emergency_threshold": 0.9},
        {"loop_window": 2},
        {"loop_window": MAX_LOOP_WINDOW},
        {"loop_action": "off"},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()),
)
def test_edge_settings_are_accepted(overrides: dict[str, Any]) -> None:
    policy = MachinePolicy(**overrides)
    for key, value in overrides.items():
        assert getattr(policy, key) == value


def test_token_lines_are_fractions_of_the_window() -> None:
    policy = MachinePolicy(context_window=1000, compact_threshold=0.5, emergency_threshold=0.75)
    assert policy.threshold_tokens == 500
    assert policy.emergency_tokens == 750


def test_policy_is_frozen_and_hashable() -> None:
    policy = MachinePolicy(tools=("a",))
    with pytest.raises(ValidationError):
        policy.max_turns = 3  # type: ignore[misc]
    assert hash(policy) == hash(MachinePolicy(tools=("a",)))
