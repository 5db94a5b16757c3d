"""Properties: the engine's invariants as pure checkers (``invariants``), the hypothesis state
machines over the brain (``brain_machine``) and the driver (``driver_machine``) that check them
after every step, and the hypothesis profiles (``profiles``).

The state machines import hypothesis (``pip install 'loopctl[sim]'``), so this package's
``__init__`` imports none of them. It may import replay, simulation and traces.
"""
