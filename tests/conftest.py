"""Every test runs with the network blocked: an accidental provider call fails loudly."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loopctl.testing import block_network


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    with block_network():
        yield
