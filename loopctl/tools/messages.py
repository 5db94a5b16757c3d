"""The texts the model reads when a tool call goes wrong, in one place.

They are part of the observable behaviour (traces record them, the model reacts to them), so a
simulator that fakes tool failures can build byte-identical results from these functions
instead of copying the wording.
"""

from __future__ import annotations

__all__ = [
    "cancelled_message",
    "denied_message",
    "describe_exception",
    "raised_message",
    "timed_out_message",
]


def describe_exception(exc: BaseException) -> str:
    """``ValueError: bad input``, or just ``ValueError`` when the exception has no text."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def timed_out_message(name: str, seconds: float) -> str:
    return f"tool '{name}' timed out after {float(seconds)} s"


def raised_message(name: str, exc: BaseException) -> str:
    return f"tool '{name}' raised {describe_exception(exc)}"


def denied_message(name: str, reason: str) -> str:
    return f"tool '{name}' was denied: {reason}"


def cancelled_message(name: str) -> str:
    """A tool that raised ``CancelledError`` on its own (not a cancel of the run)."""
    return f"tool '{name}' was cancelled"
