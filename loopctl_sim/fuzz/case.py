"""The case generator: a seed becomes one world to check, a scenario with random faults.

Every seed fully determines its case through ``random.Random(seed)`` alone (no global randomness,
no clock), so a failing seed is its own reproducer. A case is a scenario of about
``FuzzConfig.turns`` model replies with builtin tools and, swarm-style, a random subset of the
enabled fault kinds placed at random model requests, tool calls and steps: a seed that enables
few kinds drives those few hard.

Random calls almost never repeat or alternate, so a share of the seeds (``FuzzLoops.looping``
out of 100) loops on purpose (``with_loops``): one loop segment (``repeat``, ``spaced``,
``shuffled``, ``ping_pong``, ``parallel``, or ``noise``: only the policy) written over part of
its replies, long enough that a warned run is then failed, and a loop policy drawn for it, both
from ``LoopWeights``. Those draws come from a stream of their own, so the seeds that do not loop
are the worlds they always were. The order of every draw is part of the campaign's output.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import yaml

from loopctl.core import MachinePolicy
from loopctl_sim.props.loop_weights import LOOP_WEIGHTS, LoopWeights
from loopctl_sim.sim.faults import MODEL_FAULTS, RUN_FAULTS, TOOL_FAULTS, Fault, FaultKind
from loopctl_sim.sim.scenario import (
    BUILTINS,
    CallScenario,
    ReplyScenario,
    Scenario,
    ToolScenario,
)
from loopctl_sim.trace import scrub

#: Every fault kind of ``loopctl_sim.sim.world``, in a fixed order.
ALL_FAULTS: Final[tuple[str, ...]] = tuple(
    sorted(MODEL_FAULTS) + sorted(TOOL_FAULTS) + sorted(RUN_FAULTS)
)
_RETRYABLE: Final = frozenset({"network", "timeout", "rate_limited", "server_error", "overloaded"})
_TOOLS: Final = tuple(sorted(BUILTINS))


@dataclass(frozen=True)
class FuzzConfig:
    """What a campaign injects and checks. Plain data (it travels to worker processes)."""

    faults: tuple[str, ...] = ALL_FAULTS
    turns: int = 20
    #: ``machine`` (the brain driven by the simulator) or ``driver`` (the real ``BareLoop``);
    #: an ``agent`` campaign is always at driver level
    level: str = "machine"
    check_determinism: bool = True
    check_crash: bool = True
    check_heal: bool = True
    #: an exception a tool does not declare (``@tool(raises=...)``), or a tool hook's or tool
    #: middleware's, fails the seed (``loopctl_sim.fuzz.agent_checks.CrashWatch``)
    check_tool_exceptions: bool = True
    shrink: bool = True
    max_shrink_tests: int = 400
    #: the user's agent (``module:factory``): its own loop is fuzzed instead of the built-in world
    agent: str | None = None
    #: how its tools run: ``live``, ``simulated``, ``recorded``, or one of them with a list
    #: (``loopctl_sim.sim.agent_run.tool_modes``)
    tools: str = "live"
    #: the traces whose tool results answer the ``recorded`` tools
    recorded: tuple[str, ...] = ()
    #: its tools no fault may strike (tools with side effects)
    exempt: tuple[str, ...] = ()
    #: the user's checks (``module:function``), run after every run
    checks: tuple[str, ...] = ()
    #: the tools are deterministic (True), are not (False), or find out by running twice (None)
    deterministic: bool | None = None
    #: the inputs an agent's runs start from (default: a generic task)
    inputs: tuple[str, ...] = ()
    #: where ``agent`` and ``checks`` are imported from (default: the current directory)
    cwd: str | None = None


#: Every check, every fault kind, shrinking on: the default of every function taking a config.
DEFAULT_CONFIG: Final = FuzzConfig()


@dataclass(frozen=True)
class FuzzCase:
    """One seed's world: the scenario and where the crash check strikes (a fraction of the run)."""

    seed: int
    scenario: Scenario
    crash_at: float
    enabled: tuple[str, ...]


def _arguments(rng: random.Random, tool: str, spread: int) -> dict[str, Any]:
    # A small spread makes identical calls likely, so loop detection gets exercised.
    if tool == "add":
        return {"a": rng.randint(0, spread), "b": rng.randint(0, 2)}
    if tool in ("upper", "length"):
        return {"text": f"t{rng.randint(0, spread)}"}
    return {"x": rng.randint(0, spread)}


def draw_fault(
    rng: random.Random, kind: str, replies: int, tools: Sequence[str], i: int, window: int
) -> Fault:
    """One fault of ``kind`` at a random place of a run of about ``replies`` replies (a tool
    fault by name picks one of ``tools``; with none, by call index)."""
    k: FaultKind = kind  # type: ignore[assignment]
    if kind in MODEL_FAULTS:
        times = rng.choice([1, 1, 1, 2, 3, 5]) if kind in _RETRYABLE else 1
        retry_after = rng.choice([None, 0.5, 2.0]) if kind == "rate_limited" else None
        return Fault(
            kind=k, model_call=rng.randint(1, replies + 3), times=times, retry_after=retry_after
        )
    if kind in TOOL_FAULTS:
        # an oversized result of about a tenth, a half or twice the window (4 characters a
        # token), at most 100,000 characters (every trace record holding it is scrubbed)
        scale = rng.choice([0.1, 0.5, 2.0])
        size = min(int(4 * window * scale), 100_000) if kind == "tool_oversized" else None
        if rng.random() < 0.75 or not tools:
            place = rng.randint(1, 2 * replies)
            return Fault(kind=k, tool_call=place, times=rng.randint(1, 2), size=size)
        return Fault(kind=k, tool=rng.choice(list(tools)), times=rng.randint(1, 2), size=size)
    text = f"steering note {i}" if kind == "inject" else None
    return Fault(kind=k, step=rng.randint(1, 3 * replies), text=text)


def make_case(seed: int, config: FuzzConfig = DEFAULT_CONFIG) -> FuzzCase:
    """The case ``seed`` determines (under ``config``'s fault kinds and turn count)."""
    rng = random.Random(seed)
    tools = sorted(rng.sample(_TOOLS, rng.randint(1, 4)))
    n = max(1, rng.randint(config.turns - 5, config.turns + 5))
    window = rng.choice([1000, 2500, 128_000])
    spread = 2 if rng.random() < 0.15 else 1000
    replies: list[ReplyScenario] = []
    for _ in range(n - 1):
        calls = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            tool = rng.choice(tools)
            calls.append(CallScenario(name=tool, arguments=_arguments(rng, tool, spread)))
        spike = int(window * rng.uniform(0.7, 1.1)) if rng.random() < 0.08 else None
        text = rng.choice(["", "Let me check.", "Working on it."])
        replies.append(ReplyScenario(text=text, calls=calls, context_tokens=spike))
    replies.append(ReplyScenario(text=f"All done ({seed})."))
    # a run of one reply (--turns 6 or fewer can draw one) gets a turn limit of 2, not a crash
    max_turns = n + 5 if rng.random() < 0.8 else rng.randint(2, max(2, n))
    policy = MachinePolicy(
        max_turns=max_turns,
        context_window=window,
        compact_threshold=rng.choice([0.6, 0.8]),
        emergency_threshold=0.95,
        loop_action=rng.choice(["warn", "warn", "fail", "off"]),
        loop_repeat_limit=rng.choice([3, 4]),
    )
    # some seeds loop on purpose, drawn from their own stream
    replies, policy = with_loops(seed, replies, policy, tools)
    enabled = tuple(k for k in config.faults if rng.random() < 0.5)  # swarm testing
    faults = []
    if enabled:
        for i in range(rng.randint(1, 5)):
            faults.append(draw_fault(rng, rng.choice(enabled), n, tools, i, window))
    scenario = Scenario(
        name=f"fuzz-{seed}",
        description=f"fuzz seed {seed}; enabled fault kinds: {', '.join(enabled) or 'none'}",
        input=f"Task {seed}: use the tools, then answer.",
        policy=policy,
        tools={t: ToolScenario(builtin=t) for t in tools},
        model=replies,
        faults=faults,
        max_retries=rng.choice([0, 1, 2, 3]),
        tool_timeout=rng.choice([30.0, 30.0, 30.0, None]),
    )
    return FuzzCase(seed=seed, scenario=scenario, crash_at=rng.random(), enabled=enabled)


def scenario_yaml(scenario: Scenario, *, scrubbed: bool = True) -> str:
    """The scenario as a YAML file ``loopctl-sim run`` reads, its secrets scrubbed as a trace's
    are (an ``--input`` secret, and what the model copied of it, never lands in it in clear)."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data.setdefault("input", scenario.input)
    if scenario.agent is not None and scenario.explore is None:
        data.setdefault("model", [])  # an agent's scripted model, even with no replies left
    if scrubbed:
        data = scrub(data)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


# --- looping worlds ----------------------------------------------------------------------

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
    policy: MachinePolicy,
    tools: Sequence[str],
    loops: FuzzLoops = DEFAULT_LOOPS,
) -> tuple[list[ReplyScenario], MachinePolicy]:
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
