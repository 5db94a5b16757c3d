"""The ``loopctl-sim`` command line: one module per command group, registered on one click group.

The top of the harness: it may import every layer below; nothing imports it.
"""

from loopctl_sim.cli.main import main

__all__ = ["main"]
