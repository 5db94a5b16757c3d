"""The user's own agent as ``DriverMachine``'s world: their factory's loop, a model that explores
it and the fault layers around it, all drawn by hypothesis.

Every reply is drawn while the run asks for it, from the tools the request advertises, so a
failing run shrinks towards plain final answers; from ``ExploreConfig.turns`` on every reply is
final, so every run ends. Cancels, crashes and config changes are ``DriverWatch`` strikes.
"""

from __future__ import annotations

from typing import Any, Final, get_args

from hypothesis import strategies as st

from loopctl.api import ModelRequest
from loopctl.core import LoopMachine, Message
from loopctl.driver import BareLoop
from loopctl.testing import MOVES, ExploreConfig
from loopctl.testing.strategies import replies
from loopctl_sim.sim.agent import AgentFactory, build_agent
from loopctl_sim.sim.agent_run import tool_timeout
from loopctl_sim.sim.faults import MODEL_FAULTS, Fault, FaultPlan, ToolFaultKind
from loopctl_sim.sim.layers import FaultyClient, Replies, RunFaults, ToolFaults, chain_before_step

#: The tool faults drawn for a user's agent: all (``tool_hang`` reports the configured timeout
#: without waiting for it, or cancels the run when there is none).
AGENT_TOOL_FAULTS: Final = get_args(ToolFaultKind)


#: The model faults drawn. Not ``unknown_tool``: the model's own ``unknown`` move already calls
#: unknown tools (with fresh ids, as the fault's added calls now have too), and drawing the fault
#: as well thins out the others (the planted-bug hunts of tests/props/test_driver_agent.py find
#: their bugs in fewer examples without it).
_MODEL_FAULTS: Final = tuple(sorted(MODEL_FAULTS - {"unknown_tool"}))


class DrawnReplies(Replies):
    """A model source whose replies hypothesis draws from ``data`` when they are first asked
    for: reply ``i`` answers the request it was drawn for (a retried request gets the same)."""

    def __init__(self, data: st.DataObject, config: ExploreConfig) -> None:
        super().__init__()
        self.data = data
        self.config = config

    def reply(self, request: ModelRequest) -> Message:
        allowed = ("final",) if request.turn >= self.config.turns else MOVES
        return self.data.draw(
            replies(request, self.config, index=self.delivered, allowed=allowed),
            label=f"reply {self.delivered + 1}",
        )


@st.composite
def fault_plans(draw: st.DrawFn, tools: tuple[str, ...] = ()) -> FaultPlan:
    """Up to three model faults (at requests 1 to 8, for 1 to 3 requests; rate limits with a
    retry-after now and then), up to three tool faults (at dispatched calls 1 to 6, or at the
    first call of a named tool), and now and then a compaction request or an injection."""
    faults: list[Fault] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(_MODEL_FAULTS))
        after = draw(st.sampled_from([None, 1.5])) if kind == "rate_limited" else None
        faults.append(
            Fault(
                kind=kind,
                model_call=draw(st.integers(1, 8)),
                times=draw(st.sampled_from([1, 1, 2, 3])),
                retry_after=after,
            )
        )
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(AGENT_TOOL_FAULTS))
        size = draw(st.sampled_from([2_000, 40_000])) if kind == "tool_oversized" else None
        by_name: bool = draw(st.booleans()) if tools else False
        if by_name:
            place: dict[str, Any] = {"tool": draw(st.sampled_from(tools))}
        else:
            place = {"tool_call": draw(st.integers(1, 6))}
        faults.append(Fault(kind=kind, size=size, **place))
    if draw(st.integers(0, 3)) == 0:
        faults.append(Fault(kind="compact_now", step=draw(st.integers(2, 12))))
    if draw(st.integers(0, 3)) == 0:
        faults.append(Fault(kind="inject", step=draw(st.integers(2, 12)), text="please hurry"))
    return FaultPlan(faults)


class AgentRun:
    """One run's parts around the user's agent: the faulty client over drawn replies, the tool
    and run fault layers. ``body(machine)`` builds a fresh loop holding ``machine`` (at the run's
    start and after every crash), ready for the watch to install."""

    def __init__(
        self,
        factory: AgentFactory,
        data: st.DataObject,
        plan: FaultPlan,
        config: ExploreConfig,
        *,
        simulated: frozenset[str],
        exempt: frozenset[str],
    ) -> None:
        self.factory = factory
        self.loop: BareLoop | None = None
        self.client = FaultyClient(DrawnReplies(data, config), plan, self._policy)
        self.tools = ToolFaults(
            plan,
            live=lambda name: name not in simulated,
            exempt=exempt,
            timeout=self._timeout,
        )
        self.run_faults = RunFaults(plan)

    def _policy(self) -> Any:
        assert self.loop is not None
        return self.loop.policy()

    def _timeout(self, name: str) -> float | None:
        loop = self.loop
        return None if loop is None else tool_timeout(loop.registry, name, loop.config.tool_timeout)

    def body(self, machine: LoopMachine, **changes: Any) -> BareLoop:
        """The user's loop as their factory builds it, holding ``machine``, with the fault
        layers put in (``changes``: other ``BareLoop`` arguments, a config to test)."""
        loop = build_agent(self.factory, client=self.client, machine=machine, **changes)
        self.tools.registry = loop.registry
        loop = loop.replace(
            middleware=[*loop.middleware, self.tools.middleware],
            before_step=chain_before_step(
                loop.before_step, self.run_faults.before_step, self.tools.before_step
            ),
        )
        self.loop = loop
        return loop
