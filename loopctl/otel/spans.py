"""``GenAiSpans``: a run's events turned into OpenTelemetry spans, at the times it is told.

The one place that decides which span an event opens, annotates or ends, so the live observer
(``OtelObserver``: the clock's times) and the export of a recorded trace (``loopctl-sim otel``:
the trace's durations) make the same spans: a run span ``invoke_agent {agent}`` with the
outcome; a ``chat {model}`` span per model call, all its attempts included (failed attempts and
retry waits as events); an ``execute_tool {name}`` span per tool call (a wave's calls overlap, as
they ran); events on the run span for compactions, cancels, crashes, resumes, reflections, and
``loopctl.io.<kind>`` for an io kind it does not know. A crash ends the spans still open, a
resume goes on in the same run span, ``close`` ends what a cut-off trace left open. Times are
nanoseconds since the epoch. The run span names the model and provider it was given, else those
of the run's first request, so a live run and its trace name the same ones.

Attribute names follow the GenAI semantic conventions (``gen_ai.*``, development status as of
2025); what they have no name for is under ``loopctl.*``. Message content is recorded only when
the user opts in (``capture_content``, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``).
Every string that leaves through a span passes the scrubber here, in one place: an error's
message is free text from the provider (a 401 may echo the key).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from loopctl.secrets import scrub_text

Attributes = dict[str, Any]

#: The conventions' switch for recording message content.
CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

#: The trace scrubber's rule (``loopctl.secrets.scrub_text``): a live span and the export of the
#: run's trace scrub a message to the same text.
scrub_content: Final = scrub_text

_SCALAR: Final = (str, bool, int, float)


def clean(attributes: Mapping[str, Any]) -> Attributes:
    """Only values OpenTelemetry takes: scalars and lists of one scalar type; no ``None``."""
    out: Attributes = {}
    for key, value in attributes.items():
        if isinstance(value, _SCALAR):
            out[key] = value
        elif (
            isinstance(value, list | tuple)
            and value
            and isinstance(value[0], _SCALAR)
            and len({type(v) for v in value}) == 1
        ):
            out[key] = list(value)
    return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _content(value: Any, scrub: Callable[[str], str]) -> str:
    """``value`` as the text of an attribute, each string scrubbed as itself before the JSON
    text is made: there a newline is ``\\n``, and ``...PASSWORD=x\\nAPI_KEY: y`` left ``y``."""
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


def _error_type(error: Any) -> str:
    return str(error.get("kind")) if isinstance(error, Mapping) else "error"


def _error_message(error: Any) -> str:
    return str(error.get("message")) if isinstance(error, Mapping) else str(error)


_RUN_NAMES = ("gen_ai.request.model", "gen_ai.provider.name")


class GenAiSpans:
    """Spans for one stream of runs, one event at a time (see the module docstring)."""

    def __init__(
        self,
        tracer: Tracer,
        *,
        agent_name: str = "loopctl",
        model: str | None = None,
        provider: str | None = None,
        capture_content: bool = False,
        scrub: Callable[[str], str] = scrub_content,
    ) -> None:
        self.tracer = tracer
        self.agent_name = agent_name
        self.model = model
        self.provider = provider
        self.capture = capture_content
        self.scrub = scrub
        self.run: Span | None = None
        self.chat: Span | None = None
        self.tools: dict[str, list[Span]] = {}  # call id -> open spans (ids may repeat)
        self._cancel_noted = False
        self._run_names: set[str] = set()  # which of _RUN_NAMES the run span already has

    def _safe(self, attributes: Mapping[str, Any]) -> Attributes:
        """``clean(attributes)`` with every string (and every string of a list) scrubbed."""
        out = clean(attributes)
        for key, value in out.items():
            if isinstance(value, str):
                out[key] = self.scrub(value)
            elif isinstance(value, list) and isinstance(value[0], str):
                out[key] = [self.scrub(v) for v in value]
        return out

    def _error(self, span: Span, kind: str, description: str) -> None:
        """Mark ``span`` failed: ``error.type`` and an ERROR status, both scrubbed."""
        span.set_attribute("error.type", self.scrub(kind))
        span.set_status(Status(StatusCode.ERROR, self.scrub(description)))

    def start_run(self, at: int, *, input_text: str | None = None, **extra: Any) -> None:
        """A run begins (ends one still open first: a trace's next run). ``input_text`` is for
        a caller that feeds no ``accept_input`` (whose message is the run's input otherwise)."""
        if self.run is not None:
            self.end_run(at, None)
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": self.agent_name,
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            **{f"loopctl.{k}": v for k, v in extra.items()},
        }
        if self.capture and input_text is not None:
            attributes["gen_ai.input.messages"] = self.scrub(
                json.dumps([{"role": "user", "content": input_text}], ensure_ascii=False)
            )
        safe = self._safe(attributes)
        self._run_names = {k for k in _RUN_NAMES if k in safe}
        self.run = self.tracer.start_span(
            self.scrub(f"invoke_agent {self.agent_name}"),
            kind=SpanKind.INTERNAL,
            attributes=safe,
            start_time=at,
        )

    def _child(self, name: str, kind: SpanKind, attributes: Attributes, at: int) -> Span:
        context = None if self.run is None else trace.set_span_in_context(self.run)
        return self.tracer.start_span(
            self.scrub(name),
            context=context,
            kind=kind,
            attributes=self._safe(attributes),
            start_time=at,
        )

    def _event(self, name: str, attributes: Mapping[str, Any], at: int) -> None:
        target = self.run if self.run is not None else self.chat
        if target is not None:
            target.add_event(name, self._safe(attributes), timestamp=at)

    def end_run(self, at: int, outcome: Mapping[str, Any] | None) -> None:
        """The run ended with ``outcome`` (its JSON; None: not terminal)."""
        self._end_children(at, None)
        run, self.run = self.run, None
        if run is None:
            return
        kind = outcome.get("kind") if outcome is not None else None
        run.set_attribute("loopctl.outcome", self.scrub(str(kind or "none")))
        if kind == "failed":
            error = outcome.get("error") if outcome is not None else None
            self._error(run, _error_type(error), _error_message(error))
        run.end(end_time=at)

    def close(self, at: int) -> None:
        """End everything still open (a trace cut off mid-run)."""
        if self.run is not None or self.chat is not None or self.tools:
            self._end_children(at, "incomplete")
            if self.run is not None:
                self.run.set_attribute("loopctl.incomplete", True)
            self.end_run(at, None)

    def _end_children(self, at: int, error: str | None) -> None:
        spans = [s for stack in self.tools.values() for s in stack]
        if self.chat is not None:
            spans.append(self.chat)
        for span in spans:
            if error is not None:
                self._error(span, error, error)
            span.end(end_time=at)
        self.chat = None
        self.tools.clear()

    def io(
        self,
        kind: str,
        turn: int | None,
        data: Mapping[str, Any],
        duration_s: float | None,
        at: int,
    ) -> None:
        """An io event (``loopctl.observe.IoEvent``'s fields) at ``at``; for an event that
        ends something (a reply, an error, a result) ``at`` is when it ended."""
        if kind == "model_request":
            self._start_chat(turn, data, at)
        elif kind == "model_error":
            chat = self._chat(turn, at, duration_s)
            error = data.get("error")
            chat.add_event(
                "loopctl.model_error",
                self._safe(
                    {
                        "error.type": _error_type(error),
                        "loopctl.attempt": data.get("attempt"),
                        "http.response.status_code": error.get("status")
                        if isinstance(error, Mapping)
                        else None,
                        "loopctl.error.message": _error_message(error),
                    }
                ),
                timestamp=at,
            )
        elif kind == "retry":
            chat = self._chat(turn, at, None)
            attributes = {
                "loopctl.attempt": data.get("attempt"),
                "loopctl.delay_s": data.get("delay_s"),
                "error.type": data.get("kind"),
            }
            chat.add_event("loopctl.retry", self._safe(attributes), timestamp=at)
        elif kind == "model_reply":
            chat = self._chat(turn, at, duration_s)
            usage = _mapping(data.get("usage"))
            stop = data.get("stop_reason")
            reply: Attributes = {
                "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                "gen_ai.usage.cache_read.input_tokens": usage.get("cache_read_tokens") or None,
                "gen_ai.usage.cache_creation.input_tokens": usage.get("cache_write_tokens") or None,
                "gen_ai.response.finish_reasons": [str(stop)] if stop else None,
                "gen_ai.response.model": data.get("model"),
                "loopctl.attempts": data.get("attempts"),
                "loopctl.context_tokens": usage.get("context_tokens"),
            }
            if self.capture and data.get("message") is not None:
                reply["gen_ai.output.messages"] = _content([data["message"]], self.scrub)
            chat.set_attributes(self._safe(reply))
            chat.end(end_time=at)
            self.chat = None
        elif kind == "tool_call":
            self._start_tool(turn, data, at)
        elif kind == "tool_result":
            self._end_tool(turn, data, duration_s, at)
        else:
            self._other(kind, data, duration_s, at)

    def _start_chat(self, turn: int | None, data: Mapping[str, Any], at: int) -> None:
        if self.chat is not None:
            self.chat.end(end_time=at)
        context = _mapping(data.get("context"))  # trace v2 records the context under this key

        def given(key: str) -> Any:  # the request's own value wins over the spans' default
            value = data.get(key)
            return context.get(key) if value is None else value

        options = _mapping(given("options"))
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": given("model") or self.model,
            "gen_ai.provider.name": given("provider") or self.provider,
            "gen_ai.request.temperature": options.get("temperature"),
            "gen_ai.request.top_p": options.get("top_p"),
            "gen_ai.request.max_tokens": options.get("max_tokens"),
            "loopctl.request.messages": data.get("n_messages"),
        }
        tools = given("tools")
        if isinstance(tools, list):
            names = [t.get("name") if isinstance(t, Mapping) else t for t in tools]
            attributes["loopctl.request.tools"] = [str(n) for n in names]
        if self.capture:
            messages = data.get("messages")
            if not isinstance(messages, list):  # v2 writes "brain" there; v1 holds only the last
                last = data.get("last")
                messages = None if last is None else [last]
            if messages is not None:
                attributes["gen_ai.input.messages"] = _content(messages, self.scrub)
            if given("system"):
                attributes["gen_ai.system_instructions"] = _content(given("system"), self.scrub)
        attributes = clean(attributes)  # no None: the run takes the names this request has
        model = attributes.get("gen_ai.request.model")
        attributes["loopctl.turn"] = turn if turn is not None else 0
        self.chat = self._child(
            f"chat {model}" if model else "chat", SpanKind.CLIENT, attributes, at
        )
        if self.run is not None:  # the run names what its first request named, unless told
            named = {k: attributes[k] for k in _RUN_NAMES if k in attributes}
            missing = {k: v for k, v in named.items() if k not in self._run_names}
            if missing:
                self.run.set_attributes(self._safe(missing))
            self._run_names.update(_RUN_NAMES)

    def _chat(self, turn: int | None, at: int, duration_s: float | None) -> Span:
        """The open chat span; a reply or error without a request opens one where it began."""
        if self.chat is None:
            began = at - int((duration_s or 0.0) * 1e9)
            self._start_chat(turn, {}, began)
        assert self.chat is not None
        return self.chat

    def _start_tool(self, turn: int | None, data: Mapping[str, Any], at: int) -> None:
        name = data.get("name")
        attributes: Attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": data.get("id"),
            "gen_ai.tool.type": "function",
        }
        if self.capture and "arguments" in data:
            attributes["gen_ai.tool.call.arguments"] = _content(data["arguments"], self.scrub)
        attributes["loopctl.turn"] = turn if turn is not None else 0
        span = self._child(f"execute_tool {name}", SpanKind.INTERNAL, attributes, at)
        self.tools.setdefault(str(data.get("id")), []).append(span)

    def _end_tool(
        self, turn: int | None, data: Mapping[str, Any], duration_s: float | None, at: int
    ) -> None:
        stack = self.tools.get(str(data.get("id")))
        if not stack:  # a result without its call: a span of its own duration
            self._start_tool(turn, data, at - int((duration_s or 0.0) * 1e9))
            stack = self.tools[str(data.get("id"))]
        span = stack.pop(0)
        if not stack:
            del self.tools[str(data.get("id"))]
        attributes = {
            "error.type": "tool_error" if data.get("is_error") else None,
            "loopctl.tool.fault": data.get("fault"),
        }
        if self.capture and "content" in data:
            attributes["gen_ai.tool.call.result"] = _content(data["content"], self.scrub)
        span.set_attributes(self._safe(attributes))
        if data.get("is_error"):
            span.set_status(Status(StatusCode.ERROR, "the tool returned an error"))
        span.end(end_time=at)

    def _other(self, kind: str, data: Mapping[str, Any], duration_s: float | None, at: int) -> None:
        numbers = {f"loopctl.{k}": v for k, v in data.items() if isinstance(v, int | float | bool)}
        if duration_s is not None:
            numbers["loopctl.duration_s"] = duration_s
        if kind == "compaction":
            self._event("loopctl.compaction", {"loopctl.reason": data.get("reason"), **numbers}, at)
        elif kind == "cancel":
            self._cancel_noted = True
            reason = {"loopctl.reason": str(data["reason"])} if "reason" in data else {}
            self._event("loopctl.cancel", reason, at)
        elif kind == "crash":
            self._end_children(at, "crash")
            self._event("loopctl.crash", numbers, at)
        elif kind == "resume":
            self._event("loopctl.resume", numbers, at)
        elif kind == "reflection":
            text = {"loopctl.text": str(data.get("text"))} if self.capture else {}
            self._event("loopctl.reflection", text, at)
        else:
            self._event(f"loopctl.io.{kind}", numbers, at)

    def feed(self, name: str, args: Mapping[str, Any], at: int) -> None:
        """A feed the brain was given (only the ones spans care about are looked at)."""
        if name == "accept_input":  # the run's input, as the message JSON a trace records
            if self.capture and self.run is not None and args.get("input") is not None:
                text = json.dumps([args["input"]], ensure_ascii=False)
                self.run.set_attribute("gen_ai.input.messages", self.scrub(text))
        elif name == "fail":
            error = args.get("error")
            if self.chat is not None:  # the model call ended in this error
                self._error(self.chat, _error_type(error), _error_message(error))
                self.chat.end(end_time=at)
                self.chat = None
        elif name == "cancel" and not self._cancel_noted:
            self._event("loopctl.cancel", {}, at)
        elif name in ("compaction_result", "compaction_noop"):
            figures = {"loopctl.before": args.get("before"), "loopctl.after": args.get("after")}
            if self.run is not None:
                self.run.set_attributes(self._safe({"loopctl.context_tokens": args.get("after")}))
            self._event(f"loopctl.{name}", figures, at)

    def step(self, kind: str, turn: int | None, at: int) -> None:
        """A step the brain answered; a new turn's ``call_llm`` forgets an earlier cancel."""
        if kind == "call_llm":
            self._cancel_noted = False
            if self.run is not None and turn is not None:
                self.run.set_attribute("loopctl.turns", turn)
