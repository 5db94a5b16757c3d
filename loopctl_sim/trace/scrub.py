"""Secret scrubbing: nothing shaped like a credential lands in a trace, and replay still compares.

What counts as a secret is ``loopctl.secrets``' rule (shapes, and the values given to a
credential's name; a mapping key that names one has its value replaced whole), plus the user's
patterns (``Scrubber(patterns=[...])``, or one regular expression a line of
``LOOPCTL_SCRUB_PATTERNS``).

A secret becomes a placeholder with a keyed fingerprint, ``[REDACTED:1a2b3c4d5e6f]`` (HMAC-SHA256
under the scrub key), so records holding the same secret hold the same placeholder, and a replay
that meets the live value scrubs it the same way and compares placeholders. The key comes from
``LOOPCTL_SCRUB_KEY`` (or the file ``LOOPCTL_SCRUB_KEY_FILE``) and never enters a trace: a header
holds only the key's id. Without a key the placeholder is a bare ``[REDACTED]`` and secrets
compare only by where they are.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from collections.abc import Sequence
from typing import Any, Final

from loopctl.secrets import (
    AFTER,
    BUILTIN_PATTERNS,
    COMMON_WORDS,
    PLACEHOLDER,
    QUERY_NAMES,
    RARE_WORDS,
    REDACTED,
    TextScrubber,
    is_secret_name,
)

#: Name literals: a secret name's JSON text holds one (``loopctl.secrets.is_secret_name``).
_COMMON_LITERALS: Final = tuple(w + a for w in COMMON_WORDS for a in AFTER)
_NAME_LITERALS: Final = (*RARE_WORDS, *_COMMON_LITERALS)

#: A JSON text holds a secret shape or a secret name only if it holds one of these, lowered
#: (``Scrubber.might_hold``): a secret name holds one of the name literals, a URL password
#: needs ``://``, a PEM key ``private key-----``, and each other shape starts with one.
LITERALS: Final = (
    *_NAME_LITERALS,
    *(c + name + "=" for name in QUERY_NAMES for c in "?&"),
    "://",
    "private key-----",
    "sk-",
    "bearer",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "akia",
    "asia",
    "eyj",
    "aiza",
)


def _grouped(literals: Sequence[str]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``literals`` grouped by their first two characters (by the first alone when it is no
    letter: ``?`` and ``&`` are rare in a record), each group under the start its literals
    share: a text without that start holds none of them (``ghp_`` ... ``ghr_`` under ``gh``,
    the query names under ``?`` and ``&``), so a record without any is settled with one search
    a group instead of one a literal (18 searches; 22 by two characters: a traced 20-turn
    ``bench_fuzz_driver`` run 31.39M -> 30.61M instructions, cachegrind)."""
    groups: dict[str, list[str]] = {}
    for literal in literals:
        groups.setdefault(literal[:2] if literal[0].isalpha() else literal[0], []).append(literal)
    return tuple((_shared_start(group), tuple(group)) for group in groups.values())


def _shared_start(words: Sequence[str]) -> str:
    """The longest start all of ``words`` share (that of the first and last in sorted order)."""
    first, last = min(words), max(words)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]


#: The literals searched for as they are. Those of ``key``, ``keys``, ``apikey`` and ``token``
#: are found by the words' occurrences instead (``_common_name``): ``token`` is in most records
#: (``input_tokens``), where the literals would take seven searches of the whole text.
_OCCURRING: Final = tuple(w + a for w in ("key", "keys", "apikey", "token") for a in AFTER)
_LITERAL_GROUPS: Final = _grouped([lit for lit in LITERALS if lit not in _OCCURRING])
_AFTER_SET: Final = frozenset(AFTER)


def _followed(low: str, word: str) -> bool:
    """Whether ``word`` stands in ``low`` followed by one of ``AFTER``."""
    end = len(word)
    at = low.find(word)
    while at >= 0:
        if low[at + end : at + end + 1] in _AFTER_SET:
            return True
        at = low.find(word, at + 1)
    return False


def _common_name(low: str) -> bool:
    """Whether ``low`` holds one of ``_OCCURRING`` (an ``apikey`` literal holds a ``key`` one).
    A text where every ``token`` is a ``tokens`` holds none of ``token``'s: two counts settle
    the usual record."""
    if "key" in low and (_followed(low, "key") or _followed(low, "keys")):
        return True
    count = low.count("token")
    return bool(count) and count != low.count("tokens") and _followed(low, "token")


#: Whether a mapping key names a credential (its value is replaced whole): the one name rule
#: of the engine and the harness (see ``loopctl.secrets.is_secret_name``).
is_secret_key: Final = is_secret_name


def _user_patterns() -> tuple[str, ...]:
    text = os.environ.get("LOOPCTL_SCRUB_PATTERNS", "")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


def _key_from_env() -> bytes | None:
    key = os.environ.get("LOOPCTL_SCRUB_KEY")
    if key:
        return key.encode("utf-8")
    path = os.environ.get("LOOPCTL_SCRUB_KEY_FILE")
    if path:
        with open(path, "rb") as f:
            data = f.read().strip()
        if not data:
            raise ValueError(f"LOOPCTL_SCRUB_KEY_FILE {path}: the file is empty")
        return data
    return None


class Scrubber:
    """Finds secrets in JSON-shaped data and replaces them with fingerprinted placeholders.

    ``key`` (bytes) makes the fingerprints; None leaves bare ``[REDACTED]`` placeholders.
    ``patterns`` are regular expressions added to ``BUILTIN_PATTERNS``. A scrubber is immutable
    and cheap to share; ``default_scrubber()`` builds one from the environment.
    """

    def __init__(self, key: bytes | str | None = None, patterns: Sequence[str] = ()) -> None:
        self.key: bytes | None = key.encode("utf-8") if isinstance(key, str) else key
        self.patterns: tuple[str, ...] = (*BUILTIN_PATTERNS, *patterns)
        self._text = TextScrubber(self.patterns, self.placeholder)
        # The user's patterns have no literal known here: a text is searched for them whole.
        self._user = re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None
        #: Whether it has patterns of the user's: they could match any part of a record's text.
        self.user_patterns = bool(patterns)

    @property
    def key_id(self) -> str | None:
        """A fingerprint of the key (never the key): it tells replay which key wrote a trace."""
        if self.key is None:
            return None
        return hashlib.sha256(b"loopctl-scrub-key-id\0" + self.key).hexdigest()[:12]

    def placeholder(self, secret: str) -> str:
        if self.key is None:
            return REDACTED
        mac = hmac.new(self.key, secret.encode("utf-8"), hashlib.sha256).hexdigest()
        return f"[REDACTED:{mac[:12]}]"

    def might_hold(self, json_text: str) -> bool:
        """False when the JSON text certainly holds nothing this scrubber would change.

        Every record a trace writes is asked, so most must be settled without a regular
        expression: each built-in shape needs one of ``LITERALS`` (in any case), which plain
        substring searches in C find (about 3 us for a 500-byte record, where one search of the
        case-blind union of the patterns took 190 us). A text holding one is walked as data:
        the patterns are not tried on the JSON text, where an escape (a tab after ``Bearer``
        is ``\\t`` there) could hide a match the data holds. The user's patterns have no known
        literal: the text is searched for them."""
        low = json_text.lower()
        # the literals by their shared start: one search settles a group that is not there
        for head, literals in _LITERAL_GROUPS:
            if head in low:
                for literal in literals:
                    if literal in low:
                        return True
        if _common_name(low):
            return True
        return self._user is not None and self._user.search(json_text) is not None

    def text(self, text: str) -> str:
        """``text`` with every secret-shaped value replaced (the same object when none): the
        shapes first, then the values of secret names (``password: ...``, ``api-key=...``;
        ``loopctl.secrets.TextScrubber``, the rule a live span and a provider's error use)."""
        return self._text(text)

    def __call__(self, value: Any) -> Any:
        """A copy of JSON-shaped ``value`` with secrets replaced (the input is not changed).

        Returns the very same object when nothing needed scrubbing, so callers can test
        ``scrubber(x) is x`` to learn whether anything was removed.
        """
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            changed = False
            for k, v in value.items():
                new = self._held(v) if isinstance(k, str) and is_secret_key(k) else self(v)
                changed = changed or new is not v
                out[k] = new
            return out if changed else value
        if isinstance(value, list | tuple):
            items = [self(v) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                return items if isinstance(value, list) else tuple(items)
            return value
        return value

    def _held(self, value: Any) -> Any:
        """The value of a secret name: every string and number in it replaced (booleans and
        nulls say nothing secret and stay); the same object when nothing changed."""
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, str | int | float):
            if isinstance(value, str) and PLACEHOLDER.fullmatch(value):
                return value
            return self.placeholder(str(value))
        if isinstance(value, dict):
            out = {k: self._held(v) for k, v in value.items()}
            changed = any(out[k] is not v for k, v in value.items())
            return out if changed else value
        if isinstance(value, list | tuple):
            items = [self._held(v) for v in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                return items
            return value
        return value


def without_fingerprints(value: Any) -> Any:
    """``value`` with every placeholder's fingerprint dropped: secrets compared by shape only."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(REDACTED, value) if "[REDACTED" in value else value
    if isinstance(value, dict):
        return {k: without_fingerprints(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_fingerprints(v) for v in value]
    return value


_DEFAULT: dict[tuple[bytes | None, tuple[str, ...]], Scrubber] = {}


def default_scrubber() -> Scrubber:
    """The scrubber the environment asks for (``LOOPCTL_SCRUB_KEY``/``_KEY_FILE``/``_PATTERNS``),
    built once per distinct setting."""
    setting = (_key_from_env(), _user_patterns())
    found = _DEFAULT.get(setting)
    if found is None:
        found = _DEFAULT[setting] = Scrubber(*setting)
    return found


def scrub_text(text: str) -> str:
    """``default_scrubber().text(text)``."""
    return default_scrubber().text(text)


def scrub(value: Any) -> Any:
    """``default_scrubber()(value)``: see ``Scrubber.__call__``."""
    return default_scrubber()(value)
