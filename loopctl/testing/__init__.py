"""Offline helpers for tests: scripted model clients and a network guard."""

from loopctl.testing.guard import NetworkBlockedError, block_network

__all__ = ["NetworkBlockedError", "block_network"]
