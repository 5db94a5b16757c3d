"""What a replay reports: a ``ReplayResult`` and its first ``Divergence``, the one type every replay
(machine, driver, agent, fork) reports a difference with; a replay stops at it by raising
``Diverged``. A report printed for a person stays bounded whatever the values hold: a diff too
long or too wide to read (``too_long``) gives way to the fields that differ, each an excerpt
around its first difference; ``to_json`` keeps the whole diff.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field, fields
from typing import Any

from loopctl.core import Feed, LoopMachine
from loopctl_sim.replay.explain import change_line, field_changes
from loopctl_sim.trace import encode_feed

#: A unified diff longer than this many lines is not printed (the fields that differ are).
MAX_DIFF_LINES = 60
#: Nor one with a line longer than this (a long string on one line of JSON).
MAX_DIFF_WIDTH = 200
#: At most this many differing fields are listed in its place.
MAX_FIELDS = 12


def pretty(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)


def unified_diff(expected: Any, actual: Any, *, a: str = "expected", b: str = "actual") -> str:
    """A unified diff of the pretty JSON of two values."""
    lines = difflib.unified_diff(
        pretty(expected).splitlines(), pretty(actual).splitlines(), a, b, lineterm=""
    )
    return "\n".join(lines)


def too_long(lines: list[str]) -> str | None:
    """None when a diff of ``lines`` is short and narrow enough to print; else what is said
    instead (without its closing parenthesis)."""
    widest = max((len(line) for line in lines), default=0)
    if len(lines) <= MAX_DIFF_LINES and widest <= MAX_DIFF_WIDTH:
        return None
    return (
        f"(the unified diff has {len(lines)} lines, the longest {widest} characters: "
        "--json holds it whole"
    )


def bounded_diff(expected: Any, actual: Any, diff: str) -> list[str]:
    """``diff`` (the unified diff of the two values) as lines when it is short and narrow;
    otherwise the fields that differ, each bounded (``path[i:]: ...before... -> ...after...``)."""
    lines = diff.splitlines()
    said = too_long(lines)
    if said is None:
        return lines
    changes = field_changes(expected, actual)
    out = [f"{said}; the {len(changes)} differing field(s):)"]
    out += [f"  {change_line(path, a, b)}" for path, a, b in changes[:MAX_FIELDS]]
    if len(changes) > MAX_FIELDS:
        out.append(f"  ... and {len(changes) - MAX_FIELDS} more")
    return out


@dataclass(frozen=True)
class RecentFeed:
    """A feed shortly before a divergence; its args are turned into data only when shown."""

    seq: int
    line: int
    name: str
    feed: Feed  # a feed record's args

    @property
    def args(self) -> dict[str, Any]:
        return encode_feed(self.feed)


@dataclass
class Divergence:
    """The first record where the replayed brain does not match the trace."""

    seq: int
    line: int
    # "step", "feed", "digest", "summary", "request", "protocol_error", "outcome", "snapshot"
    what: str
    message: str
    expected: Any
    actual: Any
    recent_feeds: list[RecentFeed] = field(default_factory=list)
    note: str | None = None
    #: lines under the message, in the user's terms (which fields, a diff of a prompt, ...)
    details: list[str] = field(default_factory=list)
    #: the policy the brain was handed at the divergence (JSON), when the replay knows it
    policy: dict[str, Any] | None = None

    @property
    def diff(self) -> str:
        return unified_diff(self.expected, self.actual)

    def report(self, path: str = "") -> str:
        where = f"{path}:{self.line}" if path else f"line {self.line}"
        out = [f"divergence at seq {self.seq} ({where}): {self.message}"]
        out += [f"  {line}" for line in self.details]
        if self.note:
            out.append(f"note: {self.note}")
        if self.recent_feeds:
            out.append("feeds before it:")
            for f in self.recent_feeds:
                args = json.dumps(f.args, separators=(",", ":"), ensure_ascii=False)
                args = args if len(args) <= 100 else args[:97] + "..."
                out.append(f"  seq {f.seq} (line {f.line}): {f.name} {args}")
        out += bounded_diff(self.expected, self.actual, self.diff)
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["diff"] = self.diff
        data["recent_feeds"] = [
            {"seq": f.seq, "line": f.line, "name": f.name, "args": f.args}
            for f in self.recent_feeds
        ]
        return data


class Diverged(BaseException):
    """Stops a replay at its first ``divergence``. A ``BaseException``, so that the replaying
    driver's own recovery (``except Exception``: a broken stream becomes a provider error) does
    not swallow it."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.message)
        self.divergence = divergence


@dataclass
class ReplayResult:
    path: str
    records: int = 0
    runs: int = 0
    resumes: int = 0  # headers in the middle of a run (a restore after a crash)
    steps: int = 0
    feeds: int = 0
    io: int = 0
    divergence: Divergence | None = None
    final_digest: str | None = None
    outcome: Any = None
    complete: bool = False  # the last run has its end record
    stopped_at: int | None = None  # --until
    warnings: list[str] = field(default_factory=list)
    machine: LoopMachine | None = None
    #: what the reader should know about how far the replay could check (an incomplete trace,
    #: digests not comparable past scrubbed secrets, ...)
    notes: list[str] = field(default_factory=list)
    #: the agent replayed (``module:factory``), None for the brain or the built-in driver
    agent: str | None = None

    @property
    def ok(self) -> bool:
        return self.divergence is None

    def summary(self) -> str:
        notes = [f"note: {note}" for note in self.notes]
        if self.divergence is not None:
            return "\n".join([self.divergence.report(self.path), *notes])
        outcome = self.outcome.get("kind") if isinstance(self.outcome, dict) else "none"
        text = (
            f"ok: {self.path}: {self.records} records replayed ({self.runs} run(s), "
            f"{self.resumes} resume(s), "
            f"{self.steps} steps, {self.feeds} feeds, {self.io} io); outcome {outcome}; "
            f"digest {self.final_digest}"
        )
        if self.agent is not None:
            text += f"; agent {self.agent}"
        if self.stopped_at is not None:
            text += f"; stopped at seq {self.stopped_at}"
        elif not self.complete:
            text += "; the trace has no end record (incomplete run)"
        return "\n".join([text, *notes])

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "machine"}
        data["ok"] = self.ok
        data["divergence"] = None if self.divergence is None else self.divergence.to_json()
        return data
