"""The brain under hypothesis: ``BrainMachine`` (see loopctl_sim/stateful.py and docs/testing.md).

Settings come from the profile named by ``HYPOTHESIS_PROFILE`` (dev by default, ci in CI,
nightly on a schedule); the step count is the profile's.
"""

from __future__ import annotations

from loopctl_sim.profiles import profile_settings
from loopctl_sim.stateful import BrainMachine

TestBrain = BrainMachine.TestCase
TestBrain.settings = profile_settings()
