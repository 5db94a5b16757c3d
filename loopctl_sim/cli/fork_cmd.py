"""``loopctl-sim fork``: what if the run had gone otherwise from step N.

The prefix (the records up to the branch point) is replayed against the agent as ``replay
--agent`` replays a trace; a prefix that no longer replays is reported as that replay's
divergence and nothing is written. Then the run goes on live with the model given
(``--provider/--model/--base-url``, or ``--client MODULE:FACTORY`` returning an ``ApiClient``)
and is recorded into ``-o``, which names its parent (``loopctl_sim.replay.fork``).

Exit codes: 0 the forked run completed; 1 the prefix diverged (nothing written) or the run ended
otherwise; 2 a bad branch point (the nearest valid ones are named), edit or argument, an
unreadable trace, an agent or client that cannot be built.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from loopctl.api import ApiClient
from loopctl.cli import PROVIDERS, make_client
from loopctl.core import Completed, Message, ToolResult, to_jsonable
from loopctl.providers import MissingApiKeyError
from loopctl_sim.cli.common import agent_option, agent_or_configured, die, echo, emit_json
from loopctl_sim.fuzz.user_checks import load_function
from loopctl_sim.replay.fork import Edits, ForkDiverged, ForkError, ForkResult, branch_point, fork
from loopctl_sim.sim import AgentError
from loopctl_sim.trace import TraceFormatError
from loopctl_sim.view import make_console, print_divergence


def _client_factory(spec: str) -> ApiClient:
    """The client ``module:factory`` makes (imported from the current directory first)."""
    try:
        factory = load_function(spec, what="--client", form="module:factory")
    except ValueError as exc:
        die(str(exc))
    try:
        made = factory()
    except Exception as exc:  # the user's factory
        die(f"--client {spec!r}: {type(exc).__name__}: {exc}")
    if not callable(getattr(made, "stream", None)):
        die(f"--client {spec!r} returned {type(made).__name__}, not a client (no stream())")
    client: ApiClient = made
    return client


def _file_or_text(value: str) -> Any:
    """``@FILE``: the JSON the file holds; anything else: the text itself."""
    if not value.startswith("@"):
        return value
    try:
        return json.loads(Path(value[1:]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        die(f"{value}: cannot read JSON from it: {exc}")


def _tool_results(values: tuple[str, ...]) -> dict[str, str | ToolResult]:
    """``CALL_ID=TEXT`` pairs, or ``@FILE`` holding ``{"CALL_ID": "text" | {"content": ...,
    "is_error": ...}}``."""
    out: dict[str, str | ToolResult] = {}
    for value in values:
        data = _file_or_text(value)
        if isinstance(data, str):
            call_id, sep, text = data.partition("=")
            if not sep or not call_id:
                die(f"--tool-result {value!r}: expected CALL_ID=TEXT or @FILE.json")
            out[call_id] = text
            continue
        if not isinstance(data, dict):
            die(f"--tool-result {value}: the file holds no object of call id to result")
        for call_id, given in data.items():
            if isinstance(given, str):
                out[call_id] = given
            elif isinstance(given, dict) and isinstance(given.get("content"), str):
                is_error = bool(given.get("is_error", False))
                out[call_id] = ToolResult(
                    call_id=call_id, name="", content=given["content"], is_error=is_error
                )
            else:
                die(f"--tool-result {value}: {call_id}: expected text or {{'content': ...}}")
    return out


def _reply(value: str | None) -> str | Message | None:
    if value is None:
        return None
    data = _file_or_text(value)
    if isinstance(data, str):
        return data
    try:
        message = Message.model_validate(data)
    except ValueError as exc:
        die(f"--reply {value}: not a message: {exc}")
    if message.role != "assistant":
        die(f"--reply {value}: the model's reply is an assistant message, not {message.role}")
    return message


def _options(values: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE``: the value read as JSON (``0.2``, ``true``, ``[1]``), else as text."""
    out: dict[str, Any] = {}
    for value in values:
        key, sep, raw = value.partition("=")
        if not sep or not key:
            die(f"--option {value!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


@click.command("fork")
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--at", "at", type=int, default=None, metavar="SEQ", help="Branch after this record.")
@click.option(
    "--turn",
    type=int,
    default=None,
    metavar="N",
    help="Branch at turn N: right before its model call (its model call with --reply, its tool "
    "wave with --tool-result).",
)
@agent_option("The agent (default: [tool.loopctl] agent in pyproject.toml).")
@click.option("--provider", type=click.Choice(PROVIDERS), default=None, help="The live model's.")
@click.option("--model", default=None, help="The live model (with --provider).")
@click.option("--base-url", default=None, help="Its server URL (compatible servers, Ollama).")
@click.option(
    "--client",
    "client_spec",
    default=None,
    metavar="MODULE:FACTORY",
    help="A function returning the client that goes on (a scripted or function client).",
)
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="New trace.")
@click.option("--inject", default=None, metavar="TEXT", help="A user message at the branch point.")
@click.option(
    "--tool-result",
    "tool_results",
    multiple=True,
    metavar="CALL_ID=TEXT|@FILE",
    help="Replace a recorded result of the wave at the branch point (repeatable).",
)
@click.option(
    "--reply", default=None, metavar="TEXT|@FILE", help="Replace the model's reply at the branch."
)
@click.option("--max-turns", type=int, default=None, help="The policy's max_turns from the branch.")
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A request option from the branch on (VALUE read as JSON, else text; repeatable).",
)
@click.option(
    "--tools",
    default="recorded",
    show_default=True,
    help="How the prefix's tools are replayed: recorded, live or live:NAME[,NAME...].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def fork_run(
    trace: str,
    at: int | None,
    turn: int | None,
    agent: str | None,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    client_spec: str | None,
    out: str,
    inject: str | None,
    tool_results: tuple[str, ...],
    reply: str | None,
    max_turns: int | None,
    options: tuple[str, ...],
    tools: str,
    as_json: bool,
) -> None:
    """Fork the run in TRACE at a step: its prefix verified by replay, then the run goes on live
    with the model given, recorded to --out."""
    if (at is None) == (turn is None):
        die("give the branch point: --at SEQ or --turn N")
    agent = agent_or_configured(agent)
    if agent is None:
        die("fork needs the agent: --agent MODULE:FACTORY")
    if os.path.abspath(out) == os.path.abspath(trace):
        die("--out must be a new file, not the trace forked")
    if (client_spec is None) == (model is None):
        die("give the model that goes on: --provider/--model/--base-url, or --client")
    edits = Edits(
        inject=inject,
        tool_results=_tool_results(tool_results),
        reply=_reply(reply),
        max_turns=max_turns,
        options=_options(options),
    )
    try:
        branch_point(trace, at=at, turn=turn, edits=edits)  # refused before a client is made
        if client_spec is not None:
            client = _client_factory(client_spec)
        else:
            assert model is not None
            client = make_client(provider or "openai", model, base_url=base_url)
        done = fork(trace, at=at, turn=turn, agent=agent, client=client, out=out, edits=edits)
    except MissingApiKeyError as exc:
        die(str(exc))
    except ForkDiverged as exc:
        echo(f"the prefix of {trace} no longer replays against {agent}: nothing was forked", True)
        assert exc.result.divergence is not None
        print_divergence(make_console(), exc.result.divergence, exc.result.path)
        sys.exit(1)
    except (ForkError, TraceFormatError, AgentError, ValueError) as exc:
        die(str(exc))
    except OSError as exc:  # the new trace cannot be written there
        die(f"cannot write {out}: {exc.strerror or exc}")
    ok = isinstance(done.result.outcome, Completed)
    if as_json:
        emit_json(_as_json(done, ok))
    else:
        echo(done.summary())
    sys.exit(0 if ok else 1)


def _as_json(done: ForkResult, ok: bool) -> dict[str, Any]:
    return {
        "ok": ok,
        "trace": done.path,
        "parent": done.parent,
        "at": done.point.seq,
        "branch": done.point.describe(),
        "prefix_records": done.prefix.records,
        "edits": done.edits,
        "outcome": to_jsonable(done.result.outcome),
        "notes": done.notes,
    }
