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


def calling(feed: str, *args: Any) -> Callable[[LoopMachine], Any]:
    """The call ``machine.<feed>(*args)`` (for ``inv.check_refused``)."""
    return lambda machine: getattr(machine, feed)(*args)


def bad_inputs(machine: LoopMachine, policy: MachinePolicy) -> list[Misuse]:
    """Misuse that ``machine``'s current state must refuse: (description, call).

    Right feeds with wrong input (a non-error to ``fail``, a reply with duplicate call ids, a
    result short, a compaction with an orphan result, ...), questions asked too early, and the
    wrong exit door. ``policy`` is what ``next_step`` is asked with before input.
    """
    started = machine.snapshot().started
    state = machine.state
    kind = state.kind
    out: list[Misuse] = []
    if kind != "terminal":
        out.append(("fail with a non-error", calling("fail", "boom")))
    if not (kind == "terminal" and machine.finalized):
        out.append(("next_run too early", calling("next_run")))
    if kind == "start" and not started:
        out += [
            ("next_step before input", calling("next_step", policy)),
            ("inject before input", calling("inject", Message.user("n"))),
            ("input as an assistant message", calling("accept_input", Message.assistant("a"))),
        ]
    if kind == "start" and started:
        call = ToolCall(id="inj", name="read")
        result = Message.from_results([ToolResult(call_id="inj", name="read", content="")])
        out += [
            ("a second input", calling("accept_input", "again")),
            ("inject a tool call", calling("inject", Message.assistant(tool_calls=[call]))),
            ("inject a tool result", calling("inject", result)),
        ]
    if kind == "start" and not started:
        result = Message.from_results([ToolResult(call_id="in", name="read", content="")])
        out.append(("input holding a tool result", calling("accept_input", result)))
    if kind != "terminal":
        out.append(("a negative count", calling("set_context_tokens", -1)))
    if kind == "awaiting_model":
        dup = [ToolCall(id="dup", name="read"), ToolCall(id="dup", name="write")]
        nan = ToolCall(id="nan", name="read", arguments={"x": _NAN})
        results = (ToolResult(call_id="z", name="read", content=""),)
        replies: list[tuple[str, Message, Any]] = [
            ("a user reply", Message.user("u"), 1),
            ("duplicate call ids", Message.assistant(tool_calls=dup), 1),
            ("an empty call id", Message.assistant(tool_calls=[ToolCall(id="", name="read")]), 1),
            ("a negative count", Message.assistant("t"), -1),
            ("results in a reply", Message(role="assistant", parts=results), 1),
            ("non-finite arguments", Message.assistant(tool_calls=[nan]), 1),
            ("a boolean count", Message.assistant("t"), True),
        ]
        out += [(what, calling("model_response", reply, n)) for what, reply, n in replies]
    if kind == "awaiting_tools" and machine.exchange is not None:
        good = [
            ToolResult(call_id=c.id, name=c.name, content="r") for c in machine.exchange.dispatch
        ]
        pre = list(machine.exchange.preanswered)
        stray = ToolResult(call_id="stray", name="x", content="")
        ok = Message.from_results(good)
        fed: list[tuple[str, Message, Any]] = [
            ("one result short", Message.from_results(good[1:]), None),
            ("a result twice", Message.from_results([*good, good[0]]), None),
            ("a result for no call", Message.from_results([*good, stray]), None),
            (
                "text among the results",
                Message(role="user", parts=(*good, TextPart(text="t"))),
                None,
            ),
            ("results as an assistant", Message(role="assistant", parts=tuple(good)), None),
            ("results with a negative count", ok, -1),
            ("results with a boolean count", ok, True),
        ]
        if pre:
            fed.append(("answering a pre-answered call", Message.from_results([*good, *pre]), None))
        out += [(what, calling("tool_results", message, n)) for what, message, n in fed]
    if kind == "awaiting_compaction":
        orphan = Message.from_results([ToolResult(call_id="o", name="read", content="")])
        open_call = Message.assistant(tool_calls=[ToolCall(id="o", name="read")])
        out += [
            ("a compaction with an orphan result", calling("compaction_result", [orphan], 1, 1)),
            ("a compaction with an open call", calling("compaction_result", [open_call], 1, 1)),
            ("a compaction to a negative count", calling("compaction_result", [], 1, -1)),
            ("a no-op to a negative count", calling("compaction_noop", 1, -1)),
        ]
    if isinstance(state, Terminal):
        if isinstance(state.outcome, Completed):
            out.append(("discard a completed run", calling("discard_pending")))
        else:
            out.append(("commit a failed run", calling("commit_pending")))
        if machine.finalized:
            out.append(("commit twice", calling("commit_pending")))
            out.append(("discard twice", calling("discard_pending")))
    return out
