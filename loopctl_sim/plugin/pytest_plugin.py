"""The loopctl pytest plugin: scripted clients, traces replayed as tests, and recording.

Enable it with ``-p loopctl_sim.plugin.pytest_plugin`` (or through the ``pytest11`` entry point
``loopctl``, which loads it automatically once loopctl is installed).

Fixtures
--------
``loopctl_scripted``
    A factory: ``loopctl_scripted("Hello")`` or ``loopctl_scripted(Message..., LoopError...)``
    returns a ``ScriptedClient`` playing those replies in order (a plain string is a final
    assistant text).
``loopctl_replay``
    ``loopctl_replay(path)`` replays a trace at machine level and fails the test with the
    divergence report (record, diff, the feeds before it) if the brain decides anything
    differently; it returns the ``ReplayResult``. A relative path is resolved against the test
    file's directory first, then the working directory.
``loopctl_recorder``
    A ``LoopObserver`` for ``BareLoop(observers=[loopctl_recorder])``: with
    ``--loopctl-record DIR`` it is a ``TraceRecorder`` writing ``DIR/<test id>.jsonl``;
    without the option it does nothing. One trace holds one conversation (successive runs of
    one loop); a test driving two independent loops should record only one of them.

Marker
------
``@pytest.mark.loopctl_trace("path.jsonl", ...)`` replays each named trace as part of the test
(before its body runs) and fails it at the first divergence. The body may be empty, or ask for
the ``loopctl_trace_results`` fixture (the ``ReplayResult`` of each trace) to assert more.
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
from loopctl_sim.replay import ReplayResult, replay_trace
from loopctl_sim.trace import TraceFormatError, TraceRecorder

__all__ = [
    "loopctl_recorder",
    "loopctl_replay",
    "loopctl_scripted",
    "loopctl_trace_results",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_call",
    "replay_or_fail",
    "resolve_trace",
]

_RESULTS_KEY = pytest.StashKey[list[ReplayResult]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopctl", "loopctl agent loops")
    group.addoption(
        "--loopctl-record",
        metavar="DIR",
        default=None,
        help="Write a trace of every loop run that uses the loopctl_recorder fixture to DIR.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "loopctl_trace(*paths): replay loopctl trace files (JSON Lines) as part of this test; "
        "the test fails at the first divergence",
    )


# --- replaying ---------------------------------------------------------------------------------


def resolve_trace(path: str | os.PathLike[str], base: Path | None = None) -> Path:
    """``path`` as given if absolute; else under ``base`` (the test's directory) when it exists
    there; else relative to the working directory."""
    p = Path(path)
    if p.is_absolute() or base is None:
        return p
    candidate = base / p
    return candidate if candidate.exists() else p


def replay_or_fail(path: str | os.PathLike[str], base: Path | None = None) -> ReplayResult:
    """Replay the trace at ``path``; ``pytest.fail`` with a readable report if it diverges or
    cannot be read."""
    p = resolve_trace(path, base)
    try:
        result = replay_trace(p)
    except TraceFormatError as exc:
        pytest.fail(f"loopctl trace cannot be read: {exc}", pytrace=False)
    if not result.ok:
        pytest.fail(f"loopctl replay diverged\n{result.summary()}", pytrace=False)
    if result.records == 0:
        pytest.fail(f"loopctl trace {p} holds no record", pytrace=False)
    return result


def _marked_paths(item: pytest.Item) -> list[str]:
    paths: list[str] = []
    for mark in item.iter_markers("loopctl_trace"):
        if not mark.args:
            raise pytest.UsageError(f"{item.nodeid}: loopctl_trace needs at least one path")
        paths += [os.fspath(a) for a in mark.args]
    return paths


def _replay_marked(item: pytest.Item) -> list[ReplayResult]:
    cached = item.stash.get(_RESULTS_KEY, None)
    if cached is not None:
        return cached
    base = Path(str(item.path)).parent
    results = [replay_or_fail(p, base) for p in _marked_paths(item)]
    item.stash[_RESULTS_KEY] = results
    return results


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Replay the traces of a ``loopctl_trace`` marker before the test body runs."""
    if item.get_closest_marker("loopctl_trace") is not None:
        _replay_marked(item)


# --- fixtures ----------------------------------------------------------------------------------


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

    def replay(path: str | os.PathLike[str]) -> ReplayResult:
        return replay_or_fail(path, base)

    return replay


@pytest.fixture
def loopctl_trace_results(request: pytest.FixtureRequest) -> list[ReplayResult]:
    """The replay results of the test's ``loopctl_trace`` marker (one per trace, in order)."""
    if request.node.get_closest_marker("loopctl_trace") is None:
        raise pytest.UsageError("loopctl_trace_results needs a @pytest.mark.loopctl_trace(...)")
    return _replay_marked(request.node)


def _trace_name(nodeid: str) -> str:
    return re.sub(r"[^\w.-]+", "_", nodeid).strip("_") or "test"


@pytest.fixture
def loopctl_recorder(request: pytest.FixtureRequest) -> Iterator[LoopObserver]:
    """A trace recorder bound to this test with ``--loopctl-record DIR``, else a no-op observer."""
    target: Any = request.config.getoption("--loopctl-record", default=None)
    if not target:
        yield LoopObserver()
        return
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{_trace_name(request.node.nodeid)}.jsonl"
    recorder = TraceRecorder(path, metadata={"test": request.node.nodeid})
    try:
        yield recorder
    finally:
        recorder.close()
