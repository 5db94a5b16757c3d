"""Hypothesis profiles for the property tests: ``dev``, ``ci`` and ``nightly``.

``load_profile()`` registers them and loads the one named by the environment variable
``HYPOTHESIS_PROFILE`` (default ``dev``); call it once from ``tests/conftest.py``. CI sets
``HYPOTHESIS_PROFILE=ci``; the nightly job sets ``nightly``.

No profile has a deadline, and none runs the ``too_slow`` health check: the tests make no timing
claims, and a slow or busy machine must not turn a correct run red. ``ci`` is derandomized, so
the same commit explores the same examples on every run, and prints a ``@reproduce_failure``
blob for any failure. Hypothesis's example database is not stable across its versions: commit
a failing example as an ``@example`` or a regular test, never rely on the database to keep it.
"""

from __future__ import annotations

import os
from typing import Final

from hypothesis import HealthCheck, Phase, settings

ENV_VAR: Final = "HYPOTHESIS_PROFILE"
DEFAULT_PROFILE: Final = "dev"

_BASE: Final = settings.get_profile("default")

PROFILES: Final[dict[str, settings]] = {
    # Fast local runs: a handful of seconds for the whole property suite.
    "dev": settings(
        _BASE,
        max_examples=30,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    ),
    # Reproducible and informative: same examples every run, blob printed on failure.
    "ci": settings(
        _BASE,
        max_examples=100,
        stateful_step_count=30,
        deadline=None,
        derandomize=True,
        print_blob=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    ),
    # Many examples, longer programs; run on a schedule, not on every push.
    "nightly": settings(
        _BASE,
        max_examples=5_000,
        stateful_step_count=80,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
        phases=list(Phase),
    ),
}

#: The stateful step count each profile uses (``settings.stateful_step_count``), for tests that
#: want to scale their own loops the same way.
STEP_COUNTS: Final = {name: s.stateful_step_count for name, s in PROFILES.items()}

_registered = False


def register_profiles() -> None:
    """Register the three profiles with hypothesis (idempotent)."""
    global _registered
    if _registered:
        return
    for name, profile in PROFILES.items():
        settings.register_profile(name, profile)
    _registered = True


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
    register_profiles()
    name = profile_name()
    settings.load_profile(name)
    return name


def profile_settings() -> settings:
    """The settings of the profile the environment asks for, without loading it globally.

    Use as a parent: ``settings(profile_settings(), stateful_step_count=20)``.
    """
    register_profiles()
    return settings.get_profile(profile_name())
