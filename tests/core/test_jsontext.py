"""``dumps_like``: ``json.dumps``'s text, byte for byte, with the encoder built once."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl.core.jsontext import DUMPS, dumps_like

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
