"""Error records of the provider clients: keys, retry hints, classification, parse failures.

- ``classify`` turns a status, an error body and the response headers into one ``ApiError``:
  the ``LoopError`` kind, ``retryable`` per kind and status, the server's retry hints, and the
  name of the real provider or host. What a gateway says of the provider behind it
  (OpenRouter's ``error.metadata``) is kept in ``details["upstream"]`` and read for the kind too
  (an upstream "prompt is too long" is a context overflow).
- ``malformed`` is a body we could not parse, saying where (``details["where"]``): the driver
  gives up on one that repeats the same way.

Classification only: the driver decides whether and when to retry.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from loopctl.api import ApiError
from loopctl.core import ErrorKind, LoopError


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """Names used in messages and parts: ``name`` (e.g. "OpenAI", "Groq", "the server at
    127.0.0.1:8000"), the key's environment variable, the ``key`` recorded in the parts the
    client keeps (see ``_common.identity``) and the ``host`` it talks to."""

    name: str
    key_env: str | None
    key: str = ""
    host: str | None = None


class MissingApiKeyError(ApiError):
    """No API key was passed and its environment variable is unset (kind ``auth``)."""

    def __init__(self, provider: str, env_var: str) -> None:
        super().__init__(
            LoopError(
                kind="auth",
                message=f"no {provider} API key: set the {env_var} environment variable "
                "or pass api_key=",
                details={"provider": provider, "env_var": env_var},
            )
        )
        self.env_var = env_var


def resolve_key(explicit: str | None, env_var: str, provider: str, *, required: bool) -> str | None:
    """The explicit key wins, then the environment; raise ``MissingApiKeyError`` if required."""
    key = explicit if explicit is not None else os.environ.get(env_var) or None
    if key is None and required:
        raise MissingApiKeyError(provider, env_var)
    return key


def parse_retry_hints(
    headers: Mapping[str, str], *, now: datetime | None = None
) -> tuple[float | None, bool | None]:
    """``(retry_after_seconds, should_retry)`` from response headers, read as the SDKs do:
    ``retry-after-ms`` wins over ``retry-after`` (seconds, or an HTTP date against ``now``; a
    past date gives 0); ``x-should-retry`` is ``true``/``false``, anything else ignored."""
    lower = {k.lower(): v for k, v in headers.items()}
    retry_after: float | None = None
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            retry_after = max(0.0, float(ms) / 1000.0)
        except ValueError:
            retry_after = None
    if retry_after is None and (raw := lower.get("retry-after")) is not None:
        try:
            retry_after = max(0.0, float(raw))
        except ValueError:
            try:
                when = parsedate_to_datetime(raw)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                current = now if now is not None else datetime.now(UTC)
                retry_after = max(0.0, (when - current).total_seconds())
    flag = lower.get("x-should-retry", "").strip().lower()
    return retry_after, {"true": True, "false": False}.get(flag)


_OVERFLOW_CODES = {"context_length_exceeded", "exceed_context_size_error"}
_OVERFLOW_PHRASES = (
    "prompt is too long",
    "maximum context length",
    "exceeds the available context size",
    "context window",
    "context length",
)
_QUOTA_PHRASES = (
    "quota",
    "billing",
    "credit balance",
    "insufficient credits",
    "spend limit",
    "usage limits",
)
_UPSTREAM_CHARS = 1000


def _error_fields(body: Any) -> tuple[str, str | None, str | None]:
    """(message, type, code) from any of the error body shapes the providers send."""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, str):
            return err, None, None
        if isinstance(err, Mapping):
            message = str(err.get("message") or err.get("detail") or "") or json.dumps(err)[:500]
            etype = err.get("type")
            code = err.get("code")
            return (
                message,
                str(etype) if etype is not None else None,
                str(code) if code is not None else None,
            )
    if isinstance(body, str):
        return body.strip()[:500], None, None
    return json.dumps(body)[:500], None, None


def _upstream(body: Any) -> dict[str, Any] | None:
    """What a gateway says of the provider behind it: OpenRouter's ``error.metadata``
    (``provider_name`` and ``raw``, the upstream's own error; moderation ``reasons``)."""
    err = body.get("error") if isinstance(body, Mapping) else None
    meta = err.get("metadata") if isinstance(err, Mapping) else None
    if not isinstance(meta, Mapping) or not meta:
        return None
    upstream: dict[str, Any] = {}
    for key, value in meta.items():
        if isinstance(value, str):
            upstream[key] = value[:_UPSTREAM_CHARS]
        else:
            text = json.dumps(value, ensure_ascii=False)
            upstream[key] = value if len(text) <= _UPSTREAM_CHARS else text[:_UPSTREAM_CHARS]
    return upstream


def _upstream_text(upstream: dict[str, Any]) -> str:
    raw = upstream.get("raw")
    reason = raw if isinstance(raw, str) else json.dumps(raw) if raw is not None else ""
    if not reason and "reasons" in upstream:
        reason = f"flagged: {upstream['reasons']}"
    who = upstream.get("provider_name")
    if who and reason:
        return f" (upstream {who}: {reason[:300]})"
    if who:
        return f" (upstream {who})"
    return f" (upstream: {reason[:300]})" if reason else ""


def classify(
    info: ProviderInfo,
    status: int | None,
    body: Any,
    headers: Mapping[str, str] | None = None,
    *,
    now: datetime | None = None,
) -> ApiError:
    """One ``ApiError`` for an HTTP error response (``status``) or an in-stream error (None)."""
    message, etype, code = _error_fields(body)
    upstream = _upstream(body)
    if upstream:
        message += _upstream_text(upstream)
    lowered = message.lower()
    retry_after, should_retry = parse_retry_hints(headers or {}, now=now)
    tags = {etype or "", code or ""}
    kind: ErrorKind
    retryable: bool
    text = f"{info.name}: {message or f'HTTP {status}'}"
    if tags & _OVERFLOW_CODES or any(p in lowered for p in _OVERFLOW_PHRASES):
        kind, retryable = "context_overflow", False
    elif status in (401, 403) or tags & {
        "authentication_error",
        "permission_error",
        "invalid_api_key",
    }:
        kind, retryable = "auth", False
        hint = f"check {info.key_env}" if info.key_env else "check the server's access settings"
        # not "credentials: <message>": that reads as a value given to a secret name, and a
        # trace's scrubber would hide the server's first word ("Incorrect API key provided")
        said = f", saying: {message}" if message else f" (HTTP {status})"
        text = f"{info.name} refused the credentials{said} ({hint})"
    elif (
        "insufficient_quota" in tags
        or "billing_error" in tags
        or status == 402
        or (status in (400, 429) and any(p in lowered for p in _QUOTA_PHRASES))
    ):
        kind, retryable = "provider", False
        text = f"{info.name} quota or credit exhausted: {message} (check your plan and billing)"
    elif status == 429 or tags & {"rate_limit_error", "rate_limit_exceeded"}:
        kind, retryable = "rate_limited", True
    elif status == 529 or "overloaded_error" in tags or "overloaded" in lowered:
        kind, retryable = "overloaded", True
    elif status in (408, 504) or "timeout_error" in tags:
        kind, retryable = "timeout", True
    elif status == 409 or (status is not None and status >= 500):
        kind, retryable = "provider", True
    elif status is None:
        # an error event inside a 200 stream: server-side trouble unless it says otherwise
        kind = "provider"
        retryable = bool(tags & {"server_error", "api_error"}) or not (etype or code)
    else:
        kind, retryable = "provider", False
    details = details_of(info)
    if etype:
        details["type"] = etype
    if code:
        details["code"] = code
    if upstream:
        details["upstream"] = upstream
    if headers:
        lower = {k.lower(): v for k, v in headers.items()}
        request_id = lower.get("x-request-id") or lower.get("request-id")
        if request_id:
            details["request_id"] = request_id
    if status is None:
        text = f"error in the {info.name} response stream: {message or 'no message'}"
    return ApiError(
        LoopError(kind=kind, message=text, retryable=retryable, status=status, details=details),
        retry_after=retry_after,
        should_retry=should_retry,
    )


def details_of(info: ProviderInfo, **extra: Any) -> dict[str, Any]:
    """The ``details`` every error of a client carries: the provider's name, its host."""
    details: dict[str, Any] = {"provider": info.name}
    if info.host:
        details["host"] = info.host
    details.update(extra)
    return details


def malformed(info: ProviderInfo, what: str, where: str | None = None) -> ApiError:
    """The body could not be parsed (kind ``provider``, retryable: the next reply may differ;
    the driver stops once the same failure repeats). ``where`` says where in the response."""
    at = f" at {where}" if where else ""
    return ApiError(
        LoopError(
            kind="provider",
            message=f"malformed response from {info.name}: the body could not be parsed{at}: "
            f"{what}",
            retryable=True,
            details=details_of(info, parse=True, where=where or "the response"),
        )
    )


def unexpected_content(info: ProviderInfo, content_type: str, body: str, expected: str) -> ApiError:
    """A response of a content type no parser fits (an HTML page from a proxy, ...): not
    retried, since the same request gets the same answer."""
    return ApiError(
        LoopError(
            kind="provider",
            message=f"{info.name} answered with content type {content_type!r} where "
            f"{expected} was expected: {body.strip()[:200]!r}",
            retryable=False,
            details=details_of(info, content_type=content_type),
        )
    )


def stream_ended_early(info: ProviderInfo, what: str) -> ApiError:
    """The connection closed before the reply was complete (kind ``network``, retryable)."""
    return ApiError(
        LoopError(
            kind="network",
            message=f"the {info.name} stream ended before {what}",
            retryable=True,
            details=details_of(info),
        )
    )


def loads(info: ProviderInfo, text: str, where: str | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise malformed(info, f"invalid JSON ({exc.msg}): {text[:200]!r}", where) from None


def loads_object(info: ProviderInfo, text: str, where: str, what: str) -> Mapping[str, Any]:
    """``text`` parsed as a JSON object; anything else is malformed (``what``: "an event")."""
    data = loads(info, text, where)
    if not isinstance(data, Mapping):
        raise malformed(info, f"{what} that is not an object: {text[:200]!r}", where)
    return data
