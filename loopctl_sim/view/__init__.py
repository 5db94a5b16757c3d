"""Views of a run for people: the text timeline of a trace.

It may import replay (a divergence is something to show), simulation and traces.
"""
