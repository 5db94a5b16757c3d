"""Properties: the engine's invariants as pure checkers, the hypothesis state machines over the
brain and the driver that check them after every step, and the hypothesis profiles.

The state machines import hypothesis (``pip install 'loopctl[sim]'``), so this package's
``__init__`` imports none of them. It may import replay, simulation and traces.
"""
