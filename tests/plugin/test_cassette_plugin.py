"""The plugin's cassettes and network guard, exercised through pytester as a user's suite would.

The inner suites' model is an ``httpx.MockTransport`` (vcrpy records through it like through a
socket) or, for the guard, the local fake OpenAI server of this directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI

from loopctl_sim.plugin import pytest_plugin
from loopctl_sim.plugin.offline import REPLAY_KEY

pytest_plugins = ["pytester"]

ARGS = ("-p", "no:cacheprovider", "-p", "no:asyncio")

CONFTEST = """
import json

import httpx
import pytest

from loopctl.providers import OpenAIClient

SSE = (
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello!"}}]}\\n\\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\\n\\n'
    b"data: [DONE]\\n\\n"
)


class Model:
    def __init__(self):
        self.seen = []

    def handler(self, request):
        self.seen.append(json.loads(request.content))
        headers = {"content-type": "text/event-stream", "set-cookie": "s=1"}
        return httpx.Response(200, headers=headers, stream=httpx.ByteStream(SSE))


@pytest.fixture
def model():
    return Model()


@pytest.fixture
def client(model):
    http = httpx.AsyncClient(transport=httpx.MockTransport(model.handler))
    return OpenAIClient(
        "gpt-4o-mini", api_key="sk-test", base_url="https://api.example.com/v1", http_client=http
    )
"""

ANSWER = """
import pytest

from loopctl.driver import BareLoop


@pytest.mark.loopctl_cassette
def test_answer(client, model, loopctl_cassette, loopctl_record_mode):
    result = BareLoop(client).run_sync("PROMPT")
    assert result.final_text == "Hello!"
    assert len(model.seen) == (0 if loopctl_record_mode == "none" else 1)
"""


def suite(pytester: pytest.Pytester, body: str = ANSWER, prompt: str = "Say hello.") -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=body.replace("PROMPT", prompt))


def cassette_of(pytester: pytest.Pytester, name: str = "test_answer") -> Path:
    return pytester.path / "cassettes" / "test_agent" / f"{name}.yaml"


# --- cassettes ---------------------------------------------------------------------------------


def test_record_once_then_replay_offline(pytester: pytest.Pytester) -> None:
    suite(pytester)
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    text = cassette_of(pytester).read_text()
    assert "sk-test" not in text and "set-cookie" not in text
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)  # none: the model is not asked


def test_a_changed_prompt_fails_with_the_request_and_a_diff(pytester: pytest.Pytester) -> None:
    suite(pytester)
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    suite(pytester, prompt="Say hello, politely.")
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*loopctl cassette miss: POST https://api.example.com/v1/chat/completions",
            "*cassette: cassettes/test_agent/test_answer.yaml (1 interaction(s), 0 played;*",
            "*nearest recorded request: #1 POST /v1/chat/completions; body diff*",
            '*-      "content": "Say hello.",',
            '*+      "content": "Say hello, politely.",',
            '*--loopctl-record-mode=new_episodes "test_agent.py::test_answer"*',
            "*the test body then failed with AssertionError*",
        ]
    )


def test_a_miss_fails_a_test_that_checks_nothing(pytester: pytest.Pytester) -> None:
    """The driver turns the miss into a failed run; the plugin fails the test anyway."""
    suite(
        pytester,
        body="""
import pytest
from loopctl.driver import BareLoop

@pytest.mark.loopctl_cassette
def test_answer(client):
    BareLoop(client).run_sync("Say hello.")  # the outcome is not looked at
""",
    )
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*loopctl cassette miss*", "*the cassette does not exist yet*"])


@pytest.mark.parametrize(
    ("marker", "path"),
    [
        ("vcr", "tests/cassettes/test_agent/test_answer.yaml"),
        ("loopctl_cassette", "tests/cassettes/test_agent/test_answer.yaml"),
        ("loopctl_cassette('recorded/answer')", "tests/recorded/answer.yaml"),
        ("loopctl_cassette('answer.json')", "tests/answer.json"),
        ("loopctl_cassette('../shared/answer')", "shared/answer.yaml"),
        ("loopctl_cassette('../shared/deeper/answer.yml')", "shared/deeper/answer.yml"),
    ],
)
def test_the_marker_names_the_cassette(pytester: pytest.Pytester, marker: str, path: str) -> None:
    """No path: ``cassettes/<module>/<test>.yaml`` beside the test file; a relative path is
    taken from the test file's directory, ``..`` included (the tests live in ``tests/``)."""
    pytester.makeconftest(CONFTEST)
    body = ANSWER.replace("loopctl_cassette\n", f"{marker}\n", 1).replace("PROMPT", "Say hello.")
    pytester.makepyfile(**{"tests/test_agent": body})
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    kinds = {".yaml", ".yml", ".json"}
    written = [p for p in pytester.path.rglob("*") if p.suffix in kinds]
    assert [p.relative_to(pytester.path).as_posix() for p in written] == [path]
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)  # replayed from there


def test_the_fixture_alone_puts_the_test_on_a_cassette(pytester: pytest.Pytester) -> None:
    suite(pytester, body=ANSWER.replace("@pytest.mark.loopctl_cassette\n", ""))
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    assert cassette_of(pytester).exists()


def test_the_cassette_dir_fixture_can_be_overridden(pytester: pytest.Pytester) -> None:
    suite(pytester)
    with open(pytester.path / "conftest.py", "a") as f:
        f.write(
            "\n\n@pytest.fixture(scope='module')\ndef loopctl_cassette_dir():\n"
            "    import pathlib\n    return pathlib.Path(__file__).parent / 'tapes'\n"
        )
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    assert (pytester.path / "tapes" / "test_answer.yaml").exists()


def test_repeats_are_misses_unless_the_marker_allows_them(pytester: pytest.Pytester) -> None:
    twice = ANSWER.replace(
        'result = BareLoop(client).run_sync("PROMPT")',
        'BareLoop(client).run_sync("PROMPT")\n    result = BareLoop(client).run_sync("PROMPT")',
    ).replace(
        '(0 if loopctl_record_mode == "none" else 1)', '(0 if loopctl_record_mode == "none" else 2)'
    )
    suite(pytester, body=twice)
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=1)
    data = cassette_of(pytester).read_text()
    cassette_of(pytester).write_text(data[: data.index("- request:", 20)] + "version: 1\n")
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*already played*"])
    repeats = twice.replace(
        "loopctl_cassette\n", "loopctl_cassette(allow_playback_repeats=True)\n", 1
    )
    suite(pytester, body=repeats)
    pytester.runpytest(*ARGS).assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ("'a', 'b'", "*loopctl_cassette takes one optional path*"),
        ("''", "*loopctl_cassette's path names a cassette file*not ''*"),
        ("'shared/'", "*loopctl_cassette's path names a cassette file*not 'shared/'*"),
        ("'..'", "*loopctl_cassette's path names a cassette file*not '..'*"),
        ("42", "*loopctl_cassette's path names a cassette file*not 42*"),
    ],
)
def test_a_wrong_marker_is_a_usage_error(
    pytester: pytest.Pytester, arguments: str, said: str
) -> None:
    marker = f"loopctl_cassette({arguments})\n"
    suite(pytester, body=ANSWER.replace("loopctl_cassette\n", marker, 1))
    result = pytester.runpytest(*ARGS, "--loopctl-record-mode=once")
    result.stdout.fnmatch_lines([said])
    assert result.ret != 0
    assert not (pytester.path / "cassettes").exists()  # nothing recorded anywhere
    assert [p.name for p in pytester.path.iterdir() if p.suffix == ".yaml"] == []


def test_an_unknown_record_mode_is_refused(pytester: pytest.Pytester) -> None:
    suite(pytester)
    result = pytester.runpytest(*ARGS, "--loopctl-record-mode=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--loopctl-record-mode*invalid choice*"])


def test_replaying_needs_no_key(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "mine")
    pytester.makepyfile(
        f"""
import os
import pytest

@pytest.mark.loopctl_cassette
def test_keys(loopctl_record_mode):
    if loopctl_record_mode == "none":
        assert os.environ["OPENAI_API_KEY"] == {REPLAY_KEY!r}
    else:
        assert "OPENAI_API_KEY" not in os.environ
    assert os.environ["ANTHROPIC_API_KEY"] == "mine"  # a key that is set is kept

def test_after():
    assert "OPENAI_API_KEY" not in os.environ
"""
    )
    pytester.runpytest(*ARGS).assert_outcomes(passed=2)
    pytester.runpytest(*ARGS, "--loopctl-record-mode=once").assert_outcomes(passed=2)


def test_pytest_recording_learns_the_body_matcher() -> None:
    class VCR:
        def __init__(self) -> None:
            self.matchers: dict[str, object] = {}

        def register_matcher(self, name: str, matcher: object) -> None:
            self.matchers[name] = matcher

    recorder = VCR()
    pytest_plugin.pytest_recording_configure(config=None, vcr=recorder)  # type: ignore[arg-type]
    assert list(recorder.matchers) == ["loopctl_body"]


# --- the network guard -------------------------------------------------------------------------

CALLS = """
import httpx
import os
import pytest

from loopctl.driver import BareLoop
from loopctl.providers import OpenAIClient

URL = os.environ["FAKE_URL"]


def ask():
    return httpx.post(URL + "/chat/completions", json={"messages": []}, timeout=5)


def test_scripted(loopctl_scripted):
    ask()


def test_swallowed(loopctl_scripted):
    try:
        ask()
    except Exception:
        pass


def test_remote(loopctl_scripted):
    httpx.get("https://api.openai.com/v1/models", timeout=5)


def test_agent(loopctl_scripted):
    BareLoop(OpenAIClient("gpt-4o-mini", base_url=URL)).run_sync("hi")  # outcome unchecked


@pytest.mark.loopctl_allow_network("127.0.0.1")
def test_allowed_host(loopctl_scripted):
    assert ask().status_code == 200


@pytest.mark.loopctl_allow_network
def test_allowed(loopctl_scripted):
    assert ask().status_code == 200


def test_plain():
    assert ask().status_code == 200


@pytest.mark.loopctl_cassette
def test_recording(loopctl_record_mode):
    response = ask()
    if loopctl_record_mode != "none":
        assert response.status_code == 200
"""


@pytest.fixture
def calls(
    pytester: pytest.Pytester, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    monkeypatch.setenv("FAKE_URL", fake_openai.url)
    pytester.makepyfile(test_calls=CALLS)
    return pytester


def outcome(result: pytest.RunResult, name: str) -> str:
    lines = [line for line in result.outlines if f"test_calls.py::{name} " in line]
    assert lines, result.stdout.str()
    return lines[0].split()[1]


def test_loopctl_tests_cannot_reach_even_a_local_server(
    calls: pytest.Pytester, fake_openai: FakeOpenAI
) -> None:
    result = calls.runpytest(*ARGS, "-v", "-k", "not recording")
    port = fake_openai.url.split(":")[2].split("/")[0]
    for name in ["test_scripted", "test_swallowed", "test_remote", "test_agent"]:
        assert outcome(result, name) == "FAILED"
    result.stdout.fnmatch_lines(
        [
            f"*network access blocked in tests: connect to 127.0.0.1:{port}",
            "loopctl closes the network for test_calls.py::test_swallowed (it uses loopctl's "
            "fixtures or markers). To answer it from a cassette: mark the test "
            "@pytest.mark.loopctl_cassette and run `pytest --loopctl-record-mode=once "
            '"test_calls.py::test_swallowed"` once with real credentials, then commit the '
            "cassette. A test that must reach this host: "
            '@pytest.mark.loopctl_allow_network("<host>").',
            "network access blocked in tests: resolve api.openai.com:443",
        ]
    )
    for name in ["test_allowed_host", "test_allowed", "test_plain"]:
        assert outcome(result, name) == "PASSED"
    assert len(fake_openai.requests) == 3  # the three allowed calls, no other


def test_block_network_closes_it_for_every_test(calls: pytest.Pytester) -> None:
    result = calls.runpytest(*ARGS, "-v", "-k", "plain", "--loopctl-block-network")
    assert outcome(result, "test_plain") == "FAILED"


def test_a_recording_test_reaches_the_network(
    calls: pytest.Pytester, fake_openai: FakeOpenAI
) -> None:
    result = calls.runpytest(*ARGS, "-v", "-k", "recording", "--loopctl-record-mode=once")
    assert outcome(result, "test_recording") == "PASSED"
    assert len(fake_openai.requests) == 1
    result = calls.runpytest(*ARGS, "-v", "-k", "recording")  # replayed
    assert outcome(result, "test_recording") == "PASSED"
    assert len(fake_openai.requests) == 1


def test_without_vcrpy_the_plugin_loads_and_a_cassette_test_says_what_to_install(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
import sys

assert "vcr" not in sys.modules  # the plugin itself does not import vcrpy
sys.modules["vcr"] = None  # as if the cassettes extra were not installed
"""
    )
    pytester.makepyfile(
        """
import pytest

def test_scripted(loopctl_scripted):
    assert loopctl_scripted("hi") is not None

@pytest.mark.loopctl_cassette
def test_cassette():
    pass
"""
    )
    result = pytester.runpytest_subprocess(*ARGS)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["loopctl cassettes need vcrpy: pip install 'loopctl?cassettes?'*"])
