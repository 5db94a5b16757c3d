"""Benchmarks: each module prints figures (never a verdict) and exposes ``run(smoke) -> dict``."""
