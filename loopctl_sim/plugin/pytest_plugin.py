"""The loopctl pytest plugin (the ``pytest11`` entry point ``loopctl``): scripted clients
(``loopctl_scripted``), traces replayed as tests (``loopctl_replay``, the ``loopctl_trace``
marker, ``--loopctl-update`` to re-record them), traces recorded (``loopctl_recorder`` with
``--loopctl-record DIR``); cassettes and the network guard live in ``offline``. See
docs/testing.md and docs/ci.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopctl.core import Message
from loopctl.observe import LoopObserver
from loopctl.testing import Reply, ScriptedClient
from loopctl_sim.plugin import offline
from loopctl_sim.plugin.cassette_rules import register_matchers
from loopctl_sim.plugin.modes import pop_record_mode
from loopctl_sim.plugin.offline import (
    loopctl_cassette,
    loopctl_cassette_dir,
    loopctl_offline,
    loopctl_record_mode,
)
from loopctl_sim.replay import ReplayResult, replay_agent, replay_trace, update_trace
from loopctl_sim.sim import AgentError
from loopctl_sim.trace import TraceFormatError, TraceRecorder

# the fixtures ``offline`` defines, registered with pytest from this module
__all__ = ["loopctl_cassette", "loopctl_cassette_dir", "loopctl_offline", "loopctl_record_mode"]

_RESULTS_KEY = pytest.StashKey[list[ReplayResult]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopctl", "loopctl agent loops")
    group.addoption(
        "--loopctl-update",
        action="store_true",
        default=False,
        help="Re-record the traces of loopctl_trace markers that name an agent with its live "
        "results, instead of replaying them.",
    )
    group.addoption(
        "--loopctl-record",
        metavar="DIR",
        default=None,
        help="Write a trace of every loop run that uses the loopctl_recorder fixture to DIR.",
    )
    offline.add_options(group)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "loopctl_trace(*paths, agent=None, tools='live'): replay loopctl trace files (JSON "
        "Lines) as part of this test, against an agent (module:factory) when named; the test "
        "fails at the first divergence",
    )
    offline.configure(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    pop_record_mode()


@pytest.hookimpl(optionalhook=True)
def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
    """pytest-recording's hook: its VCR learns loopctl's body matcher (``loopctl_body``), for
    ``vcr_config`` fixtures returning ``loopctl_sim.plugin.cassette_rules.vcr_config()``."""
    register_matchers(vcr)


def replay_or_fail(
    path: str | os.PathLike[str],
    base: Path,
    *,
    agent: str | None = None,
    tools: str = "live",
    update: bool = False,
) -> ReplayResult:
    """Replay the trace at ``path`` (from the test's directory ``base`` when it is there, else
    the working directory), against ``agent`` when given, re-recording it with ``update``;
    ``pytest.fail`` with a readable report if it diverges or cannot be read."""
    p = Path(path)
    if not p.is_absolute() and (base / p).exists():
        p = base / p
    try:
        if agent is not None and update:
            updated = update_trace(p, agent, tools=tools)
            if not updated.ok:
                pytest.fail(f"loopctl update failed\n{updated.summary()}", pytrace=False)
        result = replay_agent(p, agent, tools=tools) if agent is not None else replay_trace(p)
    except AgentError as exc:
        pytest.fail(f"loopctl agent cannot be built: {exc}", pytrace=False)
    except TraceFormatError as exc:
        pytest.fail(f"loopctl trace cannot be read: {exc}", pytrace=False)
    if not result.ok:
        pytest.fail(f"loopctl replay diverged\n{result.summary()}", pytrace=False)
    if result.records == 0:
        pytest.fail(f"loopctl trace {p} holds no record", pytrace=False)
    return result


def _marked_paths(item: pytest.Item) -> list[tuple[str, str | None, str]]:
    """Every marked trace with the agent and tools mode its marker names."""
    paths: list[tuple[str, str | None, str]] = []
    for mark in item.iter_markers("loopctl_trace"):
        if not mark.args:
            raise pytest.UsageError(f"{item.nodeid}: loopctl_trace needs at least one path")
        unknown = set(mark.kwargs) - {"agent", "tools"}
        if unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: loopctl_trace takes agent= and tools=, not {sorted(unknown)}"
            )
        agent, tools = mark.kwargs.get("agent"), mark.kwargs.get("tools", "live")
        paths += [(os.fspath(a), agent, tools) for a in mark.args]
    return paths


def _replay_marked(item: pytest.Item) -> list[ReplayResult]:
    cached = item.stash.get(_RESULTS_KEY, None)
    if cached is not None:
        return cached
    base = Path(str(item.path)).parent
    update = bool(item.config.getoption("--loopctl-update", default=False))
    results = [
        replay_or_fail(p, base, agent=agent, tools=tools, update=update)
        for p, agent, tools in _marked_paths(item)
    ]
    item.stash[_RESULTS_KEY] = results
    return results


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Replay the traces of a ``loopctl_trace`` marker before the test body runs; after it, fail
    the test with the cassette misses and blocked calls it met (even if the body passed)."""
    if item.get_closest_marker("loopctl_trace") is not None:
        _replay_marked(item)
    try:
        result = yield
    except BaseException as error:
        offline.fail_on_problems(item, error)
        raise
    offline.fail_on_problems(item)
    return result


@pytest.fixture
def loopctl_scripted() -> Callable[..., ScriptedClient]:
    """A factory of ``ScriptedClient``s: pass replies (strings become final assistant texts)."""

    def make(*replies: Reply | str | list[Reply | str]) -> ScriptedClient:
        flat: list[Reply] = []
        for r in replies:
            for one in r if isinstance(r, list) else [r]:
                flat.append(Message.assistant(one) if isinstance(one, str) else one)
        return ScriptedClient(flat)

    return make


@pytest.fixture
def loopctl_replay(request: pytest.FixtureRequest) -> Callable[..., ReplayResult]:
    """``loopctl_replay(path)``: replay a trace, fail the test at the first divergence."""
    base = Path(str(request.path)).parent

    update = bool(request.config.getoption("--loopctl-update", default=False))

    def replay(
        path: str | os.PathLike[str], agent: str | None = None, tools: str = "live"
    ) -> ReplayResult:
        return replay_or_fail(path, base, agent=agent, tools=tools, update=update)

    return replay


@pytest.fixture
def loopctl_trace_results(request: pytest.FixtureRequest) -> list[ReplayResult]:
    """The replay results of the test's ``loopctl_trace`` marker (one per trace, in order)."""
    if request.node.get_closest_marker("loopctl_trace") is None:
        raise pytest.UsageError("loopctl_trace_results needs a @pytest.mark.loopctl_trace(...)")
    return _replay_marked(request.node)


@pytest.fixture
def loopctl_recorder(request: pytest.FixtureRequest) -> Iterator[LoopObserver]:
    """A trace recorder bound to this test with ``--loopctl-record DIR``, else a no-op observer."""
    target: Any = request.config.getoption("--loopctl-record", default=None)
    if not target:
        yield LoopObserver()
        return
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^\w.-]+", "_", request.node.nodeid).strip("_") or "test"
    path = directory / f"{name}.jsonl"
    recorder = TraceRecorder(path, metadata={"test": request.node.nodeid})
    try:
        yield recorder
    finally:
        recorder.close()
