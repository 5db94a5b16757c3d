"""``loopctl-sim resume``: finish a run whose process died, from its trace.

    loopctl-sim resume run.jsonl --agent mypkg.agent:build
    loopctl-sim resume run.jsonl.gz --out finished.jsonl.gz

The brain is rebuilt from the trace (cut anywhere: the last periodic snapshot, if the run was
recorded with ``--snapshot-every``, then the records after it) and put into the agent the factory
builds today, which runs the rest of the run live; the continuation is recorded in the trace (or
in ``--out``). A tool whose result the trace holds is not run again. See
``loopctl_sim.replay.continuation``.

Exit codes: 0 the run completed (or had ended: nothing to resume); 1 it ended otherwise, or the
trace's brain and today's engine disagree (the message names the record); 2 an unreadable trace
(``file:line``), an agent that cannot be built, a bad argument. Ctrl-C cancels the resumed run
(its trace ends with the cancel), a second Ctrl-C aborts.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

from loopctl.core import Completed
from loopctl.driver import CancelSignal
from loopctl.terminal import Interrupts
from loopctl_sim.cli.common import agent_or_configured, die, emit_json
from loopctl_sim.replay import ResumeError, ResumeResult, resume_trace_async
from loopctl_sim.sim import AgentError
from loopctl_sim.sim.session import recorded_turns
from loopctl_sim.trace import TraceFormatError

__all__ = ["resume"]


@click.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "--agent",
    default=None,
    metavar="MODULE:FACTORY",
    help="The agent that goes on with the run, built by this factory (imported from the "
    "current directory and PYTHONPATH). Default: [tool.loopctl] agent in pyproject.toml.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the trace's records and the continuation to this file (gzip-compressed when "
    "it ends in .gz) and leave TRACE as it is. Needed when TRACE is - (stdin).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def resume(trace: str, agent: str | None, out: str | None, as_json: bool) -> None:
    """Rebuild the brain of the run in TRACE and finish the run with your agent."""
    agent = agent_or_configured(agent)
    if agent is None:
        die("resume needs the agent that goes on with the run: --agent MODULE:FACTORY")
    if trace == "-" and out is None:
        die("a trace read from stdin is resumed into a new file: give --out")
    cancel = CancelSignal()
    interrupts = Interrupts(cancel)

    async def go() -> ResumeResult:
        interrupts.attach(asyncio.get_running_loop())
        return await resume_trace_async(trace, agent, out=out, cancel=cancel)

    try:
        with interrupts:
            resumed = asyncio.run(go())
    except TraceFormatError as exc:
        die(str(exc))
    except AgentError as exc:
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
        "outcome": None if result is None else result.outcome.model_dump(mode="json"),
        "digest": None if result is None else point.machine.digest(),
        "notes": resumed.notes,
        "warnings": point.warnings,
    }
