"""The attribute mapping: loopctl's events as OpenTelemetry GenAI semantic-convention attributes.

Names follow the GenAI semantic conventions (``gen_ai.*``, development status as of 2025):
the operation (``invoke_agent``, ``chat``, ``execute_tool``), the agent, the provider and the
requested model, token usage, finish reasons, the tool's name, call id and type. What loopctl
knows that the conventions have no name for is under ``loopctl.*`` (the turn, attempts, the
outcome, compaction figures).

Message content (the input and output messages, system instructions, tool arguments and
results, reflection notes) is recorded only when the user opts in, as the conventions ask
(``capture_content``, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), and then
scrubbed: ``scrub_content`` replaces anything shaped like a credential before it leaves the
process. Pure functions of plain data (the JSON of events), so the live observer and the export
of a recorded trace (``loopctl-sim otel``) map the same event to the same attributes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from loopctl.secrets import scrub_text

Attributes = dict[str, Any]

#: The conventions' switch for recording message content.
CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

#: ``text`` with every credential-shaped substring replaced by ``[REDACTED]``, and every value
#: given to a credential's name (``password: ...``, ``API_KEY=...``): the rule of the trace
#: scrubber (``loopctl.secrets.scrub_text``), so a live span and the export of the run's trace
#: scrub a message to the same text.
scrub_content: Final = scrub_text


def capture_from_env() -> bool:
    """Whether the environment opts in to message content (the conventions' default: no)."""
    return os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes")


def _scalar(value: Any) -> bool:
    return isinstance(value, str | bool | int | float)


def _one_scalar_type(values: list[Any] | tuple[Any, ...]) -> bool:
    return bool(values) and _scalar(values[0]) and len({type(v) for v in values}) == 1


def clean(attributes: Mapping[str, Any]) -> Attributes:
    """Only values OpenTelemetry takes: scalars and lists of one scalar type; no ``None``."""
    out: Attributes = {}
    for key, value in attributes.items():
        if _scalar(value):
            out[key] = value
        elif isinstance(value, list | tuple) and _one_scalar_type(value):
            out[key] = list(value)
    return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _content(value: Any, scrub: Callable[[str], str]) -> str:
    """``value`` as the text of an attribute, scrubbed. Each string of a structure is scrubbed
    as itself before the structure becomes JSON text (as the trace scrubs its data): in that
    text a newline is ``\\n``, and a value given to a name on the line before would run on
    into the next line's name (``...PASSWORD=x\\nAPI_KEY: y`` left ``y``)."""
    if isinstance(value, str):
        return scrub(value)
    return scrub(json.dumps(_strings_scrubbed(value, scrub), ensure_ascii=False))


def _strings_scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {k: _strings_scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strings_scrubbed(v, scrub) for v in value]
    return value


def chat_request_attributes(
    data: Mapping[str, Any],
    *,
    model: str | None,
    provider: str | None,
    capture: bool,
    scrub: Callable[[str], str],
) -> Attributes:
    """A ``chat`` span's attributes from a ``model_request`` event's data. A request that
    carries its own model, provider, system prompt or options (at the top level, or under
    ``context`` as trace v2 records them) wins over the observer's defaults; messages are taken
    only as a list (v2 writes a reference such as ``"brain"`` where the conversation is rebuilt
    from the brain), else the request's ``last`` message."""
    context = _mapping(data.get("context"))

    def given(key: str) -> Any:
        value = data.get(key)
        return context.get(key) if value is None else value

    options = _mapping(given("options"))
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": given("model") or model,
        "gen_ai.provider.name": given("provider") or provider,
        "gen_ai.request.temperature": options.get("temperature"),
        "gen_ai.request.top_p": options.get("top_p"),
        "gen_ai.request.max_tokens": options.get("max_tokens"),
        "loopctl.request.messages": data.get("n_messages"),
    }
    tools = given("tools")
    if isinstance(tools, list):
        names = [t.get("name") if isinstance(t, Mapping) else t for t in tools]
        attributes["loopctl.request.tools"] = [str(n) for n in names]
    if capture:
        messages = data.get("messages")
        if not isinstance(messages, list):
            last = data.get("last")
            messages = None if last is None else [last]  # v1 holds only the last message
        if messages is not None:
            attributes["gen_ai.input.messages"] = _content(messages, scrub)
        if given("system"):
            attributes["gen_ai.system_instructions"] = _content(given("system"), scrub)
    return clean(attributes)


def chat_reply_attributes(
    data: Mapping[str, Any], *, capture: bool, scrub: Callable[[str], str]
) -> Attributes:
    """What a ``model_reply`` event adds to its ``chat`` span: usage, finish reasons, attempts."""
    usage = _mapping(data.get("usage"))
    stop = data.get("stop_reason")
    attributes: Attributes = {
        "gen_ai.usage.input_tokens": usage.get("input_tokens"),
        "gen_ai.usage.output_tokens": usage.get("output_tokens"),
        "gen_ai.usage.cache_read.input_tokens": usage.get("cache_read_tokens") or None,
        "gen_ai.usage.cache_creation.input_tokens": usage.get("cache_write_tokens") or None,
        "gen_ai.response.finish_reasons": [str(stop)] if stop else None,
        "gen_ai.response.model": data.get("model"),
        "loopctl.attempts": data.get("attempts"),
        "loopctl.context_tokens": usage.get("context_tokens"),
    }
    if capture and data.get("message") is not None:
        attributes["gen_ai.output.messages"] = _content([data["message"]], scrub)
    return clean(attributes)


def tool_call_attributes(
    data: Mapping[str, Any], *, capture: bool, scrub: Callable[[str], str]
) -> Attributes:
    """An ``execute_tool`` span's attributes from a ``tool_call`` event's data."""
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": data.get("name"),
        "gen_ai.tool.call.id": data.get("id"),
        "gen_ai.tool.type": "function",
    }
    if capture and "arguments" in data:
        attributes["gen_ai.tool.call.arguments"] = _content(data["arguments"], scrub)
    return clean(attributes)


def tool_result_attributes(
    data: Mapping[str, Any], *, capture: bool, scrub: Callable[[str], str]
) -> Attributes:
    """What a ``tool_result`` event adds to its ``execute_tool`` span."""
    attributes: Attributes = {
        "error.type": "tool_error" if data.get("is_error") else None,
        "loopctl.tool.fault": data.get("fault"),
    }
    if capture and "content" in data:
        attributes["gen_ai.tool.call.result"] = _content(data["content"], scrub)
    return clean(attributes)
