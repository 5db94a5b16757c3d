"""The pytest plugin (``loopctl_sim.plugin.pytest_plugin``, loaded through the ``pytest11`` entry
point ``loopctl``): fixtures and markers for users' own tests, and the cassettes behind them.

It sits at the top of the harness beside the command line and may import every layer below.
The names below are the cassette machinery for code outside a marked test (see docs/ci.md).
Those of ``cassettes`` and ``misses`` need vcrpy (``pip install 'loopctl[cassettes]'``) and are
imported when first asked for, so the plugin itself loads without it.
"""

from __future__ import annotations

import importlib
from typing import Any

from loopctl_sim.plugin.cassette_rules import vcr_config

__all__ = [
    "CassetteMiss",
    "CassetteNotWritten",
    "CassetteSession",
    "CassetteWriteError",
    "use_cassette",
    "vcr_config",
]

_LAZY = {
    "CassetteMiss": "loopctl_sim.plugin.misses",
    "CassetteNotWritten": "loopctl_sim.plugin.cassettes",
    "CassetteSession": "loopctl_sim.plugin.cassettes",
    "CassetteWriteError": "loopctl_sim.plugin.cassettes",
    "use_cassette": "loopctl_sim.plugin.cassettes",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
