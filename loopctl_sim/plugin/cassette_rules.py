"""loopctl's cassette rules for vcrpy: how a model call is matched and what is kept of it.

A model call is matched on its method, its path and its body compared as parsed JSON
(``MATCH_ON``): the host is left out, so a cassette recorded against one server (a local fake, a
proxy, the real API) replays wherever the client points, but a changed prompt, tool schema or
setting is a different request and never replays a stale answer. Key order and whitespace in the
body do not matter; secrets compare by shape (``[REDACTED]``), so a cassette scrubbed under one
scrub key still matches in CI under none.

Nothing secret is kept (``scrub_request``/``scrub_response``, applied by vcrpy before a request is
matched or an interaction is written): credential headers are dropped, request and response
headers and bodies and the query string pass through ``loopctl_sim.trace.scrub.Scrubber`` (the
same secret shapes and key names a trace is scrubbed of, the user's ``LOOPCTL_SCRUB_PATTERNS``
included). The functions take vcrpy's request objects and response dictionaries but import no
vcrpy, so ``vcr_config()`` also serves pytest-recording's ``vcr_config`` fixture.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from loopctl_sim.trace.scrub import Scrubber, default_scrubber, is_secret_key, without_fingerprints

__all__ = [
    "BODY_MATCHER",
    "MATCH_ON",
    "SECRET_REQUEST_HEADERS",
    "SECRET_RESPONSE_HEADERS",
    "body_matcher",
    "body_text",
    "parsed_body",
    "register_matchers",
    "scrub_body",
    "scrub_request",
    "scrub_response",
    "vcr_config",
]

#: Request headers never written (besides any whose name ``is_secret_key``).
SECRET_REQUEST_HEADERS: Final = (
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "openai-organization",
    "openai-project",
    "cookie",
)
#: Response headers never written: cookies and the account's organization ids.
SECRET_RESPONSE_HEADERS: Final = (
    "set-cookie",
    "openai-organization",
    "openai-project",
    "anthropic-organization-id",
)

#: The name ``body_matcher`` is registered under with vcrpy.
BODY_MATCHER: Final = "loopctl_body"
#: vcrpy's ``match_on`` for model calls.
MATCH_ON: Final = ("method", "path", BODY_MATCHER)


def parsed_body(body: bytes | str | None) -> Any:
    """The body as JSON (secrets' fingerprints dropped), its text when it is not JSON, None when
    empty."""
    if body is None or body in (b"", ""):
        return None
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        return without_fingerprints(json.loads(text))
    except ValueError:
        return text


def body_text(body: bytes | str | None) -> str:
    """A canonical text of the body for people: JSON indented with sorted keys."""
    value = parsed_body(body)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def body_matcher(r1: Any, r2: Any) -> None:
    """A vcrpy matcher: the two request bodies are equal as parsed JSON."""
    if parsed_body(r1.body) != parsed_body(r2.body):
        raise AssertionError("the request bodies differ (compared as parsed JSON)")


# --- scrubbing -------------------------------------------------------------------------------


def _scrub_json_text(text: str, scrub: Scrubber) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return scrub.text(text)
    clean = scrub(value)
    return text if clean is value else json.dumps(clean, ensure_ascii=False)


def _scrub_line(line: str, scrub: Scrubber) -> str:
    """One line of a stream: a JSON line, an SSE ``data:`` line holding JSON, or text."""
    body, end = (line[:-1], "\n") if line.endswith("\n") else (line, "")
    prefix = ""
    if body.startswith("data:"):
        prefix, body = "data:", body[5:]
        if body.startswith(" "):
            prefix, body = "data: ", body[1:]
    stripped = body.rstrip("\r")
    tail = body[len(stripped) :]
    if stripped.startswith(("{", "[")):
        return prefix + _scrub_json_text(stripped, scrub) + tail + end
    return prefix + scrub.text(body) + end


def scrub_body(body: Any, scrubber: Scrubber | None = None) -> Any:
    """``body`` (bytes or text) with every secret replaced, keeping its type; the very same object
    when it holds none. A JSON body is scrubbed as data (secret-named keys too), a stream line by
    line (``data:`` lines and JSON lines as data)."""
    if not isinstance(body, bytes | str) or not body:
        return body
    scrub = scrubber or default_scrubber()
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    if not scrub.might_hold(text):
        return body
    try:
        json.loads(text)
        clean = _scrub_json_text(text, scrub)
    except ValueError:
        clean = "".join(_scrub_line(line, scrub) for line in text.splitlines(keepends=True))
    if clean == text:
        return body
    return clean.encode("utf-8") if isinstance(body, bytes) else clean


def _scrub_uri(uri: str, scrub: Scrubber) -> str:
    parts = urlsplit(uri)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if not pairs:
        return scrub.text(uri)
    clean = [(k, scrub.placeholder(v) if is_secret_key(k) else scrub.text(v)) for k, v in pairs]
    if clean == pairs:
        return scrub.text(uri)
    return scrub.text(urlunsplit(parts._replace(query=urlencode(clean))))


def _secret_header(name: str, listed: tuple[str, ...]) -> bool:
    lower = name.lower()
    return lower in listed or is_secret_key(lower)


def scrub_request(request: Any, scrubber: Scrubber | None = None) -> Any:
    """A vcrpy ``before_record_request``: a copy of the request without credential headers and
    with secrets scrubbed from the other headers, the query string and the body."""
    scrub = scrubber or default_scrubber()
    clean = copy.copy(request)
    clean.headers = {
        name: scrub.text(value) if isinstance(value, str) else value
        for name, value in request.headers.items()
        if not _secret_header(name, SECRET_REQUEST_HEADERS)
    }
    clean.uri = _scrub_uri(request.uri, scrub)
    body = request.body
    if isinstance(body, bytes | str):
        clean.body = scrub_body(body, scrub)
    return clean


def scrub_response(response: dict[str, Any], scrubber: Scrubber | None = None) -> dict[str, Any]:
    """A vcrpy ``before_record_response``: cookie and organization headers dropped, secrets
    scrubbed from the other headers and the body (changes the dictionary vcrpy handed over, a copy
    of the live response)."""
    scrub = scrubber or default_scrubber()
    headers: dict[str, Any] = response.get("headers") or {}
    for name in list(headers):
        if _secret_header(name, SECRET_RESPONSE_HEADERS):
            del headers[name]
        else:
            values = headers[name]
            if isinstance(values, list):
                headers[name] = [scrub.text(v) if isinstance(v, str) else v for v in values]
            elif isinstance(values, str):
                headers[name] = scrub.text(values)
    body = response.get("body")
    if isinstance(body, dict) and "string" in body:
        clean = scrub_body(body["string"], scrub)
        if clean is not body["string"]:
            body["string"] = clean
            for name in [n for n in headers if n.lower() == "content-length"]:
                del headers[name]  # the length of the body before it was scrubbed
    return response


# --- configuration ---------------------------------------------------------------------------


def vcr_config(scrubber: Scrubber | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vcr.VCR(...)`` or ``use_cassette`` with loopctl's rules (return it
    from pytest-recording's ``vcr_config`` fixture; the loopctl plugin registers the body matcher
    with pytest-recording's VCR)."""
    scrub = scrubber or default_scrubber()

    def before_request(request: Any) -> Any:
        return scrub_request(request, scrub)

    def before_response(response: dict[str, Any]) -> dict[str, Any]:
        return scrub_response(response, scrub)

    return {
        "match_on": list(MATCH_ON),
        "before_record_request": before_request,
        "before_record_response": before_response,
        "decode_compressed_response": True,
    }


def register_matchers(recorder: Any) -> Any:
    """Register loopctl's matchers with a ``vcr.VCR``; returns it."""
    register: Callable[[str, Callable[[Any, Any], None]], None] = recorder.register_matcher
    register(BODY_MATCHER, body_matcher)
    return recorder
