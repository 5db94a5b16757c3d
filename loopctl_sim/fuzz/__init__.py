"""Fuzzing: seeded fault-injection campaigns over many worlds, their executors, and the shrinking
of a failing world to a minimal reproducer.

The top of the harness below the command line: it may import every lower layer (properties,
replay, simulation, traces).
"""
