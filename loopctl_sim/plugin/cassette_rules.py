"""loopctl's cassette rules for vcrpy: how a model call is matched and what is kept of it.

A model call is matched on its method, path and body as parsed JSON (``MATCH_ON``): the host is
left out, so a cassette replays wherever the client points, but a changed prompt, tool schema or
setting never replays a stale answer. Secrets compare by shape (``[REDACTED]``), so a cassette
scrubbed under one scrub key still matches in CI under none. Nothing secret is kept
(``scrub_request``, ``scrub_response``): credential headers are dropped, the URL's userinfo and
secret-named query values become placeholders, the rest passes through the trace ``Scrubber``;
a stream is first scrubbed with each channel's deltas joined (``stream_scrub``), where a key
streamed in pieces is whole. No vcrpy import: ``vcr_config()`` serves pytest-recording too.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from loopctl.secrets import REDACTED
from loopctl_sim.plugin.stream_scrub import scrub_stream_deltas
from loopctl_sim.trace.scrub import (
    Scrubber,
    default_scrubber,
    is_secret_key,
    without_fingerprints,
)

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

#: What in a request header's or query parameter's name makes it a credential.
CREDENTIAL_NAME: Final = re.compile(r"key|token|secret|auth|passw|credential|cookie|^sig$", re.I)

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


def _scrub_json_text(text: str, scrub: Scrubber) -> str:
    try:
        value = json.loads(text)
    except ValueError:
        return scrub.text(text)
    clean = scrub(value)
    return text if clean is value else json.dumps(clean, ensure_ascii=False)


def _scrub_line(line: str, scrub: Scrubber) -> str:
    """One line of a stream: a JSON line, an SSE ``data:`` line holding JSON, or text."""
    prefix, body, end = _split_line(line)
    if body.startswith(("{", "[")):
        return prefix + _scrub_json_text(body, scrub) + end
    return prefix + scrub.text(body) + end


def _split_line(line: str) -> tuple[str, str, str]:
    """A stream line as (``data:`` prefix or nothing, its JSON or text, the line's end)."""
    stripped = line.rstrip("\r\n")
    end = line[len(stripped) :]
    for prefix in ("data: ", "data:"):
        if stripped.startswith(prefix):
            return prefix, stripped[len(prefix) :], end
    return "", stripped, end


def _scrub_deltas(lines: list[str], scrub: Scrubber) -> list[str]:
    """The stream's lines with each channel of streamed deltas scrubbed joined (see
    ``stream_scrub``): an event changed there is written again as JSON."""
    events: list[Any] = []
    where: list[int] = []
    for number, line in enumerate(lines):
        prefix, body, _ = _split_line(line)
        if body.startswith("{"):
            try:
                events.append(json.loads(body))
            except ValueError:
                continue
            where.append(number)
    changed = scrub_stream_deltas(events, scrub)
    out = list(lines)
    for index in changed:
        number = where[index]
        prefix, _, end = _split_line(lines[number])
        out[number] = prefix + json.dumps(events[index], ensure_ascii=False) + end
    return out


def scrub_body(body: Any, scrub: Scrubber) -> Any:
    """``body`` (bytes or text) with every secret replaced, keeping its type; the very same object
    when it holds none. A JSON body is scrubbed as data (secret-named keys too); a stream (SSE or
    JSON lines) first channel by channel with its deltas joined, then line by line (``data:``
    lines and JSON lines as data)."""
    if not isinstance(body, bytes | str) or not body:
        return body
    # bytes that are not UTF-8 (an audio reply) are kept byte for byte around what is scrubbed
    text = body.decode("utf-8", "surrogateescape") if isinstance(body, bytes) else body
    try:
        json.loads(text)
    except ValueError:
        lines = _scrub_deltas(text.splitlines(keepends=True), scrub)
        folded = "".join(lines)
        if scrub.might_hold(folded):
            lines = [_scrub_line(line, scrub) for line in lines]
        clean = "".join(lines)
    else:
        if not scrub.might_hold(text):
            return body
        clean = _scrub_json_text(text, scrub)
    if clean == text:
        return body
    return clean.encode("utf-8", "surrogateescape") if isinstance(body, bytes) else clean


#: A URL's user and password, once scrubbed (percent-encoded: brackets there would make the
#: host an IPv6 literal to ``urlsplit``, and vcrpy could not read the recorded URL back).
_USERINFO: Final = REDACTED.replace("[", "%5B").replace("]", "%5D")


def _secret_name(name: str) -> bool:
    return CREDENTIAL_NAME.search(name) is not None or is_secret_key(name.lower())


def _scrub_uri(uri: str, scrub: Scrubber) -> str:
    """The URL without its user and password, with every credential-named query parameter's
    value replaced, and secrets scrubbed from the rest (the path matched on stays as it is)."""
    parts = urlsplit(uri)
    if "@" in parts.netloc:
        parts = parts._replace(netloc=f"{_USERINFO}@{parts.netloc.rsplit('@', 1)[1]}")
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    clean = [(k, scrub.placeholder(v) if _secret_name(k) else scrub.text(v)) for k, v in pairs]
    query = urlencode(clean) if clean != pairs else scrub.text(parts.query)
    return urlunsplit(parts._replace(path=scrub.text(parts.path), query=query))


def _secret_header(name: str, listed: tuple[str, ...], broad: bool = False) -> bool:
    lower = name.lower()
    return lower in listed or is_secret_key(lower) or (broad and _secret_name(lower))


def scrub_request(request: Any, scrub: Scrubber) -> Any:
    """A vcrpy ``before_record_request``: a scrubbed copy of the request (module docstring)."""
    clean = copy.copy(request)
    clean.headers = {
        name: scrub.text(value) if isinstance(value, str) else value
        for name, value in request.headers.items()
        if not _secret_header(name, SECRET_REQUEST_HEADERS, broad=True)
    }
    clean.uri = _scrub_uri(request.uri, scrub)
    body = request.body
    if isinstance(body, bytes | str):
        clean.body = scrub_body(body, scrub)
    return clean


def scrub_response(response: dict[str, Any], scrub: Scrubber) -> dict[str, Any]:
    """A vcrpy ``before_record_response``: the response scrubbed (module docstring), in place
    (vcrpy hands over a copy of the live response)."""
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


def vcr_config(scrubber: Scrubber | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vcr.VCR(...)`` with loopctl's rules (pytest-recording's
    ``vcr_config`` fixture may return it: the plugin registers the body matcher there)."""
    scrub = scrubber or default_scrubber()
    return {
        "match_on": list(MATCH_ON),
        "before_record_request": functools.partial(scrub_request, scrub=scrub),
        "before_record_response": functools.partial(scrub_response, scrub=scrub),
        "decode_compressed_response": True,
    }


def register_matchers(recorder: Any) -> Any:
    """Register loopctl's matchers with a ``vcr.VCR``; returns it."""
    register: Callable[[str, Callable[[Any, Any], None]], None] = recorder.register_matcher
    register(BODY_MATCHER, body_matcher)
    return recorder
