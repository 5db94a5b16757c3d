"""Looping worlds: some fuzz seeds loop on purpose, so the brain's loop detector is judged.

A world of ``make_case`` draws its calls at random: it almost never repeats one call, never
alternates two, and its loop policy was one window for every seed, so a detector that ignored
ping-pongs, the window or its own warning passed the whole campaign. A share of the seeds
(``FuzzLoops.looping`` out of 100) gets one loop segment written over part of its replies
(``repeat``, ``spaced``, ``shuffled``, ``ping_pong``, ``parallel``, or ``noise``: only the policy)
and its loop policy drawn for loops, both from ``LoopWeights``. The segment is long enough to
escalate, so a ``warn`` run is warned and then failed.

Everything here draws from its own ``random.Random`` derived from the seed, never from the
case's stream: the seeds that do not loop are the worlds they always were, and the order of
this module's draws is part of the campaign's output.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from loopctl_sim.props.loop_weights import LOOP_WEIGHTS, LoopWeights
from loopctl_sim.sim.scenario import CallScenario, PolicyScenario, ReplyScenario

_T = TypeVar("_T")


@dataclass(frozen=True)
class FuzzLoops:
    """How many seeds loop and what they draw: ``looping`` out of 100 seeds get a loop segment
    and a loop policy from ``weights`` (0 turns looping worlds off)."""

    looping: int = 40
    weights: LoopWeights = field(default=LOOP_WEIGHTS)

    def __post_init__(self) -> None:
        if not 0 <= self.looping <= 100:
            raise ValueError(f"FuzzLoops.looping is out of 100 seeds, got {self.looping}")


#: The share and the weights ``make_case`` uses.
DEFAULT_LOOPS: Final = FuzzLoops()


def _weighted(rng: random.Random, pairs: Sequence[tuple[_T, int]]) -> _T:
    return rng.choices([v for v, _ in pairs], weights=[w for _, w in pairs])[0]


def _call(tool: str, value: int, reverse: bool = False) -> CallScenario:
    if tool == "add":
        args: dict[str, Any] = {"a": value, "b": 1}
        if reverse:
            args = {"b": 1, "a": value}
    elif tool in ("upper", "length"):
        args = {"text": f"loop{value}"}
    else:
        args = {"x": value}
    return CallScenario(name=tool, arguments=args)


def _segment(
    rng: random.Random, pattern: str, tools: Sequence[str], limit: int
) -> list[list[CallScenario]]:
    """The exchanges (each a list of calls) of one loop segment."""
    if pattern == "shuffled" and "add" not in tools:
        pattern = "repeat"  # only ``add`` takes two arguments
    a_tool = "add" if pattern == "shuffled" else rng.choice(list(tools))
    b_tool = rng.choice(list(tools))
    a, b = _call(a_tool, 7), _call(b_tool, 8)
    # past the limit, then as many exchanges again: a warned run goes on to be failed
    k = 2 * limit + rng.randint(1, 3)
    if pattern == "repeat":
        return [[a] for _ in range(k)]
    if pattern == "shuffled":
        return [[_call("add", 7, reverse=rng.random() < 0.5)] for _ in range(k)]
    if pattern == "spaced":
        other = iter(range(100, 200))
        return [[a] if i % 2 == 0 else [_call(b_tool, next(other))] for i in range(2 * k)]
    if pattern == "ping_pong":
        flip = a_tool == "add"
        return [
            [_call(a_tool, 7, reverse=flip and rng.random() < 0.3)] if i % 2 == 0 else [b]
            for i in range(max(k, 6))
        ]
    if pattern == "parallel":
        pair = [a, a] if rng.random() < 0.5 else [a, b]
        return [list(pair) for _ in range(k)]
    return []  # noise: the replies stay as drawn


def with_loops(
    seed: int,
    replies: list[ReplyScenario],
    policy: PolicyScenario,
    tools: Sequence[str],
    loops: FuzzLoops = DEFAULT_LOOPS,
) -> tuple[list[ReplyScenario], PolicyScenario]:
    """``replies`` (the last one the final answer) and ``policy`` with seed ``seed``'s loop
    segment and loop policy, or both unchanged when the seed does not loop."""
    rng = random.Random(f"loopctl-fuzz-loops:{seed}")  # apart from the case's Random(seed)
    if rng.randrange(100) >= loops.looping or len(replies) < 2:
        return replies, policy
    w = loops.weights
    limit = _weighted(rng, w.limits)
    policy = policy.model_copy(
        update={
            "loop_window": _weighted(rng, w.windows),
            "loop_repeat_limit": limit,
            "loop_action": _weighted(rng, w.actions),
        }
    )
    exchanges = _segment(rng, _weighted(rng, w.patterns), tools, limit)
    room = len(replies) - 1  # the final answer stays last
    exchanges = exchanges[:room]
    start = rng.randint(0, room - len(exchanges))
    out = list(replies)
    for i, calls in enumerate(exchanges):
        old = out[start + i]
        out[start + i] = old.model_copy(update={"calls": calls})
    return out, policy
