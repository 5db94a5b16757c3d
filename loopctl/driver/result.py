"""What a run is given besides its tools (``Hooks``) and what it gives back (``RunResult``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from loopctl.api import Usage
from loopctl.core import Completed, LoopError, MachineOutcome, Message
from loopctl.tools import PostToolHook, PreToolHook


@dataclass(frozen=True)
class Hooks:
    """Tool hooks: pre-tool (allow, deny, replace the arguments) and post-tool (rewrite)."""

    pre_tool: Sequence[PreToolHook] = ()
    post_tool: Sequence[PostToolHook] = ()


class RunResult(BaseModel):
    """How a run ended, what it said, and what it cost."""

    model_config = ConfigDict(frozen=True)
    outcome: MachineOutcome
    final_text: str | None
    # Out of the repr: the conversation is read as ``result.messages``, not printed whole; and
    # Python 3.11's asyncio.run reprs its main task's result when it puts back the SIGINT
    # handler (a signal-module enum conversion), which cost 2.4 ms for a 20-turn run's
    # messages, half the run (benchmarks/bench_fuzz_driver.py, driver_floor).
    messages: tuple[Message, ...] = Field(repr=False)
    turns: int
    usage: Usage
    error: LoopError | None

    @property
    def completed(self) -> bool:
        return isinstance(self.outcome, Completed)
