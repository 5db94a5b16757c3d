"""A new user's agent, written without the project's examples in mind, and the model it talks to.

The bookshop agent has a system prompt; four tools (``lookup_stock`` awaits an in-process
service, ``shipping_cost`` is sync, ``split_bill`` raises ``ValueError`` on some inputs and
declares it, ``catalog_dump`` returns a ~10 KB dict); a pre-tool hook that refuses the moon and
masks a card number, a post-tool hook that redacts e-mail addresses, a tool middleware, a
compactor of its own, ``max_turns``, ``loop_action="fail"``, ``context_window`` and
``temperature``. Its client is ``OpenAIClient(base_url=...)`` pointed at ``ReasoningServer``: an
OpenAI-compatible chat-completions server on 127.0.0.1 that streams server-sent events and sends
its reasoning as ``delta.reasoning_content``, as some hosts do.

What a test changes comes from the environment (``BOOKSHOP_*``), so a command in a subprocess
runs the changed agent: the model, the prompt, ``temperature``, ``max_turns``, the window, the
compactor's note, a blurb in the catalog, and a planted bug (``BOOKSHOP_BUG``: ``zerodiv``, a
``ZeroDivisionError`` the tool does not declare; ``split``, a compactor that keeps a result
without its call).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections.abc import Sequence
from typing import Any

from examples.model_server.serving import LocalServer, QuietHandler
from loopctl import (
    ApiClient,
    BareLoop,
    CompactReason,
    Hooks,
    LoopObserver,
    Message,
    RunConfig,
    SessionConfig,
    ToolCall,
    ToolResult,
    tool,
)
from loopctl.driver import plan_cut
from loopctl.tools import Deny, NextTool, Replace

SPEC = "bookshop_agent:build"
TASK = "Do you have 978-0? Ship to EU, split 30 among 3."
ANSWER = "3 copies in stock; shipping 6.00 EUR; 10.00 EUR each."
CARD = "4111111111111111"


def _env(name: str, default: str = "") -> str:
    return os.environ.get("BOOKSHOP_" + name, default)


class Inventory:
    """The shop's stock service: async, in process."""

    STOCK = {"978-0": 3, "978-1": 0, "978-2": 12}

    async def count(self, isbn: str) -> int:
        await asyncio.sleep(0)
        return self.STOCK.get(isbn, 0)


INVENTORY = Inventory()


@tool
async def lookup_stock(isbn: str, card: str | None = None) -> dict[str, Any]:
    """How many copies of the book with ``isbn`` are on the shelf."""
    return {"isbn": isbn, "copies": await INVENTORY.count(isbn), "card": card}


@tool
def shipping_cost(weight_kg: float, zone: str) -> str:
    """Shipping cost for a parcel of ``weight_kg`` to ``zone`` (eu, us, asia)."""
    rates = {"eu": 4.0, "us": 9.5, "asia": 12.0}
    return f"{rates.get(zone, 20.0) * max(weight_kg, 0.1):.2f} EUR"


@tool(raises=ValueError)
def split_bill(total: float, people: int) -> str:
    """Split ``total`` euros among ``people`` readers."""
    if people <= 0 and _env("BUG") != "zerodiv":
        raise ValueError(f"people must be positive, not {people}")
    return f"{total / people:.2f} EUR each"


@tool
def catalog_dump(section: str) -> dict[str, Any]:
    """The whole catalog of one ``section``: titles, blurbs, and the buyer's contact."""
    books = [
        {
            "title": f"{section.title()} volume {i}",
            "blurb": f"A {section} book people keep recommending, number {i}. " * 4
            + (_env("BLURB") if i == 20 else ""),
            "isbn": f"978-{i}",
        }
        for i in range(40)
    ]
    return {"section": section, "books": books, "buyer": "buyer@quietshelf.example"}


_CARD = re.compile(r"^\d{12,19}$")
_MAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def guard(call: ToolCall) -> Deny | Replace | None:
    """Pre-tool: no shipping to the moon; a card number is masked before any tool sees it."""
    if call.arguments.get("zone") == "moon":
        return Deny("we do not ship to the moon")
    card = call.arguments.get("card")
    if isinstance(card, str) and _CARD.match(card):
        return Replace({**call.arguments, "card": "*" * 12 + card[-4:]})
    return None


def redact(call: ToolCall, result: ToolResult) -> ToolResult | None:
    """Post-tool: e-mail addresses never reach the model."""
    text = _MAIL.sub("[email]", result.content)
    return None if text == result.content else result.model_copy(update={"content": text})


async def lower_zone(call: ToolCall, call_next: NextTool) -> ToolResult:
    """Tool middleware: zones in lower case (``EU`` -> ``eu``)."""
    zone = call.arguments.get("zone")
    if isinstance(zone, str) and zone != zone.lower():
        call = call.model_copy(update={"arguments": {**call.arguments, "zone": zone.lower()}})
    return await call_next(call)


class ShelfCompactor:
    """Keeps the task and the last exchange, and a note of how many messages it cut."""

    async def compact(
        self, messages: Sequence[Message], reason: CompactReason
    ) -> list[Message] | None:
        if _env("BUG") == "split":  # planted: the last message, a result without its call
            return [messages[0], *messages[-1:]]
        cut = plan_cut(messages, keep_head=1, keep_tail=2)
        if cut is None:
            return None
        start, end = cut
        note = Message.user(f"[{_env('TAG', 'shelf notes')}] {end - start} cut")
        return [*messages[:start], note, *messages[end:]]


def build(client: ApiClient | None = None, observers: Sequence[LoopObserver] = ()) -> BareLoop:
    """The bookshop agent; without a client, its own ``OpenAIClient`` at ``BOOKSHOP_URL``."""
    from loopctl.providers import OpenAIClient

    if client is None:
        client = OpenAIClient(
            _env("MODEL", "shelf-1"),
            base_url=_env("URL", "http://127.0.0.1:9/v1"),
            api_key=_env("KEY", "sk-bookshop-unset"),
        )
    return BareLoop(
        client,
        tools=[lookup_stock, shipping_cost, split_bill, catalog_dump],
        config=RunConfig(max_turns=int(_env("MAX_TURNS", "6")), loop_action="fail"),
        session=SessionConfig(
            system_prompt=_env("PROMPT", "You are the Quiet Shelf bookshop's assistant."),
            context_window=int(_env("WINDOW", "4000")),
            options={"temperature": float(_env("TEMP", "0.3"))},
        ),
        hooks=Hooks(pre_tool=[guard], post_tool=[redact]),
        middleware=[lower_zone],
        compactor=ShelfCompactor(),
        observers=observers,
    )


def decide(body: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str]:
    """The model: reasoning, then calls by what it called last (so a compacted history that
    keeps the last exchange goes on), then the answer."""
    messages = body["messages"]
    called = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    last = called[-1]["tool_calls"][0]["function"]["name"] if called else None
    stage = {None: 0, "lookup_stock": 1, "catalog_dump": 2}.get(last, 3)

    def call(i: int, name: str, **arguments: Any) -> dict[str, Any]:
        return {"id": f"call_{stage}_{i}", "name": name, "arguments": arguments}

    if stage == 0:
        first = call(0, "lookup_stock", isbn="978-0", card=CARD)
        return (
            "I should check stock and shipping.",
            [
                first,
                call(1, "shipping_cost", weight_kg=1.5, zone="EU"),
            ],
            "",
        )
    if stage == 1:
        return (
            "Now the catalog and the bill.",
            [
                call(0, "catalog_dump", section="fiction"),
                call(1, "split_bill", total=30, people=3),
            ],
            "",
        )
    if stage == 2:
        return (
            "Try the odd cases.",
            [
                call(0, "shipping_cost", weight_kg=1, zone="moon"),
                call(1, "split_bill", total=30, people=-1),
            ],
            "",
        )
    return "Time to answer.", [], ANSWER


def _events(model: str, body: dict[str, Any]) -> bytes:
    reasoning, calls, text = decide(body)

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model}
        return b"data: " + json.dumps({**data, "choices": [choice]}).encode() + b"\n\n"

    half = len(reasoning) // 2
    out = [chunk({"role": "assistant", "content": None})]
    out += [chunk({"reasoning_content": reasoning[:half]})]
    out += [chunk({"reasoning_content": reasoning[half:]})]
    if text:
        out += [chunk({"content": text[:10]}), chunk({"content": text[10:]})]
    for i, c in enumerate(calls):
        args = json.dumps(c["arguments"])
        head = {"index": i, "id": c["id"], "type": "function"}
        opening = {**head, "function": {"name": c["name"], "arguments": args[:5]}}
        out.append(chunk({"tool_calls": [opening]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[5:]}}]}))
    out.append(chunk({}, "tool_calls" if calls else "stop"))
    prompt = len(json.dumps(body)) // 4
    usage = {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20}
    last = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": model}
    out.append(b"data: " + json.dumps({**last, "choices": [], "usage": usage}).encode() + b"\n\n")
    return b"".join([*out, b"data: [DONE]\n\n"])


class _Handler(QuietHandler):
    def do_POST(self) -> None:
        body = json.loads(self.body())
        owner: ReasoningServer = self.owner
        with owner.lock:
            owner.requests.append(body)
            n = len(owner.requests)
        if owner.hold_from and n >= owner.hold_from:
            owner.released.wait()
        self.send(200, "text/event-stream", _events(body["model"], body))


class ReasoningServer(LocalServer):
    """The model on 127.0.0.1 (``port``, or a free one) in a thread; ``requests`` keeps every
    body; ``hold_from=n`` keeps the n-th request on unanswered until the block ends. The port is
    part of what a run records (the host's reasoning is kept under ``127.0.0.1:<port>``), so a
    run resumed against a restarted server needs the same one."""

    def __init__(self, hold_from: int = 0, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.hold_from = hold_from
        super().__init__(_Handler, port)

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def close(self) -> None:
        self.released.set()  # a held request ends (its client is gone by then)
        super().close()
