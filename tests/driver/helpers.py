from __future__ import annotations

from typing import Any

from loopctl.core import Message, ToolCall


def call(id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


def ask(*calls: ToolCall, text: str = "") -> Message:
    return Message.assistant(text, list(calls))


def answer(text: str) -> Message:
    return Message.assistant(text)
