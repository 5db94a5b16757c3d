"""``LoopMachine``: the brain. Pure data; one question, eleven feeds.

The driver asks ``next_step(policy)`` and gets one of four steps (``CallLLM``, ``CallTools``,
``Compact``, ``Done``), does the work in the world and reports what happened through one feed,
``feed(f)`` (``feeds.py``; the seed-named methods wrap it). Nothing else enters: no clock, no
network, no randomness, no stored settings (the policy comes with every step). Hence the
machine serializes whole, and a restored machine makes identical decisions.

This module reads top to bottom: the transition tables, the fields and read-only views (the
saved form is inherited from ``_saved.SavedBrain``), the one question, the feeds and their
handlers. Rules it keeps:

- Every transition is in ``TRANSITIONS``, keyed by (state, feed type); any other pair is a
  ``ProtocolError`` naming the feed and the state.
- A handler validates everything, the arguments' types included, before it changes anything: a
  ``ProtocolError`` leaves the machine exactly as it was. A message whose free-form values could
  not be saved and read back (``values.message_problem``) is refused on every feed that takes one.
- ``next_step`` is idempotent: asking may advance the state (Start -> awaiting, a terminal
  verdict, a loop warning), asking again at once answers the same and changes nothing.
- Terminal is sticky; ``cancel`` and ``fail`` on a terminal machine are no-ops.
- No handler and no step scans the whole history: each costs O(size of the exchange).
- History never holds a call without its result, nor a result without its call.
- History is a tuple and pending a ``Pending`` (append-only), so a ``conversation()`` view
  handed out earlier never shows what the brain did later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, cast

from loopctl.core import _saved
from loopctl.core.conversation import Conversation, Pending
from loopctl.core.errors import LoopError, ProtocolError
from loopctl.core.feeds import (
    AcceptInput,
    Cancel,
    CommitPending,
    CompactionNoop,
    CompactionResult,
    DiscardPending,
    Fail,
    Feed,
    Inject,
    ModelResponse,
    SetContextTokens,
    ToolResults,
)
from loopctl.core.loopdetect import LoopVerdict, LoopWindow, call_key, loop_note
from loopctl.core.messages import Message, ToolCall, ToolResult
from loopctl.core.snapshot import Exchange, MachineSnapshot
from loopctl.core.steps import (
    AwaitingCompaction,
    AwaitingModel,
    AwaitingTools,
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    MachinePolicy,
    MachineState,
    MachineStep,
    MaxTurnsExceeded,
    Start,
    StateKind,
    Terminal,
)
from loopctl.core.values import (
    coherent_prefix_length,
    history_problem,
    is_count,
    message_problem,
)


class Transition(NamedTuple):
    handler: str
    targets: tuple[StateKind, ...]


# next_step(policy) in each state -> handler and the states it may lead to. In Start it always
# leaves Start (a loop warning appends its note and goes on to ask); asked before any input it
# raises ProtocolError, which is not a transition.
STEP_TRANSITIONS: Final[dict[StateKind, Transition]] = {
    "start": Transition("_step_start", ("awaiting_model", "awaiting_compaction", "terminal")),
    "awaiting_model": Transition("_step_awaiting_model", ("awaiting_model", "awaiting_compaction")),
    "awaiting_tools": Transition("_step_awaiting_tools", ("awaiting_tools",)),
    "awaiting_compaction": Transition("_step_awaiting_compaction", ("awaiting_compaction",)),
    "terminal": Transition("_step_terminal", ("terminal",)),
}
#: The states the brain sits in (a state's ``kind``), in the order the tables list them.
STATES: Final[tuple[StateKind, ...]] = tuple(STEP_TRANSITIONS)


# ---------------------------------------------------------------------------------------------
# THE TABLE. (state, feed) -> handler and the states it may lead to. Anything not here is invalid.
# ---------------------------------------------------------------------------------------------
#: The states a run is under way in: each takes the driver's own count and the two ways out.
_LIVE: Final = tuple(s for s in STATES if s != "terminal")
TRANSITIONS: Final[dict[tuple[StateKind, type[Feed]], Transition]] = {
    ("start", AcceptInput): Transition("_accept_input", ("start",)),
    ("start", Inject): Transition("_inject", ("start",)),
    ("awaiting_model", ModelResponse): Transition(
        "_model_response", ("awaiting_tools", "start", "terminal")
    ),
    ("awaiting_tools", ToolResults): Transition("_tool_results", ("start",)),
    ("awaiting_compaction", CompactionResult): Transition("_compaction_result", ("start",)),
    ("awaiting_compaction", CompactionNoop): Transition("_compaction_noop", ("start", "terminal")),
    **{(s, SetContextTokens): Transition("_set_context_tokens", (s,)) for s in _LIVE},
    **{(s, Cancel): Transition("_cancel", ("terminal",)) for s in _LIVE},
    **{(s, Fail): Transition("_fail", ("terminal",)) for s in _LIVE},
    # -- finished: only the exit door's two calls; cancel and fail are no-ops
    ("terminal", CommitPending): Transition("_exit", ("terminal",)),
    ("terminal", DiscardPending): Transition("_exit", ("terminal",)),
    ("terminal", Cancel): Transition("_noop", ("terminal",)),
    ("terminal", Fail): Transition("_noop", ("terminal",)),
}


#: A brain before its first input: the snapshot's defaults are the brain's.
_FRESH: Final = MachineSnapshot(state=Start())


def not_available(call: ToolCall, advertised: tuple[str, ...]) -> ToolResult:
    """The brain's answer to a call of a tool the driver did not advertise: an error result, so
    the model learns what it may call."""
    names = ", ".join(advertised) or "none"
    content = f"tool '{call.name}' is not available; available tools: {names}"
    return ToolResult.answering(call, content, is_error=True)


class LoopMachine(_saved.SavedBrain):
    """The brain. See the module docstring for the rules it keeps."""

    #: What the brain is: equality, snapshots and the digest cover exactly these, the fields
    #: ``SavedBrain`` declares (the saved form reads them); its cache is never compared.
    STATE_SLOTS: Final = tuple(f for f in _saved.SavedBrain.__annotations__ if f != "_saved")
    __slots__ = ()

    def __init__(self, history: Iterable[Message] = (), context_tokens: int = 0) -> None:
        history = tuple(history)
        if (problem := history_problem(history)) is not None:
            raise ValueError(f"not a valid history: {problem}")
        if not is_count(context_tokens):
            raise ValueError(f"not a token count: {context_tokens!r}")
        self._adopt(_FRESH)  # every field, as the empty snapshot has it
        self._history, self._context_tokens = history, context_tokens

    # --- read-only views -----------------------------------------------------------------

    @property
    def state(self) -> MachineState:
        return self._state

    @property
    def history(self) -> tuple[Message, ...]:
        return self._history

    @property
    def pending(self) -> tuple[Message, ...]:
        return tuple(self._pending)

    @property
    def turns_taken(self) -> int:
        return self._turns_taken

    @property
    def context_tokens(self) -> int:
        return self._context_tokens

    @property
    def exchange(self) -> Exchange | None:
        return self._exchange

    @property
    def is_terminal(self) -> bool:
        return isinstance(self._state, Terminal)

    @property
    def finalized(self) -> bool:
        return self._finalized

    @property
    def started(self) -> bool:
        """True once this run accepted its input (a run is under way or over)."""
        return self._started

    def messages(self) -> list[Message]:
        """History plus pending: what the model is shown next (a copy)."""
        return [*self._history, *self._pending]

    def conversation(self) -> Conversation:
        """History plus pending as they are now: a read-only view, O(1), not a copy."""
        history, pending = self._history, self._pending
        return Conversation(history, pending, len(history), len(pending))

    def history_len(self) -> int:
        return len(self._history)

    def pending_len(self) -> int:
        return len(self._pending)

    # --- the one question ----------------------------------------------------------------

    def next_step(self, policy: MachinePolicy) -> MachineStep:
        """What should happen next. Idempotent; see the module docstring."""
        return _STEP_HANDLERS[self._state.kind](self, policy)

    def loop_verdict(self, policy: MachinePolicy) -> LoopVerdict | None:
        """The loop the next ``next_step(policy)`` will warn of (or fail on); None when there is
        none or a warning was given. Read-only: the driver tells a reflector of it."""
        return None if self._loop.warned else self._loop.judge(policy)

    def _step_start(self, policy: MachinePolicy) -> MachineStep:
        if not self._started:
            raise ProtocolError(
                "next_step() asked before any input was accepted; call accept_input() first",
                feed="next_step",
                state="start",
            )
        loop = self._loop
        verdict = loop.judge(policy)
        if verdict is not None:
            if policy.loop_action == "fail" or loop.warned:
                error = LoopError(
                    kind="loop_detected",
                    message=f"loop detected: {verdict.describe()}",
                    details={"pattern": verdict.pattern, "tool": verdict.tool},
                )
                return self._finish(Failed(error=error))
            self._pending.append(Message.user(loop_note(verdict.describe())))
        if loop.unjudged:
            self._loop = LoopWindow(calls=loop.calls, warned=loop.warned or verdict is not None)

        if self._turns_taken >= policy.max_turns:
            return self._finish(MaxTurnsExceeded())
        tokens, floor = self._context_tokens, self._noop_floor
        if policy.compact_now:
            reason = CompactReason.MANUAL
        elif tokens >= policy.emergency_tokens:
            reason = CompactReason.EMERGENCY
        elif tokens >= policy.threshold_tokens and (floor is None or tokens > floor):
            reason = CompactReason.THRESHOLD_EXCEEDED
        else:
            turn = self._turns_taken + 1
            self._advertised = policy.tools
            self._state = AwaitingModel(turn=turn)
            return CallLLM(turn=turn)
        self._state = AwaitingCompaction(reason=reason)
        return Compact(reason=reason)

    def _step_awaiting_model(self, policy: MachinePolicy) -> MachineStep:
        assert isinstance(self._state, AwaitingModel)
        if self._context_tokens >= policy.emergency_tokens:
            # A context-overflow count arrived while the model was asked: withdraw the call
            # (the turn is not counted) and compact first.
            self._state = AwaitingCompaction(reason=CompactReason.EMERGENCY)
            return Compact(reason=CompactReason.EMERGENCY)
        return CallLLM(turn=self._state.turn)

    def _step_awaiting_tools(self, policy: MachinePolicy) -> MachineStep:
        exchange = self._exchange
        assert exchange is not None
        return CallTools(turn=exchange.turn, calls=exchange.dispatch)

    def _step_awaiting_compaction(self, policy: MachinePolicy) -> MachineStep:
        assert isinstance(self._state, AwaitingCompaction)
        return Compact(reason=self._state.reason)

    def _step_terminal(self, policy: MachinePolicy) -> MachineStep:
        assert isinstance(self._state, Terminal)
        return Done(outcome=self._state.outcome)

    def _finish(self, outcome: Completed | Cancelled | MaxTurnsExceeded | Failed) -> Done:
        self._state = Terminal(outcome=outcome)
        self._exchange = None
        return Done(outcome=outcome)

    # --- the one way in, and the eleven feeds by name -----------------------------------

    def feed(self, feed: Feed) -> None:
        """Tell the brain what happened. A feed its state does not take (no table entry) is a
        ``ProtocolError`` naming the feed and the state; the machine is left as it was."""
        kind = self._state.kind
        handler = _FEED_HANDLERS.get((kind, type(feed)))
        if handler is None:
            if not isinstance(feed, Feed):
                raise ProtocolError(
                    f"feed() takes a Feed, not {type(feed).__name__}", feed="feed", state=kind
                )
            name = feed.name
            raise ProtocolError(f"{name}() is not valid in state {kind}", feed=name, state=kind)
        handler(self, feed)

    # The seed-named ways in: each builds its feed (``feeds.py`` documents them) and feeds it.

    def accept_input(self, input: str | Message) -> None:
        self.feed(AcceptInput(input))

    def model_response(self, response: Message, context_tokens: int) -> None:
        self.feed(ModelResponse(response, context_tokens))

    def tool_results(self, message: Message, context_tokens: int | None = None) -> None:
        self.feed(ToolResults(message, context_tokens))

    def compaction_result(self, compacted: Sequence[Message], before: int, after: int) -> None:
        self.feed(CompactionResult(compacted, before, after))

    def compaction_noop(self, before: int, after: int) -> None:
        self.feed(CompactionNoop(before, after))

    def set_context_tokens(self, n: int) -> None:
        self.feed(SetContextTokens(n))

    def inject(self, message: Message) -> None:
        self.feed(Inject(message))

    def cancel(self) -> None:
        self.feed(Cancel())

    def fail(self, error: LoopError) -> None:
        self.feed(Fail(error))

    def commit_pending(self) -> None:
        self.feed(CommitPending())

    def discard_pending(self) -> None:
        self.feed(DiscardPending())

    def _refuse(self, feed: Feed, why: str) -> ProtocolError:
        name, kind = feed.name, self._state.kind
        return ProtocolError(f"{name}() refused in state {kind}: {why}", feed=name, state=kind)

    # --- handlers: validate first, then change ------------------------------------------

    def _accept_input(self, feed: AcceptInput) -> None:
        input = feed.input
        if self._started:
            raise self._refuse(feed, "a run is already under way; use next_run()")
        message = Message.user(input) if isinstance(input, str) else input
        if not isinstance(message, Message) or message.role != "user":
            raise self._refuse(feed, "the input must be text or a user message")
        if (problem := message_problem(message)) is not None:
            raise self._refuse(feed, problem)
        if message.tool_results or message.tool_calls:
            raise self._refuse(feed, "the input may not hold tool calls or results")
        self._pending.append(message)
        self._started = True

    def _inject(self, feed: Inject) -> None:
        message = feed.message
        if not self._started:
            raise self._refuse(feed, "no run is under way")
        if not isinstance(message, Message):
            raise self._refuse(feed, "only a plain message without tool parts can be injected")
        if (problem := message_problem(message)) is not None:
            raise self._refuse(feed, problem)
        if message.tool_calls or message.tool_results:
            raise self._refuse(feed, "only a plain message without tool parts can be injected")
        self._pending.append(message)

    def _set_context_tokens(self, feed: SetContextTokens) -> None:
        n = feed.n
        if not is_count(n):
            raise self._refuse(feed, f"not a token count: {n!r}")
        self._context_tokens = n

    def _cancel(self, feed: Cancel) -> None:
        self._finish(Cancelled())

    def _fail(self, feed: Fail) -> None:
        error = feed.error
        if not isinstance(error, LoopError):
            raise self._refuse(feed, f"expected a LoopError, got {type(error).__name__}")
        self._finish(Failed(error=error))

    def _noop(self, feed: Feed) -> None:
        return None

    def _model_response(self, feed: ModelResponse) -> None:
        response, context_tokens = feed.response, feed.context_tokens
        state = self._state
        assert isinstance(state, AwaitingModel)
        if not isinstance(response, Message) or response.role != "assistant":
            raise self._refuse(feed, "the response must be an assistant message")
        if (problem := message_problem(response)) is not None:
            raise self._refuse(feed, problem)  # wrong types; too deep, NaN: it could not be saved
        calls: list[ToolCall] = []
        for part in response.parts:
            if isinstance(part, ToolCall):
                calls.append(part)
            elif isinstance(part, ToolResult):
                raise self._refuse(feed, "an assistant message cannot hold tool results")
        if not is_count(context_tokens):
            raise self._refuse(feed, f"not a token count: {context_tokens!r}")
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids) or "" in ids:
            raise self._refuse(feed, f"tool call ids must be unique and non-empty: {ids}")
        advertised = self._advertised
        unknown = [c for c in calls if c.name not in advertised]
        # Every call unknown: the exchange completes at once and is recorded now (a key raises
        # for what message_problem refused, so it is made before anything changes).
        keys = [call_key(c) for c in calls] if calls and len(unknown) == len(calls) else None
        turn = state.turn
        self._turns_taken += 1
        self._context_tokens = context_tokens
        self._pending.append(response)
        if not calls:
            self._finish(Completed(final_text=response.text))
            return
        preanswered = tuple(not_available(c, advertised) for c in unknown) if unknown else ()
        if keys is not None:
            self._pending.append(Message.from_results(preanswered))
            self._loop = self._loop.recorded(keys)
            self._state = Start()
            return
        self._exchange = Exchange(turn=turn, calls=tuple(calls), preanswered=preanswered)
        self._state = AwaitingTools(turn=turn)

    def _tool_results(self, feed: ToolResults) -> None:
        message, tokens = feed.message, feed.context_tokens
        exchange = self._exchange
        assert exchange is not None
        if tokens is not None and not is_count(tokens):
            raise self._refuse(feed, f"not a token count: {tokens!r}")
        if not isinstance(message, Message) or message.role != "user":
            raise self._refuse(feed, "results must come in one user message")
        if (problem := message_problem(message)) is not None:
            raise self._refuse(feed, problem)
        parts = message.parts
        for r in parts:
            if not isinstance(r, ToolResult):
                raise self._refuse(feed, "the results message may hold only tool results")
        results = cast("tuple[ToolResult, ...]", parts)
        got = [r.call_id for r in results]
        expected = [c.id for c in exchange.dispatch]
        if got != expected:
            # Not the common case (every call answered, in order): check as a set, then reorder.
            by_id = {r.call_id: r for r in results}
            if len(by_id) != len(results) or sorted(by_id) != sorted(expected):
                raise self._refuse(
                    feed, f"results {got} do not answer the dispatched calls {expected}"
                )
        if exchange.preanswered or got != expected:
            by_id = {r.call_id: r for r in (*results, *exchange.preanswered)}
            message = Message.from_results([by_id[c.id] for c in exchange.calls])
        self._pending.append(message)
        self._loop = self._loop.recorded([call_key(c) for c in exchange.calls])
        if tokens is not None:
            self._context_tokens = tokens
        self._exchange = None
        self._state = Start()

    def _compaction_result(self, feed: CompactionResult) -> None:
        compacted, before, after = feed.compacted, feed.before, feed.after
        # Typed before anything is read: a string, a message or a mapping is iterable too, and
        # what it yields is no message (``coherence_problem`` would fail on it, not refuse it).
        if isinstance(compacted, str | bytes | Message | Mapping) or not isinstance(
            compacted, Iterable
        ):
            raise self._refuse(
                feed,
                f"compacted must be a list of messages, got {type(compacted).__name__}",
            )
        new_history = list(compacted)
        if (problem := history_problem(new_history)) is not None:
            raise self._refuse(feed, f"compacted history is not valid: {problem}")
        for n in (before, after):
            if not is_count(n):
                raise self._refuse(feed, f"not a token count: {n!r}")
        self._history = tuple(new_history)
        self._pending = Pending()
        self._context_tokens = after
        self._noop_floor = None
        self._state = Start()

    def _compaction_noop(self, feed: CompactionNoop) -> None:
        before, after = feed.before, feed.after
        assert isinstance(self._state, AwaitingCompaction)
        for n in (before, after):
            if not is_count(n):
                raise self._refuse(feed, f"not a token count: {n!r}")
        reason = self._state.reason
        self._context_tokens = after
        if reason is CompactReason.EMERGENCY:
            error = LoopError(
                kind="context_overflow",
                message=(
                    f"the context ({after} tokens) is over the emergency line and compaction "
                    "found nothing more to cut; raise context_window or shorten the input"
                ),
                details={"before": before, "after": after},
            )
            self._finish(Failed(error=error))
            return
        if reason is CompactReason.THRESHOLD_EXCEEDED:
            self._noop_floor = after
        self._state = Start()

    def _exit(self, feed: CommitPending | DiscardPending) -> None:
        """The exit door: pending is glued onto history, whole on success (commit), its coherent
        prefix otherwise (discard)."""
        assert isinstance(self._state, Terminal)
        commit = isinstance(feed, CommitPending)
        if isinstance(self._state.outcome, Completed) != commit:
            other = "discard_pending" if commit else "commit_pending"
            why = f"a completed run commits, any other discards; use {other}()"
            raise self._refuse(feed, why)
        if self._finalized:
            raise self._refuse(feed, "pending was already committed or discarded")
        keep = len(self._pending) if commit else coherent_prefix_length(self._pending)
        self._history = (*self._history, *self._pending[:keep])
        self._pending = Pending()
        self._finalized = True

    # --- the next run --------------------------------------------------------------------

    def next_run(self) -> LoopMachine:
        """A fresh brain in ``Start`` holding this one's history (after the exit door)."""
        if not (isinstance(self._state, Terminal) and self._finalized):
            raise ProtocolError(
                "next_run() needs a terminal machine whose pending was committed or discarded",
                feed="next_run",
                state=self._state.kind,
            )
        fresh = LoopMachine((), self._context_tokens)
        fresh._history = self._history  # a tuple: shared
        fresh._saved = self._saved.copy()  # so its first digest does not encode history again
        return fresh

    # --- equality ------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LoopMachine):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.STATE_SLOTS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"<LoopMachine {self._state.kind} turns={self._turns_taken} "
            f"history={len(self._history)} pending={len(self._pending)}>"
        )


# The tables above, resolved to the handler functions once (the hot path looks up, not getattr).
_FEED_HANDLERS: Final[dict[tuple[str, type[Feed]], Callable[[LoopMachine, Any], None]]] = {
    key: getattr(LoopMachine, entry.handler) for key, entry in TRANSITIONS.items()
}
_STEP_HANDLERS: Final[dict[str, Callable[[LoopMachine, MachinePolicy], MachineStep]]] = {
    kind: getattr(LoopMachine, entry.handler) for kind, entry in STEP_TRANSITIONS.items()
}
