"""Views of a run for people: the terminal timeline, divergence and comparison reports, the HTML
timeline, and a trace as OpenTelemetry spans.

Each module's docstring says what it owns (``describe``: one record in words, for every view;
``otel_spans`` needs the ``otel`` extra, so it is not imported here).

It may import replay (a divergence is something to show), simulation, traces and ``loopctl``;
the command line and the plugin import it. Views read records as JSON through the public
``loopctl_sim.trace`` API and describe what they do not know generically, so a newer record
kind, io kind or message part shows up instead of breaking them.
"""

from loopctl_sim.replay.explain import ABSENT
from loopctl_sim.view.describe import describe
from loopctl_sim.view.fields import leaf_diff
from loopctl_sim.view.html import render_html, write_html
from loopctl_sim.view.reports import compare_traces, print_comparison, print_divergence
from loopctl_sim.view.show import ShowFilter, parse_turns, print_timeline, timeline
from loopctl_sim.view.term import make_console
from loopctl_sim.view.timeline import Timeline, build_timeline

__all__ = [
    "ABSENT",
    "ShowFilter",
    "Timeline",
    "build_timeline",
    "compare_traces",
    "describe",
    "leaf_diff",
    "make_console",
    "parse_turns",
    "print_comparison",
    "print_divergence",
    "print_timeline",
    "render_html",
    "timeline",
    "write_html",
]
