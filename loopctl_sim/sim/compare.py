"""Say where two conversations part: the first differing message, the first path inside it
(``parts[1].arguments.amount``) and an excerpt of each side, cut so that a 10 KB tool result
does not flood the report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from loopctl.core import Message

#: How many characters of a value a report shows (each side).
EXCERPT: Final = 80


def excerpt(value: Any, limit: int = EXCERPT) -> str:
    """``value`` as compact JSON, cut to ``limit`` characters (an ellipsis says it was cut)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_path(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any]:
    """The first path (``parts[0].text``) under which ``a`` and ``b`` differ, and the values
    there. Dicts are walked key by key (in ``a``'s order, then ``b``'s extra keys), lists index
    by index; anything else differs as a whole."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key, _MISSING) != b.get(key, _MISSING):
                sub = f"{path}.{key}" if path else str(key)
                return _first_path(a.get(key, _MISSING), b.get(key, _MISSING), sub)
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_path(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path} length", len(a), len(b)
    return path or "(the message)", a, b


_MISSING: Final = object()  # a key one side lacks (shown as "(absent)")


def _shown(value: Any) -> str:
    return "(absent)" if value is _MISSING else excerpt(value)


def history_difference(
    expected: Sequence[Message],
    actual: Sequence[Message],
    *,
    expected_name: str = "expected",
    actual_name: str = "actual",
) -> str | None:
    """Where ``actual`` first departs from ``expected``, in one line (None when equal): the
    first differing message and path with an excerpt of each side, or the first message only one
    side has; ``expected_name``/``actual_name`` say which run is which."""
    if list(expected) == list(actual):
        return None
    sizes = f"{len(expected)} messages {expected_name}, {len(actual)} {actual_name}"
    for i, (x, y) in enumerate(zip(expected, actual, strict=False)):
        if x != y:
            path, left, right = _first_path(x.model_dump(mode="json"), y.model_dump(mode="json"))
            return (
                f"message {i} ({sizes}) differs at {path}: {_shown(left)} {expected_name}, "
                f"{_shown(right)} {actual_name}"
            )
    n = min(len(expected), len(actual))
    longer, name = (expected, expected_name) if len(expected) > n else (actual, actual_name)
    extra = longer[n]
    return (
        f"message {n} ({sizes}) is only {name}: {extra.role} "
        f"({', '.join(p.kind for p in extra.parts) or 'no parts'}) "
        f"{excerpt(extra.model_dump(mode='json'))}"
    )
