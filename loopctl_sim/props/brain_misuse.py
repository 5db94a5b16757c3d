"""Misuse of the brain, as tables: for any machine, the feeds its state does not take (each with
arguments that would be fine in its own state) and the bad input its state must refuse. Each
must raise ``ProtocolError`` and change nothing (``inv.check_refused``). Functions of the machine
alone, so a plain test can run them over any machine. Pure (no hypothesis).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from loopctl.core import (
    FEED_TYPES,
    FEEDS,
    TRANSITIONS,
    Completed,
    LoopError,
    LoopMachine,
    MachinePolicy,
    Message,
    Terminal,
    TextPart,
    ToolCall,
    ToolResult,
)

#: One misuse: what it is, and the call that commits it.
Misuse: TypeAlias = tuple[str, Callable[[LoopMachine], Any]]

_NAN: Final = float("nan")

#: Every feed, with arguments that would be fine in its own state: in another state, only the
#: state can be why it is refused.
PLAUSIBLE_FEEDS: Final[Mapping[str, Callable[[LoopMachine], Any]]] = {
    "accept_input": lambda m: m.accept_input("hello"),
    "model_response": lambda m: m.model_response(Message.assistant("hi"), 1),
    "tool_results": lambda m: m.tool_results(
        Message.from_results([ToolResult(call_id="plausible", name="read", content="")])
    ),
    "compaction_result": lambda m: m.compaction_result([Message.user("s")], 5, 1),
    "compaction_noop": lambda m: m.compaction_noop(5, 5),
    "set_context_tokens": lambda m: m.set_context_tokens(1),
    "inject": lambda m: m.inject(Message.user("note")),
    "cancel": lambda m: m.cancel(),
    "fail": lambda m: m.fail(LoopError(kind="internal", message="x")),
    "commit_pending": lambda m: m.commit_pending(),
    "discard_pending": lambda m: m.discard_pending(),
}


def wrong_feeds(kind: str) -> list[str]:
    """The feeds a machine in state ``kind`` does not take (the transition table has no entry)."""
    return [f for f in FEEDS if (kind, FEED_TYPES[f]) not in TRANSITIONS]


def bad_inputs(machine: LoopMachine, policy: MachinePolicy) -> list[Misuse]:
    """Misuse that ``machine``'s current state must refuse: (description, call).

    Right feeds with wrong input (a non-error to ``fail``, a reply with duplicate call ids, a
    result short, a compaction with an orphan result, ...), questions asked too early, and the
    wrong exit door. ``policy`` is what ``next_step`` is asked with before input.
    """
    started = machine.snapshot().started
    m = machine
    state = m.state
    kind = state.kind
    out: list[Misuse] = (
        [
            ("fail with a non-error", lambda x: x.fail("boom"))  # type: ignore[arg-type]
        ]
        if kind != "terminal"
        else []
    )
    if not (kind == "terminal" and m.finalized):
        out.append(("next_run too early", lambda x: x.next_run()))
    if kind == "start" and not started:
        out.append(("next_step before input", lambda x: x.next_step(policy)))
        out.append(("inject before input", lambda x: x.inject(Message.user("n"))))
        out.append(
            ("input as an assistant message", lambda x: x.accept_input(Message.assistant("a")))
        )
    if kind == "start" and started:
        out.append(("a second input", lambda x: x.accept_input("again")))
        call = ToolCall(id="inj", name="read")
        result = Message.from_results([ToolResult(call_id="inj", name="read", content="")])
        out += [
            ("inject a tool call", lambda x: x.inject(Message.assistant(tool_calls=[call]))),
            ("inject a tool result", lambda x: x.inject(result)),
        ]
    if kind == "start" and not started:
        result = Message.from_results([ToolResult(call_id="in", name="read", content="")])
        out.append(("input holding a tool result", lambda x: x.accept_input(result)))
    if kind != "terminal":
        out.append(("a negative count", lambda x: x.set_context_tokens(-1)))
    if kind == "awaiting_model":
        a, b = ToolCall(id="dup", name="read"), ToolCall(id="dup", name="write")
        out += [
            ("a user reply", lambda x: x.model_response(Message.user("u"), 1)),
            (
                "duplicate call ids",
                lambda x: x.model_response(Message.assistant(tool_calls=[a, b]), 1),
            ),
            (
                "an empty call id",
                lambda x: x.model_response(
                    Message.assistant(tool_calls=[ToolCall(id="", name="read")]), 1
                ),
            ),
            ("a negative count", lambda x: x.model_response(Message.assistant("t"), -1)),
            (
                "results in a reply",
                lambda x: x.model_response(
                    Message(
                        role="assistant",
                        parts=(ToolResult(call_id="z", name="read", content=""),),
                    ),
                    1,
                ),
            ),
            (
                "non-finite arguments",
                lambda x: x.model_response(
                    Message.assistant(
                        tool_calls=[ToolCall(id="nan", name="read", arguments={"x": _NAN})]
                    ),
                    1,
                ),
            ),
            ("a boolean count", lambda x: x.model_response(Message.assistant("t"), True)),
        ]
    if kind == "awaiting_tools" and m.exchange is not None:
        dispatch = list(m.exchange.dispatch)
        good = [ToolResult(call_id=c.id, name=c.name, content="r") for c in dispatch]
        pre = list(m.exchange.preanswered)
        ok = Message.from_results(good)
        out += [
            ("one result short", lambda x: x.tool_results(Message.from_results(good[1:]))),
            (
                "a result twice",
                lambda x: x.tool_results(Message.from_results([*good, good[0]])),
            ),
            (
                "a result for no call",
                lambda x: x.tool_results(
                    Message.from_results([*good, ToolResult(call_id="stray", name="x", content="")])
                ),
            ),
            (
                "text among the results",
                lambda x: x.tool_results(Message(role="user", parts=(*good, TextPart(text="t")))),
            ),
            (
                "results as an assistant",
                lambda x: x.tool_results(Message(role="assistant", parts=tuple(good))),
            ),
            ("results with a negative count", lambda x: x.tool_results(ok, -1)),
            ("results with a boolean count", lambda x: x.tool_results(ok, True)),
        ]
        if pre:
            out.append(
                (
                    "answering a pre-answered call",
                    lambda x: x.tool_results(Message.from_results([*good, *pre])),
                )
            )
    if kind == "awaiting_compaction":
        orphan = Message.from_results([ToolResult(call_id="o", name="read", content="")])
        open_call = Message.assistant(tool_calls=[ToolCall(id="o", name="read")])
        out += [
            (
                "a compaction with an orphan result",
                lambda x: x.compaction_result([orphan], 1, 1),
            ),
            (
                "a compaction with an open call",
                lambda x: x.compaction_result([open_call], 1, 1),
            ),
            ("a compaction to a negative count", lambda x: x.compaction_result([], 1, -1)),
            ("a no-op to a negative count", lambda x: x.compaction_noop(1, -1)),
        ]
    if isinstance(state, Terminal):
        if isinstance(state.outcome, Completed):
            out.append(("discard a completed run", lambda x: x.discard_pending()))
        else:
            out.append(("commit a failed run", lambda x: x.commit_pending()))
        if m.finalized:
            out.append(("commit twice", lambda x: x.commit_pending()))
            out.append(("discard twice", lambda x: x.discard_pending()))
    return out
