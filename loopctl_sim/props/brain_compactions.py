"""Compactions a user's compactor can get wrong, built from the conversation it was handed.

``compaction_of`` hands the brain only provider-valid histories, so a brain that accepted an
invalid one would pass every generated program. Each row of ``MISBEHAVIOURS`` builds one wrong
history from ``LoopMachine.messages()`` and says what the contract has the brain do with it:
``orphan_results``, ``calls_unanswered`` and ``reordered_pair`` are refused (a ``ProtocolError``
that changes nothing); ``dropped_system`` and ``growing`` are accepted (a commit point like any
other). A conversation without an exchange gets a made-up one, so every row builds an invalid
history whatever the machine holds. Pure (no hypothesis).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from loopctl.core import Message, ToolCall, ToolResult

_MADE_UP_CALL: Final = ToolCall(id="cut_call", name="read", arguments={"path": "a"})
_MADE_UP_RESULTS: Final = Message.from_results(
    [ToolResult(call_id="cut_call", name="read", content="ok")]
)


def _exchange(messages: Sequence[Message]) -> tuple[Message, Message]:
    """The last (assistant calls, user results) pair of ``messages``, or a made-up one."""
    for i in range(len(messages) - 1, 0, -1):
        if messages[i].tool_results and messages[i - 1].tool_calls:
            return messages[i - 1], messages[i]
    return Message.assistant(tool_calls=[_MADE_UP_CALL]), _MADE_UP_RESULTS


def _summary(messages: Sequence[Message]) -> Message:
    return Message.user(f"[summary of {len(messages)} messages]")


def _calls_unanswered(messages: Sequence[Message]) -> list[Message]:
    calls, _ = _exchange(messages)
    head = [m for m in messages[:1] if not m.tool_calls and not m.tool_results]
    return [*head, _summary(messages), calls]


#: Each misbehaviour: how it is built from the conversation handed to the compactor.
MISBEHAVIOURS: Final[dict[str, Callable[[Sequence[Message]], list[Message]]]] = {
    "orphan_results": lambda m: [_summary(m), _exchange(m)[1]],
    "calls_unanswered": _calls_unanswered,
    "reordered_pair": lambda m: [_summary(m), *reversed(_exchange(m))],
    "dropped_system": lambda m: [x for x in m if x.role != "system"] or [_summary(m)],
    "growing": lambda m: [_summary(m), *m, _summary(m)],
}
#: The misbehaviours the contract makes the brain refuse (a call separated from its result).
REFUSED: Final = frozenset({"orphan_results", "calls_unanswered", "reordered_pair"})


def misbehaving_compaction(messages: Sequence[Message], kind: str) -> list[Message]:
    """The compacted history a compactor misbehaving as ``kind`` returns for ``messages``."""
    try:
        build = MISBEHAVIOURS[kind]
    except KeyError:
        raise ValueError(f"unknown misbehaviour {kind!r}; one of {sorted(MISBEHAVIOURS)}") from None
    return build(messages)
