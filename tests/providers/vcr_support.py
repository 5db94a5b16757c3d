"""The cassette machinery shared by the provider tests (vcrpy, matched on the JSON body).

Record mode: ``LOOPCTL_RECORD`` unset -> ``none`` (replay only; a request not in the cassette
fails). ``LOOPCTL_RECORD=1`` or ``new_episodes`` records what is missing, ``once`` records a
cassette that does not exist yet, ``all`` re-records everything. Recording needs real keys in
``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` (or a running Ollama) and lifts the network guard.
Secrets never reach a cassette: credential request headers are dropped (``filter_headers``) and
response headers that could carry one are removed before a response is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import vcr

CASSETTES = Path(__file__).resolve().parents[2] / "cassettes"

SECRET_REQUEST_HEADERS = [
    "authorization",
    "x-api-key",
    "api-key",
    "openai-organization",
    "openai-project",
    "cookie",
]
SECRET_RESPONSE_HEADERS = {"set-cookie", "openai-organization", "anthropic-organization-id"}

_MODES = {"1": "new_episodes", "new_episodes": "new_episodes", "once": "once", "all": "all"}


def record_mode() -> str:
    """vcrpy's record mode from ``LOOPCTL_RECORD`` (``none`` when unset)."""
    value = os.environ.get("LOOPCTL_RECORD", "").strip().lower()
    if not value or value in ("0", "none"):
        return "none"
    if value not in _MODES:
        raise ValueError(f"LOOPCTL_RECORD={value!r}: use 1, once, new_episodes or all")
    return _MODES[value]


def _parsed(body: Any) -> Any:
    if body is None or body == b"" or body == "":
        return None
    text = body.decode() if isinstance(body, bytes) else body
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return text


def json_body(r1: Any, r2: Any) -> None:
    """A vcrpy matcher: the two request bodies are equal as parsed JSON."""
    left, right = _parsed(r1.body), _parsed(r2.body)
    if left != right:
        raise AssertionError(f"request bodies differ:\n  {left!r}\n  {right!r}")


def scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    headers = response.get("headers", {})
    for name in list(headers):
        if name.lower() in SECRET_RESPONSE_HEADERS:
            del headers[name]
    return response


def make_vcr() -> vcr.VCR:
    recorder = vcr.VCR(
        cassette_library_dir=str(CASSETTES),
        record_mode=record_mode(),
        match_on=["method", "path", "json_body"],
        filter_headers=SECRET_REQUEST_HEADERS,
        before_record_response=scrub_response,
        decode_compressed_response=True,
    )
    recorder.register_matcher("json_body", json_body)
    return recorder


VCR = make_vcr()


def cassette(provider: str, name: str) -> Any:
    """``with cassette("openai", "plain_answer") as tape:`` (every interaction must be played)."""
    return VCR.use_cassette(f"{provider}/{name}.yaml", allow_playback_repeats=False)
