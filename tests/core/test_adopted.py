"""A brain restored from the writer's sealed text adopts its messages' JSON from the text
(``adopted.py``); any other text is restored as before and builds its cache on first use."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from brain_helpers import BY_STATE, POLICY, answer, ask, call, committed, reasoning, warned

from loopctl import LoopMachine
from loopctl.core.encoding import Modern, message_json

MACHINES: dict[str, Callable[[], LoopMachine]] = {
    **BY_STATE,
    "committed": committed,
    "warned": warned,
    "fresh": LoopMachine,
}


def _adopted(machine: LoopMachine) -> bool:
    return machine._history_json is not None and machine._pending_json is not None


def _spelled_as_the_brain_would(machine: LoopMachine) -> None:
    for cache, messages in (
        (machine._history_json, machine.history),
        (machine._pending_json, machine.pending),
    ):
        assert cache is not None
        assert list(cache.parts) == [message_json(m) for m in messages]
        assert [type(b) for b in cache.parts] == [type(message_json(m)) for m in messages]


@pytest.mark.parametrize("name", [*MACHINES, "reasoning"])
def test_the_writers_text_is_adopted_and_written_again_as_it_was(name: str) -> None:
    original = reasoning() if name == "reasoning" else MACHINES[name]()
    text = original.model_dump_json()
    restored = LoopMachine.model_validate_json(text)
    assert restored == original
    assert _adopted(restored)
    _spelled_as_the_brain_would(restored)
    assert restored.model_dump_json() == text
    assert restored.digest() == original.digest()
    assert restored.checksum() == original.checksum()
    assert LoopMachine.model_validate_json(text.encode() + b"\n") == original  # a file's newline


def test_the_reasoning_content_marks_its_modern_messages() -> None:
    restored = LoopMachine.model_validate_json(reasoning().model_dump_json())
    assert restored._pending_json is not None
    kinds = [type(b) for b in restored._pending_json.parts]
    assert kinds == [bytes, Modern, bytes]


def test_the_adopted_cache_goes_on_growing_as_the_brains_own() -> None:
    original = MACHINES["awaiting_model"]()
    restored = LoopMachine.model_validate_json(original.model_dump_json())
    for m in (original, restored):
        m.model_response(ask(call("c9", path="/z")), 20)
        m.next_step(POLICY)
        m.tool_results(answer(call("c9", path="/z")))
    assert restored.digest() == original.digest()
    assert restored.model_dump_json() == original.model_dump_json()
    _spelled_as_the_brain_would(restored)


@pytest.mark.parametrize(
    "respell",
    [
        lambda text: json.dumps(json.loads(text), indent=1),  # another layout
        lambda text: json.dumps(json.loads(text), separators=(",", ":")),  # maybe the same text
        lambda text: " " + text,
    ],
)
def test_another_layout_is_restored_but_not_adopted(respell: Callable[[str], str]) -> None:
    original = MACHINES["awaiting_tools"]()
    text = original.model_dump_json()
    other = respell(text)
    restored = LoopMachine.model_validate_json(other)
    assert restored == original
    if other != text:
        assert not _adopted(restored)
    assert restored.model_dump_json() == text
    assert restored.digest() == original.digest()


def test_an_unsealed_text_is_restored_but_not_adopted() -> None:
    original = MACHINES["awaiting_tools"]()
    content = original.snapshot().model_dump_json()  # the content, without a checksum
    restored = LoopMachine.model_validate_json(content)
    assert restored == original and not _adopted(restored)
    assert restored.model_dump_json() == original.model_dump_json()
