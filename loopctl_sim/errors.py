"""The root of every exception loopctl_sim raises, and their tree (as httpx's ``_exceptions.py``).

``except SimError`` catches anything the harness raises and nothing else. ``SimError`` is itself
a ``loopctl.LoopctlError``: the harness is loopctl's, and a program that drives both (a test
suite, a CI job) catches everything either raises with one ``except LoopctlError``, while
``except SimError`` still tells the harness's errors from the engine's.

The classes live beside the code that raises them (each layer imports only the layers below it;
this module, under them all, imports none of them), so this module is where the tree is drawn::

    LoopctlError                              loopctl's root (loopctl.errors draws its tree)
     +-- SimError                             the harness's root
          +-- TraceFormatError                a trace line that cannot be read; ``file:line:
          |                                   reason`` (trace)
          +-- ContinuationError  (ValueError) a header continuing a run where none ended
          |                                   (trace)
          +-- FeedCodecError  (ValueError)    a feed name or arguments the codec cannot take
          |                                   (trace)
          +-- TraceWriteError  (OSError)      the trace cannot be written; the file is cut back
          |                                   to its last whole record (trace)
          +-- CutShort                        a compressed trace damaged past the records read;
          |                                   the reader raises it as a TraceFormatError
          |                                   (trace.files)
          +-- SimulationError                 the simulation itself went wrong, not the run: a
          |                                   restore that differs, no Done within the bound
          |                                   (sim)
          +-- ScenarioError  (ValueError)     a scenario file that cannot be loaded (sim)
          +-- AgentError                      the agent cannot be found, imported or built (sim)
          +-- AgentRunError                   something escaped an agent's simulated run;
          |                                   ``error`` is what (sim)
          +-- StepLimit                       a harnessed run asked more steps than its bound
          |                                   (sim.layers)
          +-- ToolHang                        a simulated tool that never returns (sim.world)
          +-- ResumeError                     a trace that cannot be resumed as it is (replay)
          +-- ForkError  (ValueError)         an edit or argument a fork cannot take (replay)
          |    +-- ForkPointError             the branch point does not exist; ``nearest`` are
          |                                   the valid ones (replay)
          +-- ForkDiverged                    the prefix no longer replays against the agent
          |                                   (replay)
          +-- TraceEnded                      replay ran past the trace's last record
          |                                   (replay.cursor)
          +-- InvariantViolation  (AssertionError)  invariants that do not hold; ``problems``
          |                                   (props.invariants)
          +-- OtlpError                       the OTLP endpoint is unreachable or refused the
          |                                   spans (view.otel_spans)
          +-- StateError  (ValueError)        a campaign state file that cannot be resumed
          |                                   (fuzz)
          +-- OutputError  (OSError)          a failure's file that cannot be written
          |                                   (fuzz.campaign)
          +-- ClusterError                    the Dask cluster cannot be used (fuzz)
          +-- WorkerSetupError                a worker cannot run the campaign at all (fuzz)
          +-- Violation                       a checker's invariant problems at one place of a
          |                                   run (fuzz.checker)
          +-- SessionScenarioError  (ValueError)  a session scenario file that cannot be read
          |                                   (fuzz.sessions)
          +-- CassetteWriteError  (OSError)   a recorded cassette that cannot be written; the
          |                                   old one is unchanged (plugin)
          +-- CassetteMiss  (vcrpy's CannotOverwriteExistingCassetteException)  a request the
                                              cassette cannot answer; ``str()`` is the report
                                              (plugin)

A name in parentheses is a second base, kept where callers catch that too (a bad scenario file
is a ``ValueError``, an unwritable trace an ``OSError`` with its ``errno``; vcrpy's own handlers
see a ``CassetteMiss``).

Warnings (``warnings.warn``, not raised): ``CassetteNotWritten`` (a ``UserWarning``, plugin): a
recording did not complete, so its cassette was not written.

Control flow, not errors: these are ``BaseException``s, raised and caught inside the harness so
that a driver's ``except Exception`` recovery cannot swallow them, and they are no
``SimError``. ``Crash`` (sim.body: a harness's hook kills the run before a step), ``Diverged``
(replay.report: carries the first ``Divergence``), ``Killed``, ``Incomplete`` (replay.checker:
stop the replaying driver), ``NeedsModel`` (replay.update: only a real model can answer;
``update_trace`` reports it in its result), ``RaisedAsRecorded`` (replay.raised), and the state
machine's ``Crash`` and ``Broken`` (props.driver_watch; ``Broken`` reaches the user as an
``InvariantViolation``).
"""

from __future__ import annotations

from loopctl import LoopctlError

__all__ = ["SimError"]


class SimError(LoopctlError):
    """The root of every exception loopctl_sim raises (the tree is in the module docstring)."""
