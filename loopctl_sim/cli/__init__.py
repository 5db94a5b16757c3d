"""The ``loopctl-sim`` command line: one module per command group, registered on one click group;
``common`` holds what they share (errors, exit codes, JSON output, trace paths). The top of the
harness: it may import every layer below; nothing imports it.
"""

import click

from loopctl_sim.cli.export_cmd import export_test
from loopctl_sim.cli.fork_cmd import fork_run
from loopctl_sim.cli.fuzz_cmd import fuzz, mcp_faults
from loopctl_sim.cli.replay_cmd import replay
from loopctl_sim.cli.resume_cmd import resume
from loopctl_sim.cli.run_cmd import run
from loopctl_sim.cli.session_cmd import session
from loopctl_sim.cli.trace_cmds import diff, html, otel, schema, show

__all__ = ["COMMANDS", "main"]

#: Every command of the group, in the order ``--help`` lists them.
COMMANDS: tuple[click.Command, ...] = (
    replay,
    resume,
    fork_run,
    show,
    diff,
    html,
    otel,
    run,
    fuzz,
    session,
    mcp_faults,
    export_test,
    schema,
)


@click.group()
def main() -> None:
    """Record, replay and simulate loopctl runs."""


for _command in COMMANDS:
    main.add_command(_command)
