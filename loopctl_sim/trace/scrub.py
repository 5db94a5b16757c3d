"""Secret scrubbing: nothing shaped like a credential lands in a trace.

A mapping key that looks like a credential header (``authorization``, ``proxy-authorization``,
``api-key``/``api_key``/``apikey``, ``x-api-key``) has its value replaced whole; any string that
holds an ``sk-...`` key has that key replaced, wherever it sits.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["REDACTED", "is_secret_key", "might_hold_secrets", "scrub", "scrub_text"]

REDACTED: Final = "[REDACTED]"

_SECRET_KEY = re.compile(r"^(proxy-)?authorization$|^(x-)?api[-_]?key$", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"sk-[A-Za-z0-9_\-]{8,}")


# A JSON text that matches neither of these holds nothing ``scrub`` would change (a cheap test,
# in C, before the exact walk over the data).
_JSON_SECRET_KEY = re.compile(
    r'"(?:proxy-)?authorization"\s*:|"(?:x-)?api[-_]?key"\s*:', re.IGNORECASE
)


def might_hold_secrets(json_text: str) -> bool:
    """False when the JSON text certainly holds no secret; True means: scrub the data."""
    return "sk-" in json_text or _JSON_SECRET_KEY.search(json_text) is not None


def is_secret_key(key: str) -> bool:
    return _SECRET_KEY.fullmatch(key) is not None


def scrub_text(text: str) -> str:
    if "sk-" not in text:
        return text
    scrubbed = _SECRET_VALUE.sub(REDACTED, text)
    return text if scrubbed == text else scrubbed


def scrub(value: Any) -> Any:
    """A copy of JSON-shaped ``value`` with secrets replaced (the input is not changed).

    Returns the very same object when nothing needed scrubbing, so callers can test
    ``scrub(x) is x`` to learn whether anything was removed.
    """
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        changed = False
        for k, v in value.items():
            if isinstance(k, str) and is_secret_key(k) and v is not None:
                new = REDACTED
            else:
                new = scrub(v)
            changed = changed or new is not v
            out[k] = new
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [scrub(v) for v in value]
        if any(a is not b for a, b in zip(items, value, strict=True)):
            return items if isinstance(value, list) else tuple(items)
        return value
    return value
