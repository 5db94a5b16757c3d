"""``BrainMachine``: the brain under hypothesis's stateful testing.

Hypothesis plays the driver. It picks random policies, then runs random programs against one
``LoopMachine``: every feed in the states where it is valid (with replies, results and
compactions drawn from strategies), the same feeds in the wrong states (which must raise
``ProtocolError`` and change nothing), malformed input in the right states (the same), questions
(``next_step``), save/restore, policy changes and ``next_run``; ``drive`` plays a few iterations
of a well-behaved driver. After every rule the invariants of ``loopctl_sim.props.invariants`` are
checked, and a tiny reference model (turns, tokens, the threshold no-op floor, the advertised
tools, a reference loop detector) is compared with the brain. At the end of every program,
``heal`` checks liveness: a healthy driver finishes the run and the next one completes.

Run it as a test::

    from loopctl_sim.props.brain_machine import TestBrain   # collected by pytest

Run it against your own policies by overriding the ``policies`` strategy (and, if you like,
``histories``, the starting conversations); the rules that draw from them are rebuilt for each
subclass::

    class MyBrain(BrainMachine):
        policies = st.builds(MachinePolicy, max_turns=st.integers(1, 50), tools=st.just(("grep",)))

    TestMyBrain = MyBrain.TestCase
    TestMyBrain.settings = settings(profile_settings(), stateful_step_count=40)

A failing program prints as Python (``state.setup(policy=MachinePolicy(...), ...)`` and the rule
calls with their arguments): paste it into a test to keep it. ``run_program`` drives the same
machine with weighted actions from a ``@given(st.data())`` test (deeper runs than uniform rule
choice reaches). See docs/testing.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final, TypeAlias

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from loopctl.core import (
    FEEDS,
    MAX_LOOP_WINDOW,
    TRANSITIONS,
    AwaitingCompaction,
    AwaitingTools,
    CallLLM,
    CallTools,
    Cancelled,
    Compact,
    CompactReason,
    Completed,
    Done,
    Failed,
    LoopError,
    LoopMachine,
    LoopWindow,
    MachinePolicy,
    MachineSnapshot,
    MachineStep,
    Message,
    Start,
    Terminal,
    TextPart,
    ToolCall,
    ToolResult,
)
from loopctl_sim.props import invariants as inv

__all__ = [
    "COMMON_ARGUMENTS",
    "JSON_ARGUMENTS",
    "PROGRAM_WEIGHTS",
    "TOOL_NAMES",
    "BrainMachine",
    "TestBrain",
    "compaction_of",
    "histories",
    "policies",
    "run_program",
    "tool_arguments",
]

#: The tool names policies advertise; replies call these and others.
TOOL_NAMES: Final = ("read", "write", "search", "shell")

Args: TypeAlias = dict[str, Any]
CallSpec: TypeAlias = tuple[bool, int, Args]

# --- strategies --------------------------------------------------------------------------------

_json_leaf = st.none() | st.booleans() | st.integers(-3, 3) | st.text("ab", max_size=2)
#: Any JSON value without floats: what a parsed arguments object can hold and round-trip exactly.
JSON_ARGUMENTS: Final = st.dictionaries(
    st.text("kpq", min_size=1, max_size=2),
    st.recursive(
        _json_leaf,
        lambda inner: (
            st.lists(inner, max_size=2)
            | st.dictionaries(st.text("xy", max_size=1), inner, max_size=2)
        ),
        max_leaves=4,
    ),
    max_size=2,
)


#: A few fixed argument objects (nested ones too): equal calls, hence loops, happen often.
COMMON_ARGUMENTS: Final[tuple[Args, ...]] = (
    {},
    {},
    {},
    {"path": "a"},
    {"path": "b"},
    {"n": 1},
    {"path": "a", "n": 1},
    {"q": {"x": [1, 2]}},
    {"k": [None, True, "s"]},
)


def tool_arguments(rare_json: bool = True) -> st.SearchStrategy[Args]:
    """Mostly ``COMMON_ARGUMENTS``; with ``rare_json``, now and then any JSON object."""
    common = st.sampled_from(COMMON_ARGUMENTS)
    if not rare_json:
        return common
    return st.one_of(common, common, common, JSON_ARGUMENTS)


@st.composite
def policies(draw: st.DrawFn, tool_names: Sequence[str] = TOOL_NAMES) -> MachinePolicy:
    """Small policies: few turns, a small window, thresholds near the counts drawn elsewhere."""
    compact = draw(st.sampled_from([0.5, 0.7, 0.8, 0.9]))
    emergency = draw(st.sampled_from([compact, 0.9, 0.95, 1.0, 1.2]).filter(lambda e: e >= compact))
    window = draw(st.integers(2, 12))
    n_tools = draw(st.sampled_from([0, 1, 2, 3, 3]))
    return MachinePolicy(
        max_turns=draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 8])),
        context_window=draw(st.sampled_from([100, 1000, 128_000])),
        compact_threshold=compact,
        emergency_threshold=emergency,
        tools=tuple(draw(st.lists(st.sampled_from(tool_names), unique=True, max_size=n_tools))),
        loop_window=min(window, MAX_LOOP_WINDOW),
        loop_repeat_limit=draw(st.integers(2, 4)),
        loop_action=draw(st.sampled_from(["warn", "fail", "off"])),
    )


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Provider-valid starting conversations (ids ``h<n>``, distinct from the test's calls)."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message.system("be brief"))
    for i in range(draw(st.integers(0, 2))):
        out.append(Message.user(f"question {i}"))
        if draw(st.booleans()):
            call = ToolCall(id=f"h{i}", name=draw(st.sampled_from(TOOL_NAMES)))
            out.append(Message.assistant(tool_calls=[call]))
            out.append(
                Message.from_results([ToolResult(call_id=call.id, name=call.name, content="ok")])
            )
        out.append(Message.assistant(f"answer {i}"))
    return out


def _units(messages: Sequence[Message]) -> list[list[Message]]:
    """Split a closed conversation into units a cut may not separate: an assistant message with
    calls together with its results message; any other message alone."""
    units: list[list[Message]] = []
    i = 0
    while i < len(messages):
        if messages[i].tool_calls and i + 1 < len(messages):
            units.append([messages[i], messages[i + 1]])
            i += 2
        else:
            units.append([messages[i]])
            i += 1
    return units


COMPACTION_MODES: Final = ("middle_out", "tail", "head_and_summary", "summary_only", "unchanged")


def compaction_of(messages: Sequence[Message], mode: str) -> list[Message]:
    """A provider-valid compaction of a closed conversation, in one of ``COMPACTION_MODES``.

    ``middle_out`` keeps the first and last unit and replaces the middle with a summary (the
    default compactor's shape); ``tail`` keeps the last coherent unit; ``head_and_summary`` the
    first unit and a summary; ``summary_only`` one summary message; ``unchanged`` all of it.
    """
    units = _units(messages)
    flat = [m for u in units for m in u]
    summary = Message.user(f"[summary of {len(flat)} messages]")
    if mode == "unchanged" or (len(units) <= 1 and mode == "middle_out"):
        return flat
    if mode == "middle_out":
        return [*units[0], summary, *units[-1]]
    if mode == "tail":
        return list(units[-1]) if units else []
    if mode == "head_and_summary":
        return [*(units[0] if units else []), summary]
    if mode == "summary_only":
        return [summary]
    raise ValueError(f"unknown compaction mode {mode!r}")


_NAN: Final = float("nan")
_PATIENCE: Final = st.sampled_from([0, 1, 2, 2, 3, 4])
_STARTS: Final = st.sampled_from([True, True, True, False])
_TOKEN_FRACTIONS: Final = st.sampled_from(
    [0.0, 0.1, 0.5, 0.69, 0.7, 0.79, 0.8, 0.85, 0.9, 0.94, 0.95, 1.0, 1.3]
)
_TEXTS: Final = st.sampled_from(["", "ok", "done", "let me look", " ", "a\nb", "ünï"])
_ERRORS: Final = st.builds(
    LoopError,
    kind=st.sampled_from(["network", "timeout", "provider", "tool", "internal"]),
    message=st.sampled_from(["boom", "reset by peer"]),
    retryable=st.booleans(),
)


@st.composite
def _calls(draw: st.DrawFn) -> list[CallSpec]:
    """0 to 3 calls, each a known tool (by index into the advertised names) 3 times in 4; now
    and then the same call repeated, and mostly the first tool with no arguments (``{}``), so
    that the loop detector has loops to find."""
    n = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3]))
    known = st.sampled_from([True, True, True, False])
    spec = st.tuples(known, st.sampled_from([0, 0, 1, 2, 3, 5, 7]), tool_arguments())
    if n > 1 and draw(st.sampled_from([False, False, True])):
        return [draw(spec)] * n
    return [draw(spec) for _ in range(n)]


_CALLS: Final = _calls()

#: One iteration of the driver: (reply text, reply calls, token fraction, compaction mode).
Move: TypeAlias = tuple[str, list[CallSpec], float, str]
_MOVE_TOKENS: Final = st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9, 1.0])
_MOVES: Final = st.tuples(
    _TEXTS, _CALLS, _MOVE_TOKENS, st.sampled_from((*COMPACTION_MODES, "noop"))
)


def _clone(machine: LoopMachine) -> LoopMachine:
    """An independent copy (messages are frozen and shared; the lists are copied)."""
    return type(machine).from_snapshot(machine.snapshot())


# --- the machine -------------------------------------------------------------------------------


class BrainMachine(RuleBasedStateMachine):
    """Hypothesis drives one ``LoopMachine`` as a (sometimes misbehaving) driver would.

    Override ``policies`` (a strategy of ``MachinePolicy``) or ``histories`` (a strategy of
    provider-valid starting conversations) in a subclass to test your own settings. A policy is
    drawn per run; mid-run changes (``change_policy``) redraw everything but ``max_turns``.
    Replies call the advertised tools by index, so any tool names work.

    ``tolerated`` names invariant problem codes that are reported as known issues and not failed
    on (see ``loopctl_sim.props.invariants``); keep it as small as the brain allows.
    """

    policies: ClassVar[st.SearchStrategy[MachinePolicy]] = policies()
    histories: ClassVar[st.SearchStrategy[list[Message]]] = histories()
    tolerated: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.machine = LoopMachine()
        self.policy = MachinePolicy()
        self.manual = False  # the driver's compact_now flag for the next ask
        self.next_id = 0
        # reference model of this run
        self.turns = 0
        self.tokens = 0
        self.outcome: Any = None
        # reference model of the loop detector and the threshold no-op floor
        self.loop_keys: list[str] = []
        self.loop_unjudged = 0
        self.loop_warned = False
        self.noop_floor: int | None = None
        self.advertised: tuple[str, ...] = ()  # policy.tools of the last CallLLM from Start
        # cancel and fail wait until this many turns were taken in the run, so that runs get
        # somewhere before they are interrupted (drawn per run)
        self.patience = 0

    # --- helpers ------------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.machine.state.kind

    @property
    def started(self) -> bool:
        return self.machine.snapshot().started

    @property
    def interruptible(self) -> bool:
        """cancel and fail are enabled: a run under way, past its drawn patience."""
        return (
            self.kind != "terminal" and self.started and self.machine.turns_taken >= self.patience
        )

    def asking_policy(self) -> MachinePolicy:
        if self.manual:
            return self.policy.model_copy(update={"compact_now": True})
        return self.policy

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install_policy_rules(cls)

    def _fail_on(self, problems: Sequence[str], what: str) -> None:
        real = [p for p in problems if inv.problem_code(p) not in self.tolerated]
        inv.assert_no_problems(real, f"{what} on {self.machine!r}")

    def _new_id(self) -> str:
        self.next_id += 1
        return f"call_{self.next_id}"

    def _feed(self, feed: str, do: Callable[[LoopMachine], None]) -> LoopMachine:
        """Apply a valid feed; check it against the table and stickiness; return the copy of
        the machine before it, for feed-specific checks."""
        before = _clone(self.machine)
        do(self.machine)
        event(f"feed {feed} in {before.state.kind}")
        problems = inv.check_transition(before.state.kind, feed, self.kind)
        problems += inv.check_terminal_sticky(before, self.machine)
        self._fail_on(problems, feed)
        return before

    def _reply(self, text: str, calls: Sequence[CallSpec]) -> Message:
        tools = self.machine.snapshot().advertised
        parts: list[ToolCall] = []
        for known, index, arguments in calls:
            name = tools[index % len(tools)] if known and tools else f"missing_{index}"
            parts.append(ToolCall(id=self._new_id(), name=name, arguments=arguments))
        return Message.assistant(text, tool_calls=parts)

    # --- setup --------------------------------------------------------------------------------

    def _setup(
        self, policy: MachinePolicy, history: list[Message], patience: int, start: bool
    ) -> None:
        self.policy = policy
        self.machine = LoopMachine(history)
        self.patience = patience
        # most programs start with the run under way (swarm testing may disable both rules that
        # start one); the rest leave accept_input to the rules
        if start:
            self.accept_input("hello", False)

    def _change_policy(self, drawn: MachinePolicy) -> None:
        """The driver rebuilds the policy every step; the run's max_turns stays."""
        self.policy = drawn.model_copy(update={"max_turns": self.policy.max_turns})

    def setup_from(self, data: st.DataObject) -> None:
        """``setup`` with its arguments drawn from ``data`` (for ``run_program``)."""
        self._setup(
            data.draw(self.policies, label="policy"),
            data.draw(self.histories, label="history"),
            data.draw(_PATIENCE, label="patience"),
            data.draw(_STARTS, label="start"),
        )

    # --- the question -------------------------------------------------------------------------

    @precondition(lambda self: self.kind != "start" or self.started)
    @rule()
    def next_step(self) -> None:
        policy = self.asking_policy()
        before = self.machine.snapshot()
        step: MachineStep = self.machine.next_step(policy)
        event(f"step {step!r}" if isinstance(step, Compact) else f"step {step.kind}")
        problems = inv.check_step(self.machine, step, policy)
        problems += inv.check_transition(before.state.kind, "next_step", self.kind)
        problems += self._check_loop_and_decision(before, policy, step)
        if isinstance(step, CallLLM) and isinstance(before.state, Start):
            self.advertised = policy.tools
        if isinstance(step, CallLLM) and step.turn > policy.max_turns:
            problems.append(f"{inv.TURNS_CODE}: {step!r} with max_turns={policy.max_turns}")
        if isinstance(before.state, Terminal) and step != Done(outcome=before.state.outcome):
            problems.append(f"{inv.STICKY_CODE}: a terminal machine answered {step!r}")
        self._fail_on(problems, f"next_step -> {step!r}")
        if (isinstance(step, Compact) and step.reason is CompactReason.MANUAL) or isinstance(
            step, Done
        ):
            self.manual = False

    def _check_loop_and_decision(
        self, before: MachineSnapshot, policy: MachinePolicy, step: MachineStep
    ) -> list[str]:
        """Compare a decision taken in ``Start`` with the reference loop detector and the
        reference decision order; update the reference."""
        if not (isinstance(before.state, Start) and before.started):
            return []
        verdict = inv.reference_loop_verdict(self.loop_keys, self.loop_unjudged, policy)
        problems = inv.check_loop_decision(
            before, self.machine, step, verdict, self.loop_warned, policy
        )
        failed = verdict is not None and (policy.loop_action == "fail" or self.loop_warned)
        if verdict is not None:
            event(f"loop verdict {verdict} ({'fail' if failed else 'warn'})")
        if not failed:
            judged = before.model_copy(update={"loop": LoopWindow()})
            problems += inv.check_start_decision(judged, policy, step)
        if verdict is not None and not failed:
            self.loop_warned = True
        self.loop_unjudged = 0
        return problems

    def _record_calls(self, calls: Sequence[ToolCall]) -> None:
        self.loop_keys += [inv.reference_call_key(c) for c in calls]
        self.loop_unjudged = len(calls)

    # --- the eleven feeds, in their states -----------------------------------------------------

    @precondition(lambda self: self.kind == "start" and not self.started)
    @rule(text=_TEXTS, as_message=st.booleans())
    def accept_input(self, text: str, as_message: bool) -> None:
        given: str | Message = Message.user(text) if as_message else text
        self._feed("accept_input", lambda m: m.accept_input(given))
        assert self.machine.pending[-1] == Message.user(text)

    @precondition(lambda self: self.kind == "awaiting_model")
    @rule(text=_TEXTS, calls=_CALLS, tokens=_TOKEN_FRACTIONS)
    def model_response(self, text: str, calls: list[CallSpec], tokens: float) -> None:
        reply = self._reply(text, calls)
        count = int(tokens * self.policy.context_window)
        advertised = self.advertised
        assert self.machine.snapshot().advertised == advertised, "advertised names drifted"
        before = self._feed("model_response", lambda m: m.model_response(reply, count))
        self.turns += 1
        self.tokens = count
        added = list(self.machine.pending[before.pending_len() :])
        assert added[0] == reply, "the reply was not appended as given"
        known = [c for c in reply.tool_calls if c.name in advertised]
        if not reply.tool_calls:
            assert self.machine.state == Terminal(outcome=Completed(final_text=reply.text))
        elif not known:
            # every call unknown: the exchange completes at once with the pre-answers
            assert self.kind == "start", self.kind
            assert len(added) == 2 and all(r.is_error for r in added[1].tool_results)
            assert [r.call_id for r in added[1].tool_results] == [c.id for c in reply.tool_calls]
            self._record_calls(reply.tool_calls)
        else:
            exchange = self.machine.exchange
            assert exchange is not None and list(exchange.dispatch) == known

    @precondition(lambda self: self.kind == "awaiting_tools")
    @rule(rotate=st.integers(0, 3), errors=st.lists(st.booleans(), max_size=3))
    def tool_results(self, rotate: int, errors: list[bool]) -> None:
        exchange = self.machine.exchange
        assert exchange is not None
        dispatch = list(exchange.dispatch)
        r = rotate % len(dispatch)
        order = dispatch[r:] + dispatch[:r]
        results = [
            ToolResult(
                call_id=c.id,
                name=c.name,
                content=f"result of {c.id}",
                is_error=bool(errors[i]) if i < len(errors) else False,
            )
            for i, c in enumerate(order)
        ]
        before = self._feed("tool_results", lambda m: m.tool_results(Message.from_results(results)))
        added = list(self.machine.pending[before.pending_len() :])
        assert len(added) == 1, "tool_results must append exactly one message"
        merged = added[0].tool_results
        assert [x.call_id for x in merged] == [c.id for c in exchange.calls], "not in call order"
        by_id = {x.call_id: x for x in [*results, *exchange.preanswered]}
        assert merged == [by_id[c.id] for c in exchange.calls], "results were altered"
        self._record_calls(exchange.calls)

    @precondition(lambda self: self.kind == "awaiting_compaction")
    @rule(mode=st.sampled_from(COMPACTION_MODES), tokens=_TOKEN_FRACTIONS)
    def compaction_result(self, mode: str, tokens: float) -> None:
        compacted = compaction_of(self.machine.messages(), mode)
        count = int(tokens * self.policy.context_window)
        before_tokens = self.machine.context_tokens
        before = self._feed(
            "compaction_result", lambda m: m.compaction_result(compacted, before_tokens, count)
        )
        self.tokens = count
        self.noop_floor = None
        self._fail_on(
            inv.check_compaction_commit(before, self.machine, compacted, count), "compaction"
        )

    @precondition(lambda self: self.kind == "awaiting_compaction")
    @rule(tokens=_TOKEN_FRACTIONS)
    def compaction_noop(self, tokens: float) -> None:
        assert isinstance(self.machine.state, AwaitingCompaction)
        reason = self.machine.state.reason
        count = int(tokens * self.policy.context_window)
        before_tokens = self.machine.context_tokens
        self._feed("compaction_noop", lambda m: m.compaction_noop(before_tokens, count))
        self.tokens = count
        if reason is CompactReason.EMERGENCY:
            assert self.kind == "terminal", "a no-op after an emergency must fail the run"
        else:
            assert self.kind == "start"
        if reason is CompactReason.THRESHOLD_EXCEEDED:
            self.noop_floor = count

    @precondition(lambda self: self.kind != "terminal")
    @rule(tokens=_TOKEN_FRACTIONS)
    def set_context_tokens(self, tokens: float) -> None:
        count = int(tokens * self.policy.context_window)
        self._feed("set_context_tokens", lambda m: m.set_context_tokens(count))
        self.tokens = count

    @precondition(lambda self: self.kind == "start" and self.started)
    @rule(role=st.sampled_from(["user", "system", "assistant"]), text=_TEXTS)
    def inject(self, role: str, text: str) -> None:
        message = Message(role=role, parts=(TextPart(text=text),))
        self._feed("inject", lambda m: m.inject(message))
        assert self.machine.pending[-1] == message

    @precondition(lambda self: self.interruptible)
    @rule()
    def cancel(self) -> None:
        self._feed("cancel", lambda m: m.cancel())
        assert self.machine.state == Terminal(outcome=Cancelled())

    @precondition(lambda self: self.interruptible)
    @rule(error=_ERRORS)
    def fail(self, error: LoopError) -> None:
        self._feed("fail", lambda m: m.fail(error))
        assert self.machine.state == Terminal(outcome=Failed(error=error))

    @precondition(lambda self: self.kind == "terminal")
    @rule(error=st.none() | _ERRORS)
    def cancel_or_fail_when_terminal(self, error: LoopError | None) -> None:
        """Both are no-ops on a finished machine: nothing at all changes."""
        before = self.machine.model_dump_json()
        if error is None:
            self._feed("cancel", lambda m: m.cancel())
        else:
            self._feed("fail", lambda m: m.fail(error))
        assert self.machine.model_dump_json() == before, "a terminal machine changed"

    @precondition(
        lambda self: (
            isinstance(self.machine.state, Terminal)
            and isinstance(self.machine.state.outcome, Completed)
            and not self.machine.finalized
        )
    )
    @rule()
    def commit_pending(self) -> None:
        before = self._feed("commit_pending", lambda m: m.commit_pending())
        self._fail_on(inv.check_commit(before, self.machine), "commit_pending")

    @precondition(
        lambda self: (
            isinstance(self.machine.state, Terminal)
            and not isinstance(self.machine.state.outcome, Completed)
            and not self.machine.finalized
        )
    )
    @rule()
    def discard_pending(self) -> None:
        before = self._feed("discard_pending", lambda m: m.discard_pending())
        self._fail_on(inv.check_salvage(before, self.machine), "discard_pending")

    # --- between runs and across processes ----------------------------------------------------

    def _next_run(self, policy: MachinePolicy) -> None:
        fresh = self.machine.next_run()
        self._fail_on(inv.check_next_run(self.machine, fresh), "next_run")
        self.machine = fresh
        self.policy = policy
        self.manual = False
        self.turns = 0
        self.outcome = None
        self.loop_keys = []
        self.loop_unjudged = 0
        self.loop_warned = False
        self.noop_floor = None

    @precondition(lambda self: not (self.kind == "terminal" and self.machine.finalized))
    @rule(moves=st.lists(_MOVES, min_size=1, max_size=6))
    def drive(self, moves: list[Move]) -> None:
        """Iterations of a well-behaved driver: ask, do what was asked and report it (the
        reply, results or compaction drawn in the move); at the end, the exit door. The
        invariants are checked after every move, as after every rule."""
        for i, move in enumerate(moves):
            if self.kind == "terminal" and self.machine.finalized:
                return
            if i:
                self.check_all()
            self._move(*move)

    #: The moves ``heal`` may take to finish a run, and then to complete a fresh one.
    HEAL_BUDGET: ClassVar[int] = 12

    def heal(self) -> None:
        """Liveness: once the faults stop, a well-behaved driver finishes the run.

        From wherever the program left the machine, a driver that reports final answers (no
        tool calls), small contexts and compactions that cut everything reaches a terminal
        state and the exit door within ``HEAL_BUDGET`` moves; the next run, given a turn,
        then completes. Safety alone would pass a brain that gets stuck (say, asking for the
        same compaction forever); this would not.
        """
        self.manual = False
        heal: Move = ("healed", [], 0.0, "summary_only")
        for _ in range(self.HEAL_BUDGET):
            if self.kind == "terminal" and self.machine.finalized:
                break
            self._move(*heal)
            self.check_all()
        else:
            raise AssertionError(
                f"no exit after {self.HEAL_BUDGET} healthy moves: {self.machine!r}"
            )
        policy = self.policy
        self._next_run(policy.model_copy(update={"max_turns": max(1, policy.max_turns)}))
        for _ in range(self.HEAL_BUDGET):
            if self.kind == "terminal":
                break
            self._move(*heal)
            self.check_all()
        state = self.machine.state
        assert isinstance(state, Terminal) and isinstance(state.outcome, Completed), state

    def teardown(self) -> None:
        self.heal()

    def _move(self, text: str, calls: list[CallSpec], tokens: float, compaction: str) -> None:
        if self.kind == "start" and not self.started:
            self.accept_input(text, False)
            return
        if self.kind == "terminal":
            assert isinstance(self.machine.state, Terminal)
            if isinstance(self.machine.state.outcome, Completed):
                self.commit_pending()
            else:
                self.discard_pending()
            return
        self.next_step()
        kind = self.kind
        if kind == "awaiting_model":
            self.model_response(text, calls, tokens)
        elif kind == "awaiting_tools":
            self.tool_results(len(calls), [])
        elif kind == "awaiting_compaction" and compaction == "noop":
            self.compaction_noop(tokens)
        elif kind == "awaiting_compaction":
            self.compaction_result(compaction, tokens)

    @rule()
    def save_and_restore(self) -> None:
        text = self.machine.model_dump_json()
        try:
            restored = LoopMachine.model_validate_json(text)
        except ValueError:
            problems = inv.check_resume(self.machine)
            self._fail_on(problems, "save_and_restore")
            return  # a tolerated known issue: carry on with the original
        assert restored == self.machine
        self.machine = restored

    @precondition(lambda self: self.kind == "start" and self.started)
    @rule()
    def request_manual_compaction(self) -> None:
        self.manual = True

    # --- misuse: the wrong feed, or bad input; ProtocolError and no change ---------------------

    def _plausible(self, feed: str) -> Callable[[LoopMachine], Any]:
        """The feed with arguments that would be fine in its own state."""
        calls: dict[str, Callable[[LoopMachine], Any]] = {
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
        return calls[feed]

    @rule(index=st.integers(0, len(FEEDS) - 1))
    def feed_in_wrong_state(self, index: int) -> None:
        kind = self.kind
        invalid = [f for f in FEEDS if (kind, f) not in TRANSITIONS]
        if not invalid:
            return
        feed = invalid[index % len(invalid)]
        self._fail_on(inv.check_refused(self.machine, self._plausible(feed)), f"{feed} in {kind}")

    def _bad_inputs(self) -> list[tuple[str, Callable[[LoopMachine], Any]]]:
        """Misuse that the current state must refuse: (description, call)."""
        m = self.machine
        state = m.state
        kind = state.kind
        out: list[tuple[str, Callable[[LoopMachine], Any]]] = (
            [
                ("fail with a non-error", lambda x: x.fail("boom"))  # type: ignore[arg-type]
            ]
            if kind != "terminal"
            else []
        )
        if not (kind == "terminal" and m.finalized):
            out.append(("next_run too early", lambda x: x.next_run()))
        if kind == "start" and not self.started:
            out.append(("next_step before input", lambda x: x.next_step(self.policy)))
            out.append(("inject before input", lambda x: x.inject(Message.user("n"))))
            out.append(
                ("input as an assistant message", lambda x: x.accept_input(Message.assistant("a")))
            )
        if kind == "start" and self.started:
            out.append(("a second input", lambda x: x.accept_input("again")))
            call = ToolCall(id="inj", name="read")
            result = Message.from_results([ToolResult(call_id="inj", name="read", content="")])
            out += [
                ("inject a tool call", lambda x: x.inject(Message.assistant(tool_calls=[call]))),
                ("inject a tool result", lambda x: x.inject(result)),
            ]
        if kind == "start" and not self.started:
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
            out += [
                ("one result short", lambda x: x.tool_results(Message.from_results(good[1:]))),
                (
                    "a result twice",
                    lambda x: x.tool_results(Message.from_results([*good, good[0]])),
                ),
                (
                    "a result for no call",
                    lambda x: x.tool_results(
                        Message.from_results(
                            [*good, ToolResult(call_id="stray", name="x", content="")]
                        )
                    ),
                ),
                (
                    "text among the results",
                    lambda x: x.tool_results(
                        Message(role="user", parts=(*good, TextPart(text="t")))
                    ),
                ),
                (
                    "results as an assistant",
                    lambda x: x.tool_results(Message(role="assistant", parts=tuple(good))),
                ),
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

    @rule(index=st.integers(0, 30))
    def bad_input_in_state(self, index: int) -> None:
        cases = self._bad_inputs()
        what, call = cases[index % len(cases)]
        self._fail_on(inv.check_refused(self.machine, call), f"{what} in {self.kind}")

    # --- invariants, after every rule ---------------------------------------------------------

    def check_all(self) -> None:
        """All the invariants at once (hypothesis runs them after every rule; ``drive`` also
        between its moves)."""
        self.machine_is_sound()
        self.matches_reference_counts()
        self.terminal_is_sticky()
        self.resumes_exactly()
        self.awaiting_tools_has_an_exchange()

    @invariant()
    def machine_is_sound(self) -> None:
        self._fail_on(inv.check_machine(self.machine, self.policy), "check_machine")

    @invariant()
    def matches_reference_counts(self) -> None:
        assert self.machine.turns_taken == self.turns, (self.machine.turns_taken, self.turns)
        assert self.machine.context_tokens == self.tokens, (
            self.machine.context_tokens,
            self.tokens,
        )
        snap = self.machine.snapshot()
        assert snap.noop_floor == self.noop_floor, (snap.noop_floor, self.noop_floor)
        assert snap.loop.warned == self.loop_warned, (snap.loop.warned, self.loop_warned)

    @invariant()
    def terminal_is_sticky(self) -> None:
        state = self.machine.state
        if self.outcome is not None:
            assert isinstance(state, Terminal) and state.outcome == self.outcome, state
        elif isinstance(state, Terminal):
            self.outcome = state.outcome
            error = getattr(state.outcome, "error", None)
            event(f"outcome {state.outcome.kind}" + (f" ({error.kind})" if error else ""))

    @invariant()
    def resumes_exactly(self) -> None:
        """Restored copies equal the machine, digest the same and decide the same, idempotently."""
        self._fail_on(inv.check_resume(self.machine, self.asking_policy()), "resume")

    @invariant()
    def awaiting_tools_has_an_exchange(self) -> None:
        if isinstance(self.machine.state, AwaitingTools):
            step = self._peek()
            assert isinstance(step, CallTools) and step.calls, step

    def _peek(self) -> MachineStep | None:
        """Ask a deep copy (never the machine under test)."""
        try:
            return _clone(self.machine).next_step(self.asking_policy())
        except Exception:
            return None


def _install_policy_rules(cls: type[BrainMachine]) -> None:
    """The rules that draw from ``cls.policies`` / ``cls.histories``, built per class so that a
    subclass's strategies are used and the printed program stays plain Python
    (``state.setup(history=[...], patience=1, policy=MachinePolicy(...), start=True)``)."""
    policies_ = cls.policies
    histories_ = cls.histories

    @initialize(policy=policies_, history=histories_, patience=_PATIENCE, start=_STARTS)
    def setup(
        self: BrainMachine,
        policy: MachinePolicy,
        history: list[Message],
        patience: int,
        start: bool,
    ) -> None:
        self._setup(policy, history, patience, start)

    @precondition(lambda self: self.kind == "terminal" and self.machine.finalized)
    @rule(policy=policies_, patience=_PATIENCE)
    def next_run(self: BrainMachine, policy: MachinePolicy, patience: int) -> None:
        self._next_run(policy)
        self.patience = patience

    @precondition(lambda self: self.kind != "terminal")
    @rule(policy=policies_)
    def change_policy(self: BrainMachine, policy: MachinePolicy) -> None:
        self._change_policy(policy)

    for function in (setup, next_run, change_policy):
        setattr(cls, function.__name__, function)


_install_policy_rules(BrainMachine)

TestBrain = BrainMachine.TestCase


# --- a weighted program over the same rules ----------------------------------------------------

#: How often ``run_program`` picks each kind of action (out of the sum).
PROGRAM_WEIGHTS: Final = {
    "drive": 12,
    "set_context_tokens": 2,
    "inject": 1,
    "manual": 1,
    "change_policy": 1,
    "save_and_restore": 2,
    "misuse": 2,
    "cancel": 1,
    "fail": 1,
}


def run_program(machine: BrainMachine, data: st.DataObject, steps: int) -> None:
    """Drive ``machine`` (after ``setup_from``) with ``steps`` actions weighted by
    ``PROGRAM_WEIGHTS``, checking every invariant after each.

    Hypothesis's stateful runner picks enabled rules uniformly (with swarm testing on top), so
    runs are often interrupted before they reach deep states (loops, several exchanges, a
    compaction then a failure). This is the same machine under a driver that mostly behaves, for
    a ``@given(st.data())`` test or a fuzz campaign. Finished runs go through the exit door and on
    to the next run.
    """
    names = [name for name, weight in PROGRAM_WEIGHTS.items() for _ in range(weight)]
    for _ in range(steps):
        m = machine.machine
        if m.is_terminal and m.finalized:
            machine._next_run(data.draw(machine.policies, label="policy"))
            machine.patience = data.draw(_PATIENCE, label="patience")
            machine.check_all()
            continue
        action = data.draw(st.sampled_from(names), label="action")
        kind, started = machine.kind, machine.started
        under_way = kind == "start" and started
        if action == "drive" or (action in ("cancel", "fail") and not machine.interruptible):
            machine.drive(data.draw(st.lists(_MOVES, min_size=1, max_size=3), label="moves"))
        elif action == "set_context_tokens" and kind != "terminal":
            machine.set_context_tokens(data.draw(_TOKEN_FRACTIONS, label="tokens"))
        elif action == "inject" and under_way:
            machine.inject(data.draw(st.sampled_from(["user", "system"])), "steer")
        elif action == "manual" and under_way:
            machine.request_manual_compaction()
        elif action == "change_policy" and kind != "terminal":
            machine._change_policy(data.draw(machine.policies, label="policy"))
        elif action == "save_and_restore":
            machine.save_and_restore()
        elif action == "misuse":
            index = data.draw(st.integers(0, 30), label="index")
            if data.draw(st.booleans(), label="wrong feed"):
                machine.feed_in_wrong_state(index)
            else:
                machine.bad_input_in_state(index)
        elif action == "cancel":
            machine.cancel()
        elif action == "fail":
            machine.fail(data.draw(_ERRORS, label="error"))
        machine.check_all()
