"""Saving and restoring the brain: exact, in every state, and loud about damage."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from brain_helpers import POLICY, SCENARIOS, answer, ask, call, drive, respond
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from loopctl import LoopMachine, MachinePolicy, Message
from loopctl.core import MAX_LOOP_WINDOW, MachineSnapshot
from loopctl.core.conversation import Pending
from loopctl.core.messages import ProviderPart, TextPart, ThinkingPart, ToolCall
from loopctl.core.snapshot import SNAPSHOT_FORMAT, SNAPSHOT_VERSION

RUNNABLE = {k: v for k, v in SCENARIOS.items() if k != "fresh"}


@pytest.mark.parametrize("build", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_restore_gives_an_equal_machine(build: Callable[[], LoopMachine]) -> None:
    m = build()
    text = m.model_dump_json()
    restored = LoopMachine.model_validate_json(text)
    assert restored == m
    assert restored.model_dump_json() == text
    assert LoopMachine.model_validate(m.model_dump()) == m
    assert LoopMachine.from_snapshot(m.snapshot()) == m


@pytest.mark.parametrize("build", RUNNABLE.values(), ids=RUNNABLE.keys())
def test_a_restored_machine_makes_identical_decisions(build: Callable[[], LoopMachine]) -> None:
    m = build()
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    played = drive(m)
    assert played  # something was decided
    assert drive(restored) == played
    assert restored == m


@pytest.mark.parametrize("build", RUNNABLE.values(), ids=RUNNABLE.keys())
def test_a_restore_encodes_each_message_once_and_its_first_save_none(
    build: Callable[[], LoopMachine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking a sealed text's checksum encodes its messages; the restored brain keeps that
    JSON, so its first save and digest encode nothing, and what it saves after it runs on is a
    from-scratch brain's (from text and from ``model_dump()`` data with its checksum)."""
    from loopctl.core import _saved

    m = build()
    text = m.model_dump_json()
    sealed_data = json.loads(text)
    messages = [*m.history, *m.pending]
    encoded: list[Message] = []

    def counted(message: Message, real: Any = _saved._MESSAGE_JSON) -> Any:
        encoded.append(message)
        return real(message)

    restores: list[Callable[[], LoopMachine]] = [
        lambda: LoopMachine.model_validate_json(text),
        lambda: LoopMachine.model_validate_json(text.encode()),
        lambda: LoopMachine.model_validate(sealed_data),
    ]
    for restore in restores:
        encoded.clear()
        monkeypatch.setattr(_saved, "_MESSAGE_JSON", counted)
        restored = restore()
        assert encoded == messages  # each message once, to check the checksum
        encoded.clear()
        assert (restored.model_dump_json(), restored.digest()) == (text, m.digest())
        assert encoded == []
        monkeypatch.undo()
        assert drive(restored) == drive(build())
        assert restored.digest() == _slow_digest(restored)
        assert restored.model_dump_json() == _sealed(restored.snapshot().model_dump_json())


def test_restored_decisions_follow_the_restored_state_not_a_fresh_one() -> None:
    m = SCENARIOS["awaiting_tools"]()
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    step = restored.next_step(POLICY)
    assert step == m.next_step(POLICY)
    assert step.kind == "call_tools"


@pytest.mark.parametrize("build", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_digest_is_stable_across_save_and_restore(build: Callable[[], LoopMachine]) -> None:
    m = build()
    digest = m.digest()
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert m.digest() == digest
    assert LoopMachine.model_validate_json(m.model_dump_json()).digest() == digest


def test_digests_tell_the_scenarios_apart() -> None:
    digests = {name: build().digest() for name, build in SCENARIOS.items()}
    assert len(set(digests.values())) == len(digests)


def test_digest_changes_with_every_change_of_state() -> None:
    m = LoopMachine()
    seen = [m.digest()]
    m.accept_input("go")
    seen.append(m.digest())
    seen += [digest for _, digest in drive(m)]
    # every feed of the drive changed the machine: no two consecutive digests are equal
    assert all(a != b for a, b in pairwise(seen))
    m2 = LoopMachine()
    m2.accept_input("go")
    m2.set_context_tokens(1)
    assert m2.digest() != seen[1]


def test_snapshot_names_its_format_and_version() -> None:
    m = SCENARIOS["started"]()
    data = json.loads(m.model_dump_json())
    assert data["format"] == SNAPSHOT_FORMAT == "loopctl-machine"
    # saved, a brain is sealed: version 3, its checksum last
    assert data["version"] == SNAPSHOT_VERSION == 3
    assert list(data)[-1] == "checksum" and data["checksum"][:16] == m.digest()
    # its content (what the digest hashes) without reasoning or provider parts is version 1
    assert json.loads(m.snapshot().model_dump_json())["version"] == 1


# --- damaged snapshots --------------------------------------------------------------------------


def _data(scenario: str) -> dict[str, Any]:
    """The content of a scenario's snapshot (unsealed: read unverified, as versions 1 and 2 are,
    so that each edit below meets the consistency check, not the checksum)."""
    data: dict[str, Any] = json.loads(SCENARIOS[scenario]().snapshot().model_dump_json())
    return data


def _edit(scenario: str, **changes: Any) -> str:
    data = _data(scenario)
    data.update(changes)
    return json.dumps(data)


def _drop(scenario: str, key: str) -> str:
    data = _data(scenario)
    del data[key]
    return json.dumps(data)


def _open_call_in_history() -> str:
    data = _data("after_exchange")
    data["history"] = [{"role": "assistant", "parts": [call("x").model_dump()]}]
    return json.dumps(data)


def _exchange_mismatch() -> str:
    data = _data("awaiting_tools")
    data["exchange"]["calls"] = data["exchange"]["calls"][:1]
    return json.dumps(data)


def _result_without_call() -> str:
    data = _data("after_exchange")
    data["pending"].append(json.loads(answer(call("ghost")).model_dump_json()))
    return json.dumps(data)


DAMAGED: dict[str, Callable[[], str]] = {
    "not-json": lambda: "{not json",
    "truncated": lambda: SCENARIOS["awaiting_tools"]().model_dump_json()[:-40],
    "empty-object": lambda: "{}",
    "a-list": lambda: "[]",
    "missing-state": lambda: _drop("started", "state"),
    "unknown-field": lambda: _edit("started", temperature=0.3),
    "unknown-state": lambda: _edit("started", state={"kind": "dreaming"}),
    "wrong-type": lambda: _edit("started", turns_taken="three"),
    "negative-turns": lambda: _edit("started", turns_taken=-1),
    "negative-tokens": lambda: _edit("started", context_tokens=-5),
    "other-format": lambda: _edit("started", format="someone-elses-machine"),
    "future-version": lambda: _edit("started", version=SNAPSHOT_VERSION + 1),
    "tools-without-exchange": lambda: _edit("awaiting_tools", exchange=None),
    "exchange-outside-tools": lambda: _edit(
        "after_exchange", exchange=_data("awaiting_tools")["exchange"]
    ),
    "exchange-mismatch": _exchange_mismatch,
    "open-call-in-history": _open_call_in_history,
    "result-without-call": _result_without_call,
    "finalized-but-running": lambda: _edit("after_exchange", finalized=True),
    "pending-before-input": lambda: _edit("after_exchange", started=False),
    "model-turn-mismatch": lambda: _edit("awaiting_model", turns_taken=4),
    "loop-unjudged-overflow": lambda: _edit(
        "started", loop={"calls": [], "unjudged": 2, "warned": False}
    ),
}


@pytest.mark.parametrize("text", DAMAGED.values(), ids=DAMAGED.keys())
def test_damaged_snapshot_is_a_validation_error(text: Callable[[], str]) -> None:
    with pytest.raises(ValidationError):
        LoopMachine.model_validate_json(text())


def test_future_version_says_what_to_do() -> None:
    with pytest.raises(ValidationError) as raised:
        LoopMachine.model_validate_json(_edit("started", version=SNAPSHOT_VERSION + 1))
    assert f"version {SNAPSHOT_VERSION + 1} is not supported" in str(raised.value)
    assert "upgrade loopctl" in str(raised.value)


def test_snapshot_model_checks_consistency_when_validated_not_when_built() -> None:
    good = SCENARIOS["awaiting_tools"]().snapshot()
    fields = {name: getattr(good, name) for name in MachineSnapshot.__struct_fields__}
    forged = MachineSnapshot(**{**fields, "exchange": None})  # built by hand: not checked
    with pytest.raises(ValidationError, match="exchange missing"):
        MachineSnapshot.model_validate(forged)
    with pytest.raises(ValidationError, match="exchange missing"):
        LoopMachine.model_validate(forged.model_dump())


@pytest.mark.parametrize(
    "scenario", ["cancelled_mid_tools", "awaiting_tools", "failed_mid_tools_discarded"]
)
def test_open_calls_are_allowed_only_where_tools_are_in_flight(scenario: str) -> None:
    """A run cancelled while its tools ran keeps the open call until the exit door drops it."""
    m = SCENARIOS[scenario]()
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    assert restored == m
    if not restored.finalized and restored.is_terminal:
        restored.discard_pending()
        assert restored.history[-1].tool_results


def test_restore_does_not_share_buffers_with_the_original() -> None:
    m = SCENARIOS["after_exchange"]()
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    restored.inject(Message.user("more"))
    assert restored.pending_len() == m.pending_len() + 1


# --- the digest's fast path is byte-exact ------------------------------------------------------


def _slow_digest(m: LoopMachine) -> str:
    """The digest by definition: the hash of the snapshot model's own JSON."""
    return hashlib.sha256(m.snapshot().model_dump_json().encode()).hexdigest()[:16]


def _sealed(content: str) -> str:
    """The saved form by definition: the content with version 3 in its head and the sha256 of
    the content's bytes last."""
    checksum = hashlib.sha256(content.encode()).hexdigest()
    head = re.match(r'\{"format":"loopctl-machine","version":[12],', content)
    assert head is not None
    sealed_head = '{"format":"loopctl-machine","version":3,'
    return sealed_head + content[head.end() : -1] + f',"checksum":"{checksum}"}}'


@pytest.mark.parametrize("build", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_the_cached_json_is_the_snapshot_json(build: Callable[[], LoopMachine]) -> None:
    m = build()
    assert m.model_dump_json() == _sealed(m.snapshot().model_dump_json())
    assert m.digest() == _slow_digest(m)


@pytest.mark.parametrize(
    "policy",
    [
        POLICY,
        POLICY.model_copy(update={"compact_now": True}),
        POLICY.model_copy(update={"max_turns": 2}),
    ],
    ids=["plain", "compacting", "max-turns"],
)
def test_digest_stays_exact_while_the_conversation_grows_and_is_replaced(
    policy: MachinePolicy,
) -> None:
    """The per-message cache follows appends, compaction (history replaced) and the exit door."""
    m = LoopMachine([Message.user("é ✓ \u2028 \x7f"), Message.assistant("ok")])
    m.digest()  # warm the cache before anything changes
    m.accept_input("go")
    assert m.digest() == _slow_digest(m)
    for i in range(12):
        step = m.next_step(policy if i == 0 or not policy.compact_now else POLICY)
        assert m.digest() == _slow_digest(m)
        respond(m, step)
        assert m.digest() == _slow_digest(m)
        if m.finalized:
            break
    fresh = m.next_run()
    fresh.accept_input(Message.user("again"))
    assert fresh.digest() == _slow_digest(fresh)


def test_digest_of_odd_arguments_is_exact() -> None:
    m = LoopMachine()
    m.accept_input("go")
    m.next_step(POLICY)
    m.model_response(
        ask(call("a", f=0.1, big=10**20, nested={"z": [1.5e-7, None, True]}, s='"quoted" \\ ü')),
        7,
    )
    assert m.model_dump_json() == _sealed(m.snapshot().model_dump_json())


def test_digest_cache_follows_a_replaced_history_it_did_not_see_change() -> None:
    """A compaction may return more messages than history held; the cache must not reuse any."""
    m = LoopMachine([Message.user("old"), Message.assistant("old answer")])
    m.accept_input("go")
    m.digest()  # the cache now mirrors the old lists
    m.set_context_tokens(990)
    m.next_step(POLICY)
    longer = [Message.user("a"), Message.assistant("b"), Message.user("c"), Message.assistant("d")]
    m.compaction_result(longer, 990, 100)  # history replaced, pending emptied
    m.next_step(POLICY)
    c = call("x", n=1)
    m.model_response(ask(c), 120)  # pending regrows past its old length, unseen
    m.next_step(POLICY)
    m.tool_results(answer(c))
    assert m.digest() == _slow_digest(m)


def test_digest_stays_exact_while_the_loop_window_fills_and_slides() -> None:
    """Exchanges of one to three calls push the window past ``MAX_LOOP_WINDOW`` and keep it
    sliding (trimmed in place): the digest follows."""
    policy = POLICY.model_copy(update={"loop_action": "off", "max_turns": 1_000})
    m = LoopMachine()
    m.accept_input("go")
    for turn in range(140):
        m.next_step(policy)
        calls = [call(f"c{turn}_{i}", n=turn, i=i) for i in range(1 + turn % 3)]
        m.model_response(ask(*calls), 10)
        m.next_step(policy)
        m.tool_results(answer(*calls))
        if turn % 7 == 0 or turn > 125:
            assert m.digest() == _slow_digest(m)
            assert m.model_dump_json() == _sealed(m.snapshot().model_dump_json())
    assert len(m.loop_window.calls) == MAX_LOOP_WINDOW


_ODD_TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ['"', "\\", "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é ✓ \u2028\u2029 😀", "</script>"]
)


@pytest.mark.parametrize(
    "odd", ['say "hi"', "back\\slash", "new\nline", "tab\t", "é ✓ \u2028", "nul\x00"]
)
def test_digest_stays_exact_with_odd_tool_names_in_the_loop_window(odd: str) -> None:
    """Keys of the loop window that JSON must escape are written as pydantic writes them."""
    policy = POLICY.model_copy(update={"tools": ("read", odd), "loop_action": "off"})
    m = LoopMachine()
    m.accept_input("go")
    for turn in range(MAX_LOOP_WINDOW + 5):
        m.next_step(policy)
        c = call(f"c{turn}", odd if turn in (2, 3) else "read", n=turn)
        m.model_response(ask(c), 10)
        m.next_step(policy)
        m.tool_results(answer(c))
        if turn < 6 or turn > MAX_LOOP_WINDOW:
            assert m.digest() == _slow_digest(m)
    restored = LoopMachine.model_validate_json(m.model_dump_json())
    assert restored.digest() == m.digest() == _slow_digest(m)


@pytest.mark.parametrize("door", ["commit", "discard"])
def test_the_digest_follows_the_exit_door(door: str) -> None:
    m = LoopMachine([Message.user("before"), Message.assistant("ok")])
    m.accept_input("go")
    for turn in range(5):
        m.next_step(POLICY)
        c = call(f"c{turn}", path=f"/p/{turn}")
        m.model_response(ask(c), 10)
        m.digest()
        m.next_step(POLICY)
        if door == "discard" and turn == 4:
            break
        m.tool_results(answer(c))
        m.digest()
    if door == "commit":
        m.next_step(POLICY)
        m.model_response(Message.assistant("done"), 10)
        m.digest()
        m.commit_pending()
    else:
        m.cancel()
        m.digest()
        m.discard_pending()
    assert m.digest() == _slow_digest(m)
    assert m.model_dump_json() == _sealed(m.snapshot().model_dump_json())
    fresh = m.next_run()
    assert fresh.digest() == _slow_digest(fresh)
    fresh.accept_input("again")
    assert fresh.digest() == _slow_digest(fresh)
    assert m.digest() == _slow_digest(m)  # the two brains' caches are apart


_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["_history", "_pending"]),
        st.sampled_from(["append", "set", "pop", "clear", "replace", "modern"]),
        st.integers(0, 5),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_EDITS)
def test_the_digest_needs_no_rule_from_the_handlers(edits: list[tuple[str, str, int]]) -> None:
    """The saved form's cache knows the brain's history (a tuple) and pending (a ``Pending``,
    which refuses every edit but appending) by identity, and checks any other list message by
    message, so history replaced in any way, pending appended to, and pending replaced by a new
    ``Pending`` or by a plain list that is then edited in place (a message replaced, removed,
    the list emptied) are all followed exactly: the handlers need keep no rule. (Raw edits, not
    feeds: the point is what the cache sees, not a state the brain could reach.)"""
    m = LoopMachine([Message.user("q"), Message.assistant("a")])
    m.accept_input("go")
    m.digest()
    for which, edit, n in edits:
        held = getattr(m, which)
        messages: list[Message] = list(held) if which == "_history" else held
        fresh = Message.user(f"m{n}")
        if isinstance(messages, Pending) and edit in ("set", "pop", "clear"):
            with pytest.raises(TypeError, match="only grows by appending"):
                getattr(messages, "__setitem__" if edit == "set" else edit)(0, fresh)
            messages = list(messages)  # a handler would give the brain a new list instead
            m._pending = messages  # type: ignore[assignment]
        if edit == "append":
            messages.append(fresh)
        elif edit == "set" and messages:
            messages[n % len(messages)] = fresh
        elif edit == "pop" and messages:
            messages.pop(n % len(messages))
        elif edit == "clear":
            messages.clear()
        elif edit == "replace":
            new = [*messages, fresh]
            setattr(m, which, Pending(new) if n % 2 and which == "_pending" else new)
        elif edit == "modern":
            messages.append(Message(role="user", parts=(THINK, TextPart(text=str(n)))))
        if which == "_history":
            m._history = tuple(getattr(m, which) if edit == "replace" else messages)
        assert m.digest() == _slow_digest(m)
        assert m.model_dump_json() == _sealed(m.snapshot().model_dump_json())


# --- version 2: reasoning and provider parts -------------------------------------------------

THINK = ThinkingPart(provider="anthropic", text="I should look.", signature="EqQBCgIYAh")
BLOCK = ProviderPart(
    provider="anthropic", data={"type": "web_search_tool_result", "tool_use_id": "srv_1"}
)


def _thinking_reply(*calls: ToolCall, text: str = "") -> Message:
    parts: list[Any] = [THINK, BLOCK]
    if text:
        parts.append(TextPart(text=text))
    parts.extend(calls)
    return Message(role="assistant", parts=tuple(parts))


def _modern_machine() -> LoopMachine:
    m = LoopMachine([Message.user("before"), Message.assistant("ok")])
    m.accept_input("go")
    m.next_step(POLICY)
    c = call("c1", path="/a")
    m.model_response(_thinking_reply(c), 100)
    m.next_step(POLICY)
    m.tool_results(answer(c))
    return m


def test_a_conversation_with_reasoning_is_written_in_version_2_and_restores() -> None:
    m = _modern_machine()
    text = m.model_dump_json()
    assert json.loads(text)["version"] == SNAPSHOT_VERSION == 3
    assert json.loads(m.snapshot().model_dump_json())["version"] == 2
    assert m.snapshot().version == 2
    restored = LoopMachine.model_validate_json(text)
    assert restored == m
    assert restored.model_dump_json() == text
    assert restored.digest() == m.digest() == _slow_digest(m)
    assert LoopMachine.model_validate(m.model_dump()) == m


def test_a_plain_conversation_keeps_version_1_bytes() -> None:
    """Recorded traces hold digests of version-1 JSON: a plain machine must write it unchanged."""
    m = SCENARIOS["after_exchange"]()
    assert (
        m.snapshot()
        .model_dump_json()
        .startswith('{"format":"loopctl-machine","version":1,"history":[')
    )
    assert m.snapshot().version == 1


def test_version_1_text_holding_new_parts_is_damaged() -> None:
    data = json.loads(_modern_machine().snapshot().model_dump_json())
    data["version"] = 1
    with pytest.raises(ValidationError) as raised:
        LoopMachine.model_validate_json(json.dumps(data))
    assert "format version 1 cannot hold" in str(raised.value)


def test_version_2_text_of_a_plain_conversation_reads_and_is_written_in_version_1() -> None:
    m = SCENARIOS["after_exchange"]()
    data = json.loads(m.snapshot().model_dump_json())
    data["version"] = 2
    restored = LoopMachine.model_validate_json(json.dumps(data))
    assert restored == m
    assert restored.model_dump_json() == m.model_dump_json()
    assert MachineSnapshot.model_validate(data).version == 1


@pytest.mark.parametrize("door", ["commit", "discard", "compact-away", "compact-in"])
def test_digest_stays_exact_as_reasoning_arrives_and_leaves(door: str) -> None:
    """The digest's head follows the conversation: version 2 from the first modern message in
    pending, back to version 1 when the exit door or a compaction drops the last one."""
    m = LoopMachine([Message.user("before"), Message.assistant("ok")])
    m.accept_input("go")
    m.digest()
    m.next_step(POLICY)
    c = call("c1", path="/a")
    m.model_response(_thinking_reply(c), 100)
    assert m.digest() == _slow_digest(m)
    m.next_step(POLICY)
    if door == "discard":
        m.cancel()
        m.discard_pending()  # the open exchange is dropped: no modern message is left
        assert m.snapshot().version == 1
    elif door == "commit":
        m.tool_results(answer(c))
        m.next_step(POLICY)
        m.model_response(Message.assistant("done"), 100)
        assert m.digest() == _slow_digest(m)
        m.commit_pending()
        assert m.snapshot().version == 2
    else:
        m.tool_results(answer(c))
        m.digest()
        m.set_context_tokens(990)
        m.next_step(POLICY)
        kept = [Message.user("summary")]
        if door == "compact-in":
            kept.append(Message(role="assistant", parts=(THINK, TextPart(text="so far"))))
        m.compaction_result(kept, 990, 50)
        assert m.snapshot().version == (2 if door == "compact-in" else 1)
    assert m.digest() == _slow_digest(m)
    if m.finalized:
        fresh = m.next_run()
        fresh.accept_input("again")
        assert fresh.digest() == _slow_digest(fresh)


def test_reasoning_parts_change_no_decision() -> None:
    """Two runs fed the same replies, one with reasoning and provider parts and one without,
    get the same steps: the brain treats the new parts as data."""

    def run(modern: bool) -> list[Any]:
        m = LoopMachine()
        m.accept_input("go")
        steps: list[Any] = []
        for turn in range(3):
            steps.append(m.next_step(POLICY))
            c = call(f"c{turn}", path=f"/{turn}")
            m.model_response(_thinking_reply(c) if modern else ask(c), 100)
            steps.append(m.next_step(POLICY))
            m.tool_results(answer(c))
        steps.append(m.next_step(POLICY))
        m.model_response(_thinking_reply(text="done") if modern else Message.assistant("done"), 9)
        steps.append(m.next_step(POLICY))
        return steps

    assert run(modern=True) == run(modern=False)
