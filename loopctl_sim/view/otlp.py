"""Finished spans as OTLP/JSON, written to a file or sent to a collector's OTLP/HTTP endpoint.

OTLP/JSON is the protobuf messages' JSON mapping (``ExportTraceServiceRequest``): ids in hex,
64-bit integers and nanosecond times as strings, enums as numbers. It is what an OpenTelemetry
Collector's ``otlpjsonfile`` receiver reads and what every OTLP/HTTP endpoint (the Collector,
Jaeger, Grafana Tempo, Phoenix, Langfuse, Logfire...) accepts with
``Content-Type: application/json`` at ``/v1/traces``. Encoding it here keeps protobuf and the
exporter packages out of the ``otel`` extra; the request goes out through httpx, which loopctl
already has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["OtlpError", "otlp_json", "send_otlp", "traces_url"]


class OtlpError(Exception):
    """The endpoint could not be reached, or refused the spans."""


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
    groups: dict[tuple[int, str, str], list[ReadableSpan]] = {}
    resources: dict[int, Any] = {}
    for span in spans:
        found = span.instrumentation_scope
        name, version = (found.name, found.version or "") if found else ("", "")
        resources[id(span.resource)] = span.resource
        groups.setdefault((id(span.resource), name, version), []).append(span)
    by_resource: dict[int, list[dict[str, Any]]] = {}
    for (resource, name, version), members in groups.items():
        scope: dict[str, Any] = {"name": name}
        if version:
            scope["version"] = version
        by_resource.setdefault(resource, []).append(
            {"scope": scope, "spans": [_span(s) for s in members]}
        )
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resources[r].attributes)},
                "scopeSpans": scope_spans,
            }
            for r, scope_spans in by_resource.items()
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
    """POST ``body`` (OTLP/JSON) to ``endpoint``; the response's status, or ``OtlpError``."""
    url = traces_url(endpoint)
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        with httpx.Client(timeout=timeout, transport=transport) as client:
            response = client.post(url, content=body, headers=sent)
    except httpx.HTTPError as exc:
        raise OtlpError(f"{url}: {type(exc).__name__}: {exc}") from None
    if response.status_code >= 300:
        raise OtlpError(f"{url}: HTTP {response.status_code}: {response.text[:200]}")
    return response.status_code
