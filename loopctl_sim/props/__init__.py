"""Properties: the engine's invariants as pure checkers, the hypothesis state machines over the
brain and the driver that check them after every step, and the hypothesis profiles.

The state machines import hypothesis (``pip install 'loopctl[sim]'``), so this package's
``__init__`` imports none of them. It may import replay, simulation and traces.

====================  ============================================================================
module                owns
====================  ============================================================================
``invariants``        the pure checkers (a package: conversation, state, decisions, commits,
                      resume, along a trace); no hypothesis
``brain_strategies``  what the brain machine draws: policies, histories, replies, compactions
``brain_reference``   the reference model the brain is compared with (counts, floor, loops)
``brain_misuse``      the tables of misuse each state must refuse; no hypothesis
``brain_feeds``       ``BrainFeeds``: one rule per feed, and the question
``brain_machine``     ``BrainMachine`` and ``TestBrain``: runs, moves, liveness, misuse, invariants;
                      ``run_program``, the same machine under weighted actions
``brain_loops``       looping programs (repeats, shuffled arguments, ping-pongs, policy changes)
                      for ``BrainMachine``, drawn by ``LoopWeights``; every verdict is judged by
                      the reference
``brain_compactions`` what a misbehaving compactor returns (orphan results, unanswered calls,
                      reordered pairs, dropped system messages, growing output); no hypothesis
``driver_watch``      ``DriverWatch``: the seams a harness puts into a ``BareLoop``, the hands'
                      properties after every step and feed, the bounds, crashes and strikes
``driver_world``      the scripted world: per-step model plans with failures, the ``work`` tool
``driver_agent``      the user's agent as the world: drawn replies, fault plans, the layers
``driver_machine``    ``DriverMachine`` and ``TestDriver``: ``BareLoop`` runs with crashes,
                      cancels and config changes, watched by ``DriverWatch``
``profiles``          the ``dev``, ``ci`` and ``nightly`` hypothesis profiles
====================  ============================================================================
"""
