"""The transition tables tell the truth: every declared target is reached, and nothing else is.

``TRANSITIONS`` and ``STEP_TRANSITIONS`` drive the docs' state diagram, so they must describe what
the brain really does. Each case below brings a machine into a state, makes one call, and records
(state before, call, state after); the set of observations must equal the tables' edges exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from brain_helpers import (
    POLICY,
    answer,
    ask,
    awaiting_compaction,
    awaiting_model,
    awaiting_tools,
    call,
    completed,
    failed_mid_model,
    started,
    warned,
)

from loopctl import CompactReason, LoopError, LoopMachine, Message
from loopctl.core import STEP_TRANSITIONS, TRANSITIONS

ERR = LoopError(kind="internal", message="x")
THRESHOLD = CompactReason.THRESHOLD_EXCEEDED


def _over(tokens: int) -> LoopMachine:
    m = started()
    m.set_context_tokens(tokens)
    return m


def _model_over_the_line() -> LoopMachine:
    m = awaiting_model()
    m.set_context_tokens(990)
    return m


Case = tuple[Callable[[], LoopMachine], str, tuple[Any, ...]]
CASES: list[Case] = [
    # next_step
    (started, "next_step", (POLICY,)),
    (warned, "next_step", (POLICY,)),
    (lambda: _over(900), "next_step", (POLICY,)),
    (started, "next_step", (POLICY.model_copy(update={"max_turns": 0}),)),
    (awaiting_model, "next_step", (POLICY,)),
    (_model_over_the_line, "next_step", (POLICY,)),
    (awaiting_tools, "next_step", (POLICY,)),
    (lambda: awaiting_compaction(THRESHOLD), "next_step", (POLICY,)),
    (completed, "next_step", (POLICY,)),
    # start
    (LoopMachine, "accept_input", ("go",)),
    (started, "inject", (Message.user("steer"),)),
    (started, "set_context_tokens", (5,)),
    (started, "cancel", ()),
    (started, "fail", (ERR,)),
    # awaiting_model
    (awaiting_model, "model_response", (Message.assistant("done"), 5)),
    (awaiting_model, "model_response", (ask(call("a")), 5)),
    (awaiting_model, "model_response", (ask(call("a", "ghost")), 5)),
    (awaiting_model, "set_context_tokens", (5,)),
    (awaiting_model, "cancel", ()),
    (awaiting_model, "fail", (ERR,)),
    # awaiting_tools
    (awaiting_tools, "tool_results", (answer(call("k1", x=1), call("k2", "write", y=2)),)),
    (awaiting_tools, "set_context_tokens", (5,)),
    (awaiting_tools, "cancel", ()),
    (awaiting_tools, "fail", (ERR,)),
    # awaiting_compaction
    (lambda: awaiting_compaction(THRESHOLD), "compaction_result", ([Message.user("s")], 9, 1)),
    (lambda: awaiting_compaction(THRESHOLD), "compaction_noop", (9, 9)),
    (lambda: awaiting_compaction(CompactReason.EMERGENCY), "compaction_noop", (9, 9)),
    (lambda: awaiting_compaction(THRESHOLD), "set_context_tokens", (5,)),
    (lambda: awaiting_compaction(THRESHOLD), "cancel", ()),
    (lambda: awaiting_compaction(THRESHOLD), "fail", (ERR,)),
    # terminal
    (completed, "commit_pending", ()),
    (failed_mid_model, "discard_pending", ()),
    (completed, "cancel", ()),
    (completed, "fail", (ERR,)),
]


def _declared() -> set[tuple[str, str, str]]:
    edges: set[tuple[str, str, str]] = {
        (s, f.name, t) for (s, f), tr in TRANSITIONS.items() for t in tr.targets
    }
    edges |= {(s, "next_step", t) for s, tr in STEP_TRANSITIONS.items() for t in tr.targets}
    return edges


def _observed() -> set[tuple[str, str, str]]:
    seen: set[tuple[str, str, str]] = set()
    for build, name, args in CASES:
        m = build()
        before = m.state.kind
        getattr(m, name)(*args)
        seen.add((before, name, m.state.kind))
    return seen


def test_observed_transitions_are_exactly_the_declared_ones() -> None:
    observed, declared = _observed(), _declared()
    assert observed - declared == set(), "the brain did something its table does not declare"
    assert declared - observed == set(), "the table declares something the brain never does"
