"""A trace's records placed in time, from the durations the trace holds.

A trace records durations, not times: an io record's ``duration_s`` (a model attempt, a tool
call, a compaction) and a retry's ``delay_s``; the brain's records take no time worth drawing.
``Clock`` replays those durations in order to give every record a start and an end, in seconds
from the run's start, the way the driver spent them:

- a model attempt (``model_reply``, ``model_error``) and a retry's wait run one after another;
- the ``tool_call`` records of one wave are written together before any of its calls runs, and
  its ``tool_result`` records after: so each call of a wave starts at the wave's start and ends
  after its own duration, and the wave ends when its slowest call does. Overlapping bars show the
  wave's concurrency;
- a compaction takes its duration; any other record with a ``duration_s`` (an io kind this clock
  does not know) too; everything else is an instant.

The HTML timeline and the OpenTelemetry export (``loopctl-sim otel``) place records with the same
clock, so a span and a bar of the same call have the same length. Machine-level traces (no io
records) place everything at 0: their timeline is drawn in record order instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loopctl_sim.view.describe import data_of


@dataclass(frozen=True, slots=True)
class Placed:
    """A record's place in time (seconds from the start) and, for a tool call of a wave, its row
    (0 for the wave's first call: rows stack the calls that overlap)."""

    start: float
    end: float
    row: int = 0


@dataclass
class _Wave:
    start: float
    end: float
    rows: dict[str, int] = field(default_factory=dict)  # call id -> row
    results_seen: bool = False


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0


class Clock:
    """Feed it every record's JSON in trace order (``place``); it answers each one's place."""

    def __init__(self) -> None:
        self.now = 0.0
        self._wave: _Wave | None = None
        #: True once any record took time: the trace can be drawn against time.
        self.timed = False

    def _close_wave(self) -> None:
        if self._wave is not None:
            self.now = max(self.now, self._wave.end)
            self._wave = None

    def _take(self, seconds: float) -> Placed:
        start = self.now
        self.now += seconds
        self.timed = self.timed or seconds > 0
        return Placed(start, self.now)

    def place(self, rec: dict[str, Any]) -> Placed:
        """The place of ``rec`` (a record's JSON), which must come right after the last one."""
        if rec.get("type") != "io":
            self._close_wave()
            return Placed(self.now, self.now)
        kind = rec.get("kind")
        data = data_of(rec)
        if kind == "tool_call":
            wave = self._wave
            if wave is None or wave.results_seen:
                self._close_wave()
                wave = self._wave = _Wave(self.now, self.now)
            row = wave.rows.setdefault(str(data.get("id")), len(wave.rows))
            return Placed(wave.start, wave.start, row)
        if kind == "tool_result" and self._wave is not None:
            wave = self._wave
            wave.results_seen = True
            took = _seconds(rec.get("duration_s"))
            self.timed = self.timed or took > 0
            wave.end = max(wave.end, wave.start + took)
            row = wave.rows.get(str(data.get("id")), 0)
            return Placed(wave.start, wave.start + took, row)
        self._close_wave()
        if kind == "retry":
            return self._take(_seconds(data.get("delay_s")))
        return self._take(_seconds(rec.get("duration_s")))
