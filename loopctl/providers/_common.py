"""What every provider client shares: keys, the HTTP exchange, stream framing, error records.

The provider modules only convert (messages to wire bodies, wire chunks to ``loopctl.api``
events); this module does the IO around them:

- ``HttpProvider.stream`` posts the body, turns an HTTP error status into an ``ApiError`` and
  httpx transport failures into ``network`` / ``timeout`` errors, and hands the open response to
  the provider's parser (streaming) or its whole-body converter (``stream=False``).
- ``sse_events`` and ``ndjson_lines`` frame a byte stream (lines split across chunks are joined
  by httpx's line decoder; an event cut off by a disconnect is dropped, never half-parsed).
- ``classify`` turns a status, an error body and the response headers into one ``ApiError``:
  the ``LoopError`` kind, ``retryable`` per kind and status, and the server's retry hints
  (``retry-after-ms``, ``retry-after`` in seconds or as an HTTP date, ``x-should-retry``).

Classification only: the driver decides whether and when to retry.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from loopctl.api import ApiError, ModelRequest, StreamEvent
from loopctl.core import ErrorKind, LoopError

__all__ = [
    "HttpProvider",
    "MissingApiKeyError",
    "ProviderInfo",
    "SseEvent",
    "classify",
    "malformed",
    "ndjson_objects",
    "parse_retry_hints",
    "resolve_key",
    "sse_events",
    "stream_ended_early",
]

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """Names used in messages: ``name`` (e.g. "OpenAI") and the key's environment variable."""

    name: str
    key_env: str | None


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


# --- retry hints -----------------------------------------------------------------------------


def parse_retry_hints(
    headers: Mapping[str, str], *, now: datetime | None = None
) -> tuple[float | None, bool | None]:
    """``(retry_after_seconds, should_retry)`` from response headers, read as the SDKs do.

    ``retry-after-ms`` wins over ``retry-after``; ``retry-after`` is seconds or an HTTP date
    (converted against ``now``, default the current UTC time; a date in the past gives 0).
    ``x-should-retry`` is ``true``/``false``; anything else is ignored.
    """
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
    should_retry: bool | None = None
    flag = lower.get("x-should-retry", "").strip().lower()
    if flag == "true":
        should_retry = True
    elif flag == "false":
        should_retry = False
    return retry_after, should_retry


# --- classification --------------------------------------------------------------------------

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
    lowered = message.lower()
    retry_after, should_retry = parse_retry_hints(headers or {}, now=now)
    tags = {etype or "", code or ""}
    kind: ErrorKind
    retryable: bool
    text = message or f"HTTP {status}"
    if tags & _OVERFLOW_CODES or any(p in lowered for p in _OVERFLOW_PHRASES):
        kind, retryable = "context_overflow", False
    elif status in (401, 403) or tags & {
        "authentication_error",
        "permission_error",
        "invalid_api_key",
    }:
        kind, retryable = "auth", False
        hint = f"check {info.key_env}" if info.key_env else "check the server's access settings"
        text = f"{info.name} refused the credentials: {message or f'HTTP {status}'} ({hint})"
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
    details: dict[str, Any] = {"provider": info.name}
    if etype:
        details["type"] = etype
    if code:
        details["code"] = code
    if headers:
        lower = {k.lower(): v for k, v in headers.items()}
        request_id = lower.get("x-request-id") or lower.get("request-id")
        if request_id:
            details["request_id"] = request_id
    if status is None:
        text = f"error in the response stream: {text}"
    return ApiError(
        LoopError(kind=kind, message=text, retryable=retryable, status=status, details=details),
        retry_after=retry_after,
        should_retry=should_retry,
    )


def malformed(info: ProviderInfo, what: str) -> ApiError:
    """The server sent something we cannot parse (kind ``provider``, retryable)."""
    return ApiError(
        LoopError(
            kind="provider",
            message=f"malformed response from {info.name}: {what}",
            retryable=True,
            details={"provider": info.name},
        )
    )


def stream_ended_early(info: ProviderInfo, what: str) -> ApiError:
    """The connection closed before the reply was complete (kind ``network``, retryable)."""
    return ApiError(
        LoopError(
            kind="network",
            message=f"the {info.name} stream ended before {what}",
            retryable=True,
            details={"provider": info.name},
        )
    )


def loads(info: ProviderInfo, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise malformed(info, f"invalid JSON ({exc.msg}): {text[:200]!r}") from None


# --- framing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str | None
    data: str


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[SseEvent]:
    """Server-sent events from text lines: ``event:`` / ``data:`` fields up to a blank line.

    Comment lines (starting with ``:``) and unknown fields are skipped; several ``data:`` lines
    join with newlines. An event not closed by a blank line when the stream ends is dropped (the
    SSE rule), so a disconnect mid-event never yields half a JSON document.
    """
    event: str | None = None
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value


async def ndjson_objects(info: ProviderInfo, chunks: AsyncIterator[str]) -> AsyncIterator[Any]:
    """JSON objects of an NDJSON stream, one a line, however the text was chunked.

    A complete line that is not JSON is a malformed stream; an unfinished last line that is not
    JSON means the connection dropped mid-line (``network``).
    """
    buffer = ""
    async for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split("\n")
        for line in lines:
            if line.strip():
                yield loads(info, line)
    if buffer.strip():
        try:
            last = json.loads(buffer)
        except json.JSONDecodeError:
            raise stream_ended_early(info, "its last line was complete") from None
        yield last


# --- the exchange ----------------------------------------------------------------------------


def _without_credentials(url: str) -> str:
    """The URL for messages: a ``user:password@`` part is never shown."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return url
    if parsed.userinfo:
        return str(parsed.copy_with(username=None, password=None))
    return url


class HttpProvider:
    """The IO shared by the clients; subclasses build bodies and parse replies."""

    info: ProviderInfo
    #: Sent as a bearer token by the default ``headers()`` when set (Anthropic overrides it).
    api_key: str | None = None

    def __init__(
        self,
        *,
        base_url: str,
        http_client: httpx.AsyncClient | None,
        stream: bool,
        timeout: httpx.Timeout | float | None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._shown_url = _without_credentials(self.base_url)
        self._owns_http = http_client is None
        self.streaming = stream
        self._http = http_client
        self._timeout = DEFAULT_TIMEOUT if timeout is None else timeout

    @property
    def http_client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout)
        return self._http

    async def aclose(self) -> None:
        """Close the HTTP client this client created (an injected one is the caller's)."""
        if self._http is not None and self._owns_http:
            await self._http.aclose()
            self._http = None

    # subclass hooks
    def url(self) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def parse_stream(
        self, response: httpx.Response, request: ModelRequest
    ) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send one request and yield its events; every failure becomes an ``ApiError``."""
        body = self.body(request)
        try:
            async with self.http_client.stream(
                "POST", self.url(), json=body, headers=self.headers()
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._http_error(response)
                try:
                    if self.streaming:
                        async for event in self.parse_stream(response, request):
                            yield event
                    else:
                        await response.aread()
                        data = loads(self.info, response.text)
                        if isinstance(data, Mapping) and "error" in data:
                            raise classify(self.info, None, data, response.headers)
                        for event in self.parse_body(data, request):
                            yield event
                except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
                    # data of an unexpected shape (pydantic's ValidationError is a ValueError)
                    raise malformed(self.info, f"{type(exc).__name__}: {exc}") from None
        except httpx.TimeoutException as exc:
            raise ApiError(
                LoopError(
                    kind="timeout",
                    message=f"{self.info.name} at {self._shown_url} timed out: "
                    f"{type(exc).__name__}",
                    retryable=True,
                    details={"provider": self.info.name},
                )
            ) from None
        except httpx.ConnectError as exc:
            raise ApiError(
                LoopError(
                    kind="network",
                    message=f"cannot connect to {self.info.name} at {self._shown_url}: {exc}",
                    retryable=True,
                    details={"provider": self.info.name, "base_url": self._shown_url},
                )
            ) from None
        except httpx.TransportError as exc:
            raise ApiError(
                LoopError(
                    kind="network",
                    message=f"connection to {self.info.name} failed: {type(exc).__name__}: {exc}",
                    retryable=True,
                    details={"provider": self.info.name},
                )
            ) from None

    def _http_error(self, response: httpx.Response) -> ApiError:
        try:
            data: Any = json.loads(response.text)
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = response.text
        return classify(self.info, response.status_code, data, response.headers)
