"""Compactions a user's compactor can get wrong, built from the conversation it was handed.

``compaction_of`` (``brain_strategies``) hands the brain only provider-valid histories, so a
brain that accepted an invalid one would pass every generated program. Here each way a
compactor misbehaves is one row of ``MISBEHAVIOURS``: how it is built from the messages the
brain handed out (``LoopMachine.messages()``), and what the contract says the brain does with it:

=====================  ==========================================================  ===========
misbehaviour           the compacted history                                        the brain
=====================  ==========================================================  ===========
``orphan_results``     a summary, then a results message whose calls were cut       refuses
``calls_unanswered``   the kept head, then an assistant message whose results       refuses
                       were cut (the last calls have no results)
``reordered_pair``     a call's results before the call                             refuses
``dropped_system``     every message but the system ones                            accepts
``growing``            everything, and a summary on top (longer than given)         accepts
=====================  ==========================================================  ===========

A refused compaction is a ``ProtocolError`` that changes nothing (``inv.check_refused``); the
brain then still awaits a compaction. An accepted one is a commit point like any other
(``inv.check_compaction_commit``). A compactor that raises never reaches the brain: the driver
fails the run with a ``compaction`` error (``DriverMachine`` runs such compactors).

A conversation without an exchange (no call to cut apart) gets a made-up one, so every row
builds an invalid history whatever the machine holds. Pure (no hypothesis).
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


def _orphan_results(messages: Sequence[Message]) -> list[Message]:
    _, results = _exchange(messages)
    return [_summary(messages), results]


def _calls_unanswered(messages: Sequence[Message]) -> list[Message]:
    calls, _ = _exchange(messages)
    head = [m for m in messages[:1] if not m.tool_calls and not m.tool_results]
    return [*head, _summary(messages), calls]


def _reordered_pair(messages: Sequence[Message]) -> list[Message]:
    calls, results = _exchange(messages)
    return [_summary(messages), results, calls]


def _dropped_system(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role != "system"] or [_summary(messages)]


def _growing(messages: Sequence[Message]) -> list[Message]:
    return [_summary(messages), *messages, _summary(messages)]


#: Each misbehaviour: how it is built from the conversation handed to the compactor.
MISBEHAVIOURS: Final[dict[str, Callable[[Sequence[Message]], list[Message]]]] = {
    "orphan_results": _orphan_results,
    "calls_unanswered": _calls_unanswered,
    "reordered_pair": _reordered_pair,
    "dropped_system": _dropped_system,
    "growing": _growing,
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
