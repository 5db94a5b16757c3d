"""Record the sample agent's shipped traces, as a user records a run to keep as a regression test.

No model is reachable where these are made, so the model's side is scripted (a ``ScriptedClient``
playing what a model would answer); everything else is the real agent: its tools run, its hook
decides, its prompt and tool specs are what the trace records. From the repository root:

    python examples/support_agent/record.py          # (re)write examples/support_agent/traces/
    python examples/support_agent/record.py --check  # exit 1 when a stored trace is stale

``session.jsonl`` is the three conversations as one chat session: three runs of one loop, each
run's header naming the customer's turn (``loopctl_sim.sim.session``); ``session.yaml`` is the
same session as a session scenario (``loopctl-sim session``).
"""

from __future__ import annotations

import asyncio
import io
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from loopctl import Message, ToolCall
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceRecorder, diff_traces
from loopctl_sim.sim.session import drive_session
from loopctl_sim.sim.users import ScriptedUser

HERE = Path(__file__).resolve().parent
if str(HERE.parents[1]) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(HERE.parents[1]))

from examples.support_agent.agent import build  # noqa: E402

#: A fixed creation time: the same run always writes the same trace.
CREATED = "2026-12-01T00:00:00+00:00"


def _call(id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


#: Each shipped trace: the customer's message and what the model answers, turn by turn.
CONVERSATIONS: dict[str, tuple[str, list[Message]]] = {
    "refund": (
        "My order A-1001 arrived broken. Can I get my money back?",
        [
            Message.assistant(
                "Let me look that order up.", [_call("c1", "lookup_order", order_id="A-1001")]
            ),
            Message.assistant("", [_call("c2", "refund", order_id="A-1001", amount=800)]),
            Message.assistant("I have refunded the 800 EUR you paid for the espresso machine."),
        ],
    ),
    "refund_over_limit": (
        "Please refund my barista course, order A-1003.",
        [
            Message.assistant("", [_call("c1", "lookup_order", order_id="A-1003")]),
            Message.assistant("", [_call("c2", "refund", order_id="A-1003", amount=1500)]),
            Message.assistant(
                "A refund of 1500 EUR needs a colleague's approval: I have handed your case over."
            ),
        ],
    ),
    "shipping": (
        "What does it cost to ship 2 kg to France, and to Japan?",
        [
            Message.assistant(
                "",
                [
                    _call("c1", "shipping_quote", country="FR", weight_kg=2),
                    _call("c2", "shipping_quote", country="JP", weight_kg=2),
                ],
            ),
            Message.assistant("Shipping 2 kg costs 10.00 EUR to France and 20.00 EUR to Japan."),
        ],
    ),
}


#: One conversation of several runs, as a chat session is: the agent answers these customers'
#: messages one after the other, each a ``run()`` of the same loop (its trace holds the
#: conversation once: each run after the first has a header that continues the previous one).
SESSION: Final = ("refund", "shipping", "refund_over_limit")


def session_replies(names: Sequence[str] = SESSION) -> list[Message]:
    """The model's answers for ``names`` in turn, their call ids made unique in the
    conversation (as a model's are)."""
    replies: list[Message] = []
    for run, name in enumerate(names):
        for reply in CONVERSATIONS[name][1]:
            calls = [c.model_copy(update={"id": f"r{run}-{c.id}"}) for c in reply.tool_calls]
            replies.append(Message.assistant(reply.text, calls))
    return replies


def record(name: str, *, snapshot_headers: bool = False) -> str:
    """The trace of conversation ``name`` (or of the ``session``) as text."""
    names: tuple[str, ...]
    if name == "session":
        names, replies = SESSION, session_replies(SESSION)
    else:
        names, replies = (name,), CONVERSATIONS[name][1]
    out = io.StringIO()
    recorder = TraceRecorder(
        out,
        metadata={"agent": "examples.support_agent.agent:build"},
        created=CREATED,
        snapshot_headers=snapshot_headers,
    )
    loop = build(client=ScriptedClient(replies), observers=[recorder])
    # the customers' messages as a session's user turns: each run's header names its turn
    user = ScriptedUser([CONVERSATIONS[each][0] for each in names])
    if len(names) > 1:
        asyncio.run(drive_session(loop, user, recorder=recorder))
    else:
        asyncio.run(loop.run(CONVERSATIONS[names[0]][0]))
    return out.getvalue()


def _same(text: str, path: Path) -> bool:
    """Whether the stored trace holds the same records (durations aside, as ``diff`` compares)."""
    if not path.exists():
        return False
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / path.name
        fresh.write_text(text, encoding="utf-8")
        return diff_traces(fresh, path) is None


def main(argv: list[str]) -> int:
    stale = []
    for name in (*CONVERSATIONS, "session"):
        path = HERE / "traces" / f"{name}.jsonl"
        text = record(name)
        if "--check" in argv:
            if not _same(text, path):
                stale.append(str(path))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    for each in stale:
        print(f"stale: {each} (re-record with python examples/support_agent/record.py)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
