"""Finished spans as OTLP/JSON, written to a file or sent to a collector's OTLP/HTTP endpoint.

OTLP/JSON is the protobuf messages' JSON mapping (``ExportTraceServiceRequest``): ids in hex,
64-bit integers and nanosecond times as strings, enums as numbers. It is what an OpenTelemetry
Collector's ``otlpjsonfile`` receiver reads and what every OTLP/HTTP endpoint (the Collector,
Jaeger, Grafana Tempo, Phoenix, Langfuse, Logfire...) accepts with
``Content-Type: application/json`` at ``/v1/traces``. Encoding it here keeps protobuf and the
exporter packages out of the ``otel`` extra; the request goes out through httpx, which loopctl
already has.

What an endpoint's URL and headers carry is secret (``user:pass@`` in the URL, an API key in a
header), and a collector that refuses may echo them back: every message this module makes
(``OtlpError``, ``Redactor``) has them replaced by ``[REDACTED]``, and scrubbed of any other
credential-shaped text (``loopctl_sim.trace.scrub``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import httpx
from opentelemetry.sdk.trace import ReadableSpan

from loopctl_sim.errors import SimError
from loopctl_sim.trace import scrub_text

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
