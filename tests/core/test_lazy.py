"""``LazyMessages`` (``loopctl/core/lazy.py``) and the lazy restore of a sealed snapshot.

A verified sealed text restores with its messages held as their JSON, built when first read.
The restored brain must be the eagerly restored one in every observable (decisions, digest,
checksum, saved text, conversation), and what never reads a message must never build one.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from brain_helpers import (
    POLICY,
    SCENARIOS,
    answer,
    ask,
    call,
    exchange_messages,
    reasoning,
    respond,
    tool_turn,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from test_brain_random import ACTIONS

from loopctl import (
    Completed,
    Done,
    LoopError,
    LoopMachine,
    Message,
    ProtocolError,
    TextPart,
)
from loopctl.core.adopted import sealed_parts
from loopctl.core.encoding import Modern, message_json
from loopctl.core.lazy import LazyMessageError, LazyMessages
from loopctl.core.seal import sealed_text

# --- LazyMessages on its own ---------------------------------------------------------------------

MESSAGES = [Message.user("q"), ask(call("c1", path="/a")), answer(call("c1", path="/a"))]


def lazy(messages: list[Message] = MESSAGES) -> LazyMessages:
    return LazyMessages([message_json(m) for m in messages])


def test_nothing_is_built_until_read() -> None:
    seq = lazy()
    assert len(seq) == 3 and seq.unbuilt == 3
    assert seq[-1] == MESSAGES[-1] and seq.unbuilt == 2  # one index: that message alone
    assert seq[0] == MESSAGES[0] and seq.unbuilt == 1
    assert list(seq) == MESSAGES and seq.unbuilt == 0  # a walk: everything left


def test_a_read_message_is_built_once() -> None:
    seq = lazy()
    assert seq[1] is seq[1]
    first = seq[1]
    assert list(seq)[1] is first


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (slice(None), MESSAGES),
        (slice(1, None), MESSAGES[1:]),
        (slice(None, None, -2), [MESSAGES[2], MESSAGES[0]]),
    ],
)
def test_a_slice_is_a_list_as_a_list_would_give(index: slice, expected: list[Message]) -> None:
    seq = lazy()
    assert seq[index] == expected == MESSAGES[index]


def test_an_index_out_of_range_is_an_index_error() -> None:
    with pytest.raises(IndexError):
        lazy()[3]
    with pytest.raises(IndexError):
        lazy()[-4]


def test_growing_and_copying_build_nothing() -> None:
    seq = lazy()
    seq.append(Message.assistant("built"))
    seq.extend([Message.user("more")])
    seq.extend(lazy())  # taken as it is
    assert len(seq) == 8 and seq.unbuilt == 6
    head, copy = seq.head(4), seq.copy()
    assert head.unbuilt == 3 and copy.unbuilt == 6 and seq.unbuilt == 6
    assert list(head) == [*MESSAGES, Message.assistant("built")]
    assert list(copy) == [*MESSAGES, Message.assistant("built"), Message.user("more"), *MESSAGES]
    copy.append(Message.user("only in the copy"))
    assert len(seq) == 8  # a copy is another list


def test_equality_with_lists_tuples_and_other_lazy_sequences() -> None:
    a, b = lazy(), lazy()
    assert a == b and a.unbuilt == b.unbuilt == 3  # the same JSON: equal without building
    assert a == MESSAGES and MESSAGES == a and tuple(MESSAGES) == a  # noqa: SIM300 (reflected)
    assert a != MESSAGES[:2] and a != [*MESSAGES[:2], Message.user("other")]
    assert lazy() != lazy([*MESSAGES[:2], Message.user("other")])
    assert (a == "abc") is False


def test_equal_messages_spelled_otherwise_are_equal() -> None:
    spelled = json.dumps(json.loads(message_json(MESSAGES[1])), indent=1).encode()
    assert LazyMessages([spelled]) == LazyMessages([message_json(MESSAGES[1])])


def test_a_message_that_does_not_validate_is_named_when_read() -> None:
    seq = LazyMessages([message_json(MESSAGES[0]), b'{"role":"robot","parts":[]}'])
    assert seq[0] == MESSAGES[0]
    with pytest.raises(LazyMessageError, match="message 1 of a restored snapshot"):
        seq[1]
    with pytest.raises(LazyMessageError, match="message 1 "):
        list(seq)
    assert seq.unbuilt == 1  # nothing lost: still held as JSON
    bad = LazyMessages([message_json(MESSAGES[0])] * 3 + [b'{"role":"user","parts":[1]}'])
    with pytest.raises(LazyMessageError, match="message 3 "):
        list(bad)


# --- the lazy restore: the same brain as the eager one ---------------------------------------


def _reasoning() -> LoopMachine:
    """A version-2 content (``reasoning``) with a call whose arguments spell a modern part's
    kind (built at restore to be looked at, and marked plain)."""
    m = reasoning()
    tool_turn(m, ask(call("c2", kind="thinking")), 20)
    return m


def _long_mid_run() -> LoopMachine:
    m = LoopMachine(exchange_messages(5))
    m.accept_input("go")
    for i in range(5):
        tool_turn(m, ask(call(f"m{i}", path=f"/{i}"), text=f"turn {i}"), 100 + i)
    return m


def _finish(m: LoopMachine) -> None:
    """A turn that asks for a tool, then the final answer, committed (from ``Start``)."""
    tool_turn(m, ask(call("z1", path="/z")), 500)
    m.next_step(POLICY)
    m.model_response(Message.assistant("done"), 600)
    m.commit_pending()


MACHINES: dict[str, Callable[[], LoopMachine]] = {
    **SCENARIOS,
    "reasoning": _reasoning,
    "long_mid_run": _long_mid_run,
    "long_between_runs": lambda: LoopMachine(exchange_messages(6)),
}


def _eager(text: str) -> LoopMachine:
    """The same text restored with every message built and checked (a dict, not the text)."""
    return LoopMachine.model_validate(json.loads(text))


def _is_lazy(machine: LoopMachine) -> bool:
    return isinstance(machine._history, LazyMessages) and isinstance(machine._pending, LazyMessages)


def _unbuilt(machine: LoopMachine) -> int:
    """How many of the brain's messages are still JSON (a plain list holds none)."""
    return sum(
        seq.unbuilt for seq in (machine._history, machine._pending) if isinstance(seq, LazyMessages)
    )


def _held(machine: LoopMachine) -> int:
    return machine.history_len() + machine.pending_len()


def _read_at_restore(machine: LoopMachine) -> int:
    """What a lazy restore builds: the last pending message when an exchange is in flight (its
    calls are checked against it) and, in a version-2 content, each message whose JSON spells a
    part kind version 1 lacks (to mark its JSON ``Modern``)."""
    spelled = [message_json(m) for m in (*machine.history, *machine.pending)]
    built: set[int] = set()
    if machine.canonical_json().startswith(b'{"format":"loopctl-machine","version":2'):
        kinds = (b'"kind":"thinking"', b'"kind":"provider"')
        built = {i for i, j in enumerate(spelled) if any(k in j for k in kinds)}
    if machine.exchange is not None:
        built.add(len(spelled) - 1)
    return len(built)


@pytest.mark.parametrize("name", list(MACHINES))
def test_a_sealed_text_restores_lazily_as_the_same_brain(name: str) -> None:
    original = MACHINES[name]()
    text = original.model_dump_json()
    restored, eager = LoopMachine.model_validate_json(text), _eager(text)
    assert _is_lazy(restored) and not _is_lazy(eager)
    assert restored.model_dump_json() == eager.model_dump_json() == text
    assert restored.checksum() == eager.checksum() == original.checksum()
    assert restored.canonical_json() == eager.canonical_json()
    assert _unbuilt(restored) == _held(original) - _read_at_restore(original)
    assert restored == eager == original and eager == restored
    assert restored.conversation() == eager.conversation()
    assert restored.history == eager.history and restored.pending == eager.pending
    assert restored.messages() == eager.messages()
    assert restored.snapshot() == eager.snapshot()
    assert repr(restored) == repr(eager)


def _drive(machine: LoopMachine) -> list[object]:
    """This run and the next, driven by the deterministic driver (``respond``), through the exit
    door: every step, the digest after every feed and the saved text after each run."""
    seen: list[object] = []
    for _ in range(2):
        if not machine.started:
            machine.accept_input("again")
        for _ in range(12):
            step = machine.next_step(POLICY)
            seen.append(step)
            if isinstance(step, Done):
                if not machine.finalized:
                    if isinstance(step.outcome, Completed):
                        machine.commit_pending()
                    else:
                        machine.discard_pending()
                break
            respond(machine, step)
            seen.append(machine.digest())
        seen.append(machine.model_dump_json())
        machine = machine.next_run()
    return seen


@pytest.mark.parametrize("name", list(MACHINES))
def test_a_lazily_restored_brain_decides_as_the_eager_one(name: str) -> None:
    text = MACHINES[name]().model_dump_json()
    restored = LoopMachine.model_validate_json(text)
    assert _is_lazy(restored)
    assert _drive(restored) == _drive(_eager(text)) == _drive(MACHINES[name]())


def test_what_never_reads_a_message_builds_none() -> None:
    """Save, digest, next_step, the feeds of a run, the exit door and the next run: the restored
    brain's messages stay JSON (the test fails if the restore builds them, or any of these)."""
    original = _long_mid_run()
    text = original.model_dump_json()
    held = original.history_len() + original.pending_len()
    m = LoopMachine.model_validate_json(text)
    assert _unbuilt(m) == held
    assert m.model_dump_json() == text
    m.digest()
    assert m.next_step(POLICY) == original.next_step(POLICY)  # back in Start: turn 6 asked
    m.model_response(ask(call("z0", path="/z")), 400)
    m.next_step(POLICY)
    m.tool_results(answer(call("z0", path="/z")))
    m.digest()
    _finish(m)
    fresh = m.next_run()
    assert _unbuilt(m) == held
    assert isinstance(fresh._history, LazyMessages) and fresh._history.unbuilt == held
    fresh.accept_input("next")
    fresh.digest()
    fresh.model_dump_json()
    assert fresh._history.unbuilt == held
    # a commit moved pending's JSON onto history: the save is the eager brain's
    eager = _eager(text)
    eager.next_step(POLICY)
    eager.model_response(ask(call("z0", path="/z")), 400)
    eager.next_step(POLICY)
    eager.tool_results(answer(call("z0", path="/z")))
    _finish(eager)
    assert m.model_dump_json() == eager.model_dump_json()
    assert m.history == eager.history  # read at last: built, and equal


def test_the_exit_door_after_a_failure_reads_only_the_tail() -> None:
    original = _long_mid_run()
    m = LoopMachine.model_validate_json(original.model_dump_json())
    m.fail(LoopError(kind="network", message="down"))
    original.fail(LoopError(kind="network", message="down"))
    m.discard_pending()
    original.discard_pending()
    assert _unbuilt(m) >= original.history_len() - 2
    assert m.model_dump_json() == original.model_dump_json()


def test_a_version_2_content_marks_only_its_modern_messages() -> None:
    original = _reasoning()
    restored = LoopMachine.model_validate_json(original.model_dump_json())
    assert restored._pending_json is not None
    kinds = [type(b) for b in restored._pending_json.parts]
    assert kinds == [type(message_json(m)) for m in original.pending]
    assert kinds.count(Modern) == 1
    assert restored.digest() == original.digest()


# --- what is not restored lazily -------------------------------------------------------------


def test_an_unsealed_or_respelled_text_is_validated_whole() -> None:
    original = MACHINES["long_mid_run"]()
    text = original.model_dump_json()
    for other in (
        original.snapshot().model_dump_json(),  # the content, unsealed
        json.dumps(json.loads(text), indent=1),  # another layout, the same checksum
    ):
        restored = LoopMachine.model_validate_json(other)
        assert not isinstance(restored._history, LazyMessages)
        assert restored == original and restored.model_dump_json() == text


def test_small_fields_in_another_layout_sealed_again_are_validated_whole() -> None:
    original = MACHINES["awaiting_tools"]()
    content = original.canonical_json().replace(b'"turns_taken":', b'"turns_taken": ')
    restored = LoopMachine.model_validate_json(sealed_text(content))
    assert not isinstance(restored._history, LazyMessages)
    assert restored == original and restored.model_dump_json() == original.model_dump_json()


def _resealed(machine: LoopMachine, edit: Callable[[bytes], bytes]) -> bytes:
    """``machine``'s content edited, and sealed again with a checksum of the edit: a deliberate
    forgery (accidental damage never carries a matching checksum)."""
    return sealed_text(edit(machine.canonical_json()))


def test_an_inconsistent_state_sealed_again_is_still_refused_at_restore() -> None:
    """The small fields and the exchange's calls are checked at a lazy restore as before."""
    m = MACHINES["awaiting_tools"]()
    for edit in (
        lambda b: b.replace(b'"turns_taken":2', b'"turns_taken":7'),  # the exchange's turn
        lambda b: b.replace(b'"id":"k2"', b'"id":"k3"', 1),  # the last message's calls
        lambda b: b.replace(
            b'{"role":"assistant","parts":[{"kind":"tool_call","id":"k1"',
            b'{"role":"robot","parts":[{"kind":"tool_call","id":"k1"',
        ),
    ):
        forged = _resealed(m, edit)
        assert forged != m.model_dump_json().encode()
        with pytest.raises(ValidationError, match="MachineSnapshot"):
            LoopMachine.model_validate_json(forged)


def test_an_invalid_message_sealed_again_is_refused_at_restore() -> None:
    """A forgery that seals an invalid message verifies, yet is refused at restore (msgspec's
    mirror of the messages: ``message_shapes.py``) with the eager restore's error, as
    ``model_validate`` refuses it (``test_message_shapes`` has the table of forgeries)."""
    m = MACHINES["long_between_runs"]()
    forged = _resealed(m, lambda b: b.replace(b'{"role":"user"', b'{"role":"robot"', 1))
    assert sealed_parts(forged) is not None
    with pytest.raises(ValidationError, match="role"):
        LoopMachine.model_validate_json(forged)
    with pytest.raises(ValueError, match="role"):
        LoopMachine.model_validate(json.loads(forged))


def test_a_restored_text_part_is_the_validators_model() -> None:
    m = LoopMachine.model_validate_json(MACHINES["long_between_runs"]().model_dump_json())
    first = m.conversation()[0]
    assert type(first) is Message and type(first.parts[0]) is TextPart
    assert (
        first.model_fields_set == Message.model_validate_json(message_json(first)).model_fields_set
    )


# --- cutting a sealed text at its messages (adopted.sealed_parts) ----------------------------


def _writers_text() -> bytes:
    return MACHINES["awaiting_tools"]().model_dump_json().encode()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("the content, unsealed", MACHINES["awaiting_tools"]().canonical_json()),
        ("not JSON", _writers_text()[:-5]),
        (
            "history respelled, sealed again",
            sealed_text(
                MACHINES["long_between_runs"]()
                .canonical_json()
                .replace(b'"history":[{', b'"history":[ {')
            ),
        ),
        (
            "pending respelled, sealed again",
            sealed_text(MACHINES["awaiting_tools"]().canonical_json().replace(b"},{", b"}, {")),
        ),
    ],
)
def test_only_the_writers_verified_text_is_cut(name: str, text: bytes) -> None:
    assert text != _writers_text()
    assert sealed_parts(text) is None, name
    restored = None
    try:
        restored = LoopMachine.model_validate_json(text)
    except ValidationError:
        return  # refused, as the whole validation refuses it
    assert not isinstance(restored._history, LazyMessages)


def test_the_writers_text_is_cut_at_its_messages() -> None:
    m = MACHINES["awaiting_tools"]()
    parts = sealed_parts(m.model_dump_json().encode() + b"\n")
    assert parts is not None
    assert parts.history == [message_json(x) for x in m.history]
    assert parts.pending == [message_json(x) for x in m.pending]
    assert parts.checksum == m.checksum() and not parts.maybe_modern
    assert parts.shell == m.snapshot().model_copy(update={"pending": ()}).model_dump_json().encode()


def test_a_damaged_text_is_cut_but_refused_by_the_brains_own_checksum() -> None:
    damaged = _writers_text().replace(b'"text":"go"', b'"text":"gp"')
    assert damaged != _writers_text() and sealed_parts(damaged) is not None
    with pytest.raises(ValidationError, match="damaged machine snapshot"):
        LoopMachine.model_validate_json(damaged)


def test_a_lazy_restore_holds_the_running_hash_the_next_save_goes_on_from() -> None:
    """The restore's checksum check is the brain's own ``checksum()``: its caches come out of the
    restore already hashed, so the first save or digest hashes nothing again (fails if the
    restore checks the text's hash apart and leaves the caches unhashed)."""
    original = _long_mid_run()
    m = LoopMachine.model_validate_json(original.model_dump_json())
    history, pending = m._history_json, m._pending_json
    assert history is not None and pending is not None
    assert history.hashed == original.history_len() and pending.hashed == original.pending_len()
    chain = pending.chain
    assert m.model_dump_json() == original.model_dump_json()
    assert m._pending_json is pending and pending.chain is chain  # not started again


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(range(len(ACTIONS))), st.booleans()), max_size=30))
def test_a_brain_restored_lazily_anywhere_goes_on_as_the_original(
    program: list[tuple[int, bool]],
) -> None:
    """Random programs (``test_brain_random``'s menu, right and wrong feeds) on a brain and on a
    copy of it restored lazily from its save wherever ``restore`` is drawn: the same answers,
    refusals and digests after every action, the same saved text, the same conversation."""
    m = LoopMachine([Message.user("earlier"), Message.assistant("answer")])
    r = LoopMachine.model_validate_json(m.model_dump_json())
    for index, restore in program:
        name, action = ACTIONS[index]
        if restore:
            r = LoopMachine.model_validate_json(r.model_dump_json())
            assert _is_lazy(r)
        outcomes = []
        for brain in (m, r):
            try:
                outcomes.append(("ok", action(brain)))
            except ProtocolError as exc:
                outcomes.append(("refused", str(exc)))
        assert outcomes[0] == outcomes[1] or all(isinstance(o[1], LoopMachine) for o in outcomes), (
            name
        )
        if isinstance(outcomes[0][1], LoopMachine):  # next_run: both go on with the next run
            m, r = outcomes[0][1], outcomes[1][1]  # type: ignore[assignment]
        assert r.digest() == m.digest(), name
    assert r.model_dump_json() == m.model_dump_json()
    assert r == m and r.conversation() == m.conversation()
