"""Simulated users and sessions through the public API, on the sample support agent: one trace
holds the whole session, it replays against the agent, the same seed writes the same trace, a
model user's turns are in the trace and play back offline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl import Message, ToolCall
from loopctl.testing import ScriptedClient
from loopctl_sim import diff_traces
from loopctl_sim.cli import main
from loopctl_sim.replay import replay_agent
from loopctl_sim.sim.session import (
    SessionWorld,
    recorded_turns,
    recorded_user,
    replayed_world,
    run_session,
)
from loopctl_sim.sim.users import (
    USER_MOVES,
    ExploringUser,
    ModelUser,
    ScriptedUser,
    SimUser,
    UserTurn,
)
from loopctl_sim.trace import HeaderRecord, IoRecord, read_trace
from loopctl_sim.view.timeline import build_timeline

AGENT = "examples.support_agent.agent:build"


def _turn(user: SimUser, index: int, conversation: tuple[Message, ...] = ()) -> UserTurn | None:
    return asyncio.run(user.next_turn(conversation, index))


def test_exploring_user_is_a_function_of_seed_and_index_and_makes_every_move() -> None:
    kinds: set[str] = set()
    for seed in range(60):
        a, b = ExploringUser(seed, turns=6), ExploringUser(seed, turns=6)
        turns = [_turn(a, i) for i in range(6)]
        # asked in another order, with another conversation: the same turns
        again = [_turn(b, i, (Message.user("x"),)) for i in reversed(range(6))][::-1]
        assert turns == again
        assert _turn(a, 6) is None  # done after its turns
        kinds |= {t.kind for t in turns if t is not None}
    assert set(USER_MOVES) <= kinds  # every move shows up within 60 seeds
    texts = [t.text for s in range(60) for i in range(6) if (t := ExploringUser(s, 6).turn(i))]
    assert "" in texts
    assert any(len(t) >= 3000 for t in texts)
    assert any(not t.isascii() for t in texts)


def test_users_refuse_bad_input_with_typed_errors() -> None:
    with pytest.raises(ValueError, match="unknown user moves"):
        ExploringUser(0, weights={"shout": 1.0})
    with pytest.raises(ValueError, match="at least one turn"):
        ExploringUser(0, turns=0)
    with pytest.raises(ValueError, match="cancel_at"):
        UserTurn.from_json({"text": "hi", "cancel_at": 0})
    with pytest.raises(ValueError, match="needs its text"):
        UserTurn.from_json({"kind": "opening"})
    with pytest.raises(TypeError, match="a str or a UserTurn"):
        ScriptedUser([42])  # type: ignore[list-item]


def test_scripted_user_as_a_list_and_as_a_function_of_the_conversation() -> None:
    listed = ScriptedUser(["one", UserTurn("two", cancel_at=1)])
    assert _turn(listed, 1) == UserTurn("two", cancel_at=1)
    assert _turn(listed, 2) is None

    def answer(conversation: Sequence[Message], index: int) -> str | None:
        return None if index == 2 else f"I saw {len(conversation)} messages"

    fn = ScriptedUser(answer)
    world = SessionWorld(AGENT, fn, explore=4)
    session = run_session(world)
    assert len(session.runs) == 2
    assert session.turns[1].text == f"I saw {len(session.histories[0])} messages"


def test_one_trace_holds_the_whole_session_and_replays_against_the_agent(tmp_path: Path) -> None:
    trace = tmp_path / "session.jsonl"
    world = SessionWorld(AGENT, ExploringUser(1, turns=4), explore=1)
    session = run_session(world, trace)
    assert session.error is None and len(session.runs) == 4
    records = read_trace(trace)
    headers = [r for r in records if isinstance(r, HeaderRecord)]
    assert len(headers) == 4
    # each run after the first continues the brain the run before left (the between-run state)
    assert all(h.continues and h.brain is not None for h in headers[1:])
    assert [h.metadata["session"]["run"] for h in headers] == [1, 2, 3, 4]
    assert recorded_turns(trace) == session.turns
    result = replay_agent(trace, AGENT)
    assert result.divergence is None, result.divergence
    # the same seed writes the same trace (durations aside)
    again = tmp_path / "again.jsonl"
    run_session(SessionWorld(AGENT, ExploringUser(1, turns=4), explore=1), again)
    assert diff_traces(trace, again) is None
    # and a fixed session (the recorded user, the model's replies) writes it once more
    fixed = tmp_path / "fixed.jsonl"
    run_session(replayed_world(world, session), fixed)
    assert diff_traces(trace, fixed, brain_only=True) is None


def test_cancel_mid_run_and_input_while_tools_run(tmp_path: Path) -> None:
    trace = tmp_path / "s.jsonl"
    user = ScriptedUser(
        [
            UserTurn("Where is order A-1001?", interject="Please hurry."),
            UserTurn("Refund A-1001 please.", cancel_at=2),
            UserTurn("Thanks."),
        ]
    )
    replies = [
        [
            Message.assistant("", [_call("c1", "lookup_order", order_id="A-1001")]),
            Message.assistant("It was delivered."),
        ],
        [
            Message.assistant("", [_call("c2", "refund", order_id="A-1001", amount=800)]),
            Message.assistant("Refunded."),
        ],
        [Message.assistant("You are welcome.")],
    ]
    session = run_session(SessionWorld(AGENT, user, scripts=replies), trace)
    assert session.interjected == [0] and session.cancelled == [1]
    assert [getattr(r.outcome, "kind", None) for r in session.runs] == [
        "completed",
        "cancelled",
        "completed",
    ]
    # the interjection is in the conversation after the tool results, before the answer
    texts = [m.text for m in session.histories[0]]
    assert texts.index("Please hurry.") < texts.index("It was delivered.")
    # the cancelled run's input is kept; the next run goes on after it
    assert session.histories[2][: len(session.histories[1])] == session.histories[1]
    records = read_trace(trace)
    cancels = [r for r in records if isinstance(r, IoRecord) and r.kind == "cancel"]
    assert cancels and cancels[0].data.get("by") == "user"
    assert replay_agent(trace, AGENT).divergence is None


def _call(id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def test_a_model_user_is_recorded_and_the_session_replays_offline(tmp_path: Path) -> None:
    model = ScriptedClient([Message.assistant("Is it refunded yet?"), Message.assistant("Bye.")])
    user = ModelUser(model, turns=3, opening="My order A-1001 arrived broken.")
    trace = tmp_path / "llm-user.jsonl"
    world = SessionWorld(AGENT, user, explore=2)
    session = run_session(world, trace)
    assert [t.text for t in session.turns] == [
        "My order A-1001 arrived broken.",
        "Is it refunded yet?",
        "Bye.",
    ]
    # the user's calls are in the trace: what it was shown, what it answered
    turns = recorded_turns(trace)
    assert turns[1].calls and turns[1].calls[0]["reply"] == "Is it refunded yet?"
    shown = turns[1].calls[0]["request"]
    assert shown[0]["role"] == "assistant"  # its own opening, from its side
    # offline: the recorded user and the recorded model give the same session
    offline = tmp_path / "offline.jsonl"
    again = replayed_world(world, session)
    again.user = recorded_user(trace)
    run_session(again, offline)
    assert diff_traces(trace, offline, brain_only=True) is None
    assert replay_agent(trace, AGENT).divergence is None
    assert json.dumps(turns[1].to_json())  # plain data


def test_a_user_turn_round_trips_as_json() -> None:
    turn = UserTurn("héllo", "non_ascii", cancel_at=2, interject="x")
    assert UserTurn.from_json(json.loads(json.dumps(turn.to_json()))) == turn


def test_a_secret_the_user_writes_never_lands_in_the_session_trace(tmp_path: Path) -> None:
    key = "sk-proj-" + "abcdefABCDEF0123456789abcdefXYZ"
    user = ScriptedUser([UserTurn(f"my key is {key}", interject=f"also {key}"), "ok"])
    trace = tmp_path / "secret.jsonl"
    run_session(SessionWorld(AGENT, user, explore=1), trace)
    text = trace.read_text()
    assert key not in text
    assert "my key is [REDACTED]" in text
    assert recorded_turns(trace)[0].text == "my key is [REDACTED]"


def test_the_html_timeline_names_each_runs_user_turn(tmp_path: Path) -> None:
    trace = tmp_path / "s.jsonl"
    user = ScriptedUser(["Where is A-1001?", UserTurn("Refund it.", "correction", cancel_at=2)])
    run_session(SessionWorld(AGENT, user, explore=3), trace)
    labels = [label for label in build_timeline(trace).rec_label if "session turn" in label]
    assert labels[0].startswith("session turn 1 (message): run started")
    assert labels[1].startswith("session turn 2 (correction; cancels before step 2): run started")
    page = tmp_path / "s.html"
    result = CliRunner().invoke(main, ["html", str(trace), "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert page.stat().st_size > 0
