"""The fuzz tests import ``shop_project`` and ``planting`` by name, and reuse the planted bugs of
tests/props (``test_planted_bugs``, ``test_planted_brain_bugs``): both folders go on
``sys.path``, so a run of this folder alone finds them."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for name in ("sim_support", "props"):
    folder = str(TESTS / name)
    if folder not in sys.path:
        sys.path.insert(0, folder)
