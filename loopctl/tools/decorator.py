"""``@tool``: a typed Python function becomes something the model can call.

The signature is the single source of truth: a pydantic model built from the parameters' type
hints gives the JSON Schema the model is told (``Tool.spec``) and validates what the model sends
back, so the two never disagree. A ``Tool`` stays callable exactly like the function it wraps,
so decorating never breaks its direct callers. ``dispatch`` drives ``parse_arguments`` ->
``execute`` -> ``encode_result``.

Providers want one self-contained JSON Schema object per tool; pydantic's carry ``$defs``
references (several providers reject them) and a ``title`` on every field (noise that costs
tokens), so ``clean_schema`` inlines the first and drops the second (a recursive model keeps the
definitions still referenced).

Sync functions run in a worker thread (``loopctl.tools.threads``) so a slow tool never blocks
the event loop; a thread cannot be interrupted, so on a timeout or a cancel the loop moves on
and the thread finishes in the background. Async tools are cancelled for real.

``inline=True`` runs a sync function on the event loop, with no thread: the hop costs more than
a cheap pure function (39 µs against a few, ``benchmarks/bench_driver.py``), but while it runs
nothing else on the loop does (no other tool, no cancel, no timeout, so it takes no
``timeout``). Keep it for functions that return in microseconds and never wait on IO.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, ParamSpec, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError

from loopctl.api import ToolSpec
from loopctl.core import LoopctlError, to_jsonable
from loopctl.tools.threads import run_in_worker

__all__ = ["Tool", "ToolArgumentsError", "ToolError", "encode_result", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

#: ``json.dumps(value, ensure_ascii=False)``, which builds this encoder on every call: half the
#: cost of encoding a small result (6 against 12 us, timeit, on a loaded machine).
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False).encode

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""The tool names every supported provider accepts (OpenAI's rule is the strictest)."""


class ToolError(LoopctlError):
    """Raise inside a tool to send the model an error result with exactly this message (any
    other exception's result is prefixed with its type: ``tool 'x' raised ValueError: ...``)."""


class ToolArgumentsError(ValueError, LoopctlError):
    """The model's arguments do not fit the tool's signature; ``str()`` is written for the model."""


class Tool(Generic[P, R]):
    """A function the model can call: its spec, its argument model, and how to run it (build
    one with ``@tool``). Calling a ``Tool`` calls the wrapped function unchanged."""

    # set by ``functools.update_wrapper``, declared for type checkers
    __name__: str
    __wrapped__: Callable[P, R]
    fn: Callable[P, R]

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        parallel_safe: bool = True,
        inline: bool = False,
        raises: type[Exception] | tuple[type[Exception], ...] = (),
    ) -> None:
        if isinstance(fn, Tool):  # re-decorating: wrap the original function with new options
            fn = fn.fn
        functools.update_wrapper(self, fn, updated=())  # not the function's __dict__
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", "")
        if name is None and not self.name:
            raise ValueError(f"{fn!r} has no __name__: give the tool one with name=...")
        if not _NAME.match(self.name):
            raise ValueError(
                f"tool name {self.name!r} is not valid: use 1-64 letters, digits, '_' or '-'"
            )
        if timeout is not None and timeout <= 0:
            raise ValueError(f"tool '{self.name}': timeout must be positive, got {timeout}")
        self.raises = _expected(self.name, raises)
        self.is_async = inspect.iscoroutinefunction(_underlying(fn))
        if inline and self.is_async:
            raise ValueError(
                f"tool '{self.name}': inline=True is for sync functions; an async tool always "
                "runs on the event loop"
            )
        if inline and timeout is not None:
            raise ValueError(
                f"tool '{self.name}': an inline tool cannot be timed out (nothing interrupts it "
                "while it blocks the event loop); drop timeout= or inline=True"
            )
        doc = inspect.getdoc(fn)
        self.description = description if description is not None else docstring_summary(doc)
        self.timeout = timeout
        self.parallel_safe = parallel_safe
        self.inline = inline
        self.arguments_model, self._fields = _arguments_model(fn, self.name, doc)
        # What ``execute`` reads for each field, worked out once: (field, parameter name,
        # whether it is passed by position).
        self._params = tuple(
            (field, p.name, p.kind is inspect.Parameter.POSITIONAL_ONLY)
            for field, p in self._fields
        )
        parameters = clean_schema(self.arguments_model.model_json_schema())
        #: What the model is told about this tool.
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=parameters)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        inline = " inline=True" if self.inline else ""
        return (
            f"<Tool {self.name!r} parallel_safe={self.parallel_safe} timeout={self.timeout}"
            f"{inline}>"
        )

    def parse_arguments(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Validate the model's arguments; raise ``ToolArgumentsError`` saying what to fix."""
        try:
            # ``model_validate`` without its Python wrapper (keyword checks): 12,700 -> 8,500
            # instructions a call of ``add(a, b)`` (cachegrind); the same model, the same errors.
            validated: BaseModel = self.arguments_model.__pydantic_validator__.validate_python(
                arguments
            )
            return validated
        except ValidationError as exc:
            raise ToolArgumentsError(describe_validation_error(self.name, exc)) from None

    async def execute(self, validated: BaseModel) -> Any:
        """Run the function with validated arguments (a sync one in a worker thread, unless
        ``inline``)."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field, name, positional in self._params:
            value = getattr(validated, field)
            if positional:
                args.append(value)
            else:
                kwargs[name] = value
        fn: Callable[..., Any] = self.fn
        if self.is_async:
            return await fn(*args, **kwargs)
        result = fn(*args, **kwargs) if self.inline else await run_in_worker(fn, *args, **kwargs)
        # a plain value is not awaitable: isawaitable asks an ABC (3,800 instructions, cachegrind)
        if type(result) not in _PLAIN and inspect.isawaitable(result):
            result = await result
        return result

    async def run(self, arguments: Mapping[str, Any]) -> str:
        """Validate, execute and encode, without timeout or hooks: a tool tested as the model
        uses it."""
        return encode_result(self.name, await self.execute(self.parse_arguments(arguments)))


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    parallel_safe: bool = True,
    inline: bool = False,
    raises: type[Exception] | tuple[type[Exception], ...] = (),
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    parallel_safe: bool = True,
    inline: bool = False,
    raises: type[Exception] | tuple[type[Exception], ...] = (),
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Turn a typed function (sync or async) into a ``Tool``.

    ``name`` defaults to the function's name and ``description`` to the first paragraph of its
    docstring; parameter descriptions come from an ``Args:`` section (or ``Annotated[...,
    Field(description=...)]``). ``timeout`` (seconds) bounds one execution (else ``dispatch``'s
    ``default_timeout``). ``parallel_safe=False`` makes every call of this tool run alone.
    ``inline=True``: see the module docstring. ``raises`` declares the exceptions the tool
    raises on purpose to refuse an input (``raises=ValueError``): a fuzz campaign takes every
    other exception out of the tool for a crash. ``ToolError`` is always expected.
    """

    def wrap(f: Callable[P, R]) -> Tool[P, R]:
        return Tool(
            f,
            name=name,
            description=description,
            timeout=timeout,
            parallel_safe=parallel_safe,
            inline=inline,
            raises=raises,
        )

    return wrap(fn) if fn is not None else wrap


def _expected(
    tool_name: str, raises: type[Exception] | tuple[type[Exception], ...]
) -> tuple[type[Exception], ...]:
    """``raises`` as a tuple of exception classes, ``ToolError`` first (always expected)."""
    given = raises if isinstance(raises, tuple) else (raises,)
    for kind in given:
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            raise TypeError(f"tool '{tool_name}': raises= takes exception classes, got {kind!r}")
    return (ToolError, *(k for k in given if k is not ToolError))


_PLAIN: Final = frozenset({str, int, float, bool, type(None), dict, list, tuple})


def encode_result(tool_name: str, value: Any) -> str:
    """A tool's return value as the text the model receives: a str as is (a subclass's, a
    ``StrEnum``'s, as the plain str it holds), else JSON. An int's JSON is its ``repr``, written
    without the encoder ``_ENCODE`` builds for every call: 12,300 -> 1,900 instructions for
    ``6`` (cachegrind)."""
    if isinstance(value, str):
        return value if type(value) is str else str.__str__(value)
    try:
        if type(value) is int:  # not a bool, not an IntEnum: their JSON is not their repr
            return repr(value)
        return _ENCODE(to_jsonable(value))
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise ToolError(
            f"tool '{tool_name}' returned a value of type {type(value).__name__} that cannot "
            f"be encoded as JSON: {exc}"
        ) from None


def describe_validation_error(tool_name: str, exc: ValidationError) -> str:
    """One line per problem, naming the argument, what was wrong and what was sent."""
    problems: list[str] = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        if err["type"] == "missing":
            problems.append(f"- {where}: missing (required)")
        elif err["type"] == "extra_forbidden":
            problems.append(f"- {where}: unexpected argument")
        else:
            got = json.dumps(err.get("input"), ensure_ascii=False, default=repr)
            got = got if len(got) <= 80 else got[:77] + "..."
            problems.append(f"- {where}: {err['msg']} (got {got})")
    return f"invalid arguments for tool '{tool_name}':\n" + "\n".join(problems)


def _underlying(fn: Callable[..., Any]) -> Any:
    """The function that holds the code and the annotations: through partials, and to
    ``__call__`` for a callable object."""
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        call = getattr(target, "__call__", None)  # noqa: B004 - a callable object's method
        if call is not None:
            target = call
    return target


_Fields = tuple[tuple[str, inspect.Parameter], ...]


def _arguments_model(
    fn: Callable[..., Any], tool_name: str, doc: str | None
) -> tuple[type[BaseModel], _Fields]:
    """A pydantic model with one field per parameter, named ``p0``, ``p1``... with the
    parameter's name as alias (a parameter may be called ``json`` or ``model_config``).
    Unknown arguments are rejected, so the model learns of a misspelt one."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(_underlying(fn), include_extras=True)
    except NameError as exc:
        raise TypeError(
            f"tool '{tool_name}': cannot resolve the type hints ({exc}); define the types at "
            f"module level"
        ) from None
    described = docstring_params(doc)
    definitions: dict[str, Any] = {}
    fields: list[tuple[str, inspect.Parameter]] = []
    for index, param in enumerate(signature.parameters.values()):
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(
                f"tool '{tool_name}': *args and **kwargs are not supported; name every parameter"
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        extra: dict[str, Any] = {}
        if param.name in described and not _has_description(annotation):
            extra["description"] = described[param.name]
        field = f"p{index}"
        definitions[field] = (annotation, Field(default, alias=param.name, **extra))
        fields.append((field, param))
    model = create_model(
        f"{tool_name}_arguments",
        __config__=ConfigDict(extra="forbid", protected_namespaces=(), populate_by_name=False),
        **definitions,
    )
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model, tuple(fields)


def _has_description(annotation: Any) -> bool:
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(isinstance(meta, FieldInfo) and meta.description for meta in annotation.__metadata__)


_REF_PREFIX = "#/$defs/"


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline ``$defs``, drop auto titles, and always state ``required`` at the top level."""
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    kept: set[str] = set()
    body = {k: v for k, v in schema.items() if k != "$defs"}
    out = _inline(body, defs, (), kept)
    out = _strip_titles(out)
    assert isinstance(out, dict)
    out.setdefault("properties", {})
    out.setdefault("required", [])
    if kept:
        out["$defs"] = _strip_titles(
            {name: _inline(defs[name], defs, (name,), kept) for name in sorted(kept)}
        )
    return out


def _inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...], kept: set[str]) -> Any:
    """Replace every local ``$ref`` by its definition, unless that would recurse forever."""
    if isinstance(node, list):
        return [_inline(item, defs, stack, kept) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        name = ref[len(_REF_PREFIX) :]
        if name in stack or name not in defs:
            kept.add(name)
            return {k: _inline(v, defs, stack, kept) for k, v in node.items()}
        target = _inline(defs[name], defs, (*stack, name), kept)
        siblings = {k: _inline(v, defs, stack, kept) for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}
    out = {k: _inline(v, defs, stack, kept) for k, v in node.items()}
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        # pydantic wraps a reference in a one-item allOf when it adds siblings (a default)
        rest = {k: v for k, v in out.items() if k != "allOf"}
        out = {**all_of[0], **rest}
    return out


def _strip_titles(node: Any, *, in_properties: bool = False) -> Any:
    """Drop ``title`` keywords; keys of a ``properties`` map are field names and stay."""
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    if in_properties:
        return {k: _strip_titles(v) for k, v in node.items()}
    return {
        k: _strip_titles(v, in_properties=k in ("properties", "$defs"))
        for k, v in node.items()
        if k != "title"
    }


def docstring_summary(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line: what the model reads about the tool."""
    if not doc:
        return ""
    text = inspect.cleandoc(doc)
    first = re.split(r"\n\s*\n", text, maxsplit=1)[0]
    return " ".join(line.strip() for line in first.splitlines() if line.strip())


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params):\s*$")
_PARAM_LINE = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def docstring_params(doc: str | None) -> dict[str, str]:
    """Per-parameter descriptions from a Google-style ``Args:`` section or ``:param x:`` lines.

    The model chooses argument values from these, so they go into each property's
    ``description``. Anything the parser does not recognise is ignored, never an error.
    """
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, str] = {}
    current: str | None = None
    in_section = False
    section_indent = 0
    for raw in lines:
        stripped = raw.strip()
        sphinx = _SPHINX.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            found[current] = sphinx.group(2).strip()
            in_section = False
            continue
        if _SECTION.match(stripped):
            in_section, current, section_indent = True, None, -1
            continue
        if not in_section:
            if current is not None and stripped and raw.startswith((" ", "\t")):
                found[current] = f"{found[current]} {stripped}".strip()
            else:
                current = None
            continue
        if not stripped:
            current = None
            continue
        indent = len(raw) - len(raw.lstrip())
        if section_indent < 0:
            section_indent = indent
        if indent < section_indent or (indent == 0 and section_indent == 0):
            in_section, current = False, None
            continue
        match = _PARAM_LINE.match(stripped) if indent == section_indent else None
        if match:
            current = match.group(1).lstrip("*")
            found[current] = match.group(3).strip()
        elif current is not None:
            found[current] = f"{found[current]} {stripped}".strip()
    return {name: text for name, text in found.items() if text}
