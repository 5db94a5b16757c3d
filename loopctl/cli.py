"""The ``loopctl`` command: run one agent loop against a real provider from the terminal.

    loopctl run "What is 17 * 23?" --provider openai --model gpt-4o-mini
    loopctl run "Summarize README.md" --provider ollama --model llama3.2 --trace run.jsonl
    loopctl run "Fly me from Oslo to Rome" --agent mypkg.agent:build --trace run.jsonl

The answer streams to stdout. Without ``--agent`` the built-in agent runs, with two example
tools: ``calculator`` (arithmetic from the syntax tree, never ``eval``) and ``read_file`` (at
most 100 kB of a text file under the current directory). ``--agent module:factory`` runs the
user's agent, built as the harness builds it (``loopctl_sim.sim.agent``): given the client that
``--provider``/``--model``/``--base-url`` name (with ``--model``) and the trace recorder.

Exit codes: 0 completed; 1 ended otherwise (failed, turn limit); 2 a configuration or connection
problem, in one line without a traceback; 130 (143 for SIGTERM) interrupted. Ctrl-C cancels the
run (outcome ``Cancelled``, a ``--trace`` ends with its cancel and end records); a second one
aborts at once.

The library's warnings (a tool that raised) show on stderr in one line each, the traceback only
under ``-v``: a traceback's frames can hold secrets the user did not mean to print.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import operator
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click
import httpx

from loopctl.api import ApiClient
from loopctl.core import Cancelled, Completed, Failed, MaxTurnsExceeded
from loopctl.providers import (
    AnthropicClient,
    HttpProvider,
    MissingApiKeyError,
    OllamaClient,
    OpenAIClient,
)
from loopctl.terminal import Interrupts, StreamOutput, visible
from loopctl.tools import tool
from loopctl.tools.dispatch import describe_exception

__all__ = ["PROVIDERS", "CliDeps", "calculator", "evaluate", "main", "make_client", "read_file"]

_CLIENTS: dict[str, type[HttpProvider]] = {
    "openai": OpenAIClient,
    "anthropic": AnthropicClient,
    "ollama": OllamaClient,
}
PROVIDERS = tuple(_CLIENTS)
MAX_FILE_BYTES = 100_000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_MAX_EXPONENT = 1000
_MAX_MAGNITUDE = 10**300


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression: numbers, + - * / // % ** and parentheses only."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from None
    return _eval(tree.body)


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
        assert isinstance(value, int | float)
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        result: int | float = _UNARY[type(node.op)](_eval(node.operand))
        return result
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent {right} is too large (limit {_MAX_EXPONENT})")
        try:
            result = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError("the result is too large") from None
        if isinstance(result, complex):
            raise ValueError("the result is not a real number")
        if abs(result) > _MAX_MAGNITUDE:
            raise ValueError("the result is too large")
        return result
    raise ValueError(
        f"unsupported syntax: {type(node).__name__} (numbers and + - * / // % ** only)"
    )


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "(17 * 23) / 4"; returns the value."""
    return str(evaluate(expression))


@tool
def read_file(path: str) -> str:
    """Read a text file under the current directory (at most 100 kB)."""
    root = Path.cwd().resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise PermissionError(f"{path!r} is outside the current directory")
    if not target.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with target.open("rb") as f:  # never more than the limit (and one byte to know it was cut)
        data = f.read(MAX_FILE_BYTES + 1)
    suffix = ""
    if len(data) > MAX_FILE_BYTES:
        data, suffix = data[:MAX_FILE_BYTES], f"\n[truncated at {MAX_FILE_BYTES} bytes]"
    return data.decode("utf-8", errors="replace") + suffix


@dataclass
class CliDeps:
    """What tests inject through ``CliRunner.invoke(main, ..., obj=CliDeps(...))``."""

    http_client: httpx.AsyncClient | None = None
    sleep: Callable[[float], Awaitable[None]] | None = None


def make_client(
    provider: str,
    model: str,
    *,
    base_url: str | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> HttpProvider:
    """The provider's client; raises ``MissingApiKeyError`` when its key is not set."""
    if provider not in _CLIENTS:
        raise ValueError(f"unknown provider {provider!r}")
    return _CLIENTS[provider](model, base_url=base_url, http_client=http_client)


class _StderrLog(logging.Handler):
    """The library's warnings on stderr in one line (the traceback too when ``verbose``),
    through click so CliRunner captures it."""

    def __init__(self, verbose: bool) -> None:
        super().__init__(logging.WARNING)
        self.verbose = verbose

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = f"{record.levelname.lower()}: {record.getMessage()}"
            exc = record.exc_info[1] if record.exc_info else None
            if exc is not None:
                text += f": {describe_exception(exc)}"
                if self.verbose and record.exc_info:
                    text += "\n" + logging.Formatter().formatException(record.exc_info)
            click.echo(_clean(text), err=True)
        except Exception:  # pragma: no cover - logging must never break the run
            self.handleError(record)


def _clean(text: str) -> str:
    """``text`` with secrets replaced, as a trace would have them (an error may echo a key, and
    stderr ends up in logs), its control characters as escapes (a message cannot drive the
    terminal)."""
    from loopctl_sim import scrub_text  # the traces' rule, with the user's patterns

    return visible(scrub_text(text))


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {_clean(message)}", err=True)
    raise SystemExit(code)


@click.group()
@click.version_option(package_name="loopctl")
def main() -> None:
    """loopctl: a sans-IO agent-loop engine."""


@main.command()
@click.argument("prompt")
@click.option("--provider", type=click.Choice(PROVIDERS), default="openai", show_default=True)
@click.option(
    "--model",
    default=None,
    help="Model name, e.g. gpt-4o-mini or llama3.2 (required without --agent; with --agent, "
    "the client it names is given to the agent's factory).",
)
@click.option("--base-url", default=None, help="Server URL (OpenAI-compatible servers, Ollama).")
@click.option(
    "--trace",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write a trace (gzip-compressed when the name ends in .gz).",
)
@click.option(
    "--snapshot-every",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="With --trace: also record the brain's snapshot every N feeds, so that "
    "`loopctl-sim resume` need not replay a long run from its start.",
)
@click.option(
    "--agent",
    default=None,
    metavar="MODULE:FACTORY",
    help="Run your own agent: a factory returning a BareLoop (keywords client= and observers= "
    "optional), imported from the current directory and PYTHONPATH.",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="The built-in agent's turn limit (an --agent sets its own).",
)
@click.option("--system", default=None, help="The built-in agent's system prompt.")
@click.option(
    "-v", "--verbose", is_flag=True, help="Show tracebacks of failing tools, and every retry."
)
@click.pass_context
def run(
    ctx: click.Context,
    prompt: str,
    provider: str,
    model: str | None,
    base_url: str | None,
    trace: str | None,
    snapshot_every: int | None,
    agent: str | None,
    max_turns: int,
    system: str | None,
    verbose: bool,
) -> None:
    """Run PROMPT through one agent loop, streaming the answer."""
    from loopctl.driver import BareLoop, CancelSignal, RunConfig, SessionConfig
    from loopctl.observe import LoopObserver

    deps = ctx.find_object(CliDeps) or CliDeps()
    if agent is not None:
        for name in ("max_turns", "system"):
            if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT:
                flag = "--" + name.replace("_", "-")
                _fail(f"{flag} sets the built-in agent; the --agent's factory sets its own", 2)
        explicit = ctx.get_parameter_source("provider") is not click.core.ParameterSource.DEFAULT
        if model is None and (base_url is not None or explicit):
            _fail("--provider and --base-url with --agent need --model: they name its client", 2)
    elif model is None:
        _fail("--model is required (or run your own agent with --agent MODULE:FACTORY)", 2)
    client: ApiClient | None = None
    if model is not None:
        try:
            client = make_client(provider, model, base_url=base_url, http_client=deps.http_client)
        except MissingApiKeyError as exc:
            name = exc.error.details.get("provider", provider)
            _fail(f"no {name} API key: set the {exc.env_var} environment variable", 2)
    observers: list[LoopObserver] = []
    recorder: Any = None
    if trace is not None:
        from loopctl_sim import TraceRecorder  # the harness, shipped with loopctl

        metadata: dict[str, Any] = {"provider": provider, "model": model}
        if agent is None:  # a project's [tool.loopctl] agent is not this run's: replay says so
            metadata["builtin"] = "loopctl run"
        else:  # a --model is the command's, not the factory's: replay keeps it
            given = {"agent": agent, "model_from": "--model"}
            metadata = {"agent": agent} if model is None else {**metadata, **given}
        try:
            recorder = TraceRecorder(trace, metadata=metadata, snapshot_every=snapshot_every)
        except OSError as exc:  # before the run: nothing is lost by not starting it
            _fail(f"cannot write the trace {trace}: {exc.strerror or exc}", 2)
        observers.append(recorder)
    elif snapshot_every is not None:
        _fail("--snapshot-every goes with --trace", 2)

    out = StreamOutput(live=sys.stdout.isatty(), every_retry=verbose, clean=_clean)
    if agent is not None:
        loop = _their_loop(agent, client, observers, out, deps)
        client = loop.client
        max_turns = loop.config.max_turns
    else:
        assert client is not None  # --model is required without --agent
        loop = BareLoop(
            client,
            tools=[calculator, read_file],
            config=RunConfig(max_turns=max_turns),
            session=SessionConfig(system_prompt=system),
            observers=observers,
            on_stream=out.on_stream,
            sleep=deps.sleep,
        )

    cancel = CancelSignal()
    interrupts = Interrupts(cancel)

    async def go() -> Any:
        interrupts.attach(asyncio.get_running_loop())
        try:
            return await loop.run(prompt, cancel)
        finally:
            if isinstance(client, HttpProvider):
                await client.aclose()  # closes only a client it created itself

    where = f"; the trace {trace} ends with it" if trace else ""
    logs = _StderrLog(verbose)  # the library's warnings, on stderr for this command only
    logging.getLogger("loopctl").addHandler(logs)
    try:
        with interrupts:
            result = asyncio.run(go())
    except KeyboardInterrupt:
        out.finish()
        _fail("aborted (interrupted twice): the run did not finish", interrupts.exit_code)
    except Exception as exc:  # out of the agent's code (a compactor, a middleware): one line
        out.finish()
        if verbose:
            click.echo(_clean(logging.Formatter().formatException(sys.exc_info())), err=True)
        _fail(f"the run raised {type(exc).__name__}: {exc}{where}", 1)
    finally:
        logging.getLogger("loopctl").removeHandler(logs)
        if recorder is not None:
            recorder.close()
    out.finish(answered=isinstance(result.outcome, Completed))
    outcome = result.outcome
    if interrupts.signum is not None and isinstance(outcome, Cancelled):
        _fail(
            f"interrupted ({interrupts.name}): the run was cancelled{where}", interrupts.exit_code
        )
    if isinstance(outcome, Completed):
        if not out.printed and outcome.final_text:
            click.echo(outcome.final_text)
        return
    if isinstance(outcome, MaxTurnsExceeded):
        limit = "the agent's max_turns" if agent is not None else "--max-turns"
        _fail(f"stopped after {max_turns} turns ({limit})", 1)
    if isinstance(outcome, Failed):
        error = outcome.error
        code = 2 if error.kind in ("auth", "network", "timeout") else 1
        _fail(error.message, code)
    _fail(f"the run ended: {type(outcome).__name__}", 1)


def _their_loop(
    spec: str,
    client: ApiClient | None,
    observers: list[Any],
    out: StreamOutput,
    deps: CliDeps,
) -> Any:
    """The user's agent, built by its factory as the harness builds it, streaming to the
    terminal; a factory that cannot be found, imported or built is a one-line error (exit 2)."""
    from loopctl_sim import AgentError, build_agent, load_agent

    try:
        loop = build_agent(load_agent(spec), client=client, observers=observers)
    except AgentError as exc:
        recorder = observers[0] if observers else None
        if recorder is not None:
            recorder.close()
        _fail(str(exc), 2)
    changes: dict[str, Any] = {"on_stream": out.on_stream}
    if deps.sleep is not None:
        changes["sleep"] = deps.sleep
    return loop.replace(**changes)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
