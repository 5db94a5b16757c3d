"""The feeds: the eleven things the driver tells the brain, one frozen type each.

``LoopMachine.feed(f)`` takes any ``Feed`` and is the one way in; the brain's transition table
is keyed by (state, feed type). ``machine.model_response(reply, 120)`` and the other seed-named
methods are thin wrappers that build the feed. A feed is a plain record of what the driver
reports: constructing one checks nothing (a wrong-typed argument is refused by the brain with a
``ProtocolError``, the machine unchanged), so a feed costs what a tuple costs.

Why msgspec ``Struct``s: measured per feed (construction, then the table lookup by type), a
frozen ``Struct`` costs 50 ns + 80 ns, a slotted frozen dataclass 280-520 ns + 100-400 ns, and
a pydantic model 630-690 ns + 150 ns and would refuse a wrong type with a ``ValidationError``
before the brain could refuse it as the protocol says. ``Struct``s also compare by value, print
their fields and support ``match`` by position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Final, Literal, get_args

import msgspec

from loopctl.core.errors import LoopError
from loopctl.core.messages import Message

__all__ = [
    "FEEDS",
    "FEED_TYPES",
    "AcceptInput",
    "Cancel",
    "CommitPending",
    "CompactionNoop",
    "CompactionResult",
    "DiscardPending",
    "Fail",
    "Feed",
    "FeedName",
    "Inject",
    "ModelResponse",
    "SetContextTokens",
    "ToolResults",
]

FeedName = Literal[
    "accept_input",
    "model_response",
    "tool_results",
    "compaction_result",
    "compaction_noop",
    "set_context_tokens",
    "inject",
    "cancel",
    "fail",
    "commit_pending",
    "discard_pending",
]
#: The feeds' names, in this order; each is also the ``LoopMachine`` method that builds it.
FEEDS: Final[tuple[FeedName, ...]] = get_args(FeedName)


class _Feed(msgspec.Struct, frozen=True):
    """What every feed has: its ``name`` (a trace's feed record and the observers' ``feed``
    call carry it) and its fields as keyword arguments."""

    name: ClassVar[FeedName]

    def args(self) -> dict[str, Any]:
        """The fields by name: what observers are told (``LoopObserver.feed``)."""
        return {field: getattr(self, field) for field in self.__struct_fields__}


class AcceptInput(_Feed, frozen=True):
    """Start a run with the user's input (a fresh machine, or one from ``next_run()``)."""

    name: ClassVar[FeedName] = "accept_input"
    input: str | Message


class ModelResponse(_Feed, frozen=True):
    """The model's reply and the context size the provider reported with it."""

    name: ClassVar[FeedName] = "model_response"
    response: Message
    context_tokens: int


class ToolResults(_Feed, frozen=True):
    """One user message answering exactly the dispatched calls, each id once."""

    name: ClassVar[FeedName] = "tool_results"
    message: Message


class CompactionResult(_Feed, frozen=True):
    """History was rewritten: a commit point (pending is folded in and emptied)."""

    name: ClassVar[FeedName] = "compaction_result"
    compacted: Iterable[Message]
    before: int
    after: int


class CompactionNoop(_Feed, frozen=True):
    """The compactor found nothing to cut."""

    name: ClassVar[FeedName] = "compaction_noop"
    before: int
    after: int


class SetContextTokens(_Feed, frozen=True):
    """The driver's own count (an estimate, or a provider's overflow report)."""

    name: ClassVar[FeedName] = "set_context_tokens"
    n: int


class Inject(_Feed, frozen=True):
    """Append a message to pending during a run (steering, a reflector's note)."""

    name: ClassVar[FeedName] = "inject"
    message: Message


class Cancel(_Feed, frozen=True):
    """Stop the run (a no-op once it is over)."""

    name: ClassVar[FeedName] = "cancel"


class Fail(_Feed, frozen=True):
    """The world failed the run (a no-op once it is over)."""

    name: ClassVar[FeedName] = "fail"
    error: LoopError


class CommitPending(_Feed, frozen=True):
    """Success exit: pending is glued onto history."""

    name: ClassVar[FeedName] = "commit_pending"


class DiscardPending(_Feed, frozen=True):
    """Failure exit: the coherent prefix of pending is salvaged, the in-flight tail dropped."""

    name: ClassVar[FeedName] = "discard_pending"


Feed = (
    AcceptInput
    | ModelResponse
    | ToolResults
    | CompactionResult
    | CompactionNoop
    | SetContextTokens
    | Inject
    | Cancel
    | Fail
    | CommitPending
    | DiscardPending
)

#: Each feed's type by its name (a trace's feed record names its feed).
FEED_TYPES: Final[dict[str, type[Feed]]] = {cls.name: cls for cls in get_args(Feed)}
assert tuple(FEED_TYPES) == FEEDS, "one feed type per feed name, in order"
