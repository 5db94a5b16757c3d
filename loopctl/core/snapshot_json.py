"""The snapshot's JSON from its parts, byte for byte what ``MachineSnapshot`` writes.

A brain's digest is taken after every feed and its save after every turn, so neither serializes
the snapshot model: ``snapshot_json`` joins the messages' cached JSON (``encoding.JsonCache``)
between the format's heads, and ``EndEncoder`` writes the few bytes after the last message (the
state and the small fields), keeping the JSON of each part that did not change since the last
time. Tests pin both to pydantic's own JSON of the snapshot model. Bytes only: nothing here
validates (``snapshot.py`` does).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from pydantic import BaseModel
from pydantic_core import to_json

from loopctl.core.encoding import is_modern
from loopctl.core.seal import HISTORY_HEAD, PENDING_HEAD, SEALED_HEAD, checksum_tail
from loopctl.core.steps import AwaitingModel, AwaitingTools, MachineState, Start

__all__ = ["EndEncoder", "snapshot_json", "state_json"]


def _model_json(model: Any) -> bytes:
    """A pydantic model's JSON, as its own serializer writes it."""
    data: bytes = type(model).__pydantic_serializer__.to_json(model)
    return data


_JSON: Final = to_json
_BOOL: Final = (b"false", b"true")
#: The snapshot's JSON after pending, as one format (one ``%`` is half the time of a join).
_END: Final = (
    b'],"state":%b,"turns_taken":%d,"context_tokens":%d,"exchange":%b,"advertised":%b,'
    b'"started":%b,"finalized":%b,"noop_floor":%b,"loop":{"calls":%b,"unjudged":%d,"warned":%b}}'
)


#: A character JSON escapes (pydantic writes everything else as is).
_ESCAPED: Final = re.compile(r'["\\\x00-\x1f]')

#: The JSON of the states a turn passes through, by exact type (pinned to pydantic's by tests).
_TURN_STATE_JSON: Final[dict[type, bytes]] = {
    AwaitingModel: b'{"kind":"awaiting_model","turn":%d}',
    AwaitingTools: b'{"kind":"awaiting_tools","turn":%d}',
}
_START_JSON: Final = b'{"kind":"start"}'


def state_json(state: MachineState) -> bytes:
    """``state``'s JSON: the common states from a format, the rest from pydantic."""
    kind = type(state)
    if kind is Start:
        return _START_JSON
    fmt = _TURN_STATE_JSON.get(kind)
    if fmt is not None:
        turn = state.turn  # type: ignore[union-attr]
        if type(turn) is int:
            return fmt % turn
    return _model_json(state)


class EndEncoder:
    """The snapshot's JSON after the last pending message (the state and the small fields),
    byte for byte what ``MachineSnapshot`` writes; a few bytes, written at every digest.

    The state, the exchange, the advertised names and the loop window change less often than
    the digest is taken: each one's JSON is kept while the brain holds the same object.
    Tests pin the result to the snapshot model's own JSON.
    """

    __slots__ = (
        "advertised",
        "advertised_json",
        "calls",
        "calls_escaped",
        "calls_json",
        "calls_last",
        "calls_len",
        "exchange",
        "exchange_json",
        "state",
        "state_json",
    )

    def __init__(self) -> None:
        self.state: object = None
        self.state_json = b""
        self.exchange: object = None
        self.exchange_json = b"null"
        self.advertised: object = None
        self.advertised_json = b"[]"
        self.calls: object = None  # the window's list as last encoded, its length and last key
        self.calls_len = 0
        self.calls_last: object = None
        self.calls_escaped = False  # a key of this window needs escaping: pydantic writes it
        self.calls_json = b"[]"

    def encode(
        self,
        state: MachineState,
        turns_taken: int,
        context_tokens: int,
        exchange: BaseModel | None,
        advertised: tuple[str, ...],
        started: bool,
        finalized: bool,
        noop_floor: int | None,
        loop_calls: Sequence[str],
        loop_unjudged: int,
        loop_warned: bool,
    ) -> bytes:
        if state is not self.state:
            self.state = state
            self.state_json = state_json(state)
        if exchange is not self.exchange:
            self.exchange = exchange
            self.exchange_json = b"null" if exchange is None else _model_json(exchange)
        if advertised is not self.advertised:
            if advertised != self.advertised:  # drivers hand in equal tuples, turn after turn
                self.advertised_json = _JSON(advertised)
            self.advertised = advertised
        if (
            loop_calls is not self.calls
            or len(loop_calls) != self.calls_len
            or (loop_calls and loop_calls[-1] is not self.calls_last)
        ):
            self._encode_calls(loop_calls)
        return _END % (
            self.state_json,
            turns_taken,
            context_tokens,
            self.exchange_json,
            self.advertised_json,
            _BOOL[started],
            _BOOL[finalized],
            b"null" if noop_floor is None else b"%d" % noop_floor,
            self.calls_json,
            loop_unjudged,
            _BOOL[loop_warned],
        )

    def _encode_calls(self, calls: Sequence[str]) -> None:
        """Bring the window's JSON up to date.

        The brain changes its window in place, in one way only: it appends an exchange's freshly
        built keys (new objects) and trims the front. So the list, its length and its last key
        (held here, so no other object can take its address) tell whether it changed, and the
        keys after the last one seen are the new ones. A key is a tool name and a hex hash:
        joined with ``","`` the keys are the JSON list itself, unless a name holds a character
        JSON escapes (a quote, a backslash, a control character). Only new keys are checked for
        those; once one is seen, this window is left to pydantic key by key.
        """
        if calls is self.calls and self.calls_last is not None and not self.calls_escaped:
            last = self.calls_last
            i = len(calls) - 1
            while i >= 0 and calls[i] is not last:
                i -= 1
            new = calls[i + 1 :]
        else:
            new = calls
            self.calls_escaped = False
        if not self.calls_escaped and any(_ESCAPED.search(key) for key in new):
            self.calls_escaped = True
        self.calls = calls
        self.calls_len = len(calls)
        self.calls_last = calls[-1] if calls else None
        if self.calls_escaped:
            self.calls_json = b"[" + b",".join(map(_JSON, calls)) + b"]"
        else:
            self.calls_json = b'["' + '","'.join(calls).encode() + b'"]' if calls else b"[]"


def snapshot_json(
    history: Sequence[bytes], pending: Sequence[bytes], end: bytes, checksum: str | None = None
) -> bytes:
    """The snapshot's JSON from its parts, byte for byte what ``MachineSnapshot`` would write.

    ``history`` and ``pending`` are the JSON of each message (cached by the machine), so a
    long conversation is joined, not serialized again; ``end`` is ``EndEncoder``'s. The head names
    version 2 when a message's JSON is ``Modern``. With ``checksum`` (the sha256 of those very
    bytes), the snapshot is written sealed instead: version 3, the checksum last.
    """
    if checksum is not None:
        head = SEALED_HEAD
        end = end[:-1] + checksum_tail(checksum)
    elif is_modern(history) or is_modern(pending):
        head = HISTORY_HEAD.modern
    else:
        head = HISTORY_HEAD
    return b"".join((head, b",".join(history), PENDING_HEAD, b",".join(pending), end))
