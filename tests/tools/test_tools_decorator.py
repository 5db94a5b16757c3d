"""``@tool``: schemas from type hints, descriptions from docstrings, validation, execution."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import functools
import json
import threading
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from loopctl.api import ToolSpec
from loopctl.tools import Tool, ToolArgumentsError, ToolError, tool
from loopctl.tools.decorator import encode_result


class Point(BaseModel):
    """A point on the plane."""

    x: int
    y: int = 0


class Segment(BaseModel):
    start: Point
    end: Point


@dataclasses.dataclass
class Pair:
    left: int
    right: str


def f_int(n: int) -> int:
    return n


def f_str(s: str) -> str:
    return s


def f_float(x: float) -> float:
    return x


def f_bool(flag: bool) -> bool:
    return flag


def f_list(items: list[str]) -> int:
    return len(items)


def f_optional(label: str | None) -> str:
    return str(label)


def f_defaults(n: int = 3, label: str = "a", ratio: float | None = None) -> str:
    return f"{n}{label}{ratio}"


def f_model(point: Point) -> int:
    return point.x


def f_nested(segment: Segment) -> int:
    return segment.end.x


def f_mixed(query: str, limit: int = 10) -> str:
    return query


NULLABLE_STR = {"anyOf": [{"type": "string"}, {"type": "null"}]}
POINT = {
    "type": "object",
    "description": "A point on the plane.",
    "properties": {"x": {"type": "integer"}, "y": {"type": "integer", "default": 0}},
    "required": ["x"],
}
SCHEMA_CASES: list[tuple[Any, dict[str, Any], list[str]]] = [
    (f_int, {"n": {"type": "integer"}}, ["n"]),
    (f_str, {"s": {"type": "string"}}, ["s"]),
    (f_float, {"x": {"type": "number"}}, ["x"]),
    (f_bool, {"flag": {"type": "boolean"}}, ["flag"]),
    (f_list, {"items": {"type": "array", "items": {"type": "string"}}}, ["items"]),
    (f_optional, {"label": NULLABLE_STR}, ["label"]),
    (
        f_defaults,
        {
            "n": {"type": "integer", "default": 3},
            "label": {"type": "string", "default": "a"},
            "ratio": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": None},
        },
        [],
    ),
    (f_model, {"point": POINT}, ["point"]),
    (
        f_nested,
        {
            "segment": {
                "type": "object",
                "properties": {"start": POINT, "end": POINT},
                "required": ["start", "end"],
            }
        },
        ["segment"],
    ),
    (
        f_mixed,
        {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        ["query"],
    ),
]


@pytest.mark.parametrize(
    ("fn", "properties", "required"), SCHEMA_CASES, ids=[c[0].__name__ for c in SCHEMA_CASES]
)
def test_schema_from_type_hints(fn: Any, properties: dict[str, Any], required: list[str]) -> None:
    schema = tool(fn).spec.parameters
    assert schema == {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    assert "$defs" not in json.dumps(schema)
    assert "title" not in json.dumps(schema)


def test_spec_is_a_toolspec_named_after_the_function() -> None:
    spec = tool(f_mixed).spec
    assert isinstance(spec, ToolSpec)
    assert spec.name == "f_mixed"


def test_description_is_the_first_paragraph_of_the_docstring() -> None:
    @tool
    def search(query: str) -> str:
        """Search the web
        for pages.

        Returns the top ten hits. This second paragraph is not sent.
        """
        return query

    assert search.description == "Search the web for pages."
    assert search.spec.description == "Search the web for pages."


def test_no_docstring_gives_an_empty_description() -> None:
    assert tool(f_int).description == ""


def test_explicit_name_and_description_win() -> None:
    @tool(name="find", description="Find things.")
    def search(query: str) -> str:
        """Not this."""
        return query

    assert (search.name, search.description) == ("find", "Find things.")
    assert search.spec.name == "find"


def test_parameter_descriptions_from_args_section_and_annotated() -> None:
    @tool
    def fetch(
        url: str, retries: int = 2, mode: Annotated[str, Field(description="A.")] = "x"
    ) -> str:
        """Fetch a page.

        Args:
            url (str): the address to fetch,
                including the scheme.
            retries: how many times to retry.
            mode: ignored, the annotation's description wins.
        """
        return url

    props = fetch.spec.parameters["properties"]
    assert props["url"]["description"] == "the address to fetch, including the scheme."
    assert props["retries"]["description"] == "how many times to retry."
    assert props["mode"]["description"] == "A."
    assert fetch.description == "Fetch a page."


def test_recursive_models_keep_only_the_definitions_they_need() -> None:
    schema = tool(_walk).spec.parameters
    assert schema["properties"]["node"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    assert set(schema["$defs"]) == {"Node"}


class Node(BaseModel):
    value: int
    children: list[Node] = []


def _walk(node: Node) -> int:
    return node.value + sum(_walk(c) for c in node.children)


def test_parameter_names_that_clash_with_basemodel_attributes() -> None:
    @tool
    def odd(json: str, copy: int, model_config: bool = False) -> str:
        return f"{json}-{copy}-{model_config}"

    assert odd.spec.parameters["required"] == ["json", "copy"]
    assert asyncio.run(odd.run({"json": "j", "copy": 2})) == "j-2-False"


def test_tool_stays_callable_like_the_function() -> None:
    add = tool(_add)
    assert isinstance(add, Tool)
    assert add(2, 3) == 5
    assert add.__name__ == "_add"
    assert add.__doc__ == "Add two numbers."


def _add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_async_tool_called_directly_returns_a_coroutine() -> None:
    @tool
    async def double(n: int) -> int:
        return 2 * n

    assert double.is_async
    assert await double(4) == 8
    assert await double.run({"n": "5"}) == "10"


async def test_sync_tool_runs_in_a_worker_thread() -> None:
    @tool
    def where() -> bool:
        return threading.current_thread() is threading.main_thread()

    assert not where.is_async
    assert await where.run({}) == "false"


async def test_positional_only_parameters_are_passed_positionally() -> None:
    @tool
    def power(base: int, /, exp: int = 2) -> int:
        return int(base**exp)

    assert await power.run({"base": 3}) == "9"


async def test_validated_arguments_are_converted_to_the_annotated_types() -> None:
    @tool
    def describe(point: Point, pair: Pair, tags: list[str]) -> str:
        assert isinstance(point, Point) and isinstance(pair, Pair)
        return f"{point.x},{point.y} {pair.left}{pair.right} {tags}"

    out = await describe.run({"point": {"x": "1"}, "pair": {"left": 2, "right": "r"}, "tags": []})
    assert out == "1,0 2r []"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain text", "plain text"),
        ("", ""),
        (42, "42"),
        (1.5, "1.5"),
        (None, "null"),
        (True, "true"),
        ({"a": [1, 2]}, '{"a": [1, 2]}'),
        ([1, "x"], '[1, "x"]'),
        (Point(x=1), '{"x": 1, "y": 0}'),
        (Pair(left=1, right="é"), '{"left": 1, "right": "é"}'),
    ],
)
def test_encode_result(value: Any, expected: str) -> None:
    assert encode_result("t", value) == expected


class Level(enum.IntEnum):
    LOW = 1


@given(st.integers() | st.booleans() | st.sampled_from(Level))
def test_an_int_result_is_written_as_json_writes_it(value: int) -> None:
    # an int is written without the encoder; a bool or an IntEnum member goes the long way
    assert encode_result("t", value) == json.dumps(value)


def test_an_int_too_long_to_write_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match=r"type int that cannot be encoded as JSON: Exceeds"):
        encode_result("t", 10**5000)


def test_encode_result_of_an_unencodable_value_is_a_tool_error() -> None:
    with pytest.raises(
        ToolError, match=r"tool 't' returned a value of type object that cannot be encoded"
    ):
        encode_result("t", object())


VALIDATION_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"query": "q", "limit": "many"}, ["- limit: Input should be a valid integer", '(got "many")']),
    ({}, ["- query: missing (required)"]),
    ({"query": "q", "lmit": 3}, ["- lmit: unexpected argument"]),
    ({"query": ["a", "b"]}, ["- query: Input should be a valid string", '(got ["a", "b"])']),
]


@pytest.mark.parametrize(("arguments", "fragments"), VALIDATION_CASES)
def test_validation_errors_name_the_argument_and_the_problem(
    arguments: dict[str, Any], fragments: list[str]
) -> None:
    mixed = tool(f_mixed)
    with pytest.raises(ToolArgumentsError) as info:
        mixed.parse_arguments(arguments)
    message = str(info.value)
    assert message.startswith("invalid arguments for tool 'f_mixed':\n")
    for fragment in fragments:
        assert fragment in message


def test_validation_error_in_a_nested_model_names_the_path() -> None:
    with pytest.raises(ToolArgumentsError, match=r"- segment\.end\.x: Input should be a valid"):
        tool(f_nested).parse_arguments({"segment": {"start": {"x": 1}, "end": {"x": "far"}}})


def test_long_inputs_are_shortened_in_error_messages() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        tool(f_int).parse_arguments({"n": "x" * 500})
    assert "..." in str(info.value)
    assert len(str(info.value)) < 200


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "has space"}, "is not valid"),
        ({"name": ""}, "is not valid"),
        ({"name": "x" * 65}, "is not valid"),
        ({"timeout": 0}, "timeout must be positive"),
        ({"timeout": -1.0}, "timeout must be positive"),
    ],
)
def test_bad_decorator_options_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tool(**kwargs)(f_int)


def test_var_args_are_rejected() -> None:
    def loose(*args: int, **kwargs: int) -> int:
        return 0

    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs are not supported"):
        tool(loose)


def test_unresolvable_hints_are_a_clear_type_error() -> None:
    def broken(x: NotDefinedAnywhere) -> int:  # type: ignore[name-defined]  # noqa: F821
        return 0

    with pytest.raises(TypeError, match="cannot resolve the type hints"):
        tool(broken)


def test_options_are_kept() -> None:
    slow = tool(timeout=2.5, parallel_safe=False)(f_int)
    assert (slow.timeout, slow.parallel_safe) == (2.5, False)
    assert (tool(f_int).timeout, tool(f_int).parallel_safe) == (None, True)


class Counter:
    """Count things."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, n: int) -> int:
        """Add to the running total."""
        self.total += n
        return self.total

    async def __call__(self, label: str) -> str:
        return label.upper()


async def test_bound_methods_partials_and_callable_objects_are_tools() -> None:
    counter = Counter()
    method = tool(counter.add)
    assert (method.name, method.description) == ("add", "Add to the running total.")
    assert method.spec.parameters["required"] == ["n"]
    assert await method.run({"n": 2}) == "2"

    partial = tool(name="fixed_limit")(functools.partial(f_mixed, limit=5))
    assert partial.spec.parameters["properties"]["limit"] == {"type": "integer", "default": 5}
    assert await partial.run({"query": "q"}) == "q"

    obj = tool(name="shout")(counter)
    assert obj.is_async
    assert obj.description == "Count things."
    assert await obj.run({"label": "hi"}) == "HI"


def test_a_callable_without_a_name_needs_name() -> None:
    with pytest.raises(ValueError, match=r"has no __name__: give the tool one with name="):
        tool(functools.partial(f_mixed, limit=5))


def test_redecorating_a_tool_wraps_the_original_function() -> None:
    first = tool(f_int)
    second = tool(name="renamed", timeout=1.0)(first)
    assert second.fn is f_int
    assert (second.name, second.timeout) == ("renamed", 1.0)
    assert second.spec.parameters == first.spec.parameters
