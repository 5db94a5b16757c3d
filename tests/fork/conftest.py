"""Fixtures of the fork tests: the local travel model on 127.0.0.1 (a free port), and this
folder importable (the agent variants and client factories the CLI names as MODULE:FACTORY)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # ``examples`` importable
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from fork_agents import KEY  # noqa: E402

from examples.model_server import ModelServer  # noqa: E402


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    with ModelServer(api_key=KEY) as server:
        yield server
