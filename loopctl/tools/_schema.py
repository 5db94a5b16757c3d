"""From a Python signature to what the model is told: JSON Schema and docstring helpers (pure).

Providers want one self-contained JSON Schema object per tool: ``{"type": "object",
"properties": ..., "required": [...]}``. Pydantic's schemas carry ``$defs`` references and an
auto-generated ``title`` on every field; several providers reject references and the titles are
noise that costs tokens, so both are rewritten here. A recursive model cannot be inlined; its
definitions are kept (only those still referenced) so the schema stays valid.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

__all__ = ["clean_schema", "docstring_params", "docstring_summary"]

_REF_PREFIX = "#/$defs/"


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$defs``, drop auto titles, and always state ``required`` at the top level."""
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    kept: set[str] = set()
    body = {k: v for k, v in schema.items() if k != "$defs"}
    out = _inline(body, defs, (), kept)
    out = _strip_titles(out)
    assert isinstance(out, dict)
    out.setdefault("properties", {})
    out.setdefault("required", [])
    if kept:
        out["$defs"] = _strip_titles(
            {name: _inline(defs[name], defs, (name,), kept) for name in sorted(kept)}
        )
    return out


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: set[str]) -> Any:
    """Replace every local ``$ref`` by its definition, unless that would recurse forever."""
    if isinstance(node, list):
        return [_inline(item, defs, stack, kept) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        name = ref[len(_REF_PREFIX) :]
        if name in stack or name not in defs:
            kept.add(name)
            return {k: _inline(v, defs, stack, kept) for k, v in node.items()}
        target = _inline(defs[name], defs, (*stack, name), kept)
        siblings = {k: _inline(v, defs, stack, kept) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    out = {k: _inline(v, defs, stack, kept) for k, v in node.items()}
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        # pydantic wraps a reference in a one-item allOf when it adds siblings (a default)
        rest = {k: v for k, v in out.items() if k != "allOf"}
        out = {**all_of[0], **rest}
    return out


def _strip_titles(node: Any, *, in_properties: bool = False) -> Any:
    """Drop ``title`` keywords; keys of a ``properties`` map are field names and stay."""
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    if in_properties:
        return {k: _strip_titles(v) for k, v in node.items()}
    return {
        k: _strip_titles(v, in_properties=k in ("properties", "$defs"))
        for k, v in node.items()
        if k != "title"
    }


def docstring_summary(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line: what the model reads about the tool."""
    if not doc:
        return ""
    text = inspect.cleandoc(doc)
    first = re.split(r"\n\s*\n", text, maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines() if line.strip())


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params):\s*$")
_PARAM_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def docstring_params(doc: str | None) -> dict[str, str]:
    """Per-parameter descriptions from a Google-style ``Args:`` section or ``:param x:`` lines.

    The model chooses argument values from these, so they go into each property's
    ``description``. Anything the parser does not recognise is ignored, never an error.
    """
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, str] = {}
    current: str | None = None
    in_section = False
    section_indent = 0
    for raw in lines:
        stripped = raw.strip()
        sphinx = _SPHINX.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            found[current] = sphinx.group(2).strip()
            in_section = False
            continue
        if _SECTION.match(stripped):
            in_section, current, section_indent = True, None, -1
            continue
        if not in_section:
            if current is not None and stripped and raw.startswith((" ", "\t")):
                found[current] = f"{found[current]} {stripped}".strip()
            else:
                current = None
            continue
        if not stripped:
            current = None
            continue
        indent = len(raw) - len(raw.lstrip())
        if section_indent < 0:
            section_indent = indent
        if indent < section_indent or (indent == 0 and section_indent == 0):
            in_section, current = False, None
            continue
        match = _PARAM_LINE.match(stripped) if indent == section_indent else None
        if match:
            current = match.group(1).lstrip("*")
            found[current] = match.group(3).strip()
        elif current is not None:
            found[current] = f"{found[current]} {stripped}".strip()
    return {name: text for name, text in found.items() if text}
