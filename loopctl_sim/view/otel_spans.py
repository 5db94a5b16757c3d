"""A recorded trace as OpenTelemetry GenAI spans (``loopctl-sim otel``): the spans the live
``loopctl.otel.OtelObserver`` would have emitted for the same run.

Each record is handed to ``loopctl.otel.GenAiSpans`` (the same mapping the observer uses) at the
time ``clock.Clock`` gives it: the header's ``created`` plus the durations before it, so a model
call's span lasts as long as its attempts and waits, and a wave's tool spans overlap. A record
that ends something (a reply, an error, a tool's result, a compaction) is given at its end, a
retry at the start of its wait, as the driver reports them live.

A request is handed over as the live observer sees it: with the context in force (a trace writes
the model, provider, system prompt and options once, and again only when they change) and, when
content is asked for, the whole conversation the model was shown, rebuilt from the header's brain
and the recorded steps and feeds (a trace stores only the last message; where the brain cannot
be rebuilt, its conversation is not the request's length, or a middleware altered the messages,
that last message stands for them). The header's metadata ``model`` and ``provider`` fill in
only where a request names none (a client that does not say; a version 1 trace). The run span
is named after ``agent_name``, else the metadata's ``agent_name``, else a simulated run's
``world``, else ``loopctl``: the observer's default, so a live run and its trace name the same
agent (not the metadata's ``agent``, a factory's path such as ``pkg.agent:build``).

Span and trace ids come from a generator seeded with the trace's first line, so exporting the
same trace twice gives the same ids (a file diff of two exports shows only real changes).

Needs the ``otel`` extra (``pip install 'loopctl[otel]'``); ``loopctl_sim.view`` does not import
this module, so the other views work without it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from loopctl.core import LoopMachine
from loopctl.otel import INSTRUMENTATION, GenAiSpans
from loopctl_sim.trace import (
    HeaderRecord,
    StepRecord,
    TraceReader,
    open_for_reading,
    scrub_text,
)
from loopctl_sim.trace.requests import RecordedContexts
from loopctl_sim.view.clock import Clock
from loopctl_sim.view.describe import data_of


class SeededIds(IdGenerator):
    """Span and trace ids drawn from a seeded generator: the same trace, the same ids."""

    def __init__(self, seed: bytes) -> None:
        self._random = random.Random(hashlib.sha256(seed).digest())

    def generate_span_id(self) -> int:
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._random.getrandbits(128) or 1


def _start_ns(created: Any, path: Path) -> int:
    """The run's start: the header's ``created``, else the file's modification time."""
    try:
        when = dt.datetime.fromisoformat(str(created))
    except ValueError:
        return int(path.stat().st_mtime * 1e9)
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1e9)


class _Brain:
    """The brain of the run a trace records, rebuilt record by record, for the conversation a
    request showed the model. Gives up (``machine`` None) at the first record it cannot follow:
    spans then fall back to the request's last message rather than fail the export."""

    def __init__(self) -> None:
        self.machine: LoopMachine | None = None

    def follow(self, record: Any) -> None:
        try:
            if isinstance(record, HeaderRecord):
                self.machine = record.machine(self.machine)
            elif self.machine is None:
                return
            elif isinstance(record, StepRecord):
                self.machine.next_step(record.policy)
            elif record.type == "feed":
                self.machine.feed(record.args)
        except Exception:  # a damaged or partial trace: no conversation, still spans
            self.machine = None

    def messages(self) -> list[Any] | None:
        if self.machine is None:
            return None
        return [m.model_dump(mode="json") for m in self.machine.conversation()]


def _agent_name(meta: dict[str, Any]) -> str:
    named = meta.get("agent_name") or (meta.get("world") if meta.get("simulated") else None)
    return str(named or "loopctl")


def trace_to_spans(
    path: str | os.PathLike[str],
    tracer_provider: TracerProvider,
    *,
    agent_name: str | None = None,
    model: str | None = None,
    provider: str | None = None,
    capture_content: bool = False,
) -> int:
    """Emit the spans of the trace at ``path`` through ``tracer_provider``; returns the number
    of records read (``TraceFormatError`` if one is unreadable). ``agent_name``, ``model`` and
    ``provider`` are what the live ``OtelObserver`` would have been given; without them, see
    the module docstring."""
    reader = TraceReader(path)
    tracer = tracer_provider.get_tracer(INSTRUMENTATION)
    clock = Clock()
    contexts = RecordedContexts()
    brain = _Brain() if capture_content else None
    spans: GenAiSpans | None = None
    fallback: dict[str, Any] = {}
    base = 0
    count = 0
    for record in reader:
        rec = record.model_dump(mode="json")
        count += 1
        placed = clock.place(rec)
        kind = rec.get("type")
        if spans is None:  # the reader guarantees a header first
            meta = rec.get("metadata") or {}
            base = _start_ns(rec.get("created"), Path(reader.path))
            fallback = {k: meta[k] for k in ("model", "provider") if meta.get(k)}
            spans = GenAiSpans(
                tracer,
                agent_name=agent_name or _agent_name(meta),
                model=model,
                provider=provider,
                capture_content=capture_content,
                scrub=scrub_text,
            )
        if brain is not None and kind != "io":
            brain.follow(record)
        at = base + int(placed.end * 1e9)
        if kind == "header":
            snap = rec.get("snapshot") or {}
            if snap.get("started"):
                spans.resumed(at, turns=snap.get("turns_taken"))
            elif isinstance(rec.get("continues"), str):  # (v3) its brain's summary says
                named = (rec.get("brain") or {}).get("history")
                if type(named) is int:
                    spans.start_run(at, history_messages=named)
                else:  # a header written without its summary: the count is not known
                    spans.start_run(at)
            else:
                spans.start_run(at, history_messages=len(snap.get("history") or ()))
        elif kind == "step":
            step = rec.get("step") or {}
            spans.step(str(step.get("kind")), step.get("turn"), at)
        elif kind == "feed":
            args = rec.get("args")
            spans.feed(str(rec.get("name")), args if isinstance(args, dict) else {}, at)
        elif kind == "io":
            io_kind = str(rec.get("kind"))
            when = base + int(placed.start * 1e9) if io_kind == "retry" else at
            data = data_of(rec)
            if io_kind == "model_request":
                data = _request(data, contexts, fallback, brain)
            spans.io(io_kind, rec.get("turn"), data, rec.get("duration_s"), when)
        elif kind == "end":
            spans.end_run(at, rec.get("outcome"))
    if spans is not None:
        spans.close(base + int(clock.now * 1e9))
    return count


def _request(
    data: dict[str, Any],
    contexts: RecordedContexts,
    fallback: dict[str, Any],
    brain: _Brain | None,
) -> dict[str, Any]:
    """A recorded request's data as the live observer hands it over (the module docstring)."""
    data = dict(data)
    context = contexts.follow(data)
    if context is not None:
        data["context"] = context
    for key, value in fallback.items():  # where the request names none (a v1 trace has none)
        if data.get(key) is None and (context or {}).get(key) is None:
            data[key] = value
    if brain is not None and data.get("messages") in ("brain", None):  # not "altered"
        messages = brain.messages()
        if messages is not None and len(messages) == data.get("n_messages", len(messages)):
            data["messages"] = messages
    return data


def export_spans(
    path: str | os.PathLike[str],
    *,
    service_name: str = "loopctl",
    agent_name: str | None = None,
    model: str | None = None,
    provider: str | None = None,
    capture_content: bool = False,
) -> Sequence[ReadableSpan]:
    """The finished spans of the trace at ``path``, in the order they ended, made by an SDK
    provider of their own (seeded ids, resource ``service.name``)."""
    with open_for_reading(path) as f:  # a compressed trace's first line too, and stdin's
        seed = f.readline()
    exporter = InMemorySpanExporter()
    created = Resource.create({"service.name": service_name})
    # service.instance.id is random per process: left out, so two exports of a trace agree
    resource = Resource({k: v for k, v in created.attributes.items() if k != "service.instance.id"})
    tracer_provider = TracerProvider(resource=resource, id_generator=SeededIds(seed))
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_to_spans(
        path,
        tracer_provider,
        agent_name=agent_name,
        model=model,
        provider=provider,
        capture_content=capture_content,
    )
    tracer_provider.shutdown()
    return exporter.get_finished_spans()
