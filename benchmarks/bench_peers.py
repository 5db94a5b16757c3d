"""The same workload as ``bench_driver``, run by the peers: pydantic-ai, the OpenAI Agents SDK,
LangGraph. Each peer is optional: a peer that is not installed is skipped with a note.

The sync table also has ``loopctl (inline)``: the same ``def add`` with ``@tool(inline=True)``,
run on the event loop (the peers run theirs in a worker thread, as loopctl's default does).

Workload: one run of ``T`` model calls; calls 1..T-1 ask for one call of ``add(a, b)`` (arguments
differ every turn), call ``T`` answers ``FINAL_TEXT``. The model is instant and in-process:

- pydantic-ai: ``FunctionModel`` (``Agent.run``, ``UsageLimits(request_limit=None)``, no logfire);
- OpenAI Agents SDK: a ``Model`` subclass that answers from a counter (``Runner.run``,
  ``max_turns=T + 5``, ``set_tracing_disabled(True)`` and ``RunConfig(tracing_disabled=True)``);
- LangGraph: ``StateGraph(MessagesState)`` with an agent node calling langchain-core's
  ``GenericFakeChatModel`` and a prebuilt ``ToolNode``, routed by ``tools_condition``
  (``ainvoke``, ``recursion_limit`` raised, no callbacks).

The tool body counts its executions; ``measure`` asserts ``T - 1`` executions and the final text
after every timed run. Two tool flavours: ``def add`` (sync; pydantic-ai and LangGraph run it in a
worker thread, as loopctl does) and ``async def add``.

    python -m benchmarks.bench_peers [--smoke]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from benchmarks.bench_driver import (
    FINAL_TEXT,
    REPEATS,
    TURNS,
    Counter,
    Prepare,
    loopctl_prepare,
    paired_ratio,
    tool_arguments,
)
from benchmarks.bench_driver import (
    table as measure_table,
)

__all__ = ["GOALS", "PEERS", "available", "goals", "run", "versions"]

# pydantic-ai / logfire: never send anything anywhere.
os.environ.setdefault("LOGFIRE_IGNORE_NO_CONFIG", "1")
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("LANGCHAIN_TRACING_V2", "false")
os.environ.setdefault("LANGSMITH_TRACING", "false")

PROMPT = "add some numbers"
#: loopctl's row with the sync tool run on the event loop (``@tool(inline=True)``).
INLINE = "loopctl (inline)"

#: The project's goals against the peers (docs/performance.md, "Goals"), as ratios of a driver
#: turn to the fastest peer's, runs paired by round: goal -> (tool flavour, loopctl row, limit).
#: The worker-thread hop of a default sync tool is most of that turn, hence its looser limit.
GOALS: dict[str, tuple[str, str, float]] = {
    "sync": ("sync", "loopctl", 1 / 20),
    "inline": ("sync", INLINE, 1 / 40),
    "async": ("async", "loopctl", 1 / 40),
}


# --- pydantic-ai -------------------------------------------------------------------------------


def pydantic_ai_prepare(*, is_async: bool) -> Prepare:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    limits = UsageLimits(request_limit=None)

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        calls = [0]

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            calls[0] += 1
            n = calls[0]
            if n >= turns:
                return ModelResponse(parts=[TextPart(FINAL_TEXT)])
            return ModelResponse(
                parts=[ToolCallPart("add", tool_arguments(n), tool_call_id=f"call_{n}")]
            )

        agent: Agent[None, str] = Agent(FunctionModel(model))
        if is_async:

            @agent.tool_plain
            async def add(a: int, b: int) -> int:
                """Add two integers."""
                counter.n += 1
                return a + b

        else:

            @agent.tool_plain
            def add(a: int, b: int) -> int:
                """Add two integers."""
                counter.n += 1
                return a + b

        async def go() -> str:
            result = await agent.run(PROMPT, usage_limits=limits)
            return str(result.output)

        return go

    return prepare


# --- OpenAI Agents SDK -------------------------------------------------------------------------


def openai_agents_prepare(*, is_async: bool) -> Prepare:
    from agents import Agent, Model, ModelResponse, Runner, function_tool, set_tracing_disabled
    from agents import RunConfig as AgentsRunConfig
    from agents.testing import assistant_message, function_call
    from agents.usage import Usage

    set_tracing_disabled(True)
    run_config = AgentsRunConfig(tracing_disabled=True, trace_include_sensitive_data=False)

    class CountingModel(Model):
        """Answers call n with ``add`` for n < T, then the final text."""

        def __init__(self, turns: int) -> None:
            self.turns = turns
            self.calls = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.calls += 1
            n = self.calls
            if n >= self.turns:
                item = assistant_message(FINAL_TEXT, item_id=f"msg_{n}")
            else:
                item = function_call("add", tool_arguments(n), call_id=f"call_{n}")
            return ModelResponse(output=[item], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        if is_async:

            @function_tool
            async def add(a: int, b: int) -> int:
                """Add two integers."""
                counter.n += 1
                return a + b

        else:

            @function_tool
            def add(a: int, b: int) -> int:
                """Add two integers."""
                counter.n += 1
                return a + b

        agent = Agent(name="bench", model=CountingModel(turns), tools=[add])

        async def go() -> str:
            result = await Runner.run(agent, PROMPT, max_turns=turns + 5, run_config=run_config)
            return str(result.final_output)

        return go

    return prepare


# --- LangGraph ---------------------------------------------------------------------------------


def langgraph_prepare(*, is_async: bool) -> Prepare:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool as lc_tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def prepare(turns: int, counter: Counter) -> Callable[[], Awaitable[str]]:
        def replies() -> Any:
            for n in range(1, turns):
                yield AIMessage(
                    content="",
                    tool_calls=[{"name": "add", "args": tool_arguments(n), "id": f"call_{n}"}],
                )
            yield AIMessage(content=FINAL_TEXT)

        model = GenericFakeChatModel(messages=replies())

        if is_async:

            @lc_tool
            async def add(a: int, b: int) -> int:
                """Add two integers."""
                counter.n += 1
                return a + b

        else:

            @lc_tool
            def add(a: int, b: int) -> int:
                """Add two integers."""
                counter.n += 1
                return a + b

        async def agent(state: MessagesState) -> dict[str, Any]:
            reply = await model.ainvoke(state["messages"])
            return {"messages": [reply]}

        graph = StateGraph(MessagesState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode([add]))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        app = graph.compile()
        config: Any = {"recursion_limit": 2 * turns + 10}

        async def go() -> str:
            state = await app.ainvoke({"messages": [HumanMessage(PROMPT)]}, config=config)
            return str(state["messages"][-1].content)

        return go

    return prepare


# --- the table ---------------------------------------------------------------------------------

# name -> (import name that must be present, distribution names for versions, prepare factory)
PEERS: dict[str, tuple[str, tuple[str, ...], Callable[..., Prepare]]] = {
    "pydantic-ai": ("pydantic_ai", ("pydantic-ai-slim", "pydantic-ai"), pydantic_ai_prepare),
    "openai-agents": ("agents", ("openai-agents",), openai_agents_prepare),
    "langgraph": (
        "langgraph",
        ("langgraph", "langgraph-prebuilt", "langchain-core"),
        langgraph_prepare,
    ),
}


def available(name: str) -> bool:
    module = PEERS[name][0]
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def versions() -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in ("loopctl", "pydantic", "pydantic-core"):
        with contextlib.suppress(PackageNotFoundError):
            found[dist] = version(dist)
    for _, dists, _ in PEERS.values():
        for dist in dists:
            with contextlib.suppress(PackageNotFoundError):
                found[dist] = version(dist)
    return found


def run(
    smoke: bool, *, turns: tuple[int, ...] | None = None, repeats: int | None = None
) -> dict[str, Any]:
    """loopctl and every installed peer, side by side, sync and async tool.

    Returns ``{"turns", "repeats", "versions", "skipped", "tables": {"sync": {name: ...},
    "async": {...}}, "goals": {goal: ...}}`` (``GOALS`` names the goals).
    """
    turns = turns or ((10,) if smoke else TURNS)
    repeats = repeats or (1 if smoke else REPEATS)
    skipped: dict[str, str] = {}
    tables: dict[str, dict[str, Any]] = {}
    for flavour in ("sync", "async"):
        is_async = flavour == "async"
        subjects: dict[str, Prepare] = {"loopctl": loopctl_prepare(is_async=is_async)}
        if not is_async:  # beside the worker thread the peers use: a sync tool run inline
            subjects[INLINE] = loopctl_prepare(kind="inline")
        for name, (_, _, factory) in PEERS.items():
            if not available(name):
                skipped[name] = "not installed (pip install -e '.[bench]')"
                continue
            subjects[name] = factory(is_async=is_async)
        tables[flavour] = measure_table(subjects, turns, repeats)
    return {
        "turns": list(turns),
        "repeats": repeats,
        "versions": versions(),
        "skipped": skipped,
        "tables": tables,
        "goals": {
            name: goals(tables[flavour], subject, limit)
            for name, (flavour, subject, limit) in GOALS.items()
        },
    }


def goals(table: dict[str, Any], subject: str = "loopctl", limit: float = 1 / 20) -> dict[str, Any]:
    """``subject`` (a loopctl row of ``table``) against the fastest peer at every T: the ratio,
    and whether it is at most ``limit`` (``GOALS`` holds the project's).

    Judged on wall time (what a user waits for): the fastest peer is the one with the lowest
    median, and the ratio is the median of the two frameworks' runs paired by round
    (``paired_ratio``: the machine's slow phases cancel out of it). The ratio of the two
    medians and the CPU-time ratio are shown beside it.
    """
    out: dict[str, Any] = {}
    peers = [name for name in table if name in PEERS]
    ours = table[subject]
    for i, row in enumerate(ours["rows"]):
        t = row["turns"]
        if not peers:
            out[str(t)] = {"fastest_peer": None}
            continue
        fastest = min(peers, key=lambda p: table[p]["rows"][i]["median_us_per_turn"])
        theirs = table[fastest]["rows"][i]
        ratio = paired_ratio(row["runs_us_per_turn"], theirs["runs_us_per_turn"])
        cpu_fastest = min(peers, key=lambda p: table[p]["rows"][i]["cpu_median_us_per_turn"])
        cpu_theirs = table[cpu_fastest]["rows"][i]["cpu_median_us_per_turn"]
        out[str(t)] = {
            "fastest_peer": fastest,
            "fastest_peer_us": theirs["median_us_per_turn"],
            "loopctl_us": row["median_us_per_turn"],
            "ratio": round(ratio, 3),
            "ratio_of_medians": round(row["median_us_per_turn"] / theirs["median_us_per_turn"], 3),
            "cpu_fastest_peer": cpu_fastest,
            "cpu_ratio": round(row["cpu_median_us_per_turn"] / cpu_theirs, 3),
            "limit": limit,
            "met": ratio <= limit,
        }
    out["loopctl_growth"] = ours["growth"]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_peers")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    result = run(args.smoke)
    from benchmarks.report import print_peers

    print_peers(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
