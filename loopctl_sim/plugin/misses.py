"""What a cassette miss tells the user: the request that was not in the cassette and why.

vcrpy raises a miss inside the HTTP transport, where a client or the driver may turn it into an
ordinary failed run, so a test that does not check the outcome would stay green. The session
keeps every miss as a ``CassetteMiss`` and the test fails with its report: the request, the
reason, and a diff against the nearest recorded request, with the command that records it.
``CassetteMiss`` subclasses vcrpy's ``CannotOverwriteExistingCassetteException``, so code that
catches vcrpy's error keeps working.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Final

from vcr.errors import CannotOverwriteExistingCassetteException

from loopctl_sim.errors import SimError
from loopctl_sim.plugin.cassette_rules import body_text, parsed_body, scrub_request
from loopctl_sim.trace.scrub import Scrubber, default_scrubber

#: Lines of body diff shown before the rest is summarized.
MAX_DIFF_LINES: Final = 60
#: Characters of a body compared when looking for the nearest recorded request.
_COMPARED: Final = 20_000


def _same_call(sent: Any, recorded: Any) -> bool:
    return bool(sent.method == recorded.method and (sent.path or "/") == (recorded.path or "/"))


def nearest_request(sent: Any, recorded: list[Any]) -> tuple[int, Any] | None:
    """The index and request of the recorded request closest to ``sent``: one with the same method
    and path if any, and among those the most similar body."""
    if not recorded:
        return None
    same = [(i, r) for i, r in enumerate(recorded) if _same_call(sent, r)]
    pool = same or list(enumerate(recorded))
    text = body_text(sent.body)[:_COMPARED]

    def likeness(item: tuple[int, Any]) -> float:
        matcher = difflib.SequenceMatcher(None, body_text(item[1].body)[:_COMPARED], text)
        return matcher.ratio()

    return max(pool, key=likeness)


def _body_diff(recorded: Any, sent: Any) -> list[str]:
    diff = list(
        difflib.unified_diff(
            body_text(recorded.body).splitlines(),
            body_text(sent.body).splitlines(),
            "recorded",
            "sent",
            n=2,
            lineterm="",
        )
    )
    if not diff:
        return ["(the bodies are equal)"]
    if len(diff) > MAX_DIFF_LINES:
        diff = [*diff[:MAX_DIFF_LINES], f"... ({len(diff) - MAX_DIFF_LINES} more lines)"]
    return diff


def _reason(sent: Any, cassette: Any, exists: bool) -> str:
    requests = list(cassette.requests)
    if not requests:
        return "the cassette does not exist yet" if not exists else "the cassette is empty"
    alike = [
        i
        for i, r in enumerate(requests)
        if _same_call(sent, r) and parsed_body(sent.body) == parsed_body(r.body)
    ]
    if alike:
        return (
            f"it matches {len(alike)} recorded interaction(s), already played: the request was "
            "sent more often than when the cassette was recorded"
        )
    return "no recorded request has this method, path and body"


def describe_miss(
    sent: Any,
    cassette: Any,
    record_mode: str,
    scrubber: Scrubber | None = None,
    path: str | os.PathLike[str] | None = None,
) -> str:
    """The report of a request ``cassette`` (saved at ``path``) could not answer (``sent`` is
    vcrpy's request as the client sent it; what is shown of it is scrubbed)."""
    scrub = scrubber or default_scrubber()
    clean = scrub_request(sent, scrub)
    path = Path(path if path is not None else str(getattr(cassette, "_path", "")))
    shown = path
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        shown = path.relative_to(Path.cwd())
    recorded = list(cassette.requests)
    played = len(cassette.play_counts)
    lines = [
        f"loopctl cassette miss: {clean.method} {clean.uri}",
        f"  cassette: {shown} ({len(recorded)} interaction(s), {played} played; "
        f"record mode {record_mode!r})",
        f"  reason: {_reason(clean, cassette, path.exists())}",
    ]
    near = nearest_request(clean, recorded)
    if near is None:
        body = body_text(clean.body)
        lines.append("  body sent:")
        lines += [f"    {line}" for line in (body.splitlines() or ["(empty)"])[:MAX_DIFF_LINES]]
    else:
        index, request = near
        lines.append(
            f"  nearest recorded request: #{index + 1} {request.method} {request.path}; "
            "body diff (- recorded, + sent):"
        )
        lines += [f"    {line}" for line in _body_diff(request, clean)]
    return "\n".join(lines)


class CassetteMiss(CannotOverwriteExistingCassetteException, SimError):  # type: ignore[misc]
    """A request the cassette could not answer; ``str()`` is the report."""

    def __init__(self, report: str, cassette: Any, failed_request: Any) -> None:
        Exception.__init__(self, report)
        self.report = report
        self.cassette = cassette
        self.failed_request = failed_request
        self.similar_requests: list[Any] = []
