"""The brain's fields (``LoopMachine.STATE_SLOTS``), views and saved-form entry points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from brain_helpers import BY_STATE, committed, warned

from loopctl import LoopMachine
from loopctl.core.values import is_count

MACHINES: dict[str, Callable[[], LoopMachine]] = {
    "fresh": LoopMachine,
    **BY_STATE,
    "warned": warned,
    "committed": committed,
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, True),
        (1, True),
        (10**12, True),
        (-1, False),
        (True, False),  # a bool is an int to Python, not a count
        (False, False),
        (1.0, False),
        ("3", False),
        (None, False),
    ],
)
def test_is_count(value: object, expected: bool) -> None:
    assert is_count(value) is expected


def test_an_int_subclass_is_a_count() -> None:
    class Tokens(int):
        pass

    assert is_count(Tokens(5)) and not is_count(Tokens(-5))


@pytest.mark.parametrize("build", MACHINES.values(), ids=list(MACHINES))
def test_both_ways_of_making_a_machine_set_every_field(build: Callable[[], LoopMachine]) -> None:
    """The constructor and ``from_snapshot`` each set every slot (none left unset), and a
    ``LoopMachine`` has no instance dict: the subclass adds no field of its own."""
    m = build()
    restored = LoopMachine.from_snapshot(m.snapshot())
    for machine in (m, restored):
        assert not hasattr(machine, "__dict__")
        for slot in LoopMachine.__slots__:
            getattr(machine, slot)  # raises AttributeError if a path forgot one
    assert restored == m
    assert type(restored) is LoopMachine
    assert LoopMachine.model_validate_json(m.model_dump_json()) == m


def test_the_state_slots_are_the_snapshot_fields() -> None:
    """Equality, snapshots and the digest cover exactly ``STATE_SLOTS``: one per snapshot field,
    no more."""
    snapshot_fields = set(LoopMachine().snapshot().model_dump()) - {"format", "version"}
    assert {s.lstrip("_") for s in LoopMachine.STATE_SLOTS} == snapshot_fields


def test_equality_covers_the_state_not_the_caches() -> None:
    a, b = BY_STATE["awaiting_tools"](), BY_STATE["awaiting_tools"]()
    a.digest()  # fills a's saved-form cache only
    assert a == b
    b.set_context_tokens(b.context_tokens + 1)
    assert a != b
    assert a.__eq__(object()) is NotImplemented
    with pytest.raises(TypeError):
        hash(a)


def _finished_run(machine: LoopMachine, text: str, modern: bool) -> LoopMachine:
    from loopctl import MachinePolicy, Message, ToolCall, ToolResult
    from loopctl.core import ThinkingPart

    policy = MachinePolicy(tools=("add",))
    machine.accept_input(text)
    machine.next_step(policy)
    parts: list[object] = [ToolCall(id=f"c-{text}", name="add", arguments={"a": 1})]
    if modern:
        parts.insert(0, ThinkingPart(provider="anthropic", text="hm", signature="s"))
    machine.model_response(Message(role="assistant", parts=tuple(parts)), 10)
    machine.next_step(policy)
    machine.tool_results(
        Message.from_results([ToolResult(call_id=f"c-{text}", name="add", content="2")])
    )
    machine.next_step(policy)
    machine.model_response(Message.assistant(f"done {text}"), 12)
    machine.next_step(policy)
    machine.commit_pending()
    return machine


@pytest.mark.parametrize("digest_between", [True, False])
@pytest.mark.parametrize("modern", [False, True])
def test_the_next_runs_brain_carries_the_historys_json_and_digests_the_same(
    digest_between: bool, modern: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """next_run() hands the next brain the JSON already encoded of its history: its digest,
    checksum and saved text are a from-scratch brain's, and no message is encoded again."""
    from loopctl.core import _saved

    machine = LoopMachine()
    for run in range(3):
        machine = _finished_run(machine, f"run {run}", modern and run == 1)
        if digest_between:
            machine.digest()
        else:
            machine.model_dump_json()
        encodes: list[object] = []

        def counted(
            m: object, real: Any = _saved._MESSAGE_JSON, seen: list[object] = encodes
        ) -> Any:
            seen.append(m)
            return real(m)

        monkeypatch.setattr(_saved, "_MESSAGE_JSON", counted)
        fresh = machine.next_run()
        digest, checksum, text = fresh.digest(), fresh.checksum(), fresh.model_dump_json()
        monkeypatch.undo()
        assert encodes == []  # the history's JSON came with it
        scratch = LoopMachine(machine.messages(), machine.context_tokens)
        assert (digest, checksum, text) == (
            scratch.digest(),
            scratch.checksum(),
            scratch.model_dump_json(),
        )
        assert LoopMachine.model_validate_json(text) == fresh
        machine = fresh
