"""``OtelObserver``: a ``BareLoop`` observer that emits OpenTelemetry GenAI spans as a run goes.

Spans go to the global tracer provider, or to the one given. Each hook passes the event and the
clock's time to ``GenAiSpans``, converting only what a span needs to plain data (a run nobody
exports costs little more than the hooks' calls); a model request reaches it as the JSON a trace
records of it, so a live run and the export of its trace map it to the same attributes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import TracerProvider

from loopctl.api import ModelRequest
from loopctl.core import Done, LoopMachine, MachinePolicy, MachineStep, Terminal, to_jsonable
from loopctl.observe import IoEvent, LoopObserver
from loopctl.otel.spans import CAPTURE_ENV, GenAiSpans, scrub_content

#: The instrumentation scope the spans are reported under.
INSTRUMENTATION = "loopctl"


def _version() -> str | None:
    """loopctl's version, from the installed distribution (``import loopctl`` would bring in
    the driver, a layer this package must not reach)."""
    try:
        return metadata.version("loopctl")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return None


class OtelObserver(LoopObserver):
    """Emits a run span, a ``chat`` span per model call, an ``execute_tool`` span per tool call
    and events for retries, compactions, cancels and crashes (see ``loopctl.otel.spans``)."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        agent_name: str = "loopctl",
        model: str | None = None,
        provider: str | None = None,
        capture_content: bool | None = None,
        scrub: Callable[[str], str] = scrub_content,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        if capture_content is None:  # the conventions' switch (default: no)
            switch = os.environ.get(CAPTURE_ENV, "").strip().lower()
            capture_content = switch in ("1", "true", "yes")
        tracer = trace.get_tracer(INSTRUMENTATION, _version(), tracer_provider=tracer_provider)
        self.spans = GenAiSpans(
            tracer,
            agent_name=agent_name,
            model=model,
            provider=provider,
            capture_content=capture_content,
            scrub=scrub,
        )
        self.clock = clock

    def run_started(self, machine: LoopMachine, input: Any) -> None:
        self.spans.start_run(self.clock(), history_messages=machine.history_len())

    def step(self, policy: MachinePolicy, step: MachineStep, machine: LoopMachine) -> None:
        if not isinstance(step, Done):
            self.spans.step(step.kind, getattr(step, "turn", None), self.clock())

    def feed(self, name: str, args: Mapping[str, Any], machine: LoopMachine) -> None:
        if name == "fail":
            self.spans.feed(name, {"error": to_jsonable(args.get("error"))}, self.clock())
        elif name == "accept_input" and self.spans.capture:
            self.spans.feed(name, {"input": to_jsonable(args.get("input"))}, self.clock())
        elif name in ("cancel", "compaction_result", "compaction_noop"):
            figures = {k: args[k] for k in ("before", "after") if k in args}
            self.spans.feed(name, figures, self.clock())

    def io(self, event: IoEvent) -> None:
        data = event.data
        if event.kind == "model_request":
            data = self._request(data)
        self.spans.io(event.kind, event.turn, data, event.duration_s, self.clock())

    def _request(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """A ``model_request`` event's data as plain JSON (the messages only when content is
        recorded: a long conversation's cost is then paid on every call)."""
        request = data.get("request")
        plain = {k: v for k, v in data.items() if k != "request"}
        if isinstance(request, ModelRequest):
            plain["context"] = {
                "model": data.get("model"),
                "provider": data.get("provider"),
                "system": request.system,
                "options": dict(request.options),
            }
            if self.spans.capture:
                plain["messages"] = [m.model_dump(mode="json") for m in request.messages]
        return plain

    def run_ended(self, machine: LoopMachine) -> None:
        state = machine.state
        outcome = to_jsonable(state.outcome) if isinstance(state, Terminal) else None
        self.spans.end_run(self.clock(), outcome)

    def close(self) -> None:
        """End the spans a run left open (it crashed, or was abandoned): call before exit."""
        self.spans.close(self.clock())
