"""The scrubber's secret names and shapes, table by table, and its pre-test never missing one.

Names are read word by word: what a credential is called in the wild (``OPENAI_API_KEY``,
``x-portkey-api-key``, ``db_password``, ``credentials``) is secret, and the counts and lookup
keys that share a word with them (``max_tokens``, ``sort_key``, ``key_id``) are not.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_sim.trace.scrub import LITERALS, REDACTED, Scrubber, is_secret_key

SECRET_NAMES = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "api_key",
    "apiKey",
    "ApiKey",
    "apikey",
    "x-api-key",
    "x-portkey-api-key",
    "x-goog-api-key",
    "secret_key",
    "secret",
    "client_secret",
    "aws_secret_access_key",
    "SecretAccessKey",
    "private_key",
    "privateKey",
    "db_password",
    "password",
    "PASSWORD",
    "passwd",
    "passphrase",
    "credentials",
    "credential",
    "creds",
    "auth",
    "Authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "token",
    "access_token",
    "refreshToken",
    "id_token",
    "auth_token",
    "github_token",
    "session_token",
    "api_keys",
    "password_hash",
]

PLAIN_NAMES = [
    "max_tokens",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "context_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "tokens",
    "max_completion_tokens",
    "token_count",
    "tokenizer",
    "eos_token",
    "pad_token",
    "next_page_token",
    "key",
    "keys",
    "keyword",
    "monkey",
    "sort_key",
    "cache_key",
    "primary_key",
    "idempotency_key",
    "required_keys",
    "config_key",
    "scrub_key",
    "key_id",
    "aws_access_key_id",
    "api_key_env",
    "key_env",
    "token_type",
    "secret_name",
    "password_file",
    "author",
    "authors",
    "oauth_url",
    "text",
    "name",
    "model",
    "private_ip",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_a_credential_name_is_secret(name: str) -> None:
    assert is_secret_key(name)
    assert Scrubber()({name: "hunter22-value"}) == {name: REDACTED}


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_a_name_that_shares_a_word_is_not_secret(name: str) -> None:
    assert not is_secret_key(name)
    value = {name: 4096}
    assert Scrubber()(value) is value


def test_everything_under_a_secret_name_goes_but_flags_stay() -> None:
    value = {"credentials": {"user": "bob", "pass": "x", "port": 5432, "on": True, "none": None}}
    assert Scrubber()(value) == {
        "credentials": {
            "user": REDACTED,
            "pass": REDACTED,
            "port": REDACTED,
            "on": True,
            "none": None,
        }
    }


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
PEM_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4"

SHAPES: list[tuple[str, str, str]] = [
    # (text, the secret in it, what must remain readable)
    (f"aws_secret_access_key = {AWS_SECRET}", AWS_SECRET, "aws_secret_access_key = "),
    (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET, "AWS_SECRET_ACCESS_KEY="),
    (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET, '"SecretAccessKey": "'),
    ("http://user:s3cr3t-pw@db.example:5432/app", "s3cr3t-pw", "http://user:"),
    ("postgres://admin:hunter22@127.0.0.1/x and more", "hunter22", "@127.0.0.1/x and more"),
    ("GET http://127.0.0.1:9/v1?api-key=KEY12345&api-version=2024", "KEY12345", "api-version=2024"),
    (
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\nafter",
        PEM_BODY,
        "-----END RSA PRIVATE KEY-----\nafter",
    ),
    (
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}",  # cut before its end line
        PEM_BODY,
        "-----BEGIN OPENSSH PRIVATE KEY-----",
    ),
    ("db_password: correct-horse", "correct-horse", "db_password: "),
    ('{"private_key": "abcdef0123"}', "abcdef0123", '"private_key": "'),
    ("OPENAI_API_KEY='abc123def456'", "abc123def456", "OPENAI_API_KEY='"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA==", "Authorization: Basic "),
    ("x-portkey-api-key: pk-live-1234567", "pk-live-1234567", "x-portkey-api-key: "),
    # ``&`` is part of a password outside a URL's query (it was cut there: ``&3xyz`` stayed)
    ("db password: Tr0ub4dor&3xyz. look it up", "&3xyz", "db password: "),
    ("x?v=1&token=abcdef123456&b=2", "abcdef123456", "x?v=1&token=[REDACTED:"),
    # a quoted value runs to its quote, spaces and all (a tool's JSON text, a .env file)
    ('{"password": "correct horse battery"}', "correct horse battery", '{"password": "'),
    ("DB_PASSWORD='My Secret Phrase 123'\nHOST=db", "My Secret Phrase", "'\nHOST=db"),
]


@pytest.mark.parametrize(("text", "secret", "kept"), SHAPES)
def test_a_secret_shape_in_a_text_is_replaced(text: str, secret: str, kept: str) -> None:
    scrubbed = Scrubber(key=b"k")(text)
    assert secret not in scrubbed
    assert kept in scrubbed
    assert "[REDACTED:" in scrubbed
    # the same secret gets the same placeholder: replay compares them
    assert Scrubber(key=b"k")(text) == scrubbed
    # and scrubbing twice changes nothing more
    assert Scrubber(key=b"k")(scrubbed) == scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 100000",
        "token_count=123456789",
        "Note: something happened here",
        "the api_key is set in the environment",
        "see http://example.com/path?page=2&sort=asc",
        "https://user@example.com/x",
        "key: value-of-a-map",
        "Authorization: Bearer [REDACTED]",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "the server refused the credentials: invalid key",
        "token: expired",
        '{"token": "expired"}',
        "see http://example.com/search?q=x&api_key_env=OPENAI",
    ],
)
def test_an_ordinary_text_is_left_alone(text: str) -> None:
    assert Scrubber()(text) is text


NAMES = st.sampled_from([*SECRET_NAMES, *PLAIN_NAMES]) | st.text(
    alphabet="abcdekyotnpswrAKT_-:=\"'\\ \t\u0130\u212a", max_size=16
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | NAMES | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(NAMES, children, max_size=4)
        | st.builds(lambda n, v: f"{n}={v}", NAMES, st.text(min_size=6, max_size=12))
        | st.builds(lambda n, v: f'{{"{n}": "{v}"}}', NAMES, st.text(min_size=6, max_size=12))
    ),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(value=_json)
def test_the_pre_test_never_lets_a_secret_name_through(value: Any) -> None:
    """A record the cheap literal test passes holds nothing the walk would change, for names
    and ``name=value`` texts built from the words that matter (JSON escapes included)."""
    scrubber = Scrubber()
    text = json.dumps(value)
    if not scrubber.might_hold(text):
        assert scrubber(value) is value
    low = text.lower()
    assert scrubber.might_hold(text) is any(literal in low for literal in LITERALS)


@settings(max_examples=500, deadline=None, derandomize=True)
@given(
    text=st.text(alphabet="kestoynpa_\"'-=:\\ \tsSKT", max_size=30)
    | st.lists(st.sampled_from(["token", "tokens", "key", "keys", "apikey", "_", '"', ":"])).map(
        "".join
    )
)
def test_the_pre_test_is_the_plain_search_of_every_literal(text: str) -> None:
    """``key``, ``keys``, ``apikey`` and ``token`` are found by their occurrences (``tokens``
    everywhere would cost seven searches a record): the answer is the plain search's."""
    low = text.lower()
    assert Scrubber().might_hold(text) is any(literal in low for literal in LITERALS)
