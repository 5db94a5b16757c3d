"""loopctl: a sans-IO agent-loop engine.

The brain (``LoopMachine``, in ``loopctl.core``) decides; the hands (``BareLoop``) do. Everything a
user needs is importable from here.
"""

from loopctl.core import *  # noqa: F403
from loopctl.core import __all__ as _core_all

__version__ = "0.1.0"

__all__ = [*_core_all, "__version__"]
