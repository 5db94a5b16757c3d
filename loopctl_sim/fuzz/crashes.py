"""Crashes the dispatcher hides: a tool, a tool hook or a tool middleware that raised.

The dispatcher turns any exception out of a tool call into an error result the model reads
(``tool 'pay' raised ZeroDivisionError: ...``), so the run goes on and nothing escapes it: a
campaign that only watched for escapes would never report a tool that crashes on input its
schema allows. As Hypothesis does for a test, a campaign takes every such exception for a
finding unless it was declared expected: a tool declares the exceptions it raises on purpose to
refuse an input (``@tool(raises=ValueError)``; ``ToolError`` always is). A hook or a tool
middleware declares none: an exception out of one is a bug in it.

The exceptions are seen where the dispatcher reports them: it logs each one, with the exception,
to the ``loopctl.tools`` logger (the text the model reads holds only its type and message). A
``CrashWatch`` is a logging handler on that logger for the duration of one checked run; it keeps
only the records of its own thread (the run's event loop: a campaign runs one run at a time per
process, and a sync tool's exception is logged on the loop's thread, not the worker's).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Final

from loopctl.tools import ToolError

__all__ = ["Crash", "CrashWatch"]

#: The dispatcher's logger and its messages (``loopctl.tools.dispatch``), by what raised.
_LOGGER: Final = "loopctl.tools"
_WHERE: Final = {
    "tool %s failed": "tool",
    "pre-tool hook %s failed": "pre-tool hook",
    "post-tool hook %s failed": "post-tool hook",
    "tool middleware %s failed": "tool middleware",
}


class Crash:
    """One exception the dispatcher turned into an error result: what raised it (``where``:
    ``tool``, ``pre-tool hook``, ``post-tool hook``, ``tool middleware``), its name (the tool's,
    the hook's) and the exception's type and text."""

    def __init__(self, where: str, name: str, error: BaseException) -> None:
        self.where = where
        self.name = name
        self.kind = type(error).__name__
        self.text = str(error)

    @property
    def code(self) -> str:
        """What a failure's signature holds: the same crash shrinks to the same code."""
        return f"{self.name}:{self.kind}"

    def __str__(self) -> str:
        said = f"{self.kind}: {self.text}" if self.text else self.kind
        if self.where == "tool":
            return (
                f"tool '{self.name}' raised {said}, an exception it does not declare (declare "
                "the ones it raises on purpose with @tool(raises=...); ToolError always is)"
            )
        return f"{self.where} {self.name} raised {said}"


class CrashWatch(logging.Handler):
    """Collects the crashes of one run (``crashes``, in order); use it as a context manager.
    ``expected`` gives each tool's declared exceptions (``Tool.raises``) by name."""

    def __init__(self, expected: Mapping[str, tuple[type[BaseException], ...]]) -> None:
        super().__init__(logging.WARNING)
        self.expected = expected
        self.crashes: list[Crash] = []
        self._thread = threading.get_ident()
        self._logger = logging.getLogger(_LOGGER)
        self._level = logging.NOTSET

    def emit(self, record: logging.LogRecord) -> None:
        where = _WHERE.get(str(record.msg))
        if where is None or record.thread != self._thread or not record.exc_info:
            return
        error = record.exc_info[1]
        if error is None or not isinstance(record.args, tuple) or not record.args:
            return
        name = str(record.args[0])
        if where == "tool" and isinstance(error, (ToolError, *self.expected.get(name, ()))):
            return
        self.crashes.append(Crash(where, name, error))

    def __enter__(self) -> CrashWatch:
        self._logger.addHandler(self)
        # the dispatcher's warnings must be made even where the agent's code quieted the
        # logger (a level above WARNING): they are what this watch sees
        self._level = self._logger.level
        if self._logger.getEffectiveLevel() > logging.WARNING:
            self._logger.setLevel(logging.WARNING)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
