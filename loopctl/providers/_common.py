"""What every provider client shares: the HTTP exchange around the provider's converters.

The provider modules only convert; ``HttpProvider.stream`` does the IO around them: it posts
the body, turns an HTTP error status and httpx transport failures into ``ApiError``, and hands
the response to the provider's stream parser or its whole-body converter. The response's content
type decides which, not the request (a server may ignore ``stream: true``); a type neither fits
(an HTML page from a proxy) is a clear, non-retried error, and a neutral one (``text/plain``)
follows the request.

A base URL (``BaseUrl``): a query (Azure's ``?api-version=X``) stays a query, the endpoint's
path joined to the base's; ``user:password@`` (a proxy's HTTP Basic) never rides the request URL
(httpx would send it behind the client's back): the client sends it on purpose, and refuses it
beside an API key. What a message shows of the URL (``BaseUrl.shown``) has no userinfo and no
secret query value, and every error a client raises has the secrets it knows, and whatever else
is shaped like one, replaced (``redact``): a 401 that echoes a key does not put it in a trace.

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
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final, Literal, TypedDict

import httpx

from loopctl.api import ApiError, ModelRequest, StreamEvent, ToolSpec
from loopctl.core import LoopError
from loopctl.providers._errors import (
    ProviderInfo,
    classify,
    details_of,
    loads,
    malformed,
    resolve_key,
    unexpected_content,
)
from loopctl.providers._framing import Cursor
from loopctl.secrets import REDACTED, is_secret_name, is_secret_param, scrub_text


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


def _replace(value: Any, secrets: Sequence[str]) -> Any:
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


def redact(exc: ApiError, secrets: Sequence[str]) -> ApiError:
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


DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
OPENAI_BASE_URL = "https://api.openai.com/v1"
#: Content types that say nothing about the framing: the request's mode decides.
_NEUTRAL = frozenset({"", "text/plain", "application/octet-stream"})


class OllamaArgs(TypedDict, total=False):
    """The keyword arguments every client takes (see the package docstring)."""

    api_key: str | None
    base_url: str | None
    http_client: httpx.AsyncClient | None
    stream: bool
    options: Mapping[str, Any] | None
    timeout: httpx.Timeout | float | None
    provider: str | None


class ClientArgs(OllamaArgs, total=False):
    """``OllamaArgs`` and the tools the provider runs itself (every client but Ollama's)."""

    server_tools: Sequence[Mapping[str, Any]]


class HttpProvider:
    """The IO shared by the clients; subclasses build bodies and parse replies.

    The arguments (``ClientArgs``) are resolved here: ``base_url`` from ``default_base_url()``,
    ``api_key`` from ``key_env`` when not given (required when ``requires_key`` says so of the
    host); ``info`` names the provider and ``provider`` is its key (see ``identity``).
    """

    info: ProviderInfo
    family: Family
    #: The endpoint's path under the base URL (``chat/completions``).
    path: str
    #: The environment variable of the key (None: no key is looked up, ``api_key`` as given).
    key_env: str | None = None
    #: The media types of this provider's streams (a JSON body is always read whole).
    stream_types: tuple[str, ...] = ("text/event-stream",)

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        stream: bool = True,
        options: Mapping[str, Any] | None = None,
        timeout: httpx.Timeout | float | None = None,
        server_tools: Sequence[Mapping[str, Any]] = (),
        provider: str | None = None,
    ) -> None:
        self.model = model
        self.options = dict(options or {})
        self._base = BaseUrl(base_url or self.default_base_url())
        #: The base URL requests go under: no ``user:password@``, query kept.
        self.base_url = self._base.base
        self._shown_url = self._base.shown
        self._owns_http = http_client is None
        self.streaming = stream
        self._http = http_client
        self._timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        key, name = identity(self.base_url, self.family, provider)
        self.info = ProviderInfo(name, self.key_env, key, self._base.host)
        self.server_tools = tuple(dict(t) for t in server_tools)
        #: Sent as a bearer token by the default ``headers()`` when set (Anthropic overrides it).
        self.api_key = api_key
        if self.key_env is not None:
            required = self.requires_key(self._base.host)
            self.api_key = resolve_key(api_key, self.key_env, name, required=required)

    def default_base_url(self) -> str:
        """The base URL when none is given."""
        raise NotImplementedError

    def requires_key(self, host: str | None) -> bool:
        """Whether a key must be found for ``host`` (a local server runs without one)."""
        return False

    @property
    def provider(self) -> str:
        """The key of the parts this client keeps and sends back (e.g. ``anthropic``)."""
        return self.info.key

    @property
    def http_client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout)
        return self._http

    async def aclose(self) -> None:
        """Close the HTTP client this client created (an injected one is the caller's)."""
        if self._http is not None and self._owns_http:
            await self._http.aclose()
            self._http = None

    @property
    def secrets(self) -> tuple[str, ...]:
        """What no error of this client may show (a 401 may echo any): its key, the base URL's
        credentials, the credential headers an injected ``http_client`` sends."""
        held = self._http.headers.items() if self._http is not None else ()
        sent = tuple(value for name, value in held if is_secret_name(name))
        return (*self._base.secrets, *((self.api_key,) if self.api_key else ()), *sent)

    # subclass hooks
    def url(self) -> str:
        """Where requests go: ``path`` under the base URL (its query kept)."""
        return self._base.endpoint(self.path)

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        return headers

    def _request_headers(self) -> dict[str, str]:
        """``headers()`` plus the base URL's ``user:password@`` as HTTP Basic, sent on purpose
        (a proxy in front of the server); refused beside a key in ``Authorization``."""
        headers = self.headers()
        if self._base.basic is None:
            return headers
        if any(k.lower() == "authorization" for k in headers):
            raise ApiError(
                LoopError(
                    kind="auth",
                    message=f"the base URL of {self.info.name} ({self._shown_url}) carries "
                    "user:password and an API key is set: both go in the Authorization "
                    "header; drop one (api_key='' sends the URL's credentials)",
                    details=details_of(self.info),
                )
            )
        return {**headers, "authorization": self._base.basic}

    def body(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def tools(
        self, request: ModelRequest, convert: Callable[[Sequence[ToolSpec]], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """The tools to advertise: the function tools in the wire's form (``convert``), then
        the tools the provider runs itself, the client's then the request's, as given."""
        own = [dict(tool) for tool in (*self.server_tools, *request.server_tools)]
        return [*convert(request.tools), *own]

    def parse_stream(
        self, response: httpx.Response, request: ModelRequest, cursor: Cursor
    ) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    def parse_body(self, data: Any, request: ModelRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Send one request and yield its events; every failure becomes an ``ApiError``, with
        the secrets this client knows replaced (a server may echo a key)."""
        try:
            # closed with this generator, so an abandoned stream releases its connection now
            async with aclosing(self._exchange(request)) as events:
                async for event in events:
                    yield event
        except ApiError as exc:
            clean = redact(exc, self.secrets)
            if clean is exc:
                raise
            raise clean from None

    async def _exchange(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        body = self.body(request)
        cursor = Cursor()
        headers = self._request_headers()
        try:
            async with self.http_client.stream(
                "POST", self.url(), json=body, headers=headers
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._http_error(response)
                as_stream = await self._reads_as_stream(response)
                try:
                    if as_stream:
                        async for event in self.parse_stream(response, request, cursor):
                            yield event
                    else:
                        await response.aread()
                        data = loads(self.info, response.text, "the JSON body")
                        if isinstance(data, Mapping) and data.get("error"):
                            raise classify(self.info, None, data, response.headers)
                        for event in self.parse_body(data, request):
                            yield event
                except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
                    # data of an unexpected shape (pydantic's ValidationError is a ValueError)
                    where = cursor.where() if as_stream else "the JSON body"
                    raise malformed(self.info, f"{type(exc).__name__}: {exc}", where) from None
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from None

    def _transport_error(self, exc: httpx.TransportError) -> ApiError:
        """A timeout, a refused connection or a dropped one: retryable, naming where."""
        name, shown, details = self.info.name, self._shown_url, details_of(self.info)
        if isinstance(exc, httpx.TimeoutException):
            kind, message = "timeout", f"{name} at {shown} timed out: {type(exc).__name__}"
        elif isinstance(exc, httpx.ConnectError):
            kind, message = "network", f"cannot connect to {name} at {shown}: {exc}"
            details["base_url"] = shown
        else:
            kind, message = "network", f"connection to {name} failed: {type(exc).__name__}: {exc}"
        return ApiError(LoopError(kind=kind, message=message, retryable=True, details=details))

    async def _reads_as_stream(self, response: httpx.Response) -> bool:
        """Whether to parse the response as a stream: its content type decides (see the module
        docstring); a type no parser fits is an ``unexpected_content`` error."""
        media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media in self.stream_types:
            return True
        if media == "application/json" or media.endswith("+json"):
            return False
        if media in _NEUTRAL:
            return self.streaming
        await response.aread()
        expected = " or ".join((*self.stream_types, "application/json"))
        raise unexpected_content(self.info, media, response.text, expected)

    def _http_error(self, response: httpx.Response) -> ApiError:
        try:
            data: Any = json.loads(response.text)
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = response.text
        return classify(self.info, response.status_code, data, response.headers)


class OpenAIKeyed(HttpProvider):
    """The clients of OpenAI's APIs and of the hosts that copy them: a key from
    ``OPENAI_API_KEY`` (required only by the OpenAI API: local servers run without one),
    ``base_url`` from ``OPENAI_BASE_URL`` or the OpenAI API."""

    key_env = "OPENAI_API_KEY"

    def default_base_url(self) -> str:
        return os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL

    def requires_key(self, host: str | None) -> bool:
        return host == "api.openai.com"
