"""Properties: the invariants as pure checkers (``invariants``), the hypothesis state machines
over the brain and the driver that check them after every step, and the hypothesis profiles.
The state machines import hypothesis (``loopctl[sim]``), so this ``__init__`` imports none.
"""
