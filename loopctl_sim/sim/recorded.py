"""Recorded tools: a tool of the user's agent answered with what it answered in recorded traces,
for the same arguments, instead of running it (``--tools recorded``).

A tool with side effects cannot run in a campaign, and a stand-in's answer is not what the model
would read; the user's traces hold real answers. ``RecordedResults`` indexes their
``tool_call``/``tool_result`` records by tool and canonical arguments, the first recording
winning; a call never recorded is answered by the stand-in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from loopctl.core import ToolCall, ToolResult
from loopctl_sim.trace import IoRecord, TraceReader


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The traces ``paths`` name: files as they are, a directory for every ``*.jsonl`` in it."""
    out: list[Path] = []
    for path in paths:
        p = Path(path)
        out.extend(sorted(p.rglob("*.jsonl")) if p.is_dir() else [p])
    return out


def _key(name: str, arguments: Any) -> tuple[str, str]:
    return name, json.dumps(arguments, sort_keys=True, default=str)


class RecordedResults:
    """Tool results by tool and arguments, read from traces; see the module docstring."""

    def __init__(self, results: dict[tuple[str, str], tuple[str, bool]] | None = None) -> None:
        self.results = dict(results or {})

    @classmethod
    def from_traces(cls, paths: Iterable[str | os.PathLike[str]]) -> RecordedResults:
        """Every tool result of the traces at ``paths`` (files or directories)."""
        results: dict[tuple[str, str], tuple[str, bool]] = {}
        for path in trace_files(paths):
            calls: dict[str, tuple[str, str]] = {}
            for record in TraceReader(path):
                if not isinstance(record, IoRecord):
                    continue
                data = record.data
                if record.kind == "tool_call":
                    calls[str(data.get("id"))] = _key(str(data.get("name")), data.get("arguments"))
                elif record.kind == "tool_result":
                    key = calls.get(str(data.get("id")))
                    if key is not None and key not in results:
                        results[key] = (str(data.get("content", "")), bool(data.get("is_error")))
        return cls(results)

    def __len__(self) -> int:
        return len(self.results)

    def answer(self, call: ToolCall) -> ToolResult | None:
        """The recorded result for ``call``'s tool and arguments, or None."""
        found = self.results.get(_key(call.name, call.arguments))
        if found is None:
            return None
        content, is_error = found
        return ToolResult(call_id=call.id, name=call.name, content=content, is_error=is_error)
