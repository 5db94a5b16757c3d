"""A client's base URL: where requests go, what messages show, and which secrets it carries.

A query (Azure's ``?api-version=X``) stays a query: an endpoint's path is joined to the base
URL's path. A gateway may take its key in the query (``?api-key=KEY``), a proxy may want
``user:password@`` (HTTP Basic): the URL a request goes to never carries that userinfo (httpx
would send it behind the client's back); the client sends it on purpose (``BaseUrl.basic``),
and refuses when it would replace the API key in the same header.

What a message or a trace shows of the URL (``BaseUrl.shown``) has no userinfo and no secret
query value, and every error a client raises has the secrets it knows, and whatever else is
shaped like one, replaced (``redact``): a server that echoes a key in a 401 does not put it in
a result, a trace or a terminal. What is a secret is ``loopctl.secrets``' rule.

Who a client is talking to (``identity``), from the host, since the OpenAI-compatible client
serves many (and an Anthropic-compatible endpoint need not be Anthropic):

- the **key** recorded in the parts a client keeps (``ThinkingPart.provider``): a client sends
  such a part back only when the key is its own, so DeepSeek's ``reasoning_content`` never
  reaches OpenRouter. It names the host and the wire family (``deepseek/anthropic``); an
  explicit ``provider=`` wins (a proxy in front of a provider);
- the **name** errors use ("Groq refused the credentials"), not "OpenAI" for every host.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Final, Literal

import httpx

from loopctl.api import ApiError
from loopctl.core import LoopError
from loopctl.secrets import REDACTED, is_secret_param, scrub_text


class BaseUrl:
    """A parsed base URL: ``url`` (no userinfo, the query kept) for requests, ``shown`` for
    messages, ``basic`` the ``Authorization`` value its userinfo asks for (or None), and
    ``secrets`` the values nothing may show."""

    def __init__(self, raw: str) -> None:
        parsed = httpx.URL(raw)
        username, password = parsed.username, parsed.password
        self.basic: str | None = None
        secrets: list[str] = []
        if parsed.userinfo:
            userinfo = f"{username}:{password}".encode()
            self.basic = "Basic " + base64.b64encode(userinfo).decode("ascii")
            secrets += [password, username if not password else "", self.basic.split()[1]]
        clean = parsed.copy_with(username=None, password=None, fragment=None)
        path = clean.path.rstrip("/")
        self.url = clean.copy_with(path=path or "/")
        shown_query: list[str] = []
        for pair in self.url.query.decode("ascii", "replace").split("&") if self.url.query else ():
            name, eq, value = pair.partition("=")
            if eq and value and is_secret_param(name):
                secrets += [value, httpx.QueryParams(pair).get(name) or ""]
                value = REDACTED
            shown_query.append(f"{name}{eq}{value}")
        shown = _plain(self.url.copy_with(query=None), path)
        self.shown = shown + ("?" + "&".join(shown_query) if shown_query else "")
        self.base = _plain(self.url, path)
        self.host = self.url.host or None
        self.secrets = tuple(s for s in secrets if s)

    def endpoint(self, path: str) -> str:
        """The URL of ``path`` under this base: paths joined, the base's query kept."""
        joined = self.url.path.rstrip("/") + "/" + path.lstrip("/")
        return str(self.url.copy_with(path=joined))


def _plain(url: httpx.URL, path: str) -> str:
    """``url`` as text, without the ``/`` httpx gives an empty path."""
    text = str(url)
    if not path and url.path == "/":
        cut = text.index("/", len(url.scheme) + 3)
        text = text[:cut] + text[cut + 1 :]
    return text


def _replace(value: Any, secrets: Iterable[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return scrub_text(value)
    if isinstance(value, dict):
        return {k: _replace(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v, secrets) for v in value]
    return value


def redact(exc: ApiError, secrets: Iterable[str]) -> ApiError:
    """``exc`` with each of ``secrets`` (of 4 characters or more) replaced in its message and
    details, then whatever ``scrub_text`` finds; the same error when nothing changed."""
    # a longer one first; one shorter than 4 characters would take ordinary words with it
    ordered = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
    error = exc.error
    message = _replace(error.message, ordered)
    details = _replace(error.details, ordered)
    if message == error.message and details == error.details:
        return exc
    clean = LoopError(
        kind=error.kind,
        message=message,
        retryable=error.retryable,
        status=error.status,
        details=details,
    )
    return ApiError(clean, retry_after=exc.retry_after, should_retry=exc.should_retry)


Family = Literal["chat", "anthropic", "responses", "ollama"]

#: Known hosts: (key, name).
_HOSTS: Final[dict[str, tuple[str, str]]] = {
    "api.openai.com": ("openai", "OpenAI"),
    "api.anthropic.com": ("anthropic", "Anthropic"),
    "api.deepseek.com": ("deepseek", "DeepSeek"),
    "openrouter.ai": ("openrouter", "OpenRouter"),
    "api.groq.com": ("groq", "Groq"),
    "generativelanguage.googleapis.com": ("gemini", "Gemini"),
    "api.z.ai": ("zai", "Z.ai"),
    "open.bigmodel.cn": ("zai", "Z.ai"),
    "api.mistral.ai": ("mistral", "Mistral"),
    "api.together.xyz": ("together", "Together AI"),
    "api.fireworks.ai": ("fireworks", "Fireworks AI"),
    "api.x.ai": ("xai", "xAI"),
    "api.moonshot.ai": ("moonshot", "Moonshot AI"),
    "api.cerebras.ai": ("cerebras", "Cerebras"),
    "dashscope.aliyuncs.com": ("dashscope", "Alibaba Cloud Model Studio"),
    "dashscope-intl.aliyuncs.com": ("dashscope", "Alibaba Cloud Model Studio"),
}
_NAMES: Final = {key: name for key, name in _HOSTS.values()} | {"ollama": "Ollama"}
_SUFFIX: Final[dict[Family, str]] = {
    "chat": "",
    "anthropic": "/anthropic",
    "responses": "/responses",
    "ollama": "",
}
OLLAMA_PORT: Final = 11434


def _host(base_url: str) -> tuple[str, str]:
    """(the host, ``host:port`` when a port is given) of a base URL, credentials left out."""
    try:
        url = httpx.URL(base_url)
    except (httpx.InvalidURL, TypeError):
        return base_url, base_url
    host = url.host or base_url
    return host, f"{host}:{url.port}" if url.port else host


def identity(base_url: str, family: Family, explicit: str | None = None) -> tuple[str, str]:
    """``(key, name)`` for a client of ``family`` at ``base_url``.

    Known hosts have short keys (``deepseek``; ``openai-responses`` for OpenAI's Responses API;
    another family at a known host gets a suffix, ``deepseek/anthropic``); any other host is
    its ``host:port``. Ollama's port makes an ``ollama`` key (``ollama/v1`` through the
    OpenAI-compatible endpoint). ``explicit`` replaces the key; the name follows it if known.
    """
    host, hostport = _host(base_url)
    if family == "ollama":
        key, name = "ollama", "Ollama"
    elif host in _HOSTS:
        base, name = _HOSTS[host]
        if family == "responses" and base == "openai":
            key = "openai-responses"
        elif family == base == "anthropic":  # the family's own host: no suffix
            key = base
        else:
            key = base + _SUFFIX[family]
    elif hostport.endswith(f":{OLLAMA_PORT}"):
        key, name = "ollama/v1" if family == "chat" else "ollama" + _SUFFIX[family], "Ollama"
    else:
        key, name = hostport + _SUFFIX[family], f"the server at {hostport}"
    if explicit:
        return explicit, name_of(explicit, name)
    return key, name


def name_of(key: str, default: str) -> str:
    """The display name of a provider key (``deepseek`` -> ``DeepSeek``), else ``default``."""
    return _NAMES.get(key.split("/", 1)[0], default)
