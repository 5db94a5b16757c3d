"""The HTML timeline in a real browser: headless Chromium (Debian's ``chromium`` package, which
``.ci/run`` installs where missing) loads pages made from shipped traces, and the tests read
what is on screen through the DOM: the lanes, the tool-call bars, the outcome, a divergence.

Driven by Playwright's Python package against ``/usr/bin/chromium`` (no browser download).
Every request the page makes is recorded: a self-contained page makes none but its own file.
Screenshots go to ``artifacts/browser/`` at the top of the checkout (``LOOPCTL_ARTIFACTS``
overrides the folder; git ignores it), kept as CI artefacts. The tests skip, saying why, only
when there is no Chromium binary.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import HTML_PAYLOAD, hostile_trace
from playwright.sync_api import Browser, Dialog, Page, expect, sync_playwright
from view_helpers import DRIVER, ROOT, TRACES, invoke, lines, write_lines

from loopctl import Message, ToolCall
from loopctl.core import MachinePolicy
from loopctl_sim.sim.machine import simulate
from loopctl_sim.sim.world import ModelScript, World
from loopctl_sim.view import write_html
from loopctl_sim.view.html import HEADLESS_CHROMIUM_ARGS

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = list(HEADLESS_CHROMIUM_ARGS)
ARTIFACTS = Path(os.environ.get("LOOPCTL_ARTIFACTS", ROOT / "artifacts")) / "browser"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason="no Chromium binary (apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


class Opened:
    """A page loaded from a file, with every request it made and every script error."""

    def __init__(self, page: Page, url: str) -> None:
        self.page, self.url = page, url
        self.requests: list[str] = []
        self.errors: list[str] = []

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        print(f"screenshot: {path}")
        return path

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()

    def text(self, selector: str) -> str:
        return self.page.locator(selector).inner_text()


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Any]:
    opened: list[Opened] = []

    def open_(path: Path) -> Opened:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        result = Opened(page, path.resolve().as_uri())
        page.on("request", lambda r: result.requests.append(r.url))
        page.on("pageerror", lambda e: result.errors.append(str(e)))
        page.goto(result.url)
        page.wait_for_function("document.body.dataset.ready", timeout=30_000)
        assert page.evaluate("document.body.dataset.ready") == "1", result.errors
        opened.append(result)
        return result

    yield open_
    for result in opened:
        assert result.errors == []
        assert result.requests == [result.url], "a self-contained page fetches nothing else"
        result.page.close()


def test_lanes_tool_calls_and_outcome_on_screen(open_page: Any, tmp_path: Path) -> None:
    out = tmp_path / "max_turns.html"
    write_html(DRIVER / "max_turns.jsonl", out)
    page = open_page(out)
    lanes = page.page.eval_on_selector_all(
        "[data-testid=lane]:not([hidden])", "els => els.map(e => e.dataset.lane)"
    )
    assert lanes == ["run", "brain", "model", "tools", "compaction", "events"]
    assert page.count(".lane-tools .item") == 3
    assert page.text("[data-testid=count-tool_calls]") == "3 tool calls"
    assert page.text("[data-testid=outcome]") == "max_turns_exceeded"
    assert page.count(".lane-tools .item.tone-error") == 1  # the broken tool
    # the first wave's two calls run at once: bars side by side in time, stacked in rows
    boxes = [page.page.locator(".lane-tools .item").nth(i).bounding_box() for i in range(2)]
    assert boxes[0] and boxes[1]
    assert abs(boxes[0]["x"] - boxes[1]["x"]) < 1 and boxes[1]["y"] > boxes[0]["y"]
    page.shot("max_turns")


def test_crashes_resumes_and_a_clicked_tool_call(open_page: Any, tmp_path: Path) -> None:
    out = tmp_path / "crash_restore.html"
    write_html(DRIVER / "crash_restore.jsonl", out)
    page = open_page(out)
    assert page.count(".lane-run .item.kind-crash") == 2
    assert page.count(".lane-run .item.kind-resume") == 2
    assert page.text("[data-testid=count-resumes]") == "2 resumes"
    page.page.locator(".lane-tools .item").first.click()
    page.page.wait_for_selector("[data-testid=record-json]")
    shown = page.page.locator("[data-testid=record-json]").all_inner_texts()
    assert len(shown) == 2 and '"kind": "tool_call"' in shown[0]
    assert '"kind": "tool_result"' in shown[1] and '"content": "5"' in shown[1]
    assert page.count("#details h3") == 2
    page.shot("crash_restore")


def test_a_divergence_report(open_page: Any, tmp_path: Path) -> None:
    records = lines(DRIVER / "basic.jsonl")
    feed = next(r for r in records if r.get("name") == "tool_results")
    feed["args"]["message"]["parts"][0]["content"] = "6"
    edited = write_lines(tmp_path / "edited.jsonl", records)
    out = tmp_path / "divergence.html"
    assert invoke(["replay", str(edited), "--html", str(out)]).exit_code == 1
    page = open_page(out)
    banner = page.text("[data-testid=divergence]")
    assert f"Divergence at seq {feed['seq']}" in banner
    assert "policy in force: max_turns=10" in banner
    assert page.count("[data-testid=fields] tr") >= 2  # a header and at least one field
    assert page.count(".item.divergent") == 1 and page.count(".row.divergent") == 1
    page.page.wait_for_selector("[data-testid=record-json]")
    assert f'"seq": {feed["seq"]}' in page.text("#details")
    page.shot("divergence")


def test_a_long_trace_draws_density_then_records_when_zoomed(
    open_page: Any, tmp_path: Path
) -> None:
    def model(conversation: Any, index: int) -> Message:
        if index >= 400:
            return Message.assistant("done")
        return Message.assistant("", [ToolCall(id=f"c{index}", name="t", arguments={})])

    world = World(
        input="go",
        model=ModelScript(model),
        tools={"t": lambda a: "ok"},
        policy=MachinePolicy(max_turns=500, loop_action="off"),
        max_steps=5000,
    )
    trace = tmp_path / "long.jsonl"
    simulate(world, trace, created="t")
    out = tmp_path / "long.html"
    timeline = write_html(trace, out)
    assert timeline.summary()["tool_calls"] == 400
    page = open_page(out)
    assert page.page.locator("#lanes .lane-brain .track").get_attribute("data-mode") == "density"
    assert "zoom in to see records" in page.text("[data-testid=mode]")
    for _ in range(4):
        page.page.click("#zoom-in")
    assert page.page.locator("#lanes .lane-brain .track").get_attribute("data-mode") == "items"
    assert 0 < page.count(".lane-brain .item") < 1500
    page.page.fill("#filter", "call_tools")
    expect(page.page.locator("#list-count")).to_have_text(f"400 of {len(timeline.seq)}")
    page.shot("long")


def test_a_machine_level_trace(open_page: Any, tmp_path: Path) -> None:
    out = tmp_path / "basic.html"
    write_html(TRACES / "basic.jsonl", out)
    page = open_page(out)
    assert page.page.locator("#axis-time").is_disabled()  # no durations: record order only
    assert page.count(".lane-tools .item") == 2
    assert page.text("[data-testid=outcome]") == 'completed: "2 + 3 + 10 = 15."'


@pytest.mark.parametrize("keep", [frozenset(), frozenset({"kind"})], ids=["all", "known-kinds"])
def test_a_crafted_trace_runs_no_script(
    open_page: Any, tmp_path: Path, keep: frozenset[str]
) -> None:
    """Every free-text field of a trace (an io record's kind, tool names, texts, results,
    metadata, the file name) carries markup that would run script if it were put in as HTML;
    the page shows it as text, in the lanes, the list, the details and a divergence banner."""
    trace, carried = hostile_trace(
        DRIVER / "tool_exception.jsonl", tmp_path / "x.jsonl", HTML_PAYLOAD, keep
    )
    assert carried > 50
    named = tmp_path / 'crafted"><img src=x onerror="window.__pwned=1">{{script}}.jsonl'
    trace.rename(named)
    out = tmp_path / "crafted.html"
    result = invoke(["replay", str(named), "--html", str(out)])
    assert result.exit_code == 1 and out.exists(), result.output  # a divergence: the banner too
    page = open_page(out)
    dialogs: list[str] = []

    def dialog(d: Dialog) -> None:
        dialogs.append(d.message)
        d.dismiss()

    page.page.on("dialog", dialog)
    # every bar and row gets the events an injected handler would wait for (bars overlap, so
    # the events are dispatched on each one), and a click on each row opens its details
    for each in page.page.locator(".item, .row, #divergence *").all():
        for event in ("mouseover", "mouseenter", "focus", "click"):
            each.dispatch_event(event)
    for row in page.page.locator(".row").all()[:20]:
        row.click()
        page.page.wait_for_selector("[data-testid=record-json]")
    assert page.page.evaluate("window.__pwned") is None
    assert dialogs == []
    assert page.count("script") == 3  # the two data blocks and the page's own script
    assert page.count("img") == 0 and page.count("[onerror], [onmouseover]") == 0
    assert "window.__pwned=1" in page.text("#details")  # shown, as text
    assert "<script>window.__pwned=1</script>" in page.text("[data-testid=divergence]")
    assert page.page.title().endswith('"><img src=x onerror="window.__pwned=1">{{script}}.jsonl')
    csp = page.page.locator("meta[http-equiv=Content-Security-Policy]").get_attribute("content")
    assert csp and "unsafe-inline" not in csp and "script-src 'sha256-" in csp
    page.shot(f"crafted-{'-'.join(sorted(keep)) or 'all'}")


def test_the_policy_refuses_an_inline_script_the_page_did_not_bring(
    open_page: Any, tmp_path: Path
) -> None:
    """The hash-based policy is what stops a slip: a script or style element added to the page
    (as an injection would) is refused by the browser, while the page's own run."""
    out = tmp_path / "basic.html"
    write_html(TRACES / "basic.jsonl", out)
    page = open_page(out)
    page.page.evaluate(
        """() => {
        const s = document.createElement("script");
        s.textContent = "window.__pwned = 1";
        document.body.append(s);
        const st = document.createElement("style");
        st.textContent = "body { display: none }";
        document.head.append(st);
        const d = document.createElement("div");
        d.setAttribute("onclick", "window.__pwned = 2");
        document.body.append(d);
        d.click();
    }"""
    )
    assert page.page.evaluate("window.__pwned") is None
    assert page.page.locator("body").is_visible()
    assert page.count(".lane-tools .item") == 2  # the page's own script ran
