"""The HTML timeline: one self-contained file (``loopctl-sim html``, ``replay --html``).

The page is ``assets/timeline.html`` with its stylesheet and script inlined and the data
embedded: no network, so it opens from an air-gapped CI artefact. The data goes in two gzip
and base64 blocks the browser unpacks (``DecompressionStream``): the index the first paint needs
(``Timeline.to_json``, with a replay's divergence), and the records' JSON, unpacked when a record
is first clicked; 100,000 records make a page of a few megabytes instead of tens.

A trace is untrusted input, so no string of it is ever markup: the placeholders are filled in one
pass over the template alone, the title is escaped, the data blocks cannot end their
``<script>``, and the script builds the page with ``textContent``. Behind that, the page's
Content-Security-Policy allows only its own script and stylesheet (by SHA-256) and no fetch, so
a string that slipped through still could not run, and a slip into fetching shows as a broken
page in the browser test rather than a silent request.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import json
import os
import re
from importlib import resources
from typing import Any

from loopctl_sim.replay import Divergence
from loopctl_sim.trace.files import write_atomically
from loopctl_sim.view.fields import leaf_diff
from loopctl_sim.view.reports import divergence_policy
from loopctl_sim.view.timeline import Timeline, build_timeline

#: Flags for opening a page in headless Chromium offline, as the browser test and
#: ``benchmarks/bench_html.py`` do (no sandbox for root in CI, no GPU, no background traffic).
HEADLESS_CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)

_ASSETS = resources.files("loopctl_sim.view") / "assets"


def _asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")


def _packed(text: str) -> str:
    """``text`` gzip-compressed and base64-encoded (level 6: most of level 9's size, quicker)."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), 6, mtime=0)).decode("ascii")


def divergence_json(divergence: Divergence, path: str | None) -> dict[str, Any]:
    """What the page shows of a replay divergence."""
    data = divergence.to_json()
    data["fields"] = [d.to_json() for d in leaf_diff(divergence.expected, divergence.actual)]
    data["policy"] = divergence_policy(divergence, path)
    return data


def _script_safe(text: str) -> str:
    """Text put inside a ``<script>`` or ``<style>`` element cannot end it early."""
    return text.replace("</", "<\\/")


def _sha256(text: str) -> str:
    """A CSP source that allows exactly the inline element whose content is ``text``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(script: str, style: str) -> str:
    """The page's policy: nothing fetched, nothing run or styled but ``script`` and ``style``
    themselves (by hash: no ``'unsafe-inline'``), no ``<base>``, no form posts."""
    return (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )


#: A placeholder of the template: ``{{name}}``.
_PLACEHOLDER = re.compile(r"\{\{([a-z]+)\}\}")


def render_html(timeline: Timeline, *, divergence: dict[str, Any] | None = None) -> str:
    """The page for ``timeline`` (and a divergence, from ``divergence_json``), as text."""
    index = timeline.to_json()
    index["divergence"] = divergence
    index["title"] = f"loopctl trace: {timeline.path}"
    script = _script_safe(_asset("timeline.js"))
    style = _script_safe(_asset("timeline.css"))
    parts = {
        "csp": content_security_policy(script, style),  # base64 and fixed words: no quote
        "title": html.escape(index["title"]),  # text, and safe inside a quoted attribute
        "style": style,
        "index": _packed(json.dumps(index, ensure_ascii=False, separators=(",", ":"))),
        "records": _packed("\n".join(timeline.records)),
        "script": script,
    }
    # one pass over the template alone: what a placeholder is replaced with is never searched
    # for placeholders again (a trace named "{{script}}.jsonl" stays text)
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _asset("timeline.html"))


def write_html(
    trace: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    divergence: Divergence | None = None,
) -> Timeline:
    """Write the page of the trace at ``trace`` to ``out``; returns the timeline it drew.

    ``TraceFormatError`` if the trace is unreadable, ``OSError`` if ``out`` cannot be written;
    either way ``out`` is left as it was (``write_atomically``)."""
    timeline = build_timeline(trace)
    found = None if divergence is None else divergence_json(divergence, timeline.path)
    write_atomically(out, render_html(timeline, divergence=found))
    return timeline
