"""``MachineData``, the brain's fields and their saved forms, and ``prebuilt``, the states and
steps every machine shares: what the split of ``machine.py`` must keep true."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from brain_helpers import BY_STATE, POLICY, answer, ask, call, committed, warned

from loopctl import LoopMachine
from loopctl.core.machine_data import MachineData, is_count
from loopctl.core.prebuilt import (
    EARLY_TURNS,
    START,
    awaiting_model,
    awaiting_tools,
    call_llm,
)
from loopctl.core.steps import AwaitingModel, AwaitingTools, CallLLM, Start

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
        for slot in MachineData.__slots__:
            getattr(machine, slot)  # raises AttributeError if a path forgot one
    assert restored == m
    assert type(restored) is LoopMachine
    assert LoopMachine.model_validate_json(m.model_dump_json()) == m


def test_the_state_slots_are_the_snapshot_fields() -> None:
    """Equality, snapshots and the digest cover exactly ``STATE_SLOTS``: one per snapshot field
    (the loop window's three are one field, ``loop``), no more."""
    snapshot_fields = set(LoopMachine().snapshot().model_dump()) - {"format", "version", "loop"}
    slots = {s.lstrip("_") for s in MachineData.STATE_SLOTS}
    assert slots - {"loop_calls", "loop_unjudged", "loop_warned"} == snapshot_fields


def test_equality_covers_the_state_not_the_caches() -> None:
    a, b = BY_STATE["awaiting_tools"](), BY_STATE["awaiting_tools"]()
    a.digest()  # fills a's caches only
    assert a == b and a._history_json is not None and b._history_json is None
    b.set_context_tokens(b.context_tokens + 1)
    assert a != b
    assert a.__eq__(object()) is NotImplemented
    with pytest.raises(TypeError):
        hash(a)


def test_a_fresh_machine_starts_in_the_shared_start() -> None:
    assert LoopMachine().state is START and isinstance(START, Start)


@pytest.mark.parametrize(
    ("build", "cls"),
    [(awaiting_model, AwaitingModel), (call_llm, CallLLM), (awaiting_tools, AwaitingTools)],
)
def test_early_turns_are_shared_and_late_turns_are_built_each_time(
    build: Callable[[int], AwaitingModel | CallLLM | AwaitingTools], cls: type
) -> None:
    for turn in (0, 1, EARLY_TURNS - 1):
        value = build(turn)
        assert build(turn) is value  # one instance for every machine
        assert type(value) is cls and value.turn == turn
    late = build(EARLY_TURNS)
    assert type(late) is cls and late.turn == EARLY_TURNS
    assert build(EARLY_TURNS) is not late and build(EARLY_TURNS) == late


def test_two_machines_share_their_early_states_and_steps() -> None:
    machines = [LoopMachine(), LoopMachine()]
    steps = []
    for m in machines:
        m.accept_input("go")
        steps.append(m.next_step(POLICY))
    assert steps[0] is steps[1] and machines[0].state is machines[1].state
    c = call("c1", path="/a")
    for m in machines:
        m.model_response(ask(c), 10)
    assert machines[0].state is machines[1].state is awaiting_tools(1)
    for m in machines:
        m.tool_results(answer(c))
    assert machines[0] == machines[1]


def _finished_run(machine: LoopMachine, text: str, modern: bool) -> LoopMachine:
    from loopctl import MachinePolicy, Message, ToolCall, ToolResult
    from loopctl.core import ThinkingPart

    policy = MachinePolicy(tools=("add",))
    machine.accept_input(text)
    machine.next_step(policy)
    parts: list[object] = [ToolCall(id=f"c-{text}", name="add", arguments={"a": 1})]
    if modern:
        parts.insert(0, ThinkingPart(provider="anthropic", text="hm", signature="s"))
    machine.model_response(Message(role="assistant", parts=tuple(parts)), 10)  # type: ignore[arg-type]
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
    from loopctl.core import encoding

    machine = LoopMachine()
    for run in range(3):
        machine = _finished_run(machine, f"run {run}", modern and run == 1)
        if digest_between:
            machine.digest()
        else:
            machine.model_dump_json()
        encodes: list[object] = []

        def counted(
            m: object, real: Any = encoding.message_json, seen: list[object] = encodes
        ) -> Any:
            seen.append(m)
            return real(m)

        monkeypatch.setattr(encoding, "message_json", counted)
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


def test_a_carried_cache_goes_on_from_the_running_hash_it_had() -> None:
    """``encoding.carried`` copies the history's running hash as well as its JSON: the next
    run's first digest hashes only what came after (it hashed the whole history again, once
    per run: 1.2 ms at 10,000 messages), and the copy is its own (hashing on in one cache
    leaves the other as it was)."""
    import hashlib

    from loopctl import Message
    from loopctl.core.encoding import carried, encoded, sha256_of

    old = [Message.user(f"question {i}") for i in range(5)]
    start = sha256_of(b"[")
    cache = encoded(None, old, start)
    before = cache.chain.hexdigest()
    new = [*old, Message.user("one more")]
    out = carried(cache, old, new)
    assert out is not None and out.hashed == 5 and out.chain is not cache.chain
    assert out.chain.hexdigest() == before
    out = encoded(out, new, start)
    assert out.hashed == 6 and cache.chain.hexdigest() == before
    whole = hashlib.sha256(b"[" + b",".join(out.parts))
    assert out.chain.hexdigest() == whole.hexdigest() == encoded(None, new, start).chain.hexdigest()
