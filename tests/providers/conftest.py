"""Provider tests: offline unless --loopctl-record-mode records (see vcr_support)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from vcr_support import record_mode

from loopctl.testing import block_network


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    """Overrides the suite's guard: lifted only while re-recording cassettes."""
    if record_mode() != "none":
        yield
        return
    with block_network():
        yield


@pytest.fixture(autouse=True)
def _clean_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see no provider settings from the developer's shell (kept while recording)."""
    if record_mode() != "none":
        return
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
