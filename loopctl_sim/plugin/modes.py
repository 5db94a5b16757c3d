"""Record modes: their names and the one the running pytest session asked for.

Kept apart from ``cassettes`` (which imports vcrpy, an optional extra) so the pytest plugin can
offer ``--loopctl-record-mode`` to every user, and code outside a fixture (a test module's
helpers, ``use_cassette`` without ``record_mode=``) can follow the command line.
"""

from __future__ import annotations

from typing import Final

#: pytest-recording's modes (vcrpy's, and ``rewrite``: delete the cassette, record it afresh).
RECORD_MODES: Final = ("none", "once", "new_episodes", "all", "rewrite")

#: The record mode of each pytest session, innermost last (pytester nests sessions).
_SESSION_MODES: list[str] = []


def check_record_mode(mode: str) -> str:
    """``mode`` if it is a record mode, else a ``ValueError`` naming the valid ones."""
    if mode not in RECORD_MODES:
        raise ValueError(f"record mode {mode!r}: use one of {', '.join(RECORD_MODES)}")
    return mode


def current_record_mode() -> str:
    """The running pytest session's ``--loopctl-record-mode`` (``none`` outside pytest)."""
    return _SESSION_MODES[-1] if _SESSION_MODES else "none"


def push_record_mode(mode: str) -> None:
    """The plugin's ``pytest_configure``: this session records as ``mode``."""
    _SESSION_MODES.append(check_record_mode(mode))


def pop_record_mode() -> None:
    """The plugin's ``pytest_unconfigure``."""
    if _SESSION_MODES:
        _SESSION_MODES.pop()
