"""Replay: a trace re-run against today's engine (the brain alone, or the whole driver), the
divergence reports, trace diffs, regression tests exported from a trace, and the regression corpus.

- ``report``: ``ReplayResult`` and ``Divergence``, what a replay reports and how it reads
- ``machine``: ``replay_trace``, machine-level replay, the digest checked after every feed
- ``cursor``: the trace streamed in order, with a lookahead up to the next brain record
- ``checker``: the replay's observer: every step, feed, request and end against the trace
- ``explain``: a divergence in the user's terms (a tool's output, the prompt, a tool spec)
- ``answers``: the model, recorded tools and compactions as the trace recorded them
- ``driver``: ``replay_agent`` (the user's agent) and ``replay_driver`` (the built-in body)
- ``update``: ``update_trace``, the trace re-recorded with the agent's live results
- ``diff``: ``diff_traces``, the first record where two traces differ
- ``export``: ``export_test``, a trace as a pytest regression test
- ``corpus``: the regression corpus in ``tests/traces/`` (``python -m loopctl_sim.replay.corpus``)
- ``resume``: ``resume_point``, a run's brain rebuilt from its trace, cut anywhere
- ``continuation``: ``resume_trace``, the rest of that run, with the user's agent, recorded
- ``fork``, ``fork_edits``: ``fork``, a run branched at a step; ``session_resume``: a session
  finished after a kill; ``mcp``, ``raised``: MCP servers and exceptions in agent replay

It may import ``loopctl_sim.sim`` (the driver-level replay puts a ``BareLoop`` together the way the
simulator does) and ``loopctl_sim.trace``; never the property, fuzz or command-line layers.
"""

from loopctl_sim.replay.continuation import ResumeResult, resume_trace, resume_trace_async
from loopctl_sim.replay.diff import TraceDiff, diff_traces
from loopctl_sim.replay.driver import replay_agent, replay_driver
from loopctl_sim.replay.export import export_test
from loopctl_sim.replay.fork import Edits, ForkDiverged, ForkError, ForkPointError, fork
from loopctl_sim.replay.machine import replay_trace
from loopctl_sim.replay.report import Divergence, ReplayResult
from loopctl_sim.replay.resume import ResumeError, resume_point
from loopctl_sim.replay.update import update_trace

__all__ = [
    "Divergence",
    "Edits",
    "ForkDiverged",
    "ForkError",
    "ForkPointError",
    "ReplayResult",
    "ResumeError",
    "ResumeResult",
    "TraceDiff",
    "diff_traces",
    "export_test",
    "fork",
    "replay_agent",
    "replay_driver",
    "replay_trace",
    "resume_point",
    "resume_trace",
    "resume_trace_async",
    "update_trace",
]
