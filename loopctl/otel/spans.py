"""``GenAiSpans``: a run's events turned into OpenTelemetry spans, at the times it is told.

The one place that decides which span an event opens, annotates or ends, so the live observer
(``OtelObserver``: times from the clock as events arrive) and the export of a recorded trace
(``loopctl-sim otel``: times from the trace's durations) make the same spans:

- a run span ``invoke_agent {agent}`` from the run's start to its end, with the outcome;
- a ``chat {model}`` span per model call (``CallLLM``), from the request to the reply or the
  last error, all its attempts included (each failed attempt an event, each retry's wait an
  event), with usage and finish reasons;
- an ``execute_tool {name}`` span per tool call, from its call to its result (a wave's calls
  overlap, as they ran); an error result sets the span's status;
- events on the run span for compactions, cancels, crashes, resumes and reflections; an io kind
  it does not know becomes an event ``loopctl.io.<kind>`` with its scalar numbers and flags.

A crash ends the spans still open (``error.type`` ``crash``); a resume goes on in the same run
span; ``close`` ends whatever a cut-off trace left open. Times are nanoseconds since the epoch.

The run span names the model and provider it was given, else those of the run's first request:
both sides see the same requests, so a live run and its trace name the same ones whatever each
was configured with. Every string that leaves through a span (attributes, event attributes,
status descriptions) passes the scrubber here, in one place: an error's message is free text
from the provider (a 401 may echo the key), and a path that skipped scrubbing would leak it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from loopctl.otel.attributes import (
    Attributes,
    chat_reply_attributes,
    chat_request_attributes,
    clean,
    scrub_content,
    tool_call_attributes,
    tool_result_attributes,
)


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

    # --- the run ------------------------------------------------------------------------------

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

    # --- what the driver did --------------------------------------------------------------

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
            reply = chat_reply_attributes(data, capture=self.capture, scrub=self.scrub)
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
        attributes = chat_request_attributes(
            data, model=self.model, provider=self.provider, capture=self.capture, scrub=self.scrub
        )
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
        attributes = tool_call_attributes(data, capture=self.capture, scrub=self.scrub)
        attributes["loopctl.turn"] = turn if turn is not None else 0
        name = data.get("name")
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
        attributes = tool_result_attributes(data, capture=self.capture, scrub=self.scrub)
        span.set_attributes(self._safe(attributes))
        if "error.type" in attributes:
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

    # --- what the brain was told and answered ---------------------------------------------

    def resumed(self, at: int, **numbers: Any) -> None:
        """The run resumed from a snapshot after a crash (it goes on in the same run span)."""
        self._event("loopctl.resume", {f"loopctl.{k}": v for k, v in numbers.items()}, at)

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
