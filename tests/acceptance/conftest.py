"""Fixtures of the acceptance suite: a local model server per test (127.0.0.1, a free port)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # ``examples`` importable

from examples.model_server import ModelServer

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:  # the helpers and variants, for tests here and in other folders
    sys.path.insert(0, HERE)

from acceptance_helpers import KEY  # noqa: E402


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """The travel model on 127.0.0.1, wanting ``acceptance_helpers.KEY``."""
    with ModelServer(api_key=KEY) as server:
        yield server
