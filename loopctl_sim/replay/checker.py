"""The replay's observer: every step, feed, request and end the live driver reports, against the
trace's record of it, in order; the first difference stops the replay as a ``Divergence``.

Compared: the policy and the step; the feed and the brain's digest after it (and its summary);
every model request's digest (``explain`` says what changed); the run's outcome and final digest.
Other io records are the world's answers (``answers`` reads them) or skipped.

Secrets. A ``scrubbed`` record holds placeholders: the live value is scrubbed with the same key
and compared (by fingerprint when this process holds the trace's key, else by position). A brain
that took a placeholder in cannot reach the recorded digests, so from a run's first scrubbed
record on digests are not compared (the result says so); steps, feeds and requests still are.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, NoReturn

from loopctl.api import ModelRequest
from loopctl.core import LoopMachine, MachinePolicy, MachineStep, Terminal, to_jsonable
from loopctl.observe import IoEvent, LoopObserver
from loopctl_sim.replay.cursor import Cursor, TraceEnded
from loopctl_sim.replay.explain import (
    brain_divergence,
    feed_explanation,
    policy_changes,
    request_explanation,
)
from loopctl_sim.replay.machine import summary_divergence
from loopctl_sim.replay.report import Diverged, Divergence, RecentFeed, ReplayResult
from loopctl_sim.trace import (
    EndRecord,
    FeedRecord,
    Record,
    Scrubber,
    StepRecord,
    decode_feed,
    encode_feed,
    without_fingerprints,
)
from loopctl_sim.trace.requests import (
    RecordedContexts,
    RequestLog,
    canonical_context,
    request_digest,
    with_last,
)

_REQUEST = frozenset({"model_request"})


class Killed(BaseException):
    """The recorded driver was killed in the middle of what the replaying one is doing and the
    trace resumed there (a header follows): the replayed run stops to go on from that header."""


class Incomplete(BaseException):
    """The trace ends while the run it records is under way (a crash, a Ctrl-C): the replay
    stops there, and has checked everything up to the trace's last record."""


def brain_view(rec: Record) -> dict[str, Any]:
    """A brain record as data, without what replay never compares."""
    return rec.model_dump(exclude=("seq", "type", "scrubbed", "brain"))


def _kind(rec: Record) -> str:
    if rec.type == "feed":
        return f"feed {rec.name}"
    if isinstance(rec, StepRecord):
        return f"step {rec.step.kind}"
    return rec.type


@dataclass(eq=False)
class Checker(LoopObserver):
    """Compares what the live driver reports with the trace; see the module docstring."""

    cursor: Cursor
    result: ReplayResult
    scrubber: Scrubber
    _: KW_ONLY
    fingerprints: bool  # the trace's scrub key is this scrubber's
    # The agent's requests are compared whole; the built-in body's (which cannot know the
    # agent's prompt and tool specs) take the trace's context: only messages are compared.
    own_context: bool = True
    # (seq, line, name, args) of the last feeds, made ``RecentFeed`` only for a report
    recent: deque[tuple[int, int, str, Any]] = field(default_factory=lambda: deque(maxlen=3))
    turn: int | None = None
    policy: MachinePolicy | None = None
    digests: bool = True  # still comparable in this run
    requests: RequestLog = field(default_factory=RequestLog)
    contexts: RecordedContexts = field(default_factory=RecordedContexts)
    machine: LoopMachine | None = None
    in_run: bool = False
    #: the digest of the brain as of the last record matched (None: not comparable): what a
    #: header after a kill must hold
    matched: str | None = None

    def fail(
        self,
        line: int,
        seq: int,
        what: str,
        message: str,
        expected: Any,
        actual: Any,
        details: list[str] | None = None,
    ) -> NoReturn:
        divergence = self.result.divergence
        if divergence is None:  # the first divergence is the one to report
            clean = self.scrubber  # the live side may hold secrets: a report never shows them
            divergence = self.result.divergence = Divergence(
                seq,
                line,
                what,
                clean.text(message),
                expected,
                clean(actual),
                [RecentFeed(*feed) for feed in self.recent],
                details=[clean.text(d) for d in details or []],
                policy=None if self.policy is None else self.policy.model_dump(mode="json"),
            )
        raise Diverged(divergence)

    def ended(self) -> NoReturn:
        """The trace ran out under a live run."""
        if self.in_run:
            raise Incomplete
        line = self.cursor.last_read()
        self.fail(line, line - 1, "end", "the agent went on after the trace ended", None, None)

    def _brain_record(self, actual: str) -> tuple[int, Record]:
        if header_next(self.cursor):
            raise Killed
        try:
            (line, rec), skipped = self.cursor.take_brain()
        except TraceEnded:
            self.ended()
        assert rec.type != "header" and rec.type != "io"  # header_next; take_brain
        if skipped and any(r.scrubbed for r in skipped):
            self.scrubbed_from(line)
        if type(rec) is EndRecord and rec.error is not None:  # the recorded run raised here
            went = "ended through the exit door" if actual == "end" else "went on"
            why = f"the agent's run {went} where the trace's ended by an exception, "
            why += f"{rec.error} (the failure no longer happens)"
            live = {actual: "the run went on"} if actual != "end" else {"end": "exit door"}
            raised = {"error": rec.error.model_dump(mode="json")}
            self.fail(line, rec.seq, "exception", why, raised, live)
        return line, rec

    def scrubbed_from(self, line: int) -> None:
        """The run's records hold secrets from ``line`` on: digests are not compared after it."""
        if self.digests:
            self.digests = False
            self.result.notes.append(
                f"digests compared up to line {line}: the trace holds scrubbed secrets from "
                "there on (steps, feeds and requests are still compared, with the secrets "
                + ("by their fingerprints" if self.fingerprints else "by where they stand")
                + "; token counts are not)"
            )

    def same(self, recorded: Any, live: Any, scrubbed: bool) -> bool:
        """JSON data ``recorded`` (from a ``scrubbed`` record or not) against ``live``."""
        if not scrubbed:
            return bool(recorded == live)
        live = self.scrubber(live)
        if self.fingerprints:
            return bool(recorded == live)
        return bool(without_fingerprints(recorded) == without_fingerprints(live))

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        self.machine = machine
        self.in_run = True

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        self.machine = machine
        self.policy = policy
        line, rec = self._brain_record("step")
        self.turn = getattr(step, "turn", self.turn)
        if not isinstance(rec, StepRecord):
            why = f"the brain asked {step.kind} where the trace has {_kind(rec)}"
            live = {"policy": policy.model_dump(mode="json"), "step": to_jsonable(step)}
            self.fail(line, rec.seq, "step", why, brain_view(rec), live)
        if rec.policy != policy:
            recorded, live = rec.policy.model_dump(mode="json"), policy.model_dump(mode="json")
            why = "the agent's settings differ from the trace's: " + ", ".join(
                policy_changes(recorded, live)
            )
            self.fail(line, rec.seq, "policy", why, recorded, live)
        if rec.step != step and not (
            rec.scrubbed and self.same(to_jsonable(rec.step), to_jsonable(step), True)
        ):
            at = f"turn {self.turn}: " if self.turn else ""
            self.fail(
                line,
                rec.seq,
                "step",
                at + f"the brain asked {step.kind}, the trace has {rec.step.kind}"
                if rec.step.kind != step.kind
                else at + f"the brain asked another {step.kind}",
                to_jsonable(rec.step),
                to_jsonable(step),
            )
        if rec.scrubbed:
            self.scrubbed_from(line)
        self._matched(machine, None)
        self.result.steps += 1

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        self.machine = machine
        line, rec = self._brain_record("feed")
        rec = self._feed_args(line, rec, name, args)
        if rec.scrubbed:
            self.scrubbed_from(line)
        digest = None
        if self.digests:
            digest = machine.digest()
            if rec.digest != digest:
                sentence = f"the brain after {name}() is not the recorded one"
                why = brain_divergence(sentence, rec.digest, rec.brain, machine)
                self.fail(line, rec.seq, "digest", *why)
            # the brain summary beside the digest is checked too (it is no decoration)
            if rec.brain is not None:
                found = summary_divergence(rec.brain, machine, f"after {name}()", digest)
                if found is not None:
                    self.fail(line, rec.seq, "summary", *found)
        self._matched(machine, digest)
        self.result.feeds += 1

    def _feed_args(self, line: int, rec: Record, name: str, args: Mapping[str, Any]) -> FeedRecord:
        """The feed's name and arguments against the record's; the record, a feed's."""
        if rec.type != "feed" or rec.name != name:
            why = f"the agent fed {name}() where the trace has {_kind(rec)}"
            live = {"name": name, "args": encode_feed(decode_feed(name, args))}
            self.fail(line, rec.seq, "feed", why, brain_view(rec), live)
        self.recent.append((rec.seq, line, name, rec.args))
        # The driver hands the brain valid values (messages, counts): equal to the recorded
        # feed's fields, the live arguments are that feed, and are not validated into one of
        # their own (3 validations a turn); anything else is validated and compared as a feed.
        if rec.args.args() != args and rec.args != (typed := decode_feed(name, args)):
            recorded, live = encode_feed(rec.args), encode_feed(typed)
            if not self.digests:
                # Past a secret the driver counts tokens of placeholders, which are not as long
                # as the secrets they stand for: counts are not compared (the brain is given the
                # live ones, so a decision they change still shows as a step that differs).
                for data in (recorded, live):
                    data.pop("context_tokens", None)
                    if name == "set_context_tokens":
                        data.pop("n", None)
            if not self.same(recorded, live, rec.scrubbed or not self.digests):
                message, details = feed_explanation(self.turn, name, recorded, live)
                self.fail(line, rec.seq, "feed", message, recorded, live, details)
        return rec

    def _matched(self, machine: LoopMachine, digest: str | None) -> None:
        """Keep the brain's digest as of the record just matched (``digest``, when the feed
        computed it) where a header follows that record: only a header after a kill reads it
        (``loopctl_sim.replay.driver``), and a kill is met only where the next brain record is
        a header. Skipping the others skips 5 of a turn's 9 digests (a 10,000-record agent
        replay: 232,000 -> 198,000 instructions a record)."""
        if not self.digests:
            self.matched = None
        elif header_next(self.cursor):
            self.matched = digest if digest is not None else machine.digest()

    def io(self, event: IoEvent) -> None:
        if event.kind != "model_request":
            return
        request = event.data.get("request")
        if not isinstance(request, ModelRequest):
            return
        found = self.cursor.take_io(_REQUEST)
        if found is None and header_next(self.cursor):
            raise Killed
        if found is None:  # a brain record comes first, or none
            item = self.cursor.peek()
            if item is None:
                self.ended()
            why = f"turn {self.turn}: the agent called the model where the trace did not"
            sent = {"n_messages": len(request.messages)}
            self.fail(item[0], item[1].seq, "request", why, brain_view(item[1]), sent)
        line, rec = found
        brain = self.machine.digest() if self.machine is not None else None
        live = self.requests.see(
            request, event.data.get("model"), event.data.get("provider"), brain, last=False
        )
        recorded_context = self.contexts.follow(rec.data)
        if rec.scrubbed:
            self.scrubbed_from(line)
        if "digest" in rec.data and not self.own_context:  # the built-in body: the messages
            expected = request_digest(canonical_context(recorded_context or {}), brain or "")
            same = (
                rec.data.get("messages") == "altered"
                or not self.digests  # the messages hold placeholders: they cannot be compared
                or rec.data["digest"] == expected
            )
            same = same and rec.data.get("n_messages") == live.data["n_messages"]
        elif "digest" in rec.data:  # version 2: the whole request (and its summary)
            data, seen = rec.data, live.data
            same = (
                data["digest"] == live.digest
                or (not self.digests and self.same(recorded_context, live.context, rec.scrubbed))
            ) and (
                data.get("n_messages") == seen["n_messages"] and data.get("tools") == seen["tools"]
            )
        else:  # version 1: its summary
            data = with_last(live.data, request.messages)
            same = self.same(
                {k: rec.data.get(k) for k in ("n_messages", "tools", "last")},
                {k: data.get(k) for k in ("n_messages", "tools", "last")},
                rec.scrubbed,
            )
        if not same:
            data = with_last(live.data, request.messages)
            message, details = request_explanation(
                self.turn, recorded_context, live.context, rec.data, data
            )
            self.fail(line, rec.seq, "request", message, rec.data, data, details)

    def run_ended(self, machine: LoopMachine) -> None:
        self.machine = machine
        line, rec = self._brain_record("end")
        state = machine.state
        outcome = state.outcome if isinstance(state, Terminal) else None
        actual: dict[str, Any] = {
            "outcome": None if outcome is None else to_jsonable(outcome),
            "digest": machine.digest(),
        }
        if not isinstance(rec, EndRecord):
            why = f"the run ended where the trace has {_kind(rec)}"
            self.fail(line, rec.seq, "outcome", why, brain_view(rec), actual)
        recorded: dict[str, Any] = brain_view(rec)
        same_outcome = self.same(recorded["outcome"], actual["outcome"], rec.scrubbed)
        if not same_outcome or (self.digests and recorded["digest"] != actual["digest"]):
            kind, was = ((side["outcome"] or {}).get("kind") for side in (actual, recorded))
            why = f"the run ended {kind}, the trace's {was}"
            if same_outcome:
                why = "the run ended with another brain"
            self.fail(line, rec.seq, "outcome", why, recorded, actual)
        self.in_run = False
        self.result.complete = True
        self.result.outcome = actual["outcome"]

    def new_run(self) -> None:
        """A header was taken: digests are comparable again until the run's first secret."""
        self.digests = True
        self.turn = None


def header_next(cursor: Cursor) -> bool:
    """Whether the next brain record is a header (under a run: the recorded driver was killed)."""
    item = cursor.next_brain()
    return item is not None and item[1].type == "header"
