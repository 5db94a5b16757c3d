"""The session tests import the examples (``examples.support_agent``, ``examples.model_server``)
and their helper module ``session_agents`` by name: the checkout's root and this folder come
first on ``sys.path``."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (str(HERE.parents[1]), str(HERE)):
    if folder not in sys.path:
        sys.path.insert(0, folder)
