"""The pytest plugin (loopctl_sim.plugin.pytest_plugin), exercised through pytester with ``-p``."""

from __future__ import annotations

import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from loopctl_sim.replay import replay_trace

pytest_plugins = ["pytester"]


def _autoloaded() -> bool:
    """Whether the ``pytest11`` entry point ``loopctl`` is installed (then pytest loads the
    plugin by itself, and naming it again with ``-p`` would register it twice)."""
    plugins = entry_points(group="pytest11")
    return any(ep.value == "loopctl_sim.plugin.pytest_plugin" for ep in plugins)


_LOAD = () if _autoloaded() else ("-p", "loopctl_sim.plugin.pytest_plugin")
PLUGIN = (*_LOAD, "-p", "no:cacheprovider", "-p", "no:asyncio")
TRACES = Path(__file__).resolve().parent.parent / "traces"


def _copy_trace(pytester: pytest.Pytester, name: str = "basic.jsonl") -> Path:
    target = pytester.path / name
    shutil.copy(TRACES / name, target)
    return target


def _tamper(path: Path) -> None:
    """Change the recorded model reply's text so the digest after it no longer matches."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if '"name":"model_response"' in line and '"text":"' in line:
            lines[i] = line.replace('"text":"', '"text":"TAMPERED ', 1)
            break
    else:  # pragma: no cover - the corpus trace always has a reply
        raise AssertionError("no model_response with text in the trace")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_marker_replays_a_trace_as_the_test(pytester: pytest.Pytester) -> None:
    _copy_trace(pytester)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.loopctl_trace("basic.jsonl")
        def test_basic():
            pass

        @pytest.mark.loopctl_trace("basic.jsonl")
        def test_basic_outcome(loopctl_trace_results):
            (result,) = loopctl_trace_results
            assert result.outcome["kind"] == "completed"
            assert result.complete
        """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=2)


def test_marker_fails_with_a_readable_divergence_report(pytester: pytest.Pytester) -> None:
    _tamper(_copy_trace(pytester))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.loopctl_trace("basic.jsonl")
        def test_basic():
            raise AssertionError("the body must not run after a divergence")
        """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*loopctl replay diverged*", "*divergence at seq*"])
    result.stdout.no_fnmatch_line("*AssertionError: the body must not run*")


def test_marker_on_a_missing_trace_fails_clearly(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.loopctl_trace("nowhere.jsonl")
        def test_missing():
            pass
        """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*loopctl trace cannot be read*nowhere.jsonl*"])


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(*PLUGIN, "--markers")
    result.stdout.fnmatch_lines(["*loopctl_trace(*paths, agent=None*"])
    result = pytester.runpytest(*PLUGIN, "--help")
    result.stdout.fnmatch_lines(["*--loopctl-record=DIR*"])


def test_replay_fixture_passes_and_fails(pytester: pytest.Pytester) -> None:
    _copy_trace(pytester)
    bad = _copy_trace(pytester, "cancel.jsonl")
    _tamper_any(bad)
    pytester.makepyfile(
        """
        def test_good(loopctl_replay):
            result = loopctl_replay("basic.jsonl")
            assert result.ok and result.runs == 1

        def test_bad(loopctl_replay):
            loopctl_replay("cancel.jsonl")
        """
    )
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_bad*", "*divergence at seq*"])


def _tamper_any(path: Path) -> None:
    """Break the digest of the first feed record."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if '"type":"feed"' in line and '"digest":"' in line:
            start = line.index('"digest":"') + len('"digest":"')
            lines[i] = line[:start] + "0000000000000000" + line[start + 16 :]
            break
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


_LOOP_TEST = """
from loopctl import tool
from loopctl.core import Message, ToolCall
from loopctl.driver import BareLoop

@tool
def add(a: int, b: int) -> int:
    return a + b

def test_adds(loopctl_scripted, loopctl_recorder):
    client = loopctl_scripted(
        Message.assistant("adding", [ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})]),
        "5",
    )
    loop = BareLoop(client, tools=[add], observers=[loopctl_recorder])
    result = loop.run_sync("what is 2 + 3?")
    assert result.final_text == "5"
    assert client.remaining == 0
"""


def test_scripted_fixture_and_recorder_without_the_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_loop=_LOOP_TEST)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    assert not list(pytester.path.rglob("*.jsonl"))


def test_record_option_writes_a_replayable_trace_per_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_loop=_LOOP_TEST)
    out = pytester.path / "traces-out"
    result = pytester.runpytest(*PLUGIN, f"--loopctl-record={out}")
    result.assert_outcomes(passed=1)
    (trace,) = out.glob("*.jsonl")
    assert "test_loop.py" in trace.name and "test_adds" in trace.name
    replayed = replay_trace(trace)
    assert replayed.ok, replayed.summary()
    assert replayed.outcome is not None and replayed.outcome["kind"] == "completed"
    # and the recorded trace can be replayed as a test with the marker
    pytester.makepyfile(
        test_again=f"""
        import pytest

        @pytest.mark.loopctl_trace({str(trace)!r})
        def test_recorded():
            pass
        """
    )
    again = pytester.runpytest(*PLUGIN, "test_again.py")
    again.assert_outcomes(passed=1)


def test_marker_without_a_path_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.loopctl_trace()
        def test_nothing():
            pass
        """
    )
    result = pytester.runpytest(*PLUGIN)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*loopctl_trace needs at least one path*"])


def _copy_agent(pytester: pytest.Pytester) -> Path:
    """The sample agent as a user's package ``shop``, with its refund trace beside the tests."""
    example = Path(__file__).resolve().parents[2] / "examples" / "support_agent"
    shutil.copytree(example, pytester.path / "shop", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(example / "traces" / "refund.jsonl", pytester.path / "refund.jsonl")
    return pytester.path / "shop" / "agent.py"


def test_the_marker_replays_against_the_agent_and_update_approves_a_change(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _copy_agent(pytester)
    monkeypatch.syspath_prepend(str(pytester.path))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.loopctl_trace("refund.jsonl", agent="shop.agent:build")
        def test_refund():
            pass

        def test_refund_fixture(loopctl_replay):
            assert loopctl_replay("refund.jsonl", agent="shop.agent:build", tools="recorded").ok
        """
    )
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=2)
    agent.write_text(agent.read_text().replace("max_turns=12", "max_turns=20"))
    failed = pytester.runpytest_subprocess(*PLUGIN)
    failed.assert_outcomes(failed=2)
    failed.stdout.fnmatch_lines(["*max_turns 12 -> 20*"])
    before = (pytester.path / "refund.jsonl").read_text()
    pytester.runpytest_subprocess(*PLUGIN, "--loopctl-update").assert_outcomes(passed=2)
    assert (pytester.path / "refund.jsonl").read_text() != before
    pytester.runpytest_subprocess(*PLUGIN).assert_outcomes(passed=2)


def test_update_that_needs_a_model_fails_the_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _copy_agent(pytester)
    monkeypatch.syspath_prepend(str(pytester.path))
    agent.write_text(agent.read_text().replace('"amount": 800', '"amount": 900'))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.loopctl_trace("refund.jsonl", agent="shop.agent:build")
        def test_refund():
            pass
        """
    )
    result = pytester.runpytest_subprocess(*PLUGIN, "--loopctl-update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*needs a real model*"])
