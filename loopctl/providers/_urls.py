"""A client's base URL: where requests go, what messages show, and which secrets it carries.

A base URL may hold more than a place. Azure-style servers take a query (``?api-version=X``),
which must stay a query: an endpoint's path is joined to the base URL's path and the query kept
(``.../v1/chat/completions?api-version=X``), never appended after it. A gateway may take its
key in the query (``?api-key=KEY``), and a proxy in front of a local server may want
``user:password@`` (HTTP Basic). The URL a request goes to never carries that userinfo (httpx
would turn it into Basic credentials behind the client's back); the client sends it on purpose
(``BaseUrl.basic``), and refuses when it would replace the API key in the same header.

What a message, an error or a trace shows of the URL (``BaseUrl.shown``) has no userinfo and
no secret query value, and every error a client raises has the secrets it knows (its key, the
URL's password, a secret query value) replaced, and whatever else is shaped like one
(``redact``): a server that echoes a key in a 401 does not put it in a run's result, a trace or
a terminal. Which query parameters carry a credential, and what else is a secret, is the trace
scrubber's rule (``loopctl.secrets``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

import httpx

from loopctl.api import ApiError
from loopctl.core import LoopError
from loopctl.secrets import REDACTED, is_secret_param, scrub_text


class BaseUrl:
    """A parsed base URL: ``url`` (no userinfo, the query kept) for requests, ``shown`` for
    messages, ``basic`` the ``Authorization`` value its userinfo asks for (or None), and
    ``secrets`` the values nothing may show."""

    def __init__(self, raw: str) -> None:
        parsed = httpx.URL(raw)
        username, password = parsed.username, parsed.password
        self.basic: str | None = None
        secrets: list[str] = []
        if parsed.userinfo:
            userinfo = f"{username}:{password}".encode()
            self.basic = "Basic " + base64.b64encode(userinfo).decode("ascii")
            secrets += [password, username if not password else "", self.basic.split()[1]]
        clean = parsed.copy_with(username=None, password=None, fragment=None)
        path = clean.path.rstrip("/")
        self.url = clean.copy_with(path=path or "/")
        shown_query: list[str] = []
        for pair in self.url.query.decode("ascii", "replace").split("&") if self.url.query else ():
            name, eq, value = pair.partition("=")
            if eq and value and is_secret_param(name):
                secrets += [value, httpx.QueryParams(pair).get(name) or ""]
                value = REDACTED
            shown_query.append(f"{name}{eq}{value}")
        shown = _plain(self.url.copy_with(query=None), path)
        self.shown = shown + ("?" + "&".join(shown_query) if shown_query else "")
        self.base = _plain(self.url, path)
        self.host = self.url.host or None
        self.secrets = tuple(s for s in secrets if s)

    def endpoint(self, path: str) -> str:
        """The URL of ``path`` under this base: paths joined, the base's query kept."""
        joined = self.url.path.rstrip("/") + "/" + path.lstrip("/")
        return str(self.url.copy_with(path=joined))


def _plain(url: httpx.URL, path: str) -> str:
    """``url`` as text, without the ``/`` httpx gives an empty path."""
    text = str(url)
    if not path and url.path == "/":
        cut = text.index("/", len(url.scheme) + 3)
        text = text[:cut] + text[cut + 1 :]
    return text


def _replace(value: Any, secrets: Iterable[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return scrub_text(value)
    if isinstance(value, dict):
        return {k: _replace(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v, secrets) for v in value]
    return value


def redact(exc: ApiError, secrets: Iterable[str]) -> ApiError:
    """``exc`` with each of ``secrets`` (of 4 characters or more) replaced in its message and
    details, then whatever else is shaped like a secret or given to a secret's name (another
    key a server echoes: ``loopctl.secrets.scrub_text``); the same error when nothing
    changed, the retry hints kept."""
    # a longer one first; one shorter than 4 characters would take ordinary words with it
    ordered = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
    error = exc.error
    message = _replace(error.message, ordered)
    details = _replace(error.details, ordered)
    if message == error.message and details == error.details:
        return exc
    clean = LoopError(
        kind=error.kind,
        message=message,
        retryable=error.retryable,
        status=error.status,
        details=details,
    )
    return ApiError(clean, retry_after=exc.retry_after, should_retry=exc.should_retry)
