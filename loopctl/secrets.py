"""What a secret looks like in a text: one rule for the engine and its harness.

Every place that keeps a credential out of what it shows reads it here: the live spans, a
provider client's errors, the harness's traces, cassettes and messages (``loopctl_sim.trace.scrub``
adds a fingerprinting placeholder, the user's patterns and a fast pre-test of a JSON text).
Pure, below loopctl's other layers, so each of them imports it without any extra installed.

Two kinds of secret:

- shapes (``BUILTIN_PATTERNS``): OpenAI/Anthropic keys, bearer tokens, GitHub, Slack, AWS and
  Google keys, JWTs, a URL's password, a PEM private key's body;
- values given to a credential's name (``DB_PASSWORD='correct horse battery'``,
  ``x-api-key: plain123``), which have no shape of their own: a name read word by word
  (``OPENAI_API_KEY``, ``apiKey``, ``x-portkey-api-key``, ``db_password``; not ``max_tokens``,
  ``key_id`` or ``sort_key``), its value six characters or more and not one lowercase word
  (``token: expired`` is prose), a quoted value to its closing quote, ``&`` ending a value only
  in a URL's query, an auth scheme before it kept. In a URL's query a few more names carry a
  credential (``?key=``, ``?sig=``, ``?code=``: ``is_secret_param``).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Sequence
from typing import Final

__all__ = [
    "AFTER",
    "BUILTIN_PATTERNS",
    "COMMON_WORDS",
    "PLACEHOLDER",
    "QUERY_NAMES",
    "RARE_WORDS",
    "REDACTED",
    "TextScrubber",
    "bare",
    "is_secret_name",
    "is_secret_param",
    "scrub_text",
]

REDACTED: Final = "[REDACTED]"

#: A placeholder, with or without its fingerprint.
PLACEHOLDER: Final = re.compile(r"\[REDACTED(?::[0-9a-f]{12})?\]")

#: A password in a URL: ``scheme://user:password@host`` (the password).
_URL_PASSWORD: Final = (
    r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@\"']*:(?P<s>[^/\s@\"']+)@"
)
#: The body of a PEM private key, up to its end line (or the text's end, when cut).
_PEM: Final = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
    r"(?P<s>[\s\S]+?)(?=-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"
)

#: The secret shapes looked for inside strings. Where a pattern has a group named ``s``, only
#: that group is the secret (``Bearer`` stays readable).
BUILTIN_PATTERNS: Final[tuple[str, ...]] = (
    r"sk-[A-Za-z0-9_\-]{8,}",
    r"(?i:bearer)\s+(?P<s>[A-Za-z0-9._~+/\-]{8,}=*)",
    r"\bgh[pousr]_[A-Za-z0-9]{16,}",
    r"\bgithub_pat_[A-Za-z0-9_]{16,}",
    r"\bxox[abposr]-[A-Za-z0-9\-]{8,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\beyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}",
    r"\bAIza[0-9A-Za-z_\-]{35}",
    _URL_PASSWORD,
    _PEM,
)


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
    """Whether a lowered text shows a secret word as a name shows it (a rare word anywhere, a
    common one followed by one of ``AFTER``): a name without one is no secret name, so a text
    without one needs no closer reading."""
    return any(word in low for word in RARE_WORDS) or any(
        _followed(low, word) for word in COMMON_WORDS
    )


#: Lowers ASCII letters only: the words are ASCII, and a Unicode ``lower()`` may turn other
#: letters into ASCII ones (the Kelvin sign into ``k``) that a JSON text does not show.
_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


# Cached: a trace's scrubber asks it about every key of every record, a few dozen distinct
# names; 0.08 against 2.8 us a name (timeit).
@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str, after: str = '"') -> bool:
    """Whether ``name`` (followed in its text by ``after``) names a credential: the trace
    scrubber replaces a mapping value under such a key whole, and a text's value given to it.

    The name is read as words (``OPENAI_API_KEY``, ``apiKey``), any case (``_named_secret``).
    The common words (key, token, ...) count where the name shows them whole (followed by one
    of ``AFTER`` or its end), so that a pre-test of a text finds every secret name by a
    literal."""
    return _anchored((name + after).translate(_ASCII_LOWER)) and _named_secret(name)


#: Names that carry a credential in a URL's query though they name none elsewhere (Google's
#: ``?key=``, a shared access signature's ``sig``, an OAuth ``code``).
QUERY_NAMES: Final = ("key", "sig", "signature", "code")
_QUERY_LITERALS: Final = tuple(c + name + "=" for name in QUERY_NAMES for c in "?&")


def is_secret_param(name: str) -> bool:
    """Whether a URL's query parameter ``name`` carries a credential (``api-key``, ``key``,
    ``sig``; not ``api-version``)."""
    return name.lower() in QUERY_NAMES or is_secret_name(name, "=")


def _named_secret(name: str) -> bool:
    """The word rule: a word of ``name`` is a secret one (``_SECRET_WORDS``), no later word says
    the name describes the secret (``key_id``, ``token_type``, ``api_key_env``), and the word
    before does not make it a lookup key or a piece of text (``sort_key``, ``eos_token``); a
    bare ``key`` is any mapping's; ``private`` counts only as the last word. Counts
    (``max_tokens``) hold ``tokens``, no secret word."""
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


def _assignments(text: str, placeholder: Callable[[str], str]) -> str:
    """``text`` with the values given to its secret names replaced by ``placeholder(value)``."""
    if "=" not in text and ":" not in text:
        return text
    pieces: list[str] = []
    pos = done = 0
    while (match := _ASSIGNED.search(text, pos)) is not None:
        name = match.group("name")
        pos = match.end()
        start = match.start("name")
        in_query = start > 0 and text[start - 1] in "?&" and match.group("next") == "="
        secret = is_secret_param(name) if in_query else is_secret_name(name, match.group("next"))
        if not secret:
            pos = match.end("name")
            continue
        value = (_QUERY_VALUE if in_query else _VALUE).match(text, pos)
        group = "u" if value is None or value.group("u") is not None else "s"
        if value is None or "[REDACTED" in value[group] or _PROSE.fullmatch(value[group]):
            continue
        start, end = value.span(group)
        pieces += (text[done:start], placeholder(value[group]))
        pos = done = end
    return "".join((*pieces, text[done:])) if pieces else text


def bare(secret: str) -> str:
    """The placeholder without a fingerprint (a live span's, a provider error's)."""
    return REDACTED


class TextScrubber:
    """A text's secrets replaced: the shapes of ``patterns`` first (only the group named ``s``
    where a pattern has one), then the values given to secret names; each secret becomes
    ``placeholder(secret)``, and a placeholder already there is left as it is. The patterns are
    compiled once, as one regular expression."""

    def __init__(
        self,
        patterns: Sequence[str] = BUILTIN_PATTERNS,
        placeholder: Callable[[str], str] = bare,
    ) -> None:
        self.patterns: tuple[str, ...] = tuple(patterns)
        self.placeholder = placeholder
        # each pattern's group ``s`` gets a name of its own
        named = [p.replace("(?P<s>", f"(?P<s{i}>") for i, p in enumerate(self.patterns)]
        self._values = re.compile("|".join(f"(?:{p})" for p in named))
        self._group = tuple(self._values.groupindex)

    def __call__(self, text: str) -> str:
        """``text`` with every secret replaced (the same object when none)."""
        out = text
        if self._values.search(out) is not None:
            out = self._values.sub(self._replace, out)
        low = out.lower()  # a wider lowering than a name's: a pre-test only
        if _anchored(low) or any(literal in low for literal in _QUERY_LITERALS):
            out = _assignments(out, self.placeholder)
        return text if out == text else out

    def _replace(self, match: re.Match[str]) -> str:
        whole = match.group(0)
        for name in self._group:
            inner = match.group(name)
            if inner is not None:
                if PLACEHOLDER.fullmatch(inner):
                    return whole
                start, end = match.span(name)
                offset = match.start(0)
                return whole[: start - offset] + self.placeholder(inner) + whole[end - offset :]
        if PLACEHOLDER.fullmatch(whole):
            return whole
        return self.placeholder(whole)


_BARE: Final = TextScrubber()


def scrub_text(text: str) -> str:
    """``text`` with every built-in secret replaced by a bare ``[REDACTED]`` (the same object
    when none): what a live span or a provider's error shows."""
    return _BARE(text)
