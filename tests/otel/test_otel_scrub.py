"""A live span's content holds no secret the trace would hold none of: one rule scrubs both.

The live observer scrubs with ``loopctl.otel.scrub_content`` (the engine may not import the trace
scrubber); a value with no key shape of its own (``DB_PASSWORD='correct horse battery'`` in a
tool's result) is a secret by its name only. The shapes, the name rule and the text scrubbing
are defined once, in ``loopctl.secrets``: the otel scrubber is that function, the trace
scrubber reads the same patterns and name rule, and both scrub the tables here the same.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from otel_helpers import memory_provider

from loopctl import BareLoop, Message, secrets, tool
from loopctl.core import ToolCall
from loopctl.otel import REDACTED, OtelObserver, scrub_content
from loopctl.testing import ScriptedClient
from loopctl_sim import TraceRecorder
from loopctl_sim.trace.scrub import BUILTIN_PATTERNS, PLACEHOLDER, Scrubber, is_secret_key
from loopctl_sim.trace.scrub import REDACTED as TRACE_REDACTED

ENV = (
    "HOST=db.internal\n"
    "DB_PASSWORD='correct horse battery staple'\n"
    "OPENAI_API_KEY=abc123XYZdef456\n"
    "x-portkey-api-key: plainkey12345\n"
    "PASSWD=Tr0ub4dor&3xyz\n"
    "MAPS_URL=https://maps.example.com/api?key=Kq8Zr2Lm5Np0&region=eu\n"
)
SECRETS = ("correct horse", "abc123XYZ", "plainkey123", "Tr0ub4dor", "hunter2hunter2", "Kq8Zr2Lm")


@tool
def read_env() -> str:
    """Read the project's .env."""
    return ENV


def test_a_live_run_sends_no_named_secret_and_its_trace_holds_none(tmp_path: Path) -> None:
    provider, exporter = memory_provider()
    client = ScriptedClient(
        [
            Message.assistant("", [ToolCall(id="c1", name="read_env", arguments={})]),
            Message.assistant("The password: hunter2hunter2 is set."),
        ]
    )
    trace = tmp_path / "run.jsonl"
    recorder = TraceRecorder(trace)
    observers = [OtelObserver(provider, capture_content=True), recorder]
    result = BareLoop(client, tools=[read_env], observers=observers).run_sync(
        "my db_password: hunter2hunter2"
    )
    recorder.close()
    assert result.completed
    spans = exporter.get_finished_spans()
    contents = [
        str(value)
        for span in spans
        for name, value in (span.attributes or {}).items()
        if name.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call"))
    ]
    assert any("HOST=db.internal" in c for c in contents)  # the content is there, scrubbed
    for secret in SECRETS:
        assert not any(secret in c for c in contents), secret
        assert secret not in trace.read_text(), secret


NAMES = [
    "OPENAI_API_KEY", "api_key", "apiKey", "x-api-key", "x-portkey-api-key", "secret_key",
    "private_key", "db_password", "passwd", "credentials", "auth", "authorization", "cookie",
    "token", "access_token", "client_secret", "SecretAccessKey", "max_tokens", "input_tokens",
    "key_id", "sort_key", "cache_key", "eos_token", "token_count", "api_key_env", "key",
    "keyword", "private_ip", "monkey", "author", "tokens", "password_file",
]  # fmt: skip


def test_the_otel_and_trace_scrubbers_are_one_definition() -> None:
    assert scrub_content is secrets.scrub_text
    assert is_secret_key is secrets.is_secret_name
    assert BUILTIN_PATTERNS is secrets.BUILTIN_PATTERNS
    assert PLACEHOLDER is secrets.PLACEHOLDER
    assert TRACE_REDACTED is secrets.REDACTED and REDACTED is secrets.REDACTED
    assert Scrubber().patterns == secrets.BUILTIN_PATTERNS
    assert isinstance(Scrubber()._text, secrets.TextScrubber)


def test_the_names_are_read_by_the_one_rule() -> None:
    secret = {n for n in NAMES if is_secret_key(n)}
    assert {"OPENAI_API_KEY", "apiKey", "x-portkey-api-key", "db_password", "cookie"} <= secret
    assert not secret & {"max_tokens", "key_id", "sort_key", "eos_token", "key", "monkey"}


TEXTS = [
    *(f"{name}: abc123XYZdef456" for name in NAMES),
    *(f'{{"{name}": "a b c d e f"}}' for name in NAMES),
    *(f"{name}='Tr0ub4dor&3 xyz'" for name in NAMES),
    "GET http://h/v1?api-key=KEY12345&api-version=2024",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==",
    "token: expired",
    "the api_key is set in the environment",
    "password = 'unterminated value here",
]


def test_texts_are_scrubbed_as_the_trace_scrubs_them() -> None:
    trace = Scrubber()  # no key: bare placeholders, as a span's
    for text in TEXTS:
        assert scrub_content(text) == trace(text), text


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    st.lists(
        st.sampled_from([*NAMES, " ", "=", ": ", '"', "'", "&", "?", "\n", "abc", "XYZ12345", "é"]),
        max_size=14,
    )
)
def test_any_text_of_names_and_values_is_scrubbed_the_same(words: list[str]) -> None:
    text = "".join(words)
    assert scrub_content(text) == Scrubber()(text)


def test_a_bare_key_in_a_url_query_is_scrubbed_as_the_providers_redact_it() -> None:
    text = "GET https://generativelanguage.googleapis.com/v1?key=AbCdEf123456&alt=sse"
    want = "GET https://generativelanguage.googleapis.com/v1?key=[REDACTED]&alt=sse"
    assert scrub_content(text) == want
    assert Scrubber()(text) == want
    assert Scrubber().might_hold('{"url": "' + text + '"}')
    # a key outside a query is any mapping's
    assert Scrubber()("key: AbCdEf123456") == "key: AbCdEf123456"
    assert (
        Scrubber()("https://h/x?sig=Zm9vYmFyYmF6&sv=2024") == "https://h/x?sig=[REDACTED]&sv=2024"
    )
