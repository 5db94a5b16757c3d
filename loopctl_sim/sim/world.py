"""Worlds: everything outside the brain, scripted: the user's input, a scripted model, scripted
tools and a fault schedule; and what each fault (``sim.faults``) does to a reply or a result.
The same world gives the same run, byte for byte; the machine-level and driver-level simulators
share these rules and end every example scenario with the same brain.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from loopctl.api import (
    ApiError,
    ModelReply,
    StopEvent,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UsageEvent,
    fold_events,
    folded,
)
from loopctl.core import (
    CompactReason,
    ErrorKind,
    LoopError,
    MachinePolicy,
    Message,
    TextPart,
    ToolCall,
    ToolResult,
    not_available,
)
from loopctl.driver import CharEstimator, MiddleOutCompactor, RetryConfig, message_chars
from loopctl.tools import raised_message, timed_out_message
from loopctl_sim.errors import SimError
from loopctl_sim.sim.faults import UNKNOWN_TOOL, Fault

ModelFn = Callable[[Sequence[Message], int], Message]


class ModelScript:
    """The scripted model: the ``i``-th successful reply (0-based) is ``replies[i]`` or
    ``fn(conversation, i)``. Past the end of the list it answers ``exhausted_text``."""

    def __init__(
        self,
        replies: Sequence[Message] | ModelFn = (),
        *,
        tokens: Sequence[int | None] = (),
        exhausted_text: str = "[the scripted model has nothing more to say]",
    ) -> None:
        self.fn: ModelFn | None = replies if callable(replies) else None
        self.replies: tuple[Message, ...] = () if callable(replies) else tuple(replies)
        self.tokens = tuple(tokens)
        self.exhausted_text = exhausted_text
        self._chars: dict[int, tuple[Message, int]] = {}  # by id: each message counted once

    def context_tokens(self, conversation: Sequence[Message], reply: Message, index: int) -> int:
        """The context size the provider reports with reply ``index``: scripted, or
        ``estimate_tokens([*conversation, reply])``, each message's characters counted once
        (counting it whole at every request instead takes a 20-turn simulated run from
        8.9M to 13.2M instructions, cachegrind)."""
        if index < len(self.tokens) and self.tokens[index] is not None:
            return int(self.tokens[index])  # type: ignore[arg-type]
        chars = 0
        for message in (*conversation, reply):
            known = self._chars.get(id(message))
            if known is None or known[0] is not message:
                known = self._chars[id(message)] = (message, message_chars(message))
            chars += known[1]
        return _ESTIMATOR.from_chars(chars, len(conversation) + 1)

    def reply(self, conversation: Sequence[Message], index: int) -> Message:
        if self.fn is not None:
            return self.fn(list(conversation), index)  # the function's own copy
        if index < len(self.replies):
            return self.replies[index]
        return Message.assistant(self.exhausted_text)


_ESTIMATOR: Final = CharEstimator()


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The driver's default estimate (``CharEstimator``): deterministic."""
    return _ESTIMATOR.count(messages)


def message_events(message: Message, usage: Usage | None = None) -> list[StreamEvent]:
    """The stream a provider would send for ``message``: its text first, in two deltas, then
    each call, its arguments as sorted-key JSON in two deltas."""
    calls = message.tool_calls
    text = "".join(part.text for part in message.parts if isinstance(part, TextPart))
    events: list[StreamEvent] = []
    half = len(text) // 2
    if half:
        events.append(TextDelta(text=text[:half]))
    if text:
        events.append(TextDelta(text=text[half:]))
    for i, call in enumerate(calls):
        args = json.dumps(call.arguments, sort_keys=True)
        half = len(args) // 2
        events.append(ToolCallStart(index=i, id=call.id, name=call.name))
        if half:
            events.append(ToolCallDelta(index=i, arguments=args[:half]))
        events.append(ToolCallDelta(index=i, arguments=args[half:]))  # JSON text is never empty
        events.append(ToolCallEnd(index=i))
    if usage is not None:
        events.append(UsageEvent(usage=usage))
    reason = "tool_use" if calls else "end_turn"
    events.append(StopEvent(reason=reason))
    return events


# error-kind model fault -> (LoopError kind, default message, retryable, HTTP status or None
# when the failure has no response, whether the fault's retry-after reaches the driver)
_FAULT_ERRORS: dict[str, tuple[ErrorKind, str, bool, int | None, bool]] = {
    "network": ("network", "connection reset by peer", True, None, False),
    "timeout": ("timeout", "the request timed out", True, None, False),
    "rate_limited": ("rate_limited", "rate limit exceeded", True, 429, True),
    "server_error": ("provider", "internal server error", True, 500, True),
    "overloaded": ("overloaded", "overloaded", True, 529, True),
    "context_overflow": (
        "context_overflow",
        "prompt is too long for the model's context window",
        False,
        400,
        False,
    ),
}


def fault_error(fault: Fault, policy: MachinePolicy) -> ApiError | None:
    """The ``ApiError`` a provider raises for an error-kind model fault; None for the others."""
    entry = _FAULT_ERRORS.get(fault.kind)
    if entry is None:
        return None
    kind, default_message, retryable, default_status, hints = entry
    status = (fault.status or default_status) if default_status is not None else None
    message = fault.message or default_message
    details = {"context_window": policy.context_window} if kind == "context_overflow" else {}
    error = LoopError(
        kind=kind, message=message, retryable=retryable, status=status, details=details
    )
    return ApiError(error, retry_after=fault.retry_after if hints else None)


def _streamed_message(fault: Fault | None, message: Message, request: int) -> Message | None:
    """The message a reply's stream carries under ``fault`` (renamed or duplicated calls), or
    None when the fault breaks the stream itself. A call added to a reply without calls takes
    its id from ``request`` (from 1), so two such replies never answer one id twice."""
    kind = fault.kind if fault is not None else None
    if kind in ("invalid_tool_json", "malformed_stream"):
        return None
    if kind == "unknown_tool":
        calls = message.tool_calls or [ToolCall(id=f"call_unknown_{request}", name=UNKNOWN_TOOL)]
        calls = [calls[0].model_copy(update={"name": UNKNOWN_TOOL}), *calls[1:]]
    elif kind == "duplicate_call_ids":
        calls = message.tool_calls or [ToolCall(id="call_dup", name=UNKNOWN_TOOL)]
        twin = calls[1] if len(calls) > 1 else calls[0]
        calls = [calls[0], twin.model_copy(update={"id": calls[0].id}), *calls[2:]]
    else:
        return message
    text = [p for p in message.parts if isinstance(p, TextPart)]
    return Message(role="assistant", parts=(*text, *calls))


def faulty_reply(
    fault: Fault | None, message: Message, usage: Usage | None, request: int = 0
) -> list[StreamEvent]:
    """The stream for ``message`` as a stream-shaped fault (or no fault) delivers it, as the
    answer to model request number ``request``."""
    streamed = _streamed_message(fault, message, request)
    if streamed is not None:
        return message_events(streamed, usage)
    assert fault is not None
    if fault.kind == "invalid_tool_json":
        name = message.tool_calls[0].name if message.tool_calls else "unknown"
        return [
            ToolCallStart(index=0, id="call_badjson", name=name),
            ToolCallDelta(index=0, arguments='{"a": 1, "b": '),
            ToolCallEnd(index=0),
            StopEvent(reason="tool_use"),
        ]
    # malformed_stream: arguments for a call that never started: the fold refuses the stream.
    return [TextDelta(text="Let me"), ToolCallDelta(index=3, arguments='{"x": 1}')]


def delivered_reply(
    fault: Fault | None, message: Message, usage: Usage | None, request: int = 0
) -> ModelReply:
    """``fold_events(faulty_reply(fault, message, usage, request))``, the stream built and
    folded only when the fault is in it or ``message`` is not its own fold (``folded``)."""
    streamed = _streamed_message(fault, message, request)
    if streamed is None:
        return fold_events(faulty_reply(fault, message, usage, request))
    for part in streamed.parts:
        if type(part) is not ToolCall and type(part) is not TextPart:
            break  # a reasoning or provider part: this stream leaves it out
    else:
        whole = folded(streamed, usage, sort_keys=True)
        if whole is not None:
            return whole
    return fold_events(message_events(streamed, usage))


ToolFn = Callable[[dict[str, Any]], str]


class ToolHang(SimError):
    """A tool that never returns (the driver's deadline or a cancel must end it)."""


#: The characters a ``tool_oversized`` fault pads a result to, unless it says ``size``.
OVERSIZED: Final = 200_000
_NON_JSON_TAIL: Final = "<html><body><h1>502 Bad Gateway</h1></body></html>"


def fault_result(call: ToolCall, fault: Fault, timeout: float | None) -> ToolResult | None:
    """The result a tool fault gives ``call`` instead of running the tool (the driver's own
    texts, ``loopctl.tools.messages``), or None when the tool runs and ``distort`` changes its
    output. Raises ``ToolHang`` for a hang with no timeout (the run can only be cancelled)."""

    def error(text: str) -> ToolResult:
        return ToolResult(call_id=call.id, name=call.name, content=text, is_error=True)

    if fault.kind == "tool_exception":
        return error(raised_message(call.name, RuntimeError(fault.message or "boom")))
    if fault.kind == "tool_timeout":
        return error(timed_out_message(call.name, timeout or 60.0))
    if fault.kind == "tool_hang":
        if timeout is None:
            raise ToolHang(call.name)
        return error(timed_out_message(call.name, timeout))
    return None


def distort(content: str, fault: Fault | None) -> str:
    """A tool's output as an output-changing fault (``tool_oversized``, ``tool_non_json``)
    delivers it; unchanged for the others."""
    if fault is None:
        return content
    if fault.kind == "tool_oversized":
        size = fault.size or OVERSIZED
        unit = content or "x"
        return (unit * (size // len(unit) + 1))[:size] if len(content) < size else content
    if fault.kind == "tool_non_json":
        return content[: len(content) // 2] + _NON_JSON_TAIL
    return content


def run_tool(
    call: ToolCall, fn: ToolFn | None, fault: Fault | None, timeout: float | None
) -> ToolResult:
    """Run one scripted tool call as the driver would: errors become ``is_error`` results with
    the driver's own texts (``loopctl.tools.messages``); ``ToolHang`` as ``fault_result``."""
    if fault is not None:
        faulted = fault_result(call, fault, timeout)
        if faulted is not None:
            return faulted
    if fn is None:
        return not_available(call, ())
    try:
        content = fn(dict(call.arguments))
    except Exception as exc:
        return ToolResult.answering(call, raised_message(call.name, exc), is_error=True)
    return ToolResult.answering(call, distort(str(content), fault))


def middle_out(
    messages: Sequence[Message], keep_head: int = 2, keep_tail: int = 6
) -> list[Message] | None:
    """The driver's default compaction (``MiddleOutCompactor``), run synchronously: keep a head
    and a tail, replace the middle with one marker message. None when nothing can be cut."""
    coro = MiddleOutCompactor(keep_head, keep_tail).compact(messages, CompactReason.MANUAL)
    try:
        coro.send(None)
    except StopIteration as stop:
        result: list[Message] | None = stop.value
        return result
    coro.close()  # pragma: no cover - the compactor never awaits
    raise RuntimeError("MiddleOutCompactor awaited something")


@dataclass
class World:
    """A scripted world (``policy.tools`` is replaced by the names of ``tools``)."""

    input: str | Message
    model: ModelScript = field(default_factory=ModelScript)
    tools: dict[str, ToolFn] = field(default_factory=dict)
    faults: Sequence[Fault] = ()
    policy: MachinePolicy = field(default_factory=MachinePolicy)
    history: Sequence[Message] = ()
    max_retries: int = 3
    tool_timeout: float | None = 30.0
    keep_head: int = 2
    keep_tail: int = 6
    max_steps: int = 10_000
    name: str = "world"
    metadata: dict[str, Any] = field(default_factory=dict)

    def run_policy(self) -> MachinePolicy:
        return self.policy.model_copy(update={"tools": tuple(self.tools)})

    def retry_config(self) -> RetryConfig:
        """The driver's retry settings for this world (no jitter: deterministic delays)."""
        return RetryConfig(max_retries=self.max_retries, jitter=0.0)
