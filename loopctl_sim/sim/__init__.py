"""Simulation: scripted worlds (model, tools, faults), scenario files, and the two simulators that
run a world: one drives the bare brain, the other the real ``BareLoop``.

It may import ``loopctl_sim.trace`` (to record what it runs) and ``loopctl``; nothing above it.
"""
