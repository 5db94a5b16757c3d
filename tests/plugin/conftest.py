"""The plugin tests: a local fake OpenAI-compatible server for the recordings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fake OpenAI server on 127.0.0.1 for this test (it answers only when a test records)."""
    with FakeOpenAI() as server:
        yield server
