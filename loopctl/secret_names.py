"""Values given to a credential's name in a text (``password: ...``, ``API_KEY=...``).

A value with no shape of its own (``DB_PASSWORD='correct horse battery'`` in a tool's result,
``x-api-key: plain123`` echoed by a server) is a secret only by the name it is given. One rule
finds those values for the engine's live spans (``loopctl.otel``) and for the harness's traces,
cassettes and messages (``loopctl_sim.trace.scrub``, which adds its own fast pre-test of a whole
JSON text): a name read word by word (``OPENAI_API_KEY``, ``apiKey``, ``x-portkey-api-key``,
``db_password``; not ``max_tokens``, ``key_id`` or ``sort_key``), its value six characters or
more and not one lowercase word (``token: expired`` is prose), a quoted value to its closing
quote, ``&`` ending a value only in a URL's query, an auth scheme before it kept. It lives here,
outside ``loopctl.otel``, so that the harness reads it without the ``otel`` extra.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Final

__all__ = [
    "AFTER",
    "COMMON_WORDS",
    "RARE_WORDS",
    "assignments",
    "is_secret_name",
    "named_secret",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that make a name secret wherever they stand in it (rare outside a credential's name,
#: so a pre-test looks for them alone).
RARE_WORDS: Final = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "cookie",
    "authorization",
)
#: Words common in other names too (``input_tokens``, ``keyword``): a name's word counts only
#: where the name shows it whole, followed by one of ``AFTER`` or the name's end.
COMMON_WORDS: Final = ("key", "keys", "apikey", "token", "auth", "creds", "private")
AFTER: Final = ('"', "'", "_", "-", "=", ":", "\\")
#: The secret words of a name, as its tokens.
_SECRET_WORDS: Final = frozenset(
    {
        *RARE_WORDS,
        *COMMON_WORDS,
        "passwords",
        "secrets",
        "credentials",
        "cookies",
    }
)
#: A later word that makes the name describe the secret, not hold it (``key_id``).
_DESCRIBES: Final = _words(
    "id ids name names type types kind env var file path url uri count counts limit limits "
    "budget usage used length len size format version prefix suffix hint field fields location "
    "expiry expires expiration ttl at time timestamp date created updated rotation policy mode "
    "scheme source provider required enabled set present label index"
)
#: A word before ``key``/``keys`` that makes it a lookup key (``sort_key``).
_KEY_KINDS: Final = _words(
    "sort primary foreign partition cache idempotency lookup row dedup dedupe group routing "
    "hash range shard unique composite natural order map dict index column field attribute "
    "attr object message translation i18n public react join partial scrub call record "
    "required allowed missing extra unknown known expected sorted valid nested json yaml config "
    "header query param state item items entry property prop registry setting settings option "
    "options schema"
)
#: A word before ``token`` that makes it a piece of text or a count (``eos_token``).
_TOKEN_KINDS: Final = _words(
    "max min num total input output prompt completion reasoning cached cache context bos eos "
    "pad unk sep cls mask special stop start end page next continuation cursor pagination "
    "last first new"
)
_WORD: Final = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", re.ASCII)

_ASSIGNED: Final = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]*[A-Za-z0-9])(?=(?P<next>[\"'\s:=]))"
    r"[\"']?[ \t]*[:=]"
)
_SCHEME: Final = r"(?:(?i:bearer|basic|token|digest)[ \t]+)?(?!(?i:bearer|basic|token|digest)\b)"
_VALUE: Final = re.compile(
    r"[ \t]*(?:(?P<q>[\"'])" + _SCHEME + r"(?P<s>(?:(?!(?P=q))[^\n\\]|\\.){6,})(?P=q)"
    r"|[\"']?" + _SCHEME + r"(?P<u>[^\s\"',;<>()\[\]{}]{6,}))"
)
_QUERY_VALUE: Final = re.compile(r"[ \t]*[\"']?" + _SCHEME + r"(?P<u>[^\s\"'&,;<>()\[\]{}]{6,})")
_PROSE: Final = re.compile(r"[a-z]+")


def _followed(low: str, word: str) -> bool:
    at = low.find(word)
    while at >= 0:
        if low[at + len(word) : at + len(word) + 1] in AFTER:
            return True
        at = low.find(word, at + 1)
    return False


def _anchored(low: str) -> bool:
    """Whether a lowered name (with the character after it) shows a secret word as the trace
    scrubber's pre-test finds it."""
    return any(word in low for word in RARE_WORDS) or any(
        _followed(low, word) for word in COMMON_WORDS
    )


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str, after: str = '"') -> bool:
    """Whether ``name`` (followed in its text by ``after``) names a credential."""
    return _anchored((name + after).lower()) and named_secret(name)


def named_secret(name: str) -> bool:
    """The word rule alone (no look at the character after the name): a word of ``name`` is a
    secret one, no later word says the name describes the secret (``key_id``, ``token_type``),
    and the word before does not make it a lookup key or a piece of text (``sort_key``,
    ``eos_token``); a bare ``key`` is any mapping's."""
    words = [w.lower() for w in _WORD.findall(name)]
    for i, word in enumerate(words):
        if word not in _SECRET_WORDS:
            continue
        later, before = words[i + 1 :], words[i - 1] if i else ""
        if any(w in _DESCRIBES for w in later):
            continue
        if word == "private" and later:
            continue
        if word in ("key", "keys") and (before in _KEY_KINDS or (not before and not later)):
            continue
        if word == "token" and before in _TOKEN_KINDS:
            continue
        return True
    return False


def assignments(text: str, placeholder: Callable[[str], str]) -> str:
    """``text`` with the values given to its secret names replaced by ``placeholder(value)``."""
    if "=" not in text and ":" not in text:
        return text
    pieces: list[str] = []
    pos = done = 0
    while (match := _ASSIGNED.search(text, pos)) is not None:
        name = match.group("name")
        pos = match.end()
        if not is_secret_name(name, match.group("next")):
            pos = match.end("name")
            continue
        start = match.start("name")
        in_query = start > 0 and text[start - 1] in "?&"
        value = (_QUERY_VALUE if in_query else _VALUE).match(text, pos)
        group = "u" if value is None or value.group("u") is not None else "s"
        if value is None or "[REDACTED" in value[group] or _PROSE.fullmatch(value[group]):
            continue
        start, end = value.span(group)
        pieces += (text[done:start], placeholder(value[group]))
        pos = done = end
    return "".join((*pieces, text[done:])) if pieces else text
