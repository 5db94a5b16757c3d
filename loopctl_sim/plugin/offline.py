"""The plugin's offline half: cassettes for a test's model calls and the network guard.

``pytest_plugin`` imports the fixtures from here and calls the hook helpers; this module owns
the rules:

- A test that uses loopctl's fixtures or markers, or any test under
  ``--loopctl-block-network``, runs with the network closed, local servers included (a local
  Ollama is a provider too); ``loopctl_allow_network(*hosts)`` opens it. A test with a cassette
  runs with the network open while the record mode records.
- ``loopctl_cassette`` (marker or fixture; ``vcr`` when pytest-recording is not installed) puts
  the test's httpx requests on ``loopctl_cassette_dir/<test name>.yaml`` or the marker's path
  (relative to the test file). While replaying, unset provider key variables get a placeholder,
  so an agent that builds its client from the environment runs in CI without secrets.
- A blocked call or a cassette miss fails the test after its body, whatever it asserted:
  clients may turn either into an ordinary failed run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from loopctl.testing import NetworkBlockedError, block_network
from loopctl_sim.plugin.modes import RECORD_MODES, push_record_mode

#: A test using any of these (or a loopctl_trace or cassette marker) runs with the network closed.
GUARDED_FIXTURES: Final = frozenset(
    {
        "loopctl_scripted",
        "loopctl_replay",
        "loopctl_recorder",
        "loopctl_trace_results",
        "loopctl_cassette",
    }
)
#: The environment variables given a placeholder while replaying, when unset.
KEY_VARIABLES: Final = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
REPLAY_KEY: Final = "loopctl-replay-without-a-key"

_PROBLEMS = pytest.StashKey[list[str]]()
#: Why the test's call failed, if it did (its recording then does not replace the cassette).
_FAILED = pytest.StashKey[str]()
_SESSION = pytest.StashKey[Any]()
_VCR_IS_OURS = pytest.StashKey[bool]()


def add_options(group: Any) -> None:
    group.addoption(
        "--loopctl-record-mode",
        choices=RECORD_MODES,
        default="none",
        help="How loopctl cassettes record: none (replay only, the default; CI), once (record a "
        "cassette that does not exist), new_episodes (record what a cassette lacks), all "
        "(record every request again), rewrite (delete and record afresh).",
    )
    group.addoption(
        "--loopctl-block-network",
        action="store_true",
        default=False,
        help="Close the network for every test, not only those using loopctl's fixtures and "
        "markers.",
    )


def configure(config: pytest.Config) -> None:
    push_record_mode(str(config.getoption("--loopctl-record-mode", default="none")))
    ours = not config.pluginmanager.hasplugin("recording")  # pytest-recording owns `vcr`
    config.stash[_VCR_IS_OURS] = ours
    lines = [
        "loopctl_cassette(path=None, *, allow_playback_repeats=False): answer this test's "
        "httpx requests from a cassette (recorded as --loopctl-record-mode says) with "
        "loopctl's rules; a miss fails the test",
        "loopctl_allow_network(*hosts): let this loopctl test reach the network (only the "
        "named hosts when given)",
    ]
    if ours:
        lines.append("vcr(path=None): loopctl_cassette (pytest-recording is not installed)")
    for line in lines:
        config.addinivalue_line("markers", line)


def _cassette_markers(item: pytest.Item) -> list[pytest.Mark]:
    marks = list(item.iter_markers("loopctl_cassette"))
    if item.config.stash.get(_VCR_IS_OURS, False):
        marks += list(item.iter_markers("vcr"))
    return marks


def _guarded(request: pytest.FixtureRequest) -> bool:
    return bool(
        request.config.getoption("--loopctl-block-network", default=False)
        or GUARDED_FIXTURES & set(request.fixturenames)
        or request.node.get_closest_marker("loopctl_trace") is not None
        or _cassette_markers(request.node)
    )


def record_hint(nodeid: str) -> str:
    """How to record what a test's cassette lacks (ends a miss report)."""
    return (
        f'To record it: run `pytest --loopctl-record-mode=new_episodes "{nodeid}"` once with '
        "real credentials (`once` for a new cassette, `rewrite` to record it afresh), then "
        "commit the cassette."
    )


def blocked_hint(nodeid: str, has_cassette: bool) -> str:
    """What a blocked call in ``nodeid`` tells the user to do instead."""
    record = (
        record_hint(nodeid)
        if has_cassette
        else "To answer it from a cassette: mark the test @pytest.mark.loopctl_cassette and run "
        f'`pytest --loopctl-record-mode=once "{nodeid}"` once with real credentials, then '
        "commit the cassette."
    )
    return (
        f"loopctl closes the network for {nodeid} (it uses loopctl's fixtures or markers). "
        f"{record} A test that must reach this host: "
        '@pytest.mark.loopctl_allow_network("<host>").'
    )


@pytest.fixture(autouse=True)
def loopctl_offline(request: pytest.FixtureRequest) -> Iterator[None]:
    """Closes the network for loopctl tests and puts marked tests on their cassette."""
    wants_cassette = bool(_cassette_markers(request.node)) or "loopctl_cassette" in (
        request.fixturenames
    )
    recording = wants_cassette and request.config.getoption("--loopctl-record-mode") != "none"
    allow = request.node.get_closest_marker("loopctl_allow_network")
    if recording or (allow is not None and not allow.args) or not _guarded(request):
        if wants_cassette:
            request.getfixturevalue("loopctl_cassette")
        yield
        return
    problems = request.node.stash.setdefault(_PROBLEMS, [])

    def note(error: NetworkBlockedError) -> None:
        problems.append(str(error))

    hosts = [str(h) for h in allow.args] if allow is not None else []
    hint = blocked_hint(request.node.nodeid, wants_cassette)
    with block_network(allow_hosts=hosts, allow_loopback=False, hint=hint, on_block=note):
        if wants_cassette:
            request.getfixturevalue("loopctl_cassette")
        yield


@pytest.fixture(scope="session")
def loopctl_record_mode(pytestconfig: pytest.Config) -> str:
    """The session's ``--loopctl-record-mode``."""
    return str(pytestconfig.getoption("--loopctl-record-mode"))


@pytest.fixture(scope="module")
def loopctl_cassette_dir(request: pytest.FixtureRequest) -> Path:
    """Where a test module's cassettes live: ``cassettes/<module>/`` beside it (override the
    fixture to keep them elsewhere)."""
    module = Path(str(request.path))
    return module.parent / "cassettes" / module.stem


def cassette_name(request: pytest.FixtureRequest) -> str:
    """The default cassette of a test: its name (and its class's), safe as a file name."""
    name = request.node.name
    if request.cls is not None:
        name = f"{request.cls.__name__}.{name}"
    for ch in "<>?%*:|\"'/\\":
        name = name.replace(ch, "-")
    return f"{name}.yaml"


def cassette_path(request: pytest.FixtureRequest, directory: Path) -> tuple[Path, bool]:
    """The test's cassette and whether its marker allows playback repeats: the marker's path (a
    relative one from the test file's directory; ``.yaml`` added unless it ends in ``.yaml``,
    ``.yml`` or ``.json``), else ``directory/<test name>.yaml``."""
    marks = _cassette_markers(request.node)
    mark = marks[0] if marks else None
    if mark is not None:
        unknown = set(mark.kwargs) - {"allow_playback_repeats"}
        if unknown or len(mark.args) > 1:
            raise pytest.UsageError(
                f"{request.node.nodeid}: {mark.name} takes one optional path and "
                f"allow_playback_repeats=, not {mark.args!r} {sorted(unknown)}"
            )
    if mark is not None and mark.args:
        arg = mark.args[0]
        text = os.fspath(arg) if isinstance(arg, str | os.PathLike) else None
        given = Path(text) if text and text.strip() and not text.endswith(("/", os.sep)) else None
        path = Path(str(request.path)).parent / given if given is not None else Path()
        path = Path(os.path.normpath(path))  # "../x" leaves no ".." for vcrpy's mkdir
        if given is None or path.is_dir():
            raise pytest.UsageError(
                f"{request.node.nodeid}: {mark.name}'s path names a cassette file (like "
                f"'orders/status' or '../cassettes/status.yaml'), not {arg!r}"
            )
    else:
        path = directory / cassette_name(request)
    if path.suffix not in (".yaml", ".yml", ".json"):
        path = path.with_name(path.name + ".yaml")
    repeats = bool(mark.kwargs.get("allow_playback_repeats", False)) if mark else False
    return path, repeats


@pytest.fixture
def loopctl_cassette(
    request: pytest.FixtureRequest, loopctl_cassette_dir: Path, loopctl_record_mode: str
) -> Iterator[Any]:
    """The test's cassette (vcrpy's ``Cassette``: ``all_played``, ``play_count``, ``requests``)
    while its httpx requests are answered from it; a miss fails the test."""
    try:
        from loopctl_sim.plugin.cassettes import CassetteSession
    except ImportError as exc:  # vcrpy is the optional extra
        pytest.fail(
            f"loopctl cassettes need vcrpy: pip install 'loopctl[cassettes]' ({exc})",
            pytrace=False,
        )
    path, repeats = cassette_path(request, Path(loopctl_cassette_dir))
    session = CassetteSession(
        path,
        record_mode=loopctl_record_mode,
        allow_playback_repeats=repeats,
        raise_on_miss=False,
        hint=record_hint(request.node.nodeid),
    )
    request.node.stash[_SESSION] = session
    with pytest.MonkeyPatch.context() as patch:
        if loopctl_record_mode == "none":
            for variable in KEY_VARIABLES:
                if not os.environ.get(variable):
                    patch.setenv(variable, REPLAY_KEY)
        with session as cassette:
            yield cassette
            failed = request.node.stash.get(_FAILED, None)
            if failed is not None:
                session.abandon(f"the test failed: {failed}")


def fail_on_problems(item: pytest.Item, error: BaseException | None = None) -> None:
    """``pytest.fail`` with every blocked call and cassette miss of the test, if any: they are
    the cause, so they replace ``error``, the failure of the body they led to (named on a line
    of its own)."""
    noted: list[str] = item.stash.get(_PROBLEMS, [])
    problems = list(dict.fromkeys(noted))
    session = item.stash.get(_SESSION, None)
    if session is not None and session.misses:
        problems.append(session.report())
    first = (str(error).strip().splitlines() or [""])[0]
    if error is not None:
        item.stash[_FAILED] = f"{type(error).__name__}: {first[:200]}"
    if not problems:
        return
    item.stash[_FAILED] = (problems[0].splitlines() or [""])[0]
    item.stash[_PROBLEMS] = []
    if session is not None:
        session.misses.clear()
    if error is not None and not isinstance(error, pytest.skip.Exception):
        cut = first if len(first) <= 200 else first[:200] + "..."
        problems.append(f"(the test body then failed with {type(error).__name__}: {cut})")
    try:
        pytest.fail("\n\n".join(problems), pytrace=False)
    except pytest.fail.Exception as failure:
        raise failure from None
