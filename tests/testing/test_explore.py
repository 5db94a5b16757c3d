"""The model that explores (loopctl.testing.explore, schema_values, strategies): arguments from
JSON schemas checked against a real validator, every move, determinism, and the client through
the real driver on the sample agent."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import jsonschema
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from examples.support_agent import agent as shop
from loopctl import BareLoop, Message, RunConfig, ToolCall, tool
from loopctl.api import ModelRequest, ToolSpec
from loopctl.testing import MOVES, ExploreConfig, Explorer, ExploringClient, ScriptedClient
from loopctl.testing.schema_values import (
    RandomChooser,
    Vocabulary,
    broken_arguments,
    missing_arguments,
    schema_value,
    valid_arguments,
)
from loopctl.testing.strategies import arguments, replies, tool_calls
from loopctl.tools import ToolArgumentsError

# --- schemas: every construct the generator claims, checked by jsonschema -----------------------

SCHEMAS: list[dict[str, Any]] = [
    {"type": "string", "minLength": 3, "maxLength": 5},
    {"type": "integer", "minimum": 10, "maximum": 12},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
    {"type": "number", "minimum": -1.5, "maximum": 2.5},
    {"type": "boolean"},
    {"type": "null"},
    {"type": ["string", "null"]},
    {"enum": ["red", "green", 3]},
    {"const": "fixed"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uuid"},
    {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
    {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True, "maxItems": 3},
    {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]},
            "d": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
        "$defs": {
            "Point": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            }
        },
    },
    {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 2}]},
    {"oneOf": [{"type": "boolean"}, {"type": "null"}]},
    {"allOf": [{"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]}]},
    {
        "type": "object",
        "properties": {"tags": {"type": "object", "additionalProperties": {"type": "integer"}}},
    },
    {"type": "object", "properties": {"n": {"type": "integer", "default": 7}}},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: str(s)[:40])
def test_schema_values_are_valid(schema: dict[str, Any]) -> None:
    for seed in range(60):
        value = schema_value(schema, RandomChooser(seed))
        jsonschema.validate(value, schema)


def test_values_are_copied_from_the_vocabulary() -> None:
    words = Vocabulary.of(["Please refund order A-1001: 800 EUR"])
    assert "A-1001" in words.words and 800.0 in words.numbers
    assert 1001.0 not in words.numbers  # the digits of an id are not a number
    strings = {schema_value({"type": "string"}, RandomChooser(s), words) for s in range(40)}
    assert "A-1001" in strings
    numbers = {schema_value({"type": "integer"}, RandomChooser(s), words) for s in range(40)}
    assert 800 in numbers


OBJECT = SCHEMAS[15]


def test_broken_and_missing_arguments_do_not_validate() -> None:
    for seed in range(60):
        broken = broken_arguments(OBJECT, RandomChooser(seed))
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, OBJECT)
        missing = missing_arguments(OBJECT, RandomChooser(seed))
        assert missing is not None and not {"a", "b"} <= set(missing)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(missing, OBJECT)
    assert missing_arguments({"type": "object", "properties": {}}, RandomChooser(0)) is None


SHOP_TOOLS = [shop.lookup_order, shop.shipping_quote, shop.refund]


@pytest.mark.parametrize("shop_tool", SHOP_TOOLS, ids=lambda t: t.name)
def test_the_tools_own_validation_agrees(shop_tool: Any) -> None:
    """Valid arguments pass the tool's pydantic model; broken and missing ones are refused."""
    parameters = shop_tool.spec.parameters
    for seed in range(40):
        shop_tool.parse_arguments(valid_arguments(parameters, RandomChooser(seed)))
        for bad in (
            broken_arguments(parameters, RandomChooser(seed)),
            missing_arguments(parameters, RandomChooser(seed)),
        ):
            with pytest.raises(ToolArgumentsError):
                shop_tool.parse_arguments(bad or {})


# --- the explorer ---------------------------------------------------------------------------------

SPECS = tuple(t.spec for t in SHOP_TOOLS)


def request(*messages: Message, turn: int = 1, specs: tuple[ToolSpec, ...] = SPECS) -> ModelRequest:
    return ModelRequest(
        messages=messages or (Message.user("refund A-1001"),), tools=specs, turn=turn
    )


def test_every_move_is_made_and_obeys_its_definition() -> None:
    explorer = Explorer()
    names = {s.name for s in SPECS}
    a = Message.assistant("", [ToolCall(id="p1", name="lookup_order", arguments={"order_id": "x"})])
    b = Message.assistant("", [ToolCall(id="p2", name="refund", arguments={"order_id": "x"})])
    history = (Message.user("go"), a, Message.user("r"), b, Message.user("r"))
    for move in MOVES:
        message = explorer.reply(request(*history), 9, RandomChooser(1), move)
        calls = message.tool_calls
        if move in ("final", "empty"):
            assert not calls and (message.text == "") == (move == "empty")
        elif move == "long":
            assert len(message.text) == ExploreConfig().long_text
        elif move == "unknown":
            assert len(calls) == 1 and calls[0].name not in names
        elif move == "repeat":
            assert [(c.name, c.arguments) for c in calls] == [("refund", {"order_id": "x"})]
        elif move == "ping_pong":
            assert [(c.name, c.arguments) for c in calls] == [("lookup_order", {"order_id": "x"})]
        elif move == "parallel":
            assert 2 <= len(calls) <= 3 and {c.name for c in calls} <= names
        else:
            assert len(calls) == 1 and calls[0].name in names
        ids = [c.id for c in calls]
        assert len(set(ids)) == len(ids) and not {"p1", "p2"} & set(ids)


def test_moves_are_drawn_by_weight_and_the_run_ends() -> None:
    explorer = Explorer(ExploreConfig(turns=5))
    drawn = Counter(explorer.move(request(turn=1), RandomChooser(s)) for s in range(2000))
    assert set(drawn) == set(MOVES)
    assert drawn.most_common(1)[0][0] == "call"
    assert all(explorer.move(request(turn=5), RandomChooser(s)) == "final" for s in range(50))
    only = Explorer(ExploreConfig(weights={"call": 1.0}))
    assert {only.move(request(), RandomChooser(s)) for s in range(50)} == {"call"}
    no_tools = {explorer.move(request(specs=()), RandomChooser(s)) for s in range(300)}
    assert no_tools <= {"final", "empty", "long", "unknown"}
    with pytest.raises(ValueError, match="unknown moves"):
        ExploreConfig(weights={"dance": 1.0})  # type: ignore[dict-item]


def test_ids_stay_unique_against_an_earlier_run_on_the_same_history() -> None:
    used = Message.assistant("", [ToolCall(id="call_1_1", name="refund", arguments={})])
    history = (Message.user("a"), used, Message.user("r"), Message.assistant("ok"))
    message = Explorer().reply(request(*history), 0, RandomChooser(0), "call")
    assert message.tool_calls[0].id == "call_1_1_2"


def _run(client: Any) -> BareLoop:
    loop = shop.build(client=client)
    loop.run_sync("Please refund order A-1001, it arrived broken.")
    return loop


def test_the_client_is_deterministic_and_its_replies_replay_as_a_script() -> None:
    for seed in range(12):
        first, second = ExploringClient(seed), ExploringClient(seed)
        a, b = _run(first), _run(second)
        assert first.replies == second.replies and a.machine.digest() == b.machine.digest()
        again = _run(ScriptedClient(first.replies))
        assert again.machine.digest() == a.machine.digest()
        assert sum(first.moves.values()) == len(first.replies) == len(first.requests)
    assert ExploringClient(1).chooser(0).rng.random() != ExploringClient(2).chooser(0).rng.random()


def test_every_run_ends_within_the_configured_turns() -> None:
    config = ExploreConfig(turns=4, weights={"repeat": 5.0, "call": 1.0})
    for seed in range(10):
        client = ExploringClient(seed, config)
        loop = _run_with(client, RunConfig(max_turns=50, loop_action="off"))
        assert loop.machine.turns_taken <= 4
        assert client.replies[-1].tool_calls == []


def _run_with(client: Any, config: RunConfig) -> BareLoop:
    loop = shop.build(client=client).replace(config=config)
    loop.run_sync("go")
    return loop


def test_peek_does_not_use_a_reply_up() -> None:
    client = ExploringClient(3)
    req = request()
    assert client.peek(req) == client.peek(req) == client.deliver(req)
    assert len(client.replies) == 1


# --- the hypothesis strategies --------------------------------------------------------------------


@settings(max_examples=60)
@given(st.data())
def test_strategy_arguments_validate(data: st.DataObject) -> None:
    objects = [s for s in SCHEMAS if s.get("type") == "object" or "allOf" in s]
    schema = data.draw(st.sampled_from(objects))
    value = data.draw(arguments(schema))
    jsonschema.validate(value, schema)
    broken = data.draw(arguments(schema, "invalid"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


@settings(max_examples=40)
@given(replies(SPECS))
def test_strategy_replies_are_assistant_messages(message: Message) -> None:
    assert message.role == "assistant"
    ids = [c.id for c in message.tool_calls]
    assert len(ids) == len(set(ids))


@settings(max_examples=30)
@given(tool_calls(SPECS))
def test_strategy_tool_calls_are_valid_for_the_tool(call: ToolCall) -> None:
    found = {t.name: t for t in SHOP_TOOLS}[call.name]
    found.parse_arguments(call.arguments)


#: ``find`` explores at random and its shrinker takes random steps: from one start in about six it
#: stops at a call of an unknown tool (``lookup_orders``), a local minimum it cannot leave in one
#: step. Derandomized, the search is the same on every run (``--hypothesis-seed`` does not move
#: it), and with no example database one red run cannot keep the next one red.
FIXED = settings(derandomize=True, database=None)


def test_a_failing_reply_shrinks_to_the_simplest() -> None:
    simplest = find(replies(SPECS), lambda m: True, settings=FIXED)
    assert simplest.tool_calls == [] and len(simplest.text) < 10  # an answer, no calls
    with_call = find(replies(SPECS), lambda m: bool(m.tool_calls), settings=FIXED)
    assert len(with_call.tool_calls) == 1 and with_call.tool_calls[0].name == "lookup_order"


def test_a_user_state_machine_can_drive_its_own_tool() -> None:
    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search the index."""
        return f"{limit} hits for {query}"

    @settings(max_examples=25)
    @given(replies([search.spec]))
    def run_one(reply: Message) -> None:
        loop = BareLoop(ScriptedClient([reply, Message.assistant("done")]), [search])
        result = loop.run_sync("find x")
        assert result.outcome.kind in ("completed", "failed")

    run_one()


def test_a_chooser_takes_a_seed_or_a_random() -> None:
    assert RandomChooser(random.Random(5)).integer(0, 10**6) == RandomChooser(5).integer(0, 10**6)
