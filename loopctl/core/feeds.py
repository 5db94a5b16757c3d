"""The feeds: the eleven things the driver tells the brain, one frozen type each.

``LoopMachine.feed(f)`` takes any ``Feed`` and is the one way in; the transition table is keyed
by (state, feed type); ``machine.model_response(reply, 120)`` and the other seed-named methods
build the feed. Constructing one checks nothing: the brain refuses a wrong-typed argument with a
``ProtocolError``, the machine unchanged. Feeds are ``Data`` (msgspec ``Struct``s, ``data.py``),
as the rest of the brain's vocabulary: a trace's feed record reads its arguments straight into
them, so the trace keeps no definition of its own. Measured per feed (construction, then the
table lookup): a msgspec ``Struct`` 50-60 ns + 70 ns, a slotted frozen dataclass 260-280 ns +
100-250 ns, a pydantic model 630-690 ns + 150 ns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final, Literal, get_args

from loopctl.core.data import Data
from loopctl.core.errors import LoopError
from loopctl.core.messages import Message

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


class _Feed(Data, frozen=True):
    """What every feed has: its ``name`` (a trace's feed record and observers carry it)."""

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
    """One user message answering exactly the dispatched calls, each id once, and the context
    size with it when the driver counted one (None keeps the count): one feed per exchange, so
    a trace holds one record where a second feed for the count once followed."""

    name: ClassVar[FeedName] = "tool_results"
    message: Message
    context_tokens: int | None = None


class CompactionResult(_Feed, frozen=True):
    """History was rewritten: a commit point (pending is folded in and emptied)."""

    name: ClassVar[FeedName] = "compaction_result"
    compacted: Sequence[Message]
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
