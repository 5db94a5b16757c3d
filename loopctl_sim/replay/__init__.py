"""Replay: a trace re-run against today's engine (the brain alone, or the whole driver), the
divergence reports, trace diffs, regression tests exported from a trace, and the regression corpus.

It may import ``loopctl_sim.sim`` (the driver-level replay puts a ``BareLoop`` together the way the
simulator does) and ``loopctl_sim.trace``; never the property, fuzz or command-line layers.
"""
