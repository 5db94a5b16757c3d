"""``loopctl-sim fuzz``: a seeded fault-injection campaign, its failures and their reproducers;
``loopctl-sim mcp-faults``: one at the MCP transport of the user's agent.

Targets: the built-in world (``--level machine|driver``) or the user's agent (``--agent``, or
``[tool.loopctl] agent``; ``--builtin`` ignores that); with ``--user-turns``, ``--user`` or
``--repeat``, an agent's sessions (``loopctl_sim.cli.session_cmd``, in this process). The seeds
run here, in ``--workers N`` processes or on a Dask ``--cluster``; ``--state FILE`` makes the
campaign resumable. The results are the same everywhere.

Exit 0 when every seed passes, 1 when any fails, 2 on bad arguments (or an agent or check that
cannot be loaded, here or on a worker; a state file of another campaign; a scheduler that cannot
be reached), 130 when interrupted (a campaign with ``--state`` goes on where it stopped).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import sys

import click

from loopctl.terminal import visible
from loopctl.tools.mcp import McpError
from loopctl_sim.cli.common import (
    agent_option,
    agent_or_configured,
    check_option,
    deterministic_option,
    die,
    load_checks,
    tool_exceptions_option,
)
from loopctl_sim.cli.fuzz_report import CampaignProgress, failure_lines, summary_tables
from loopctl_sim.cli.session_cmd import session_campaign
from loopctl_sim.fuzz import FuzzConfig, parse_faults, parse_seeds, run_campaign
from loopctl_sim.fuzz.agent_case import agent_profile
from loopctl_sim.fuzz.campaign import OutputError, prepare
from loopctl_sim.fuzz.cluster import ClusterError, DaskCluster, parse_cluster
from loopctl_sim.fuzz.executors import Executor, WorkerSetupError, default_chunk_size
from loopctl_sim.fuzz.mcp_campaign import DEFAULT_INPUT, mcp_fault_campaign
from loopctl_sim.fuzz.sessions import SessionFuzzConfig
from loopctl_sim.fuzz.state import CampaignState, StateError
from loopctl_sim.sim import AgentError
from loopctl_sim.sim.agent_run import tool_modes
from loopctl_sim.trace import scrub_text
from loopctl_sim.view import make_console

#: The defaults of the options that go with --agent: (--tools, --exempt, --deterministic,
#: --input, --recorded, --tool-exceptions).
_AGENT_DEFAULTS = ("live", (), None, (), (), True)


def _rerun(seed: int, args: list[tuple[str, str | None]]) -> str:
    """The command line that runs ``seed`` again with the campaign's options (values quoted
    for a POSIX shell). Each value is scrubbed before it is quoted: the quoting of an
    ``--input`` like ``password='a b c'`` would hide the quoted value from a scrub of the line."""
    parts = ["loopctl-sim fuzz", f"--seeds {seed}:{seed + 1}"]
    for flag, value in args:
        if value is not None:
            parts.append(f"{flag} {shlex.quote(scrub_text(value))}" if value else flag)
    return " ".join(parts)


def _agent_config(agent: str, config: FuzzConfig) -> None:
    """Load the agent and the checks now, so that a mistake is one clear error (exit 2)."""
    try:
        profile = agent_profile(agent, config.cwd)
        modes = tool_modes(config.tools, profile.tools)
        if not config.recorded and any(modes(t) == "recorded" for t in profile.tools):
            raise ValueError(
                "--tools recorded answers tools from traces: name them with --recorded"
            )
        unknown = sorted(set(config.exempt) - set(profile.tools))
        if unknown:
            raise ValueError(f"--exempt: the agent has no tool {', '.join(unknown)}")
    except (AgentError, ValueError) as exc:
        die(str(exc))


@click.command("fuzz")
@click.option(
    "--seeds",
    "seeds_arg",
    default="0:1000",
    show_default=True,
    help="Seeds to run: START:STOP (half-open), N, or N,M,...",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Processes to spread the seeds over.",
)
@click.option(
    "--cluster",
    default=None,
    metavar="ADDRESS|local[:N]",
    help="Run the seeds on a Dask cluster: its scheduler's address (tcp://host:8786), or "
    "local:N for a LocalCluster of N worker processes here (needs loopctl[dask]).",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds to wait for the --cluster scheduler (and a first worker).",
)
@click.option(
    "--state",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Record finished chunks of seeds in FILE; the same command again resumes the "
    "campaign without running them again.",
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1),
    default=None,
    help="Seeds per chunk sent to a worker (default: about 8 chunks per worker, at most 100).",
)
@click.option(
    "--faults",
    default="all",
    show_default=True,
    help="Fault kinds to draw from: all, none, or a comma list (e.g. network,crash).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="fuzz-failures",
    show_default=True,
    help="Directory for failing traces and shrunk scenarios.",
)
@click.option(
    "--turns",
    type=click.IntRange(min=1),
    default=None,
    help="About how many model replies a run has (default 20; an agent's, 12).",
)
@click.option(
    "--level",
    type=click.Choice(["machine", "driver"]),
    default="machine",
    show_default=True,
    help="The built-in world against the brain alone, or through the real BareLoop.",
)
@agent_option(
    "Fuzz your agent, built by this factory: the exploring model, your tools live, the "
    "faults around them. Default: [tool.loopctl] agent in pyproject.toml."
)
@click.option(
    "--builtin", is_flag=True, help="Fuzz the built-in world even if pyproject names an agent."
)
@click.option(
    "--tools",
    default="live",
    show_default=True,
    metavar="live|simulated|recorded|MODE:A,B",
    help="With an agent: run its tools for real, answer them with a stand-in, or with what "
    "--recorded traces hold for the same call; live:A,B runs those (the others simulated), "
    "simulated:A,B and recorded:A,B those so (the others live).",
)
@click.option(
    "--recorded",
    multiple=True,
    type=click.Path(exists=True),
    metavar="TRACE|DIR",
    help="With --tools recorded: traces whose tool results answer the recorded tools.",
)
@click.option(
    "--exempt",
    multiple=True,
    metavar="TOOL[,TOOL]",
    help="With an agent: tools no fault may strike (tools with side effects). Repeatable.",
)
@check_option("A check of your own, run on every run's result and trace. Repeatable.")
@deterministic_option(
    "With an agent: say whether its tools give the same results for the same calls "
    "(default: find out by running each seed twice)."
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="TEXT",
    help="With an agent: a task the runs start from (repeatable; default: generic tasks).",
)
@tool_exceptions_option(
    "With an agent: an exception a tool does not declare (@tool(raises=...)), or a tool "
    "hook's or tool middleware's, fails the seed."
)
@click.option(
    "--user",
    default=None,
    metavar="MODULE:MAKE_USER",
    help="With an agent: fuzz sessions whose user make_user(seed, turns) builds "
    "(loopctl_sim.sim.users); implies sessions.",
)
@click.option(
    "--user-turns",
    type=click.IntRange(min=1),
    default=None,
    help="With an agent: fuzz sessions of N user turns (the seeded exploring user unless "
    "--user), checked across their runs.",
)
@click.option(
    "--repeat",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="With an agent: run each seed's session K times and report how often each check "
    "held (pass^k); alone, each seed is a session of one turn.",
)
@click.option("--no-shrink", is_flag=True, help="Save failures without shrinking them.")
@click.option("--progress/--no-progress", default=None, help="Show a progress bar (default: tty).")
def fuzz(
    seeds_arg: str,
    workers: int,
    cluster: str | None,
    connect_timeout: float,
    state: str | None,
    chunk_size: int | None,
    faults: str,
    out: str,
    turns: int | None,
    level: str,
    agent: str | None,
    builtin: bool,
    tools: str,
    recorded: tuple[str, ...],
    exempt: tuple[str, ...],
    checks: tuple[str, ...],
    deterministic: bool | None,
    inputs: tuple[str, ...],
    tool_exceptions: bool,
    user: str | None,
    user_turns: int | None,
    repeat: int,
    no_shrink: bool,
    progress: bool | None,
) -> None:
    """Run a fault-injection campaign over --seeds; exit 1 if any seed fails.

    Each seed builds one world (replies, tools, a swarm of faults); each is run with the
    invariants checked after every step, twice for determinism, once with a crash/restore, and
    followed by a heal run that must complete. With --agent, the world is your agent: its own
    loop, tools, hooks and compactor, a model that explores its tool schemas, and faults around
    the model, the tools and the run.
    """
    try:
        seeds = parse_seeds(seeds_arg)
        kinds = parse_faults(faults)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    if not builtin:
        agent = agent_or_configured(agent)
    if agent is not None and builtin:
        die("--builtin fuzzes the built-in world: drop --agent")
    exempt_names = tuple(n.strip() for item in exempt for n in item.split(",") if n.strip())
    config = FuzzConfig(
        faults=kinds,
        turns=turns or (12 if agent else 20),
        level="driver" if agent else level,
        shrink=not no_shrink,
        agent=agent,
        tools=tools,
        recorded=tuple(os.path.abspath(p) for p in recorded),
        exempt=exempt_names,
        checks=checks,
        deterministic=deterministic,
        inputs=inputs,
        cwd=os.getcwd(),
        check_tool_exceptions=tool_exceptions,
    )
    if user is not None or user_turns is not None or repeat > 1:
        if agent is None:
            die("--user, --user-turns and --repeat fuzz an agent's sessions: give --agent")
        if workers != 1 or cluster is not None or state is not None:
            die("a session campaign runs in this process: drop --workers, --cluster, --state")
        session_config = SessionFuzzConfig(
            agent=agent,
            user=user,
            # --repeat alone: one turn, a single run per seed, repeated
            user_turns=user_turns or (3 if user is not None else 1),
            faults=kinds,
            turns=turns or 6,
            checks=checks,
            check_determinism=deterministic is not False,
            repeat=repeat,
            shrink=not no_shrink,
            tools=tools,
            exempt=exempt_names,
            cwd=os.getcwd(),
        )
        sys.exit(session_campaign(seeds, session_config, out))
    load_checks(checks, config.cwd)
    if agent is not None:
        _agent_config(agent, config)
    elif (tools, exempt, deterministic, inputs, recorded, tool_exceptions) != _AGENT_DEFAULTS:
        die(
            "--tools, --recorded, --exempt, --deterministic, --input and --no-tool-exceptions "
            "go with --agent"
        )
    target = f"agent {agent}" if agent else f"the built-in world, {config.level} level"
    if cluster is not None and workers != 1:
        die("--workers and --cluster: the cluster's workers run the seeds, choose one")
    errors = make_console(stderr=True)
    with contextlib.ExitStack() as stack:
        executor: Executor | None = None
        where = f"{workers} worker(s)"
        if cluster is not None:
            try:
                dask = stack.enter_context(
                    DaskCluster(parse_cluster(cluster), connect_timeout=connect_timeout)
                )
                dask.check_workers(functools.partial(prepare, config))
            except (ClusterError, WorkerSetupError, ValueError) as exc:
                die(str(exc))
            executor, workers, where = dask, dask.workers, dask.where
        size = chunk_size or default_chunk_size(len(seeds), workers)
        resumable = None
        if state is not None:
            try:
                resumable = stack.enter_context(
                    CampaignState.open(state, seeds=seeds, config=config, out=out, chunk_size=size)
                )
            except StateError as exc:
                die(str(exc))
        errors.print(
            f"fuzz: {target}; {len(seeds)} seeds, faults {faults}, {where}, failures to {out}",
            soft_wrap=True,
        )
        done = resumable.seeds_done if resumable is not None else 0
        found = sum(len(s.failures) for s in resumable.finished().values()) if resumable else 0
        if resumable is not None and resumable.resumed:
            errors.print(
                f"resuming {resumable.path}: {len(resumable.finished())} of {resumable.chunks} "
                f"chunks done ({done} seeds), chunks of {resumable.chunk_size}",
                soft_wrap=True,
            )
        show = errors.is_terminal if progress is None else progress
        bar = CampaignProgress(len(seeds), console=errors, show=show, done=done, failing=found)
        try:
            with bar:
                summary = run_campaign(
                    seeds,
                    config,
                    workers=workers,
                    out=out,
                    on_result=bar.seed_done,
                    chunk_size=size,
                    executor=executor,
                    state=resumable,
                )
        except (WorkerSetupError, ClusterError, StateError, OutputError) as exc:
            die(str(exc))
        except KeyboardInterrupt:
            again = f": run the same command to go on ({resumable.path})" if resumable else ""
            die(f"interrupted{again}", 130)
    args: list[tuple[str, str | None]] = [
        ("--agent", agent),
        ("--level", level if agent is None and level != "machine" else None),
        ("--faults", faults if faults != "all" else None),
        ("--turns", str(turns) if turns else None),
        ("--tools", tools if tools != "live" else None),
        *(("--recorded", path) for path in recorded),
        ("--exempt", ",".join(exempt_names) or None),
        *(("--check", spec) for spec in checks),
        *(("--input", text) for text in inputs),
    ]
    if deterministic is not None:
        args.append(("--deterministic" if deterministic else "--nondeterministic", ""))
    if not tool_exceptions:
        args.append(("--no-tool-exceptions", ""))
    # the campaign's checks as ``run --checks`` and ``export-test`` take them
    checked = ("--check", "--deterministic", "--nondeterministic", "--no-tool-exceptions")
    flags = [word for flag, value in args if flag in checked for word in (flag, value) if word]
    console = make_console()
    # what is printed is scrubbed as the traces are (an --input may hold a secret), and its
    # control characters shown as escapes (a tool's error may quote what it fetched)
    secret = any(scrub_text(text) != text for text in inputs)
    for r in summary.failures:
        lines = failure_lines(r, _rerun(r.seed, args), agent, level=config.level, flags=flags)
        for line in lines:
            console.print(visible(scrub_text(line)), soft_wrap=True, markup=False)
    if secret and summary.failures:
        console.print(
            "note: an --input holds a secret: the commands above show it scrubbed, as the "
            "traces and scenarios hold it; give it again to run them",
            soft_wrap=True,
        )
    for table in summary_tables(summary, target):
        console.print(table)
    for note, count in sorted(summary.notes.items()):
        line = visible(scrub_text(f"note ({count} seeds): {note}"))
        console.print(line, soft_wrap=True, markup=False)
    console.print(
        f"{summary.seeds} seeds, {summary.runs} simulated runs, {summary.steps} steps checked; "
        f"{len(summary.failures)} failing seed(s)"
    )
    sys.exit(0 if summary.ok else 1)


@click.command("mcp-faults")
@click.option("--agent", required=True, metavar="MODULE:FACTORY", help="The agent to fuzz.")
@click.option("--seeds", default="0:20", show_default=True, help="START:STOP, N or N,M,...")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="mcp-fault-failures",
    show_default=True,
    help="Where a failing seed's trace is kept.",
)
@click.option("--input", "question", default=DEFAULT_INPUT, help="What the agent is asked.")
@click.option("--turns", type=click.IntRange(min=1), default=8, show_default=True)
def mcp_faults(agent: str, seeds: str, out: str, question: str, turns: int) -> None:
    """Fault the agent's MCP servers, one fault a seed (the server dies, answers slowly,
    answers something malformed, changes its tool list mid-run); each run must end typed and
    its trace replay with the server absent. Exit 1 if a seed fails."""
    try:
        chosen = parse_seeds(seeds)
        found = mcp_fault_campaign(agent, chosen, out=out, input=question, turns=turns)
    except (AgentError, ValueError, McpError) as exc:
        die(str(exc))
    for each in found:
        verdict = "ok" if each.problem is None else "FAIL"
        fault = f"{each.fault.kind} at call {each.fault.at_call}"
        if each.fault.kind == "tools_change":
            fault += f" (drops {each.fault.drop})"
        click.echo(f"seed {each.seed}: {verdict}: server '{each.server}' {fault}; {each.outcome}")
        if each.problem is not None:
            click.echo(f"  {each.problem}\n  trace: {each.trace}")
    failing = sum(1 for each in found if each.problem is not None)
    click.echo(f"{len(found)} seeds, {failing} failing seed(s)")
    if failing:
        raise SystemExit(1)
