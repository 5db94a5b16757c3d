"""Scenario files: a ``World`` (or the user's agent under faults) as YAML, validated by pydantic;
docs/testing.md, "Scenario files", shows every field. Errors name the file and the field:
``scenario.yaml: faults.0.model_call: ...``.

A scenario is data from anywhere, so it is read with YAML's safe loader and its aliases are
bounded (``MAX_ALIAS_EXPANSION``): every step after parsing walks the expanded tree, and a
640-byte file of nested aliases expands to hundreds of millions of nodes.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from loopctl.core import MachinePolicy, Message, ToolCall
from loopctl.testing import ExploreConfig
from loopctl_sim.errors import SimError
from loopctl_sim.sim.agent_run import AgentWorld
from loopctl_sim.sim.faults import Fault
from loopctl_sim.sim.world import ModelScript, ToolFn, World

#: How much a scenario's aliases may add to it, in nodes (a scalar of ``n`` characters counts
#: ``1 + n // 64``): far above what a hand-written or saved scenario repeats, far below what
#: makes validating it slow.
MAX_ALIAS_EXPANSION: Final = 100_000

_STRICT = ConfigDict(frozen=True, extra="forbid")


class ScenarioError(ValueError, SimError):
    """A scenario file that cannot be loaded; the message names the file and the field."""


BUILTINS: dict[str, ToolFn] = {
    "add": lambda args: str(args.get("a", 0) + args.get("b", 0)),
    "echo": lambda args: json.dumps(args, sort_keys=True),
    "concat": lambda args: "".join(str(v) for _, v in sorted(args.items())),
    "upper": lambda args: str(args.get("text", "")).upper(),
    "length": lambda args: str(len(str(args.get("text", "")))),
}


#: How a scenario scripts a tool (one of them, or ``mode`` for an agent's own tool).
_SCRIPTED: Final = ("builtin", "returns", "results", "raises")


class ToolScenario(BaseModel):
    """One tool of a scenario: scripted (``builtin``, ``returns``, ``results``, ``raises``), or,
    for an agent's tool, how it runs (``mode``: ``live`` or ``simulated``; the string alone is
    short for it) and whether faults may strike it (``faults: false`` exempts a tool with side
    effects)."""

    model_config = _STRICT
    builtin: Literal["add", "echo", "concat", "upper", "length"] | None = None
    returns: str | None = None
    results: list[str] | None = Field(None, min_length=1)
    raises: str | None = None
    mode: Literal["live", "simulated", "recorded"] | None = None
    faults: bool = True

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"mode": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _one(self) -> ToolScenario:
        given = [k for k in (*_SCRIPTED, "mode") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(
                f"a tool takes one of builtin, returns, results, raises, mode (got {given})"
            )
        return self

    @property
    def scripted(self) -> bool:
        """Answered by the scenario (not the agent's own tool)."""
        return any(getattr(self, k) is not None for k in _SCRIPTED)

    def function(self) -> ToolFn:
        if self.builtin is not None:
            return BUILTINS[self.builtin]
        if self.returns is not None:
            value = self.returns
            return lambda args: value
        if self.results is not None:
            results = itertools.chain(self.results, itertools.repeat(self.results[-1]))
            return lambda args: next(results)
        message = self.raises or "boom"

        def raiser(args: dict[str, Any]) -> str:
            raise RuntimeError(message)

        return raiser


class CallScenario(BaseModel):
    model_config = _STRICT
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ReplyScenario(BaseModel):
    model_config = _STRICT
    text: str = ""
    calls: list[CallScenario] = Field(default_factory=list)
    context_tokens: int | None = Field(None, ge=0)

    def message(self, index: int) -> Message:
        calls = [
            ToolCall(id=c.id or f"call_{index + 1}_{j + 1}", name=c.name, arguments=c.arguments)
            for j, c in enumerate(self.calls)
        ]
        return Message.assistant(self.text, calls)


class ExploreScenario(BaseModel):
    """The exploring model (``loopctl.testing.ExploringClient``) instead of scripted replies."""

    model_config = _STRICT
    seed: int = 0
    turns: int = Field(12, ge=1)
    weights: dict[str, float] | None = None

    def config(self) -> ExploreConfig:
        weights = {} if self.weights is None else {"weights": self.weights}
        return ExploreConfig(turns=self.turns, **weights)  # type: ignore[arg-type]


#: What the agent's own factory decides: a scenario naming an agent may not set these.
_AGENT_OWNS: Final = ("policy", "max_retries", "tool_timeout", "keep_head", "keep_tail")


class Scenario(BaseModel):
    """A world as a file. With ``agent``, the world is the user's own agent: its factory builds
    the loop and decides what ``_AGENT_OWNS`` decides for the built-in world; its tools run
    (``tools`` says otherwise per tool); the model is ``model`` (scripted) or ``explore``."""

    model_config = _STRICT
    name: str
    description: str = ""
    agent: str | None = None
    input: str
    history: list[Message] = Field(default_factory=list)
    #: ``MachinePolicy`` but ``tools`` (the scenario's own) and ``compact_now`` (a fault's)
    policy: MachinePolicy = Field(default_factory=MachinePolicy)
    tools: dict[str, ToolScenario] = Field(default_factory=dict)
    model: list[ReplyScenario] = Field(default_factory=list)
    explore: ExploreScenario | None = None
    #: traces (files or directories) whose tool results answer the ``recorded`` tools
    recorded: list[str] = Field(default_factory=list)
    faults: list[Fault] = Field(default_factory=list)
    max_retries: int = Field(3, ge=0)
    tool_timeout: float | None = Field(30.0, gt=0)
    keep_head: int = Field(2, ge=0)
    keep_tail: int = Field(6, ge=0)
    expect: Literal["completed", "cancelled", "max_turns_exceeded", "failed"] | None = None

    @model_validator(mode="after")
    def _policy_valid(self) -> Scenario:
        taken = sorted({"tools", "compact_now"} & self.policy.model_fields_set)
        if taken:
            raise ValueError(f"policy: {', '.join(taken)}: set by the scenario's tools and faults")
        if self.agent is None:
            if self.explore is not None or self.recorded:
                raise ValueError(
                    "explore and recorded go with an agent: name it with agent: module:factory"
                )
            modes = [n for n, t in self.tools.items() if not t.scripted]
            if modes:
                raise ValueError(
                    f"tools {modes}: live, simulated and faults apply to an agent's tools "
                    "(name it with agent: module:factory); a scripted world's tools take "
                    "builtin, returns, results or raises"
                )
            return self
        owned = [k for k in _AGENT_OWNS if k in self.model_fields_set]
        if owned:
            raise ValueError(f"{', '.join(owned)}: the agent's factory sets these")
        if any(t.mode == "recorded" for t in self.tools.values()) and not self.recorded:
            raise ValueError("a recorded tool needs the traces it is answered from (recorded:)")
        if self.explore is not None and self.model:
            raise ValueError("give model (scripted replies) or explore, not both")
        if not {"model", "explore"} & self.model_fields_set:
            raise ValueError(
                "an agent's scenario gives model (scripted replies, maybe none) or explore "
                "(the exploring model: explore: {seed: 0})"
            )
        return self

    def world(self) -> World:
        """A fresh world (tools with state, like ``results``, start over)."""
        if self.agent is not None:
            raise ValueError(f"{self.name}: names an agent: run it with agent_world()")
        return World(
            input=self.input,
            model=ModelScript(self.replies(), tokens=[r.context_tokens for r in self.model]),
            tools={name: t.function() for name, t in self.tools.items()},
            faults=tuple(self.faults),
            policy=self.policy,
            history=tuple(self.history),
            max_retries=self.max_retries,
            tool_timeout=self.tool_timeout,
            keep_head=self.keep_head,
            keep_tail=self.keep_tail,
            name=self.name,
            metadata={"scenario": self.name},
        )

    def replies(self) -> list[Message]:
        """The scripted model's replies (default call ids ``call_<reply>_<n>``)."""
        return [r.message(i) for i, r in enumerate(self.model)]

    def agent_world(self, *, cwd: str | None = None) -> AgentWorld:
        """The agent's world: its factory, the model (scripted or exploring), the faults, and
        the scenario's say on each tool (live, simulated, scripted, exempt from faults)."""
        if self.agent is None:
            raise ValueError(f"{self.name}: names no agent: run it with world()")
        modes = {n: t.mode for n, t in self.tools.items() if t.mode is not None}
        explore = self.explore
        return AgentWorld(
            agent=self.agent,
            input=self.input,
            explore=explore.seed if explore is not None else None,
            explore_config=explore.config() if explore is not None else ExploreConfig(),
            script=None if explore is not None else self.replies(),
            tokens=[r.context_tokens for r in self.model],
            faults=tuple(self.faults),
            tools=modes or "live",
            recorded=list(self.recorded),
            exempt=frozenset(n for n, t in self.tools.items() if not t.faults),
            scripted={n: t.function() for n, t in self.tools.items() if t.scripted},
            history=tuple(self.history),
            name=self.name,
            metadata={"scenario": self.name},
            cwd=cwd,
        )


def _expanded(root: yaml.Node, limit: int) -> tuple[int, int]:
    """The size of ``root`` as a tree (every alias expanded) and as written (each node once);
    stops counting once the tree passes ``limit`` more than what is written. A node that holds
    itself (a recursive alias) raises ``ValueError``."""
    sizes: dict[int, int] = {}
    written = 0
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        nonlocal written
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in open_nodes:
            raise ValueError("an alias refers to a node that holds it (a recursive alias)")
        open_nodes.add(key)
        total = 1 + len(node.value) // 64 if isinstance(node, yaml.ScalarNode) else 1
        written += total
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        for child in children:
            total += size(child)
            if total - written > limit:
                break  # already over: the caller refuses
        open_nodes.discard(key)
        sizes[key] = total
        return total

    return size(root), written


def safe_yaml(text: str, *, limit: int = MAX_ALIAS_EXPANSION) -> Any:
    """``yaml.safe_load(text)`` with its aliases bounded: ``ValueError`` when they expand the
    document by more than ``limit`` nodes (see the module docstring), or refer to themselves.
    YAML errors are raised as ``yaml.YAMLError``, as ``safe_load`` raises them."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        tree, written = _expanded(root, limit)
        if tree - written > limit:
            raise ValueError(
                f"its YAML aliases expand it by more than {limit:,} nodes (an alias bomb?); "
                "write the repeated parts out instead"
            )
        return loader.construct_document(root)
    finally:
        loader.dispose()


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a scenario file; ``ScenarioError`` names the file and the field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror or exc}") from None
    try:
        data = safe_yaml(text)
    except ValueError as exc:
        raise ScenarioError(f"{p}: refused: {exc}") from None
    except RecursionError:
        raise ScenarioError(f"{p}: refused: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{p}{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{p}: a scenario is a mapping (name, input, model, ...)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            lines.append(f"{p}: {loc}: {err['msg']}")
        raise ScenarioError("\n".join(lines)) from None
