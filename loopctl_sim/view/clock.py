"""A trace's records placed in time, from the durations the trace holds.

A trace records durations, not times: an io record's ``duration_s`` and a retry's ``delay_s``.
``Clock`` replays them in order to give every record a start and an end, in seconds from the
run's start, the way the driver spent them: model attempts and retry waits one after another; the
calls of a tool wave (whose ``tool_call`` records are written together before any runs) each from
the wave's start for its own duration, so overlapping bars show the wave's concurrency; every
other record with a duration takes it, the rest are instants. The HTML timeline and the
OpenTelemetry export share it, so a span and a bar of the same call have the same length.
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
