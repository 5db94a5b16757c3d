"""The HTML page as a user makes it (``loopctl-sim html``, ``replay --html``, ``replay --agent
--html``) and as a hostile trace would like it to be: no user string is ever a placeholder or
markup, the policy allows only the page's own script and style by their hashes, and a page that
cannot be written leaves the old one whole with a one-line error."""

from __future__ import annotations

import base64
import errno
import hashlib
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hostile import HTML_PAYLOAD, hostile_trace
from view_helpers import DRIVER, ROOT, TRACES, invoke, lines, write_lines

from loopctl_sim.trace.files import write_atomically
from loopctl_sim.view import build_timeline, render_html, write_html

AGENT = "examples.support_agent.agent:build"
REFUND = ROOT / "examples" / "support_agent" / "traces" / "refund.jsonl"


class _Elements(HTMLParser):
    """Every element of a page with its attributes, and the text of its inline scripts, styles
    and title."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.inline: dict[str, list[str]] = {"script": [], "style": [], "title": []}
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._open = tag if tag in self.inline else None
        if self._open:
            self.inline[tag].append("")

    def handle_endtag(self, tag: str) -> None:
        self._open = None

    def handle_data(self, data: str) -> None:
        if self._open:
            self.inline[self._open][-1] += data


def _parse(page: str) -> _Elements:
    parsed = _Elements()
    parsed.feed(page)
    return parsed


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _template_tags() -> list[str]:
    return [t for t, _ in _parse(render_html(build_timeline(TRACES / "basic.jsonl"))).tags]


def test_the_policy_allows_the_pages_own_script_and_style_by_hash_alone() -> None:
    page = _parse(render_html(build_timeline(DRIVER / "crash_restore.jsonl")))
    [csp] = [a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"]
    assert csp is not None and "unsafe-inline" not in csp and "unsafe-eval" not in csp
    policy = dict(part.strip().split(" ", 1) for part in csp.split(";"))
    assert policy["default-src"] == "'none'" and policy["base-uri"] == "'none'"
    runnable = [s for s, (_, a) in zip(page.inline["script"], _scripts(page), strict=True) if not a]
    assert policy["script-src"] == " ".join(_hash(s) for s in runnable) and len(runnable) == 1
    [style] = page.inline["style"]
    assert policy["style-src"] == _hash(style)


def _scripts(page: _Elements) -> list[tuple[str, str | None]]:
    return [(t, a.get("type")) for t, a in page.tags if t == "script"]


@pytest.mark.parametrize("marker", ["{{script}}", "{{style}}", "{{index}}", "{{csp}}", "{{x}}"])
def test_a_file_name_holding_a_template_marker_stays_text(tmp_path: Path, marker: str) -> None:
    name = f"bug {marker} {{{{title}}}} <b>&'\".jsonl"
    trace = write_lines(tmp_path / name, lines(TRACES / "basic.jsonl"))
    out = tmp_path / "page.html"
    result = invoke(["html", str(trace), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    page = _parse(text)
    assert [t for t, _ in page.tags] == _template_tags()  # no element added, none split
    assert page.inline["title"] == [f"loopctl trace: {trace}"]
    assert text.count('"use strict"') == 1  # the script is in the page once: in its element
    h1 = text.split('<h1 id="title">', 1)[1].split("</h1>", 1)[0]
    assert marker in h1 and "&lt;b&gt;&amp;&#x27;&quot;.jsonl" in h1


def test_a_crafted_trace_adds_no_element_to_the_page(tmp_path: Path) -> None:
    """The page's markup is the template's whatever the trace holds (the browser test shows
    that the script draws the strings as text, too)."""
    trace, carried = hostile_trace(
        DRIVER / "tool_exception.jsonl", tmp_path / "x.jsonl", HTML_PAYLOAD
    )
    assert carried > 50
    out = tmp_path / "x.html"
    assert invoke(["html", str(trace), "-o", str(out)]).exit_code == 0
    page = _parse(out.read_text())
    assert [t for t, _ in page.tags] == _template_tags()
    assert not [a for _, attrs in page.tags for a in attrs if a.startswith("on")]


def test_replay_agent_html_writes_the_page_when_the_agent_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "ok.html"
    result = invoke(["replay", str(REFUND), "--agent", AGENT, "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out}" in result.output and "ok: " in result.output
    index = _index(out)
    assert index["divergence"] is None and index["summary"]["tool_calls"] == 2


def test_replay_agent_html_writes_the_page_with_the_divergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = lines(REFUND)
    feed = next(r for r in records if r.get("name") == "tool_results")
    feed["args"]["message"]["parts"][0]["content"] = '{"status": "lost"}'
    edited = write_lines(tmp_path / "edited.jsonl", records)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "diverged.html"
    result = invoke(["replay", str(edited), "--agent", AGENT, "--html", str(out)])
    assert result.exit_code == 1, result.output
    assert f"wrote {out}" in result.output and "divergence at seq" in result.output
    divergence = _index(out)["divergence"]
    assert divergence["seq"] == feed["seq"] and "lookup_order" in divergence["message"]
    many = invoke(["replay", str(edited), str(REFUND), "--agent", AGENT, "--html", str(out)])
    assert many.exit_code == 2 and "--html needs exactly one trace" in many.output


def _index(page: Path) -> dict[str, Any]:
    import gzip
    import json

    found = re.search(r'id="data-index">([^<]*)</script>', page.read_text())
    assert found is not None
    data: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(found.group(1))))
    return data


def test_html_into_a_missing_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "page.html"
    result = invoke(["html", str(DRIVER / "basic.jsonl"), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: cannot write {out}: No such file or directory (nothing written)"
    ]
    assert "Traceback" not in result.output and not out.parent.exists()


def test_a_failed_write_keeps_the_old_page_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run.html"
    assert invoke(["html", str(DRIVER / "basic.jsonl"), "-o", str(out)]).exit_code == 0
    old = out.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)  # the disk fills up as the new page is flushed
    result = invoke(["html", str(DRIVER / "crash_restore.jsonl"), "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"error: cannot write {out}: No space left on device (nothing written)"
    )
    assert out.read_bytes() == old and sorted(p.name for p in tmp_path.iterdir()) == ["run.html"]
    replayed = invoke(["replay", str(DRIVER / "basic.jsonl"), "--html", str(out)])
    assert replayed.exit_code == 2 and "No space left on device" in replayed.output
    assert out.read_bytes() == old and "Traceback" not in replayed.output


def test_an_unreadable_trace_keeps_the_old_page(tmp_path: Path) -> None:
    out = tmp_path / "run.html"
    write_html(DRIVER / "basic.jsonl", out)
    old = out.read_bytes()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(DRIVER.joinpath("basic.jsonl").read_text() + "{not json\n")
    result = invoke(["html", str(bad), "-o", str(out)])
    assert result.exit_code == 2 and "not valid JSON" in result.output
    assert len(result.output.strip().splitlines()) == 1 and out.read_bytes() == old


def test_the_page_may_not_replace_its_own_trace(tmp_path: Path) -> None:
    trace = tmp_path / "run.html"
    shutil.copy(DRIVER / "basic.jsonl", trace)
    result = invoke(["html", str(trace)])  # the default output is the trace's own name
    assert result.exit_code == 2 and "is the trace itself" in result.output
    assert trace.read_bytes() == (DRIVER / "basic.jsonl").read_bytes()


def test_write_atomically_gives_the_mode_a_plain_write_gives(tmp_path: Path) -> None:
    out = tmp_path / "a.html"
    write_atomically(out, "x")
    plain = tmp_path / "b.html"
    plain.write_text("x")
    assert out.stat().st_mode == plain.stat().st_mode and out.read_text() == "x"
