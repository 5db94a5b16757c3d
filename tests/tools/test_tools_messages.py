"""The model-facing failure texts, which a simulator reuses to fake identical results."""

from __future__ import annotations

import pytest

from loopctl.tools.dispatch import (
    cancelled_message,
    denied_message,
    describe_exception,
    raised_message,
    timed_out_message,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (describe_exception(ValueError("bad")), "ValueError: bad"),
        (describe_exception(KeyError()), "KeyError"),
        (raised_message("x", OSError("disk full")), "tool 'x' raised OSError: disk full"),
        (timed_out_message("x", 2), "tool 'x' timed out after 2.0 s"),
        (timed_out_message("x", 0.05), "tool 'x' timed out after 0.05 s"),
        (denied_message("x", "read-only"), "tool 'x' was denied: read-only"),
        (cancelled_message("x"), "tool 'x' was cancelled"),
    ],
)
def test_messages(text: str, expected: str) -> None:
    assert text == expected
