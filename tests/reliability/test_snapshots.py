"""Damaged snapshots are refused with a clear error; what is restored is what was saved.

- 400 random bit flips of a saved (sealed) snapshot: each is refused or restores the very same
  brain, never another valid one (the unsealed content form, as versions 1 and 2 were written,
  lets some through: that is what the checksum is for).
- A checksum that does not match, a version changed, a checksum dropped: refused, saying why.
- Snapshots written before the checksum (versions 1 and 2) are still read.
- NaN and infinities (``1e999``) in a tool call's arguments or a part's data are refused.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from loopctl import LoopMachine, MachinePolicy, Message, ToolCall, ToolResult
from loopctl.core import MachineSnapshot, ProviderPart, TextPart, ThinkingPart

POLICY = MachinePolicy(tools=("read", "write"))
FLIPS = 400
V1_TRACE = Path(__file__).parents[1] / "traces" / "v1" / "crash_restore.jsonl"


def a_machine(modern: bool = False) -> LoopMachine:
    """A brain a few turns into a run: calls, results, numbers, unicode, a pending exchange."""
    m = LoopMachine([Message.user("earlier ✓"), Message.assistant("noted")])
    m.accept_input("read the files, then write a summary")
    for turn in range(3):
        m.next_step(POLICY)
        call = ToolCall(id=f"c{turn}", name="read", arguments={"path": f"/f{turn}", "n": turn})
        parts: list[object] = [TextPart(text=f"reading {turn}"), call]
        if modern and turn == 0:
            parts.insert(0, ThinkingPart(provider="anthropic", text="hm", signature="sig"))
        m.model_response(Message(role="assistant", parts=tuple(parts)), 100 + turn)
        m.next_step(POLICY)
        m.tool_results(
            Message.from_results([ToolResult(call_id=call.id, name="read", content="x" * turn)])
        )
        m.set_context_tokens(150 + turn)
    m.next_step(POLICY)
    return m


def flipped(text: bytes, rng: random.Random) -> bytes:
    data = bytearray(text)
    i = rng.randrange(len(data))
    data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def restore_outcomes(text: bytes, original: LoopMachine, seed: int) -> dict[str, int]:
    """How each of FLIPS one-bit flips of ``text`` restores: refused, the same brain, another."""
    rng = random.Random(seed)
    counts = {"refused": 0, "same": 0, "different": 0}
    for _ in range(FLIPS):
        try:
            restored = LoopMachine.model_validate_json(flipped(text, rng))
        except ValidationError:
            counts["refused"] += 1
            continue
        counts["same" if restored == original else "different"] += 1
    return counts


@pytest.mark.parametrize("modern", [False, True], ids=["version-1-content", "version-2-content"])
def test_no_bit_flip_of_a_saved_snapshot_restores_another_brain(modern: bool) -> None:
    m = a_machine(modern)
    counts = restore_outcomes(m.model_dump_json().encode(), m, seed=15)
    assert counts["different"] == 0, counts
    assert counts["refused"] + counts["same"] == FLIPS


def test_without_the_checksum_some_flips_restore_another_brain() -> None:
    """The reason for the checksum: the unsealed content (what versions 1 and 2 wrote) passes
    the consistency check with some flips in it (a digit of a count, a letter of a text)."""
    m = a_machine()
    counts = restore_outcomes(m.snapshot().model_dump_json().encode(), m, seed=15)
    assert counts["different"] > 0, counts


#: The ways in, each giving the snapshot it restored: the brain's (its saved form's cache checks
#: the checksum) and the model's own (it serializes the content whole to check it).
DOORS: dict[str, Callable[[str], MachineSnapshot]] = {
    "LoopMachine.model_validate_json": lambda t: LoopMachine.model_validate_json(t).snapshot(),
    "LoopMachine.model_validate": lambda t: LoopMachine.model_validate(json.loads(t)).snapshot(),
    "MachineSnapshot.model_validate_json": MachineSnapshot.model_validate_json,
}


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
def test_a_damaged_snapshot_says_it_is_damaged(door: Callable[[str], MachineSnapshot]) -> None:
    m = a_machine()
    text = m.model_dump_json()
    damaged = text.replace('"reading 1"', '"reading 7"')
    with pytest.raises(ValidationError) as caught:
        door(damaged)
    assert "damaged machine snapshot: its checksum does not match its content" in str(caught.value)
    assert door(json.dumps(json.loads(text), indent=2)) == m.snapshot()  # laid out otherwise


def test_a_version_changed_or_a_checksum_dropped_is_refused() -> None:
    data = json.loads(a_machine().model_dump_json())
    for version in (1, 2):
        with pytest.raises(ValidationError, match=f"a version-{version} snapshot has no checksum"):
            LoopMachine.model_validate_json(json.dumps({**data, "version": version}))
    without = {k: v for k, v in data.items() if k != "checksum"}
    with pytest.raises(ValidationError, match="carries a checksum and this one has none"):
        LoopMachine.model_validate_json(json.dumps(without))


def test_a_sealed_snapshot_laid_out_otherwise_still_restores() -> None:
    """Re-indented or re-ordered, the content is checked by serializing it again."""
    m = a_machine(modern=True)
    data = json.loads(m.model_dump_json())
    pretty = json.dumps(dict(reversed(list(data.items()))), indent=2)
    assert LoopMachine.model_validate_json(pretty) == m
    assert LoopMachine.model_validate_json(m.model_dump_json() + "\n") == m
    assert LoopMachine.model_validate(data) == m  # a dict with its checksum: checked too


def test_the_checksum_seals_the_content_the_digest_hashes() -> None:
    m = a_machine()
    data = json.loads(m.model_dump_json())
    assert data["version"] == 3 and data["checksum"] == m.checksum()
    assert m.checksum()[:16] == m.digest()
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    assert restored.model_dump_json() == m.model_dump_json()
    # the checksum is checked and dropped: a snapshot is the content
    assert MachineSnapshot.model_validate_json(m.model_dump_json()) == m.snapshot()


def test_snapshots_written_before_the_checksum_are_still_read() -> None:
    m = a_machine()
    assert (
        LoopMachine.model_validate_json(m.snapshot().model_dump_json()) == m
    )  # version 1, unsealed
    modern = a_machine(modern=True)
    assert json.loads(modern.snapshot().model_dump_json())["version"] == 2
    assert LoopMachine.model_validate_json(modern.snapshot().model_dump_json()) == modern
    # a header snapshot of a trace recorded in format v1, long before the checksum
    for line in V1_TRACE.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "header" and record["snapshot"] is not None:
            restored = LoopMachine.model_validate_json(json.dumps(record["snapshot"]))
            assert restored.model_dump_json().startswith('{"format":"loopctl-machine","version":3')


NONFINITE = ["NaN", "Infinity", "-Infinity", "1e999", "-1E+400"]


REFUSED = "JSON cannot represent|JSON is malformed|Number out of range"


def _with_number(text: bytes, number: str) -> bytes:
    """``text`` (unsealed content) with the first call's ``n`` replaced by ``number``."""
    assert b'"n":0' in text
    return text.replace(b'"n":0', b'"n":' + number.encode(), 1)


@pytest.mark.parametrize("number", NONFINITE)
def test_a_snapshot_holding_a_number_json_cannot_is_refused(number: str) -> None:
    content = _with_number(a_machine().snapshot().model_dump_json().encode(), number)
    with pytest.raises(ValidationError) as caught:
        LoopMachine.model_validate_json(content)
    # msgspec's reader refuses the token itself (NaN is no JSON; 1e999 is out of range)
    assert re.search(REFUSED, str(caught.value))
    where = str(caught.value)  # a path, or the byte msgspec's reader stopped at
    assert "history" in where or "pending" in where or "byte" in where


def test_python_data_holding_nan_is_refused_too() -> None:
    data = a_machine().model_dump()
    data["pending"][1]["parts"][1]["arguments"]["n"] = float("nan")
    with pytest.raises(ValidationError, match="JSON cannot represent"):
        LoopMachine.model_validate(data)


def test_a_provider_part_holding_infinity_is_refused() -> None:
    m = LoopMachine(
        [
            Message.user("q"),
            Message(role="assistant", parts=(ProviderPart(provider="p", data={"x": 1.0}),)),
        ]
    )
    text = m.snapshot().model_dump_json().encode().replace(b'"x":1.0', b'"x":1e999')
    with pytest.raises(ValidationError, match=REFUSED):
        LoopMachine.model_validate_json(text)
