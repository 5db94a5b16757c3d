"""Hypothesis profiles for the property tests: ``dev``, ``ci`` (derandomized: the same commit
explores the same examples on every run) and ``nightly``; ``HYPOTHESIS_PROFILE`` picks one.

No profile has a deadline or runs the ``too_slow`` health check: the tests make no timing
claims, and a busy machine must not turn a correct run red. Hypothesis's example database is
not stable across its versions: commit a failing example as an ``@example``.
"""

from __future__ import annotations

import os
from typing import Final

from hypothesis import HealthCheck, Phase, settings

ENV_VAR: Final = "HYPOTHESIS_PROFILE"
DEFAULT_PROFILE: Final = "dev"

_BASE: Final = settings(
    settings.get_profile("default"),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

PROFILES: Final[dict[str, settings]] = {
    # Fast local runs: a handful of seconds for the whole property suite.
    "dev": settings(_BASE, max_examples=30),
    # Reproducible and informative: same examples every run, blob printed on failure.
    "ci": settings(_BASE, max_examples=100, derandomize=True, print_blob=True, database=None),
    # Many examples, longer programs; run on a schedule, not on every push.
    "nightly": settings(
        _BASE, max_examples=5_000, stateful_step_count=80, print_blob=True, phases=list(Phase)
    ),
}


def profile_name() -> str:
    """The profile the environment asks for (``HYPOTHESIS_PROFILE``, default ``dev``)."""
    name = os.environ.get(ENV_VAR, "").strip() or DEFAULT_PROFILE
    if name not in PROFILES:
        raise ValueError(
            f"{ENV_VAR}={name!r} is not a loopctl profile; choose one of {sorted(PROFILES)}"
        )
    return name


def load_profile() -> str:
    """Register the profiles and load the one named by ``HYPOTHESIS_PROFILE``; return its name."""
    for name, profile in PROFILES.items():
        settings.register_profile(name, profile)
    name = profile_name()
    settings.load_profile(name)
    return name


def profile_settings() -> settings:
    """The settings of the profile the environment asks for, without loading it globally: a
    parent, as in ``settings(profile_settings(), stateful_step_count=20)``."""
    return PROFILES[profile_name()]
