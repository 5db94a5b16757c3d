"""``dumps_like``: ``json.dumps``'s text, byte for byte, with the encoder built once."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl.core.jsontext import DUMPS, SORTED_DUMPS, dumps_like, loads

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
NON_ASCII = dumps_like(ensure_ascii=False)


@given(JSON)
def test_the_text_is_json_dumps_text(value: Any) -> None:
    assert DUMPS(value) == json.dumps(value)
    assert NON_ASCII(value) == json.dumps(value, ensure_ascii=False)
    assert SORTED_DUMPS(value) == json.dumps(value, sort_keys=True)


@pytest.mark.parametrize(
    "value",
    ['é\n"', 1.5e300, -0.0, math.inf, -math.inf, [1, (2, 3)], {"k": None, "é": "ü"}, 10**30],
)
def test_edge_values(value: Any) -> None:
    assert DUMPS(value) == json.dumps(value)
    assert NON_ASCII(value) == json.dumps(value, ensure_ascii=False)


def test_nan_as_json_dumps_writes_it() -> None:
    assert DUMPS(math.nan) == json.dumps(math.nan) == "NaN"


@pytest.mark.parametrize("value", [object(), {1j: 1}, {"a": {1, 2}}])
def test_what_json_cannot_write_is_a_type_error(value: Any) -> None:
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        DUMPS(value)


TEXTS = st.one_of(
    JSON.map(json.dumps),
    JSON.map(lambda v: json.dumps(v, ensure_ascii=False)),
    st.text(alphabet='{}[]",:0123456789.eE+-truefalsn \\u\n\t', max_size=30),
    st.sampled_from(
        ['{"a": NaN}', '{"a": 1e400}', '{"a": "\\ud800"}', '{"a": 1} x', "", " ", "[1,]", "{"]
    ),
)


def _parsed(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return ("value", parse(text))
    except json.JSONDecodeError as exc:
        return ("error", (exc.msg, exc.pos))


@given(TEXTS)
def test_loads_gives_json_loads_value_or_error(text: str) -> None:
    mine, theirs = _parsed(loads, text), _parsed(json.loads, text)
    assert repr(mine) == repr(theirs)  # repr: NaN is not equal to itself
    if mine[0] == "value":
        assert type(mine[1]) is type(theirs[1])


def test_deep_nesting_is_a_recursion_error_from_loads_as_from_json() -> None:
    text = "[" * 5000 + "]" * 5000
    with pytest.raises(RecursionError):
        json.loads(text)
    with pytest.raises(RecursionError):
        loads(text)
