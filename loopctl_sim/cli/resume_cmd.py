"""``loopctl-sim resume``: finish a run whose process died, from its trace.

The brain is rebuilt from the trace (its last periodic snapshot, then the records after it) and
put into the agent the factory builds today, which runs the rest live; the continuation is
recorded in the trace (or ``--out``). A tool whose result the trace holds is not run again
(``loopctl_sim.replay.continuation``). The model goes on as the run had it: docs/driver.md has
the rules for a run whose model ``loopctl run`` named and for its built-in agent
(``_client``, ``_builtin_agent``).

Exit codes: 0 the run completed (or had ended); 1 it ended otherwise, or the trace's brain and
today's engine disagree; 2 an unreadable trace, an agent that cannot be built, a bad argument.
Ctrl-C cancels the resumed run (its trace ends with the cancel), a second Ctrl-C aborts.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click

from loopctl.api import ApiClient
from loopctl.cli import PROVIDERS, calculator, make_client, read_file
from loopctl.core import Completed, MachinePolicy, to_jsonable
from loopctl.driver import BareLoop, CancelSignal, RunConfig, SessionConfig
from loopctl.observe import LoopObserver
from loopctl.providers import MissingApiKeyError
from loopctl.terminal import Interrupts
from loopctl_sim.cli.common import agent_option, agent_or_configured, die, emit_json
from loopctl_sim.replay import ResumeError, ResumeResult, resume_trace_async
from loopctl_sim.sim import AgentError
from loopctl_sim.sim.agent import AgentFactory
from loopctl_sim.sim.session import recorded_turns
from loopctl_sim.trace import HeaderRecord, IoRecord, StepRecord, TraceFormatError, TraceReader
from loopctl_sim.trace.requests import RecordedContexts


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@agent_option(
    "The agent that goes on with the run, built by this factory (imported from the "
    "current directory and PYTHONPATH). Default: loopctl run's built-in agent for a trace "
    "it recorded, else [tool.loopctl] agent in pyproject.toml."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the trace's records and the continuation to this file (gzip-compressed when "
    "it ends in .gz) and leave TRACE as it is. Needed when TRACE is - (stdin).",
)
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS),
    default=None,
    help="The provider of the client the run goes on with (default: the trace's, else openai).",
)
@click.option(
    "--model",
    default=None,
    help="Go on with a client of this model, given to the agent's factory as loopctl run "
    "--model gives it (default: the trace's, when loopctl run named it; else the agent's own).",
)
@click.option("--base-url", default=None, help="Server URL of that client (as loopctl run).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def resume(
    trace: str,
    agent: str | None,
    out: str | None,
    provider: str | None,
    model: str | None,
    base_url: str | None,
    as_json: bool,
) -> None:
    """Rebuild the brain of the run in TRACE and finish the run with your agent."""
    if trace == "-" and out is None:
        die("a trace read from stdin is resumed into a new file: give --out")
    recorded = _recorded(trace)
    builtin = agent is None and recorded.builtin
    runs: str | AgentFactory
    if builtin:
        runs, agent = _builtin_agent(recorded), "loopctl run's built-in agent"
        click.echo(f"note: recorded by {agent}: the run goes on with it", err=True)
    else:
        agent = agent_or_configured(agent)
        if agent is None:
            die("resume needs the agent that goes on with the run: --agent MODULE:FACTORY")
        runs = agent
    client = _client(recorded, provider, model, base_url)
    cancel = CancelSignal()
    interrupts = Interrupts(cancel)

    async def go() -> ResumeResult:
        interrupts.attach(asyncio.get_running_loop())
        try:
            return await resume_trace_async(trace, runs, out=out, cancel=cancel, client=client)
        finally:
            close = getattr(client, "aclose", None)
            if close is not None:
                await close()  # (closes only an HTTP client the provider client made itself)

    try:
        with interrupts:
            resumed = asyncio.run(go())
    except (TraceFormatError, AgentError) as exc:
        die(str(exc))
    except ResumeError as exc:
        die(f"cannot resume: {exc}", 1)
    except KeyboardInterrupt:
        die("aborted (interrupted twice): the resumed run did not finish", interrupts.exit_code)
    for warning in resumed.point.warnings:
        click.echo(f"warning: {warning}", err=True)
    ok = resumed.result is None or isinstance(resumed.result.outcome, Completed)
    if as_json:
        emit_json(_as_json(resumed, ok))
    else:
        click.echo(resumed.summary())
        for note in resumed.notes:
            click.echo(f"note: {note}")
        turns = recorded_turns(resumed.trace) if trace != "-" else []
        if turns:  # a session's trace: this finished its run, not the user's remaining turns
            click.echo(
                f"note: the trace is a session's ({len(turns)} user turns in it); "
                f"loopctl-sim session --resume TRACE --agent {agent} (SCENARIO or --user) "
                "also runs the turns after them"
            )
    sys.exit(0 if ok else 1)


@dataclass
class _Recorded:
    """What the trace says of the client and the agent its run had: its first header's
    metadata, its first step's policy, and the request context in force at its last request."""

    metadata: dict[str, Any] = field(default_factory=dict)
    policy: MachinePolicy | None = None
    context: dict[str, Any] = field(default_factory=dict)

    @property
    def builtin(self) -> bool:
        return bool(self.metadata.get("builtin"))

    @property
    def model_given(self) -> bool:
        """Whether the run's model was named on ``loopctl run``'s command line."""
        return self.builtin or self.metadata.get("model_from") == "--model"


def _recorded(trace: str) -> _Recorded:
    """The trace read for ``_Recorded`` (past its first header only when ``loopctl run`` named
    its model); a record that cannot be read ends the reading (the resume itself then says
    where the trace is damaged)."""
    recorded = _Recorded()
    contexts = RecordedContexts()
    headers = 0
    try:
        for rec in TraceReader(trace):
            if isinstance(rec, HeaderRecord):
                headers += 1
                if headers == 1:
                    recorded.metadata = dict(rec.metadata)
                    if not recorded.model_given:
                        break  # the agent's own client: nothing more to read (a long run)
            elif isinstance(rec, StepRecord) and recorded.policy is None:
                recorded.policy = rec.policy
            elif isinstance(rec, IoRecord) and rec.kind == "model_request":
                recorded.context = contexts.follow(rec.data) or recorded.context
    except (TraceFormatError, OSError, ValueError):
        pass
    return recorded


def _client(
    recorded: _Recorded, provider: str | None, model: str | None, base_url: str | None
) -> ApiClient | None:
    """The client the run goes on with (None: the agent's own; the rules are docs/driver.md's).
    A client that cannot be built, or would reach another endpoint than the trace's requests
    did, ends the command with one line (exit 2)."""
    if model is None and not recorded.model_given:
        if provider is not None or base_url is not None:
            die("--provider and --base-url need --model: they name the agent's client")
        return None
    chosen = model is not None or provider is not None or base_url is not None
    why = ""
    if model is None:
        named = recorded.metadata.get("model")
        if not isinstance(named, str) or not named:
            die("the trace's run was given its model on the command line but the trace does "
                "not name it: give --model (and --provider, --base-url)")  # fmt: skip
        model, why = named, f" (the trace's model {named}; or give --model)"
    name = provider or recorded.metadata.get("provider") or "openai"
    if name not in PROVIDERS:
        die(f"the trace's provider {name!r} is not one of {', '.join(PROVIDERS)}: give --provider")
    try:
        client = make_client(str(name), model, base_url=base_url)
    except MissingApiKeyError as exc:
        key = exc.error.details.get("provider", name)
        die(f"no {key} API key: set the {exc.env_var} environment variable{why}")
    reached = recorded.context.get("provider")
    if not chosen and isinstance(reached, str) and reached != client.provider:
        die(f"the trace's model {model} was reached at {reached}, this client would reach "
            f"{client.provider}: give --base-url (or --provider, --model)")  # fmt: skip
    return client


def _builtin_agent(recorded: _Recorded) -> AgentFactory:
    """``loopctl run``'s built-in agent as the trace's run had it: its two tools, the recorded
    turn limit and system prompt, the client the resume gives it."""
    max_turns = recorded.policy.max_turns if recorded.policy is not None else 20
    system = recorded.context.get("system")
    session = SessionConfig(system_prompt=system if isinstance(system, str) else None)

    def builtin(client: ApiClient, observers: Sequence[LoopObserver] = ()) -> BareLoop:
        return BareLoop(
            client,
            tools=[calculator, read_file],
            config=RunConfig(max_turns=max_turns),
            session=session,
            observers=list(observers),
        )

    return builtin


def _as_json(resumed: ResumeResult, ok: bool) -> dict[str, Any]:
    point, result = resumed.point, resumed.result
    return {
        "ok": ok,
        "trace": resumed.trace,
        "resumed_from_line": point.line,
        "checkpoint": {"kind": point.restored_from, "line": point.checkpoint},
        "replayed": point.replayed,
        "reused": resumed.reused,
        "dispatched": resumed.dispatched,
        "outcome": None if result is None else to_jsonable(result.outcome),
        "digest": None if result is None else point.machine.digest(),
        "notes": resumed.notes,
        "warnings": point.warnings,
    }
