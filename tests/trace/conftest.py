"""The trace tests import ``sim_helpers`` by name: the shared helpers of tests/sim_support go on
``sys.path``; this folder is there already (pytest puts each test file's folder first)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for name in ("sim_support",):
    folder = str(TESTS / name)
    if folder not in sys.path:
        sys.path.insert(0, folder)
