"""The pure schema and docstring helpers behind ``@tool``."""

from __future__ import annotations

from typing import Any

import pytest

from loopctl.tools.decorator import clean_schema, docstring_params, docstring_summary


def test_refs_are_inlined_with_their_siblings() -> None:
    raw = {
        "$defs": {"P": {"title": "P", "type": "object", "properties": {"x": {"type": "integer"}}}},
        "title": "args",
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/P", "description": "first"},
            "b": {"allOf": [{"$ref": "#/$defs/P"}], "default": None},
        },
        "required": ["a"],
    }
    p = {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert clean_schema(raw) == {
        "type": "object",
        "properties": {"a": {**p, "description": "first"}, "b": {**p, "default": None}},
        "required": ["a"],
    }


def test_a_property_called_title_is_kept() -> None:
    raw = {"type": "object", "properties": {"title": {"title": "Title", "type": "string"}}}
    assert clean_schema(raw) == {
        "type": "object",
        "properties": {"title": {"type": "string"}},
        "required": [],
    }


def test_recursive_definitions_stay_as_references() -> None:
    raw = {
        "$defs": {
            "T": {"type": "object", "properties": {"kids": {"items": {"$ref": "#/$defs/T"}}}}
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/T"}},
    }
    out = clean_schema(raw)
    assert out["properties"]["root"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/T"}
    assert out["$defs"]["T"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/T"}


@pytest.mark.parametrize(
    ("doc", "summary"),
    [
        (None, ""),
        ("", ""),
        ("One line.", "One line."),
        ("First\n    line continues.\n\n    Second paragraph.", "First line continues."),
        ("\n    Leading blank line.\n    ", "Leading blank line."),
    ],
)
def test_docstring_summary(doc: str | None, summary: str) -> None:
    assert docstring_summary(doc) == summary


GOOGLE = """Do it.

    Args:
        path (str): where to look.
        depth: how deep,
            counted in folders.
        *rest: ignored extras.

    Returns:
        path: not a parameter.
    """

SPHINX = """Do it.

    :param path: where to look.
    :param int depth: how deep,
        counted in folders.
    :returns: nothing.
    """


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (None, {}),
        ("No sections here.", {}),
        (
            GOOGLE,
            {
                "path": "where to look.",
                "depth": "how deep, counted in folders.",
                "rest": "ignored extras.",
            },
        ),
        (SPHINX, {"path": "where to look.", "depth": "how deep, counted in folders."}),
    ],
)
def test_docstring_params(doc: str | None, expected: dict[str, Any]) -> None:
    assert docstring_params(doc) == expected
