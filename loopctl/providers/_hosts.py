"""Who a client is talking to: a provider key for the parts it keeps, a name for its messages.

The OpenAI-compatible client serves many hosts (DeepSeek, OpenRouter, Groq, Gemini, a local
vLLM, ...), and an Anthropic-compatible endpoint need not be Anthropic. Two things depend on the
host, so both come from the base URL here:

- the **key** recorded in the ``ThinkingPart`` / ``ProviderPart`` a client keeps
  (``ThinkingPart.provider``): a client sends such a part back only when the key is its own, so
  DeepSeek's ``reasoning_content`` never reaches OpenRouter and Anthropic's signed thinking never
  reaches an OpenAI model. The key names the host and the wire family (an Anthropic-format
  endpoint of DeepSeek is not its OpenAI-format one);
- the **name** errors use ("Groq refused the credentials", "OpenRouter: ..."), instead of
  calling every compatible host "OpenAI".

An explicit ``provider=`` on a client wins over the host's key (a proxy in front of a provider).
"""

from __future__ import annotations

from typing import Final, Literal

import httpx

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
#: The family's own host: its key carries no suffix there.
_HOME: Final[dict[Family, str]] = {
    "chat": "openai",
    "anthropic": "anthropic",
    "responses": "openai",
}
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
        elif _HOME.get(family) == base:
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
