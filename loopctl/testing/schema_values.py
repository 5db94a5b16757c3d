"""Values from a JSON Schema: valid ones (what a careful model sends) and broken ones (what a
careless model sends), drawn through a ``Chooser``.

A tool's ``parameters`` is the only description of its input a model has, so an exploring
model is driven by it. What the schema cannot say (a ``pattern``, an order id that exists) is
taken, where it can be, from the ``Vocabulary`` of the conversation, as a real model takes it.

Every draw goes through a ``Chooser``: a seeded ``random.Random`` (``RandomChooser``, the
exploring client) or hypothesis's ``draw`` (``loopctl.testing.strategies``, which shrinks). The
simplest option is asked for first (index 0, the low end of a range, ``False``), which is what
hypothesis shrinks towards.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeVar

T = TypeVar("T")

#: How deep nested objects and arrays go before the generator stops adding optional parts.
MAX_DEPTH: Final = 4
_FALLBACK_STRINGS: Final = ("", "a", "hello world", "ünïcødé ✓", "x" * 40)
_WORD: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@/:-]{0,39}")
_NUMBER: Final = re.compile(r"(?<![\w.-])-?\d+(?:\.\d+)?(?![\w-])")  # not inside an id


class Chooser(Protocol):
    """The draws the generators make; the simplest answer is the first option or the low end."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``."""

    def chance(self, p: float) -> bool:
        """True with probability ``p`` (``False`` is the simpler answer)."""

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options`` (not empty)."""

    def weighted(self, options: Sequence[tuple[T, float]]) -> T:
        """One of ``options``, by weight (weights >= 0, not all zero)."""

    def real(self, lo: float, hi: float) -> float:
        """A finite float in ``[lo, hi]``."""


class RandomChooser:
    """A ``Chooser`` over a ``random.Random``: the same seed, the same draws."""

    __slots__ = ("rng",)

    def __init__(self, rng: random.Random | int) -> None:
        self.rng = rng if isinstance(rng, random.Random) else random.Random(rng)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def weighted(self, options: Sequence[tuple[T, float]]) -> T:
        total = sum(w for _, w in options)
        x = self.rng.random() * total
        for value, weight in options:
            x -= weight
            if x < 0:
                return value
        return options[-1][0]

    def real(self, lo: float, hi: float) -> float:
        return self.rng.uniform(lo, hi)


@dataclass
class Vocabulary:
    """What a model could copy into arguments: the words and numbers of the conversation and
    the tool descriptions, and, by key, the values its JSON objects held: a model that refunds
    an order it looked up copies ``amount`` from the lookup, which is where real agents' bugs
    are."""

    words: list[str] = field(default_factory=list)
    numbers: list[float] = field(default_factory=list)
    keyed: dict[str, list[Any]] = field(default_factory=dict)

    @classmethod
    def of(
        cls, texts: Sequence[str], objects: Sequence[Mapping[str, Any]] = (), limit: int = 200
    ) -> Vocabulary:
        words: dict[str, None] = {}
        numbers: dict[float, None] = {}
        for text in texts:
            for match in _WORD.finditer(text):
                if len(words) < limit:
                    words.setdefault(match.group().rstrip(".:"), None)
            for match in _NUMBER.finditer(text):
                if len(numbers) < limit:
                    numbers.setdefault(float(match.group()), None)
        words.pop("", None)
        keyed: dict[str, list[Any]] = {}
        for obj in objects:
            for key, value in obj.items():
                seen = keyed.setdefault(key, [])
                if value not in seen and len(seen) < 20:
                    seen.append(value)
        return cls(list(words), list(numbers), keyed)


_NO_WORDS: Final = Vocabulary()


def _resolve(schema: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    """``schema`` with a local ``$ref`` followed and a one-item ``allOf`` merged in."""
    if not isinstance(schema, Mapping):
        return {}
    seen = 0
    while isinstance(schema.get("$ref"), str) and seen < 16:
        ref: str = schema["$ref"]
        target: Any = root
        for part in ref.removeprefix("#/").split("/") if ref.startswith("#/") else ["?"]:
            target = target.get(part) if isinstance(target, Mapping) else None
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**(target if isinstance(target, Mapping) else {}), **siblings}
        seen += 1
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and all_of:
        merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
        for part in all_of:
            for key, value in _resolve(part, root).items():
                if key == "properties" and isinstance(value, Mapping):
                    merged["properties"] = {**merged.get("properties", {}), **value}
                elif key == "required" and isinstance(value, list):
                    merged["required"] = [*merged.get("required", []), *value]
                else:
                    merged.setdefault(key, value)
        schema = merged
    resolved: Mapping[str, Any] = schema
    return resolved


def _types(schema: Mapping[str, Any]) -> list[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list) and declared:
        return [t for t in declared if isinstance(t, str)]
    if "properties" in schema:
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    return []


def schema_value(
    schema: Any,
    choose: Chooser,
    words: Vocabulary = _NO_WORDS,
    *,
    root: Mapping[str, Any] | None = None,
    depth: int = 0,
) -> Any:
    """A value ``schema`` accepts (as far as the schema can say; a ``pattern`` is not honoured
    unless a default or example matches it)."""
    top = root if root is not None else (schema if isinstance(schema, Mapping) else {})
    s = _resolve(schema, top)
    if "const" in s:
        return s["const"]
    enum = s.get("enum")
    if isinstance(enum, list) and enum:
        return choose.choice(enum)
    for key in ("anyOf", "oneOf"):
        options = s.get(key)
        if isinstance(options, list) and options:
            option = choose.choice(options)
            rest = {k: v for k, v in s.items() if k != key}
            merged = {**rest, **_resolve(option, top)}
            return schema_value(merged, choose, words, root=top, depth=depth)
    if "default" in s and choose.chance(0.2):
        return s["default"]
    examples = s.get("examples")
    if isinstance(examples, list) and examples and choose.chance(0.3):
        return choose.choice(examples)
    types = _types(s)
    kind = choose.choice(types) if types else choose.choice(["string", "integer", "boolean"])
    if kind == "object":
        return _object(s, choose, words, top, depth)
    if kind == "array":
        return _array(s, choose, words, top, depth)
    if kind == "string":
        return _string(s, choose, words)
    if kind == "integer":
        return _integer(s, choose, words)
    if kind == "number":
        return _number(s, choose, words)
    if kind == "boolean":
        return choose.chance(0.5)
    return None  # "null", or a type this generator does not know


def _object(
    s: Mapping[str, Any], choose: Chooser, words: Vocabulary, top: Mapping[str, Any], depth: int
) -> dict[str, Any]:
    properties = s.get("properties")
    props: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
    required = set(s.get("required") or ())
    out: dict[str, Any] = {}
    for name, sub in props.items():
        if name in required or (depth < MAX_DEPTH and choose.chance(0.5)):
            copied = _copied(name, sub, choose, words, top)
            if copied is not _NONE:
                out[name] = copied
            else:
                out[name] = schema_value(sub, choose, words, root=top, depth=depth + 1)
    for name in sorted(required - set(out)):  # required but not described
        out[name] = schema_value({}, choose, words, root=top, depth=depth + 1)
    extra = s.get("additionalProperties")
    if isinstance(extra, Mapping) and depth < MAX_DEPTH and choose.chance(0.3):
        out[f"key{choose.integer(0, 9)}"] = schema_value(
            extra, choose, words, root=top, depth=depth + 1
        )
    return out


_NONE: Final = object()


def _copied(
    name: str, schema: Any, choose: Chooser, words: Vocabulary, top: Mapping[str, Any]
) -> Any:
    """Often, a value seen under the same key (``_NONE`` when there is none of a type the
    schema allows, or when the model does not copy this time)."""
    seen = words.keyed.get(name)
    if not seen or not choose.chance(0.6):
        return _NONE
    s = _resolve(schema, top)
    enum = s.get("enum")
    types = _types(s)
    fitting = [
        v
        for v in seen
        if (not isinstance(enum, list) or v in enum) and (not types or _is_type(v, types))
    ]
    return choose.choice(fitting) if fitting else _NONE


def _array(
    s: Mapping[str, Any], choose: Chooser, words: Vocabulary, top: Mapping[str, Any], depth: int
) -> list[Any]:
    prefix = s.get("prefixItems")
    if isinstance(prefix, list):
        return [schema_value(p, choose, words, root=top, depth=depth + 1) for p in prefix]
    lo = int(s.get("minItems", 0))
    hi = int(s.get("maxItems", max(lo, 3 if depth < MAX_DEPTH else lo)))
    n = choose.integer(lo, max(lo, hi))
    items = s.get("items", {})
    out: list[Any] = []
    for _ in range(n):
        value = schema_value(items, choose, words, root=top, depth=depth + 1)
        if s.get("uniqueItems") and value in out:
            continue
        out.append(value)
    return out


def _string(s: Mapping[str, Any], choose: Chooser, words: Vocabulary) -> str:
    lo = int(s.get("minLength", 0))
    hi = int(s.get("maxLength", max(lo, 60)))
    fmt = s.get("format")
    if fmt == "date-time":
        text = f"2026-0{choose.integer(1, 9)}-1{choose.integer(0, 9)}T12:00:00Z"
    elif fmt == "date":
        text = f"2026-0{choose.integer(1, 9)}-1{choose.integer(0, 9)}"
    elif fmt == "email":
        text = choose.choice(["user@example.com", "a@b.co"])
    elif fmt in ("uri", "url"):
        text = choose.choice(["https://example.com/", "https://example.com/a?b=1"])
    elif fmt == "uuid":
        text = f"00000000-0000-4000-8000-{choose.integer(0, 10**12 - 1):012d}"
    elif words.words and choose.chance(0.7):
        # identifiers (an order id, a path) are what arguments are made of, more than prose
        ids = [w for w in words.words if any(c.isdigit() for c in w) or "_" in w or "/" in w]
        text = choose.choice(ids if ids and choose.chance(0.5) else words.words)
    else:
        text = choose.choice(_FALLBACK_STRINGS)
    if len(text) < lo:
        text = text + "x" * (lo - len(text))
    return text[:hi] if hi >= lo else text


def _bounds(s: Mapping[str, Any], default: float) -> tuple[float, float]:
    lo = s.get("minimum", s.get("exclusiveMinimum", -default))
    hi = s.get("maximum", s.get("exclusiveMaximum", default))
    lo = float(lo) if isinstance(lo, int | float) else -default
    hi = float(hi) if isinstance(hi, int | float) else default
    return lo, max(lo, hi)


def _integer(s: Mapping[str, Any], choose: Chooser, words: Vocabulary) -> int:
    lo_f, hi_f = _bounds(s, 1000.0)
    lo, hi = math.ceil(lo_f), math.floor(hi_f)
    if "exclusiveMinimum" in s and lo == lo_f:
        lo += 1
    if "exclusiveMaximum" in s and hi == hi_f:
        hi -= 1
    hi = max(lo, hi)
    seen = [int(n) for n in words.numbers if n == int(n) and lo <= n <= hi]
    if seen and choose.chance(0.6):
        value = choose.choice(seen)
    else:
        pick = choose.weighted([("small", 2.0), ("low", 1.0), ("high", 1.0), ("any", 4.0)])
        if pick == "small":
            value = max(lo, min(hi, 1))
        elif pick == "low":
            value = lo
        elif pick == "high":
            value = hi
        else:
            value = choose.integer(lo, hi)
    step = s.get("multipleOf")
    if isinstance(step, int) and step > 0:
        value = max(lo, min(hi, value - value % step))
    return value


def _number(s: Mapping[str, Any], choose: Chooser, words: Vocabulary) -> float:
    lo, hi = _bounds(s, 1000.0)
    seen = [n for n in words.numbers if lo <= n <= hi]
    if seen and choose.chance(0.6):
        return float(choose.choice(seen))
    return round(choose.real(lo, hi), 3)


#: A value of another JSON type for each type (what a careless model sends instead), none of
#: which a lax validator coerces either (pydantic takes ``True`` for an integer, ``"yes"`` and
#: ``1`` for a boolean: those would test nothing).
_WRONG: Final[dict[str, tuple[Any, ...]]] = {
    "string": (42, True, ["a"], {"value": "a"}, None),
    "integer": ("seven", 1.5, [1], {"n": 1}, None),
    "number": ("1.5 kg", "", [2.0], None),
    "boolean": ("maybe", 2, [True], None),
    "array": ("a, b", 3, {"0": "a"}),
    "object": ("{}", [["k", "v"]], 0),
    "null": ("null", 0),
}


def wrong_value(schema: Any, choose: Chooser, root: Mapping[str, Any] | None = None) -> Any:
    """A value of a JSON type ``schema`` does not allow (or out of its enum or range)."""
    top = root if root is not None else (schema if isinstance(schema, Mapping) else {})
    s = _resolve(schema, top)
    enum = s.get("enum")
    if isinstance(enum, list) and enum:
        return choose.choice(["not-one-of-them", 12345])
    types = _types(s) or ["string"]
    options = [v for t in types for v in _WRONG.get(t, ()) if not _is_type(v, types)]
    return choose.choice(options) if options else {"unexpected": True}


def _is_type(value: Any, types: Sequence[str]) -> bool:
    names = {
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        list: "array",
        dict: "object",
        type(None): "null",
    }
    name = names.get(type(value), "")
    return name in types or (name == "integer" and "number" in types)


def valid_arguments(
    parameters: Mapping[str, Any], choose: Chooser, words: Vocabulary = _NO_WORDS
) -> dict[str, Any]:
    """Arguments ``parameters`` (an object schema) accepts."""
    value = schema_value(parameters, choose, words, root=parameters)
    return value if isinstance(value, dict) else {}


def broken_arguments(
    parameters: Mapping[str, Any], choose: Chooser, words: Vocabulary = _NO_WORDS
) -> dict[str, Any]:
    """Arguments with one property of the wrong type (or, with no properties, one the schema
    does not describe)."""
    arguments = valid_arguments(parameters, choose, words)
    props = _resolve(parameters, parameters).get("properties")
    names = sorted(props) if isinstance(props, Mapping) else []
    if not names:
        return {**arguments, "unexpected_argument": choose.choice([1, "x", True])}
    name = choose.choice(names)
    assert isinstance(props, Mapping)
    arguments[name] = wrong_value(props[name], choose, parameters)
    return arguments


def missing_arguments(
    parameters: Mapping[str, Any], choose: Chooser, words: Vocabulary = _NO_WORDS
) -> dict[str, Any] | None:
    """Arguments without one of the required properties; None when nothing is required."""
    required = list(_resolve(parameters, parameters).get("required") or ())
    if not required:
        return None
    arguments = valid_arguments(parameters, choose, words)
    arguments.pop(choose.choice(required), None)
    return arguments
