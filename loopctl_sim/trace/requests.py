"""The model request as a trace records it: its context once per change, a digest every time.

A request is everything the model was shown: the model and the provider, the system prompt, the
advertised tools (name, description, JSON schema) and the provider's own tools, the options, and
the messages. The messages are the brain's conversation (history and pending), which the trace
already holds through its feeds, so a ``model_request`` record does not repeat them: it holds
their count, the last one (for a reader), and a ``digest`` of the whole request:

    digest = sha256(canonical context JSON, "\\0", the brain's digest when the request was made)

The brain's digest stands for the messages (the trace certifies it after every feed); messages
a model middleware rewrote are hashed themselves (``"messages": "altered"``). The ``context`` is
written whole with the first request and whenever it changes, so a replay names what changed.
The recorder and the replayer use the same functions: requests compare by their digests.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loopctl.api import ModelRequest
from loopctl.core import Message


def request_context(
    request: ModelRequest, model: str | None = None, provider: str | None = None
) -> dict[str, Any]:
    """The request's context as JSON data: everything it holds but the messages."""
    return {
        "model": model,
        "provider": provider,
        "system": request.system,
        "tools": [spec.model_dump(mode="json") for spec in request.tools],
        "server_tools": [dict(t) for t in getattr(request, "server_tools", ())],
        "options": dict(request.options),
    }


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _prefix(context_json: str) -> Any:  # hashlib's sha256 object (its type is private)
    """A sha256 that has hashed the context and its separator (``RequestLog`` keeps it while
    the context stays the same)."""
    return hashlib.sha256((context_json + "\0").encode("utf-8"))


def _digest(prefix: Any, fingerprint: str) -> str:
    h = prefix.copy()
    h.update(fingerprint.encode("utf-8"))
    return str(h.hexdigest()[:32])


def canonical_context(context: Mapping[str, Any]) -> str:
    """A context's canonical JSON (the digest's first part)."""
    return _canonical(context)


def request_digest(context_json: str, fingerprint: str) -> str:
    """A request's digest: its canonical context and what stands for its messages (the brain's
    digest, or ``messages_fingerprint`` of messages the driver did not take from the brain)."""
    return _digest(_prefix(context_json), fingerprint)


def messages_fingerprint(messages: Sequence[Message]) -> str:
    text = _canonical([m.model_dump(mode="json") for m in messages])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def with_last(data: Mapping[str, Any], messages: Sequence[Message]) -> dict[str, Any]:
    """A request's data seen with ``last=False``, with its ``last`` (the last message as JSON
    data, None for none) in its place: the data ``see`` gives by default, key for key."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "messages":
            out["last"] = messages[-1].model_dump(mode="json") if messages else None
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class RequestSeen:
    """One request as recorded: its digest, its context and the record's data."""

    digest: str
    context: dict[str, Any]
    data: dict[str, Any]


class RequestLog:
    """What one trace has recorded of its requests: the context last written.

    ``see(request, model, provider, brain_digest)`` gives the ``model_request`` record's data;
    the context is part of it only when it differs from the one last seen. ``brain_digest`` is
    the brain's digest when the messages are the brain's own (None: they were altered)."""

    def __init__(self) -> None:
        self._context_json: str | None = None
        # The last request's context inputs: a loop hands the same tool spec objects and equal
        # options on every call, so the context JSON is built again only when one changed, and
        # so is what is kept with it: the tools' names and a sha256 that has hashed the context
        # (a request's digest then hashes only the brain's digest; the context's JSON, 474
        # bytes with bench_agent_replay's two tools, was hashed again for every request: that
        # agent's replay 143,800 -> 141,400 instructions a record, cachegrind).
        self._inputs: tuple[Any, ...] | None = None
        self._built: tuple[dict[str, Any], str, list[str], Any] | None = None

    def _context(
        self, request: ModelRequest, model: str | None, provider: str | None
    ) -> tuple[dict[str, Any], str, list[str], Any]:
        tools = request.tools
        inputs = (
            request.system,
            request.options,
            getattr(request, "server_tools", ()),
            model,
            provider,
        )
        built, last = self._built, self._inputs
        if (
            built is not None
            and last is not None
            and len(last[0]) == len(tools)
            and all(map(operator.is_, last[0], tools))
            and last[1:] == inputs
        ):
            return built
        context = request_context(request, model, provider)
        context_json = _canonical(context)
        names = [spec.name for spec in tools]
        built = self._built = (context, context_json, names, _prefix(context_json))
        self._inputs = (tuple(tools), *inputs)
        return built

    def see(
        self,
        request: ModelRequest,
        model: str | None,
        provider: str | None,
        brain_digest: str | None,
        *,
        last: bool = True,
    ) -> RequestSeen:
        """``last=False`` leaves the last message out of the data (a replay adds it with
        ``with_last`` only where it compares or reports it: a version 1 trace, a divergence)."""
        context, context_json, names, prefix = self._context(request, model, provider)
        messages = request.messages
        fingerprint = brain_digest if brain_digest is not None else messages_fingerprint(messages)
        digest = _digest(prefix, fingerprint)  # request_digest, its context already hashed
        data: dict[str, Any] = {
            "digest": digest,
            "n_messages": len(messages),
            "tools": list(names),  # a list of its own for each record's data
        }
        if last:
            data["last"] = messages[-1].model_dump(mode="json") if messages else None
        data["messages"] = "brain" if brain_digest is not None else "altered"
        if context_json != self._context_json:
            data["context"] = context
            self._context_json = context_json
        return RequestSeen(digest, context, data)


class RecordedContexts:
    """A replay's view of a trace's requests: the context in force at each recorded request."""

    def __init__(self) -> None:
        self.context: dict[str, Any] | None = None

    def follow(self, data: Mapping[str, Any]) -> dict[str, Any] | None:
        """The context in force for a recorded ``model_request`` with ``data`` (None for a
        version 1 record, which has none)."""
        if "digest" not in data:
            return None
        context = data.get("context")
        if isinstance(context, dict):
            self.context = context
        return self.context

    def named(self, field: str, data: Mapping[str, Any] | None) -> str | None:
        """``field`` (``model``, ``provider``) of the context the next request is checked
        against: the one written in its record's ``data`` (None: no request record is next),
        else the one in force; None unless a string. A replay's client names its model and
        provider by it, so an agent asking for another model diverges at its first request."""
        written = None if data is None else data.get("context")
        context = written if isinstance(written, dict) else self.context
        value = None if context is None else context.get(field)
        return value if isinstance(value, str) else None
