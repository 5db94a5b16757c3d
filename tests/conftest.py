"""Every test runs with the network blocked (an accidental provider call fails loudly), and the
hypothesis profile comes from HYPOTHESIS_PROFILE (dev by default; CI sets ci)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loopctl.testing import block_network
from loopctl_sim.props.profiles import load_profile

load_profile()


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    with block_network():
        yield
