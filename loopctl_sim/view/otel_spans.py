"""A recorded trace as OpenTelemetry GenAI spans (``loopctl-sim otel``): the spans the live
``loopctl.otel.OtelObserver`` would have emitted for the same run.

Each record goes to ``loopctl.otel.GenAiSpans`` (the observer's own mapping) at the time
``clock.Clock`` places it, so a model call's span lasts as long as its attempts and a wave's tool
spans overlap. A request is handed over as the live observer sees it: with the context in force
and, when content is asked for, the conversation rebuilt from the brain (a trace stores only the
last message, which stands in where the brain cannot be rebuilt). The run span is named as the
observer names it (``_agent_name``), so a live run and its trace name the same agent. Ids come
from a generator seeded with the trace's first line: two exports of a trace agree.

The spans go out as OTLP/JSON (``otlp_json``; what a Collector's ``otlpjsonfile`` receiver reads
and every OTLP/HTTP endpoint accepts), to a file or an endpoint (``send_otlp``): encoded here, so
the ``otel`` extra needs neither protobuf nor the exporter packages. An endpoint's URL and headers
carry secrets a refusing collector may echo back: every message made here has them redacted
(``Redactor``). ``loopctl_sim.view`` does not import this module: the other views work without
the ``otel`` extra.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import os
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from loopctl.core import LoopMachine
from loopctl.otel import INSTRUMENTATION, GenAiSpans
from loopctl_sim.errors import SimError
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
    capture_content: bool = False,
) -> None:
    """Emit the spans of the trace at ``path`` through ``tracer_provider`` (``TraceFormatError``
    if a record is unreadable). ``agent_name`` and ``model`` are what the live ``OtelObserver``
    would have been given; without them, see the module docstring."""
    reader = TraceReader(path)
    tracer = tracer_provider.get_tracer(INSTRUMENTATION)
    clock = Clock()
    contexts = RecordedContexts()
    brain = _Brain() if capture_content else None
    spans: GenAiSpans | None = None
    fallback: dict[str, Any] = {}
    base = 0
    for record in reader:
        rec = record.model_dump(mode="json")
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
                capture_content=capture_content,
                scrub=scrub_text,
            )
        if brain is not None and kind != "io":
            brain.follow(record)
        at = base + int(placed.end * 1e9)
        if kind == "header":
            snap = rec.get("snapshot") or {}
            if snap.get("started"):
                spans.io("resume", None, {"turns": snap.get("turns_taken")}, None, at)
            elif isinstance(rec.get("continues"), str):  # (v3): its brain summary's, if written
                named = (rec.get("brain") or {}).get("history")
                spans.start_run(at, history_messages=named if type(named) is int else None)
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
        path, tracer_provider, agent_name=agent_name, model=model, capture_content=capture_content
    )
    tracer_provider.shutdown()
    return exporter.get_finished_spans()


_REDACTED = "[REDACTED]"


class OtlpError(SimError):
    """The endpoint could not be reached, or refused the spans (the message is redacted)."""


# A URL's userinfo: after ``//`` up to the authority's last ``@`` (a password may hold ``@``);
# read without a URL parser, so a URL it would refuse (a bad port) is redacted too.
_USERINFO = re.compile(r"(?<=//)([^/?#\s]*)@")


def shown_url(url: str) -> str:
    """``url`` as it may be printed: its userinfo (``user:pass@``) replaced by ``[REDACTED]@``."""
    return _USERINFO.sub(f"{_REDACTED}@", url, count=1)


class Redactor:
    """Replaces the secrets of one endpoint in any text: the URL's userinfo (as written,
    decoded, and as the Basic credentials httpx sends for it) and every header's value (whole,
    and its credential after a scheme such as ``Bearer``); then the scrubber's shapes."""

    def __init__(self, endpoint: str, headers: Mapping[str, str] | None = None) -> None:
        secrets: set[str] = set()
        found = _USERINFO.search(endpoint)
        userinfo = found.group(1) if found else ""
        if userinfo:
            user, _, password = userinfo.partition(":")
            pair = f"{unquote(user)}:{unquote(password)}"
            secrets |= {userinfo, unquote(userinfo), pair, base64.b64encode(pair.encode()).decode()}
            secrets |= {password, unquote(password)}
        for value in (headers or {}).values():
            secrets.add(value.strip())
            secrets.add(value.strip().split(" ", 1)[-1].strip())  # "Bearer KEY": KEY alone too
        # longest first, so a secret holding another is replaced whole; too short to be a
        # secret (an empty password, a one-letter header) would blank ordinary text
        self.secrets = sorted((s for s in secrets if len(s) >= 3), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, _REDACTED)
        return scrub_text(text)


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in (attributes or {}).items()]


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    out: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
        "name": span.name,
        "kind": span.kind.value + 1,  # the SDK's INTERNAL is 0, OTLP's SPAN_KIND_INTERNAL 1
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": _attributes(span.attributes),
        "events": [
            {
                "timeUnixNano": str(e.timestamp),
                "name": e.name,
                "attributes": _attributes(e.attributes),
            }
            for e in span.events
        ],
        "status": {"code": span.status.status_code.value},
    }
    if span.parent is not None:
        out["parentSpanId"] = f"{span.parent.span_id:016x}"
    if span.status.description:
        out["status"]["message"] = span.status.description
    return out


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` holding ``spans`` (grouped by resource and scope)."""
    grouped: dict[int, tuple[Any, dict[tuple[str, str], list[dict[str, Any]]]]] = {}
    for span in spans:
        found = span.instrumentation_scope
        scope = (found.name, found.version or "") if found else ("", "")
        _, scopes = grouped.setdefault(id(span.resource), (span.resource, {}))
        scopes.setdefault(scope, []).append(_span(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [
                    {
                        "scope": {"name": name, **({"version": version} if version else {})},
                        "spans": members,
                    }
                    for (name, version), members in scopes.items()
                ],
            }
            for resource, scopes in grouped.values()
        ]
    }


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of ``endpoint`` (a base like ``http://host:4318``, or the full
    ``.../v1/traces``)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


def send_otlp(
    body: bytes,
    endpoint: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> int:
    """POST ``body`` (OTLP/JSON) to ``endpoint``; the response's status, or ``OtlpError``
    (its message redacted: see ``Redactor``)."""
    url = traces_url(endpoint)
    redact = Redactor(endpoint, headers)
    shown = redact(shown_url(url))
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        with httpx.Client(timeout=timeout, transport=transport) as client:
            response = client.post(url, content=body, headers=sent)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise OtlpError(f"{shown}: {type(exc).__name__}: {redact(str(exc))}") from None
    if response.status_code >= 300:
        said = redact(response.text)[:200].replace("\n", " ")  # whole, then cut: no half key
        raise OtlpError(f"{shown}: HTTP {response.status_code}: {said}")
    return response.status_code
