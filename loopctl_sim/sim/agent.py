"""The user's agent, as the harness finds, loads and builds it.

An agent is named ``module:attribute`` (``mypkg.agent:build``), as ``uvicorn app:app`` names an
app, or once per project in ``pyproject.toml`` (``[tool.loopctl] agent = ...``). The attribute
is the user's *factory*, a callable that returns a configured ``BareLoop``. Anything that goes
wrong is an ``AgentError`` whose message says what to fix, never a traceback.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from loopctl.api import ApiClient
from loopctl.driver import BareLoop
from loopctl.observe import LoopObserver
from loopctl_sim.errors import SimError

#: The user's factory: returns a configured ``BareLoop`` (keywords ``client``, ``observers``
#: optional).
AgentFactory = Callable[..., BareLoop]


class AgentError(SimError):
    """The agent cannot be found, imported or built; the message says what to fix."""


def agent_from_pyproject(start: str | os.PathLike[str] | None = None) -> str | None:
    """``[tool.loopctl] agent`` of the nearest ``pyproject.toml`` from ``start`` (default: the
    current directory) upwards, or None."""
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                config = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise AgentError(f"{candidate}: cannot be read: {exc}") from None
            agent = config.get("tool", {}).get("loopctl", {}).get("agent")
            if agent is not None and not isinstance(agent, str):
                raise AgentError(f"{candidate}: [tool.loopctl] agent must be a string")
            return agent
    return None


def load_agent(
    spec: str | AgentFactory, *, cwd: str | os.PathLike[str] | None = None
) -> AgentFactory:
    """The factory named by ``spec`` (``module:attribute``), imported as ``uvicorn`` imports an
    app: the current directory (or ``cwd``) comes first on ``sys.path``. A callable is taken
    as it is."""
    if callable(spec):
        return spec
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise AgentError(
            f"agent {spec!r}: expected 'module:factory' (for example 'mypkg.agent:build')"
        )
    folder = os.fspath(Path(cwd if cwd is not None else os.getcwd()).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AgentError(
            f"agent {spec!r}: cannot import module {module_name!r} ({exc}); it is looked up "
            f"from the current directory ({folder}) and PYTHONPATH"
        ) from None
    except Exception as exc:  # the user's module raised while being imported
        raise AgentError(
            f"agent {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}"
        ) from None
    factory: Any = module
    for part in attribute.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise AgentError(f"agent {spec!r}: module {module_name!r} has no {attribute!r}")
    if isinstance(factory, BareLoop):
        raise AgentError(
            f"agent {spec!r} is a BareLoop, not a factory: name a function that returns one "
            "(each replay needs a fresh loop)"
        )
    if not callable(factory):
        raise AgentError(f"agent {spec!r}: {attribute!r} is not callable")
    built: AgentFactory = factory
    return built


def agent_name(agent: str | Callable[..., Any]) -> str:
    """How traces and reports name an agent: its ``module:factory``, else the factory's name."""
    return agent if isinstance(agent, str) else str(getattr(agent, "__qualname__", repr(agent)))


def _takes(factory: Callable[..., Any], name: str) -> bool:
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or an odd callable: pass nothing
        return False
    if name in parameters:
        return parameters[name].kind is not inspect.Parameter.POSITIONAL_ONLY
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def build_agent(
    factory: AgentFactory,
    *,
    client: ApiClient | None = None,
    observers: Sequence[LoopObserver] = (),
    **changes: Any,
) -> BareLoop:
    """The user's loop, built by ``factory``, with the harness's ``client`` and ``observers``
    (after the user's own; as keywords when the factory takes them, else through
    ``BareLoop.replace``) and any other ``BareLoop`` argument in ``changes``."""
    given: dict[str, Any] = {}
    if client is not None and _takes(factory, "client"):
        given["client"] = client
    if observers and _takes(factory, "observers"):
        given["observers"] = list(observers)
    name = agent_name(factory)
    try:
        loop = factory(**given)
    except Exception as exc:
        raise AgentError(f"the agent factory {name} raised {type(exc).__name__}: {exc}") from None
    if not isinstance(loop, BareLoop):
        raise AgentError(f"the agent factory {name} returned {type(loop).__name__}, not a BareLoop")
    swap: dict[str, Any] = dict(changes)
    if client is not None and "client" not in given:
        swap["client"] = client
    if observers and "observers" not in given:
        swap["observers"] = [*loop.observers, *observers]
    return loop.replace(**swap) if swap else loop
