"""The data the HTML timeline is drawn from: the trace's records as items on swimlanes.

One streaming pass gives each record its words (``describe``) and its place in time
(``clock.Clock``), kept in columns (one list per field, so the page's JSON stays small for
100,000 records). An item is one record, except that a tool call's ``tool_call`` and
``tool_result`` make one bar, and a model attempt's bar points at its request too.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from loopctl_sim.trace import TraceReader
from loopctl_sim.view.clock import Clock
from loopctl_sim.view.describe import LANES, data_of, describe, outcome_text

#: A label on the page is cut here; the details pane has the whole record.
LABEL = 160


@dataclass
class Timeline:
    """The columns of the page's data (see the module docstring)."""

    path: str
    # one entry per record, in trace order
    seq: list[int] = field(default_factory=list)
    rec_lane: list[int] = field(default_factory=list)
    rec_kind: list[str] = field(default_factory=list)
    rec_tone: list[str] = field(default_factory=list)
    rec_turn: list[int] = field(default_factory=list)
    rec_label: list[str] = field(default_factory=list)
    records: list[str] = field(default_factory=list)  # each record's JSON text
    # one entry per item
    lane: list[int] = field(default_factory=list)
    t0: list[float] = field(default_factory=list)
    t1: list[float] = field(default_factory=list)
    s0: list[int] = field(default_factory=list)
    s1: list[int] = field(default_factory=list)
    row: list[int] = field(default_factory=list)
    rec: list[int] = field(default_factory=list)  # the item's record (index into the above)
    rec2: list[int] = field(default_factory=list)  # a second record it shows, or -1
    counts: Counter[str] = field(default_factory=Counter)
    outcome: Any = None
    timed: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def items(self) -> int:
        return len(self.lane)

    def summary(self) -> dict[str, Any]:
        c = self.counts
        kind = self.outcome.get("kind") if isinstance(self.outcome, dict) else None
        return {
            "records": len(self.seq),
            "runs": c["runs"],
            "resumes": c["resume"],
            "forks": c["fork"],
            "crashes": c["crash"],
            "steps": c["step"],
            "feeds": c["feed"],
            "io": c["io"],
            "model_calls": c["call_llm"],
            "model_attempts": c["model_reply"] + c["model_error"],
            "model_errors": c["model_error"],
            "retries": c["retry"],
            "tool_calls": c["tool_calls"],
            "tool_errors": c["tool_errors"],
            "compactions": c["compact"],
            "cancels": c["cancel_feed"],
            "turns": c["turns"],
            "duration_s": self.t1[-1] if self.t1 else 0.0,
            "timed": self.timed,
            "outcome": outcome_text(self.outcome, LABEL),
            "outcome_kind": kind or "none",
        }

    def to_json(self) -> dict[str, Any]:
        """The page's index (everything but the records' JSON)."""
        return {
            "path": self.path,
            "lanes": list(LANES),
            "summary": self.summary(),
            "warnings": self.warnings,
            "recs": {
                "seq": self.seq,
                "lane": self.rec_lane,
                "kind": self.rec_kind,
                "tone": self.rec_tone,
                "turn": self.rec_turn,
                "label": self.rec_label,
            },
            "items": {
                "lane": self.lane,
                "t0": self.t0,
                "t1": self.t1,
                "s0": self.s0,
                "s1": self.s1,
                "row": self.row,
                "rec": self.rec,
                "rec2": self.rec2,
            },
        }


class _Builder:
    def __init__(self, path: str) -> None:
        self.tl = Timeline(path)
        self.clock = Clock()
        self.calls: dict[str, int] = {}  # open tool call id -> its item
        self.request = -1  # the last model_request record
        self.turn = 0
        self.lanes = {name: i for i, name in enumerate(LANES)}

    def add(self, rec: dict[str, Any]) -> None:
        tl = self.tl
        index = len(tl.seq)
        described = describe(rec, LABEL)
        placed = self.clock.place(rec)
        kind = rec.get("type")
        if kind == "header" and described.kind == "header":
            self.turn = 0
        if described.turn is not None:
            self.turn = max(self.turn, described.turn)
            if described.kind == "call_llm":
                tl.counts["turns"] = max(tl.counts["turns"], described.turn)
        self._count(rec, described.kind)
        lane = self.lanes.get(described.lane, self.lanes["other"])
        tl.seq.append(int(rec.get("seq", index)))
        tl.rec_lane.append(lane)
        tl.rec_kind.append(described.kind)
        tl.rec_tone.append(described.tone)
        tl.rec_turn.append(self.turn)
        tl.rec_label.append(" | ".join(described.lines))
        tl.records.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")))
        start, end = round(placed.start, 6), round(placed.end, 6)
        data = data_of(rec)
        if kind == "io" and described.kind == "tool_result":
            item = self.calls.pop(str(data.get("id")), None)
            if item is not None:  # the call's bar ends here
                tl.t1[item], tl.s1[item], tl.rec2[item] = end, index + 1, index
                tl.row[item] = placed.row
                return
        second = -1
        if kind == "io" and described.kind == "model_request":
            self.request = index
        elif kind == "io" and described.kind in ("model_reply", "model_error"):
            second = self.request
        tl.lane.append(lane)
        tl.t0.append(start)
        tl.t1.append(end)
        tl.s0.append(index)
        tl.s1.append(index + 1)
        tl.row.append(placed.row)
        tl.rec.append(index)
        tl.rec2.append(second)
        if kind == "io" and described.kind == "tool_call":
            self.calls[str(data.get("id"))] = len(tl.lane) - 1

    def _count(self, rec: dict[str, Any], kind: str) -> None:
        counts = self.tl.counts
        rtype = str(rec.get("type"))
        counts[rtype] += 1
        if rtype == "header":
            counts["runs" if kind == "header" else kind if kind == "fork" else "resume"] += 1
        elif rtype == "end":
            self.tl.outcome = rec.get("outcome")
        elif rtype == "step":
            counts[kind] += 1
            if kind == "call_tools":
                counts["tool_calls"] += len((rec.get("step") or {}).get("calls") or ())
        elif rtype == "feed":
            if kind == "cancel":
                counts["cancel_feed"] += 1
            elif kind == "tool_results":
                parts = ((rec.get("args") or {}).get("message") or {}).get("parts") or ()
                counts["tool_errors"] += sum(1 for p in parts if p.get("is_error"))
        else:
            counts[kind] += 1


def build_timeline(path: str | os.PathLike[str]) -> Timeline:
    """The timeline data of the trace at ``path`` (``TraceFormatError`` if unreadable)."""
    reader = TraceReader(path)
    builder = _Builder(reader.path)
    for record in reader:
        builder.add(record.model_dump(mode="json"))
    builder.tl.timed = builder.clock.timed
    builder.tl.warnings = list(reader.warnings)
    return builder.tl
