"""``Data``: the base of the brain's frozen data (messages and their parts, states, steps, the
exchange, the loop window, the snapshot), written and read by msgspec.

Why msgspec: a brain is mostly messages, and every form the engine writes or reads holds them.
Measured side by side on this project's 10,000-message snapshot: decoding the messages took 7 ms
as msgspec ``Struct``s, 31-34 ms as slotted dataclasses validated by pydantic and 47-87 ms as
pydantic models; encoding them 1.3 ms against 18-23 ms (pydantic); building one 0.1 us against
1-2 us. Constructing one checks nothing (the brain checks what it is fed); decoding checks every
type, constraint and unknown key.

``gc=False``: the cyclic garbage collector does not track a ``Data``. A brain of 10,000
messages is some 40,000 of them, and every collection walked them all: the first save +
restore of such a brain in a fresh process took 26-30 ms CPU untracked against 42-54 tracked,
alternated run by run (``bench_snapshot``'s child, 2026-12-04). What it asks: a ``Data`` is
never part of a reference cycle, or the cycle is never freed. Its fields hold other ``Data``,
strings, numbers and the JSON data of calls and parts, all made before it: a cycle would need
an object inside that data which refers back to the very ``Data`` holding it.

The rest of loopctl is pydantic models (settings, records, events). They embed ``Data`` as it is:
pydantic validates one with ``msgspec.convert`` and writes it as its JSON data. ``Data``
answers the ``model_*`` methods of those models, so every loopctl value is read and written
the same way, and a value that does not fit is a pydantic ``ValidationError`` wherever it comes
from. ``LoopError`` (a pydantic model a ``Failed`` outcome holds) crosses the other way by the
hooks below.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from functools import cache, partial
from typing import Any, Final, Self

import msgspec
import pydantic_core
from pydantic import BaseModel, GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema


def _enc_hook(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise NotImplementedError(f"cannot write a {type(value).__name__}")


def _dec_hook(tp: Any, value: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        try:
            return tp.model_validate(value)
        except ValidationError as e:  # one line, as msgspec's own (it adds where: `$.error`)
            first = e.errors(include_url=False)[0]
            where = ".".join(map(str, first["loc"]))
            raise ValueError(f"{first['msg']} (in {where})" if where else first["msg"]) from None
    raise NotImplementedError(f"cannot read a {tp!r}")


#: The one JSON writer of the brain's data: compact, keys in field order.
ENCODE: Final[Callable[[Any], bytes]] = msgspec.json.Encoder(enc_hook=_enc_hook).encode
_DECODE: Final = msgspec.json.Decoder().decode


def _json_data(value: Data) -> Any:
    """``value`` as JSON data (dicts, lists, strings, numbers): its JSON read back, in a quarter
    of the time pydantic's ``to_jsonable_python`` took through its fallback (a message with a
    call: 0.9 against 3.9 us, timeit)."""
    return _DECODE(ENCODE(value))


def _unknown(value: Any) -> Any:
    raise pydantic_core.PydanticSerializationError(
        f"Unable to serialize unknown type: {type(value)}"
    )


def _data_or(fallback: Callable[[Any], Any], value: Any) -> Any:
    """What pydantic does not know: the brain's data as JSON data, the rest by ``fallback``."""
    return _json_data(value) if isinstance(value, Data) else fallback(value)


def to_jsonable(value: Any) -> Any:
    """Any value as JSON builtins, the brain's data among it (pydantic's ``to_jsonable_python``,
    which does not know msgspec's types, falling back to msgspec)."""
    return pydantic_core.to_jsonable_python(value, fallback=partial(_data_or, _unknown))


#: msgspec's writer of any value: what it does not know, pydantic makes JSON data first.
_ANY_JSON: Final[Callable[[Any], bytes]] = msgspec.json.Encoder(enc_hook=to_jsonable).encode


def to_json(value: Any, fallback: Callable[[Any], Any] | None = None) -> bytes:
    """Any value as compact JSON, the brain's data among it. Without ``fallback``, msgspec writes
    it (the brain's data, dataclasses and builtins; anything else as pydantic makes it JSON
    data): a traced run writes every step and feed so, in half the time pydantic took through
    its fallback (cProfile of 30 traced runs of ``bench_fuzz_driver``: 11 against 25 ms for
    13,080 writes). With ``fallback``, pydantic writes it and ``fallback`` what neither knows."""
    if fallback is None:
        return _ANY_JSON(value)
    return pydantic_core.to_json(value, fallback=partial(_data_or, fallback))


#: Why a text nested deeper than the interpreter's recursion limit is refused: msgspec raises
#: ``RecursionError`` there, and every reader of loopctl answers bad input with a ``ValueError``.
TOO_DEEP: Final = "nested too deep to read"


@cache
def json_reader(tp: Hashable) -> Callable[[str | bytes], Any]:
    """The JSON reader of ``tp``, any type made of the brain's data (a union of tagged ``Data``
    among them): every field checked (``msgspec.DecodeError``, a ``ValueError``), a ``Data``'s
    own ``checked`` left to the caller. One per type."""
    read = msgspec.json.Decoder(tp, dec_hook=_dec_hook).decode

    def reader(text: str | bytes) -> Any:
        try:
            return read(text)
        except RecursionError:
            raise msgspec.ValidationError(TOO_DEEP) from None

    return reader


def convert(value: Any, cls: type[Any]) -> Any:
    """``value`` (builtins, or already ``cls``) as a ``cls``, every field checked."""
    if type(value) is cls:
        return value
    return msgspec.convert(value, cls, dec_hook=_dec_hook)


def _schema_hook(tp: Any) -> dict[str, Any]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_json_schema()
    raise NotImplementedError(f"no JSON schema for {tp!r}")


def _inline(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(defs[schema["$ref"]], defs)
        return {k: _inline(v, defs) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_inline(v, defs) for v in schema]
    return schema


def invalid(cls: type[Any], data: Any, error: object) -> ValidationError:
    """msgspec's complaint about ``data`` as the pydantic ``ValidationError`` loopctl raises."""
    details: list[InitErrorDetails] = [
        {"type": PydanticCustomError("invalid", str(error)), "loc": (), "input": data}
    ]
    return ValidationError.from_exception_data(cls.__name__, details)


class Data(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, gc=False):
    """Frozen data (see the module docstring)."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.read,
            serialization=core_schema.plain_serializer_function_ser_schema(_json_data),
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: Any, handler: GetJsonSchemaHandler) -> Any:
        return cls.model_json_schema()

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        """msgspec's JSON schema of ``cls``, its definitions written in place (none recurses)."""
        (root,), defs = msgspec.json.schema_components(
            (cls,), schema_hook=_schema_hook, ref_template="{name}"
        )
        out: dict[str, Any] = _inline(root, defs)
        return out

    @classmethod
    def read(cls, data: Any) -> Self:
        """``data`` (builtins, or a ``cls``) as a ``cls``, checked; ``ValueError`` if it is not
        one (how pydantic validates one)."""
        value: Self = convert(data, cls)
        return value.checked()

    @classmethod
    def model_validate(cls, data: Any) -> Self:
        """``data`` as a ``cls`` (``read``); a ``ValidationError`` if it is not one."""
        try:
            return cls.read(data)
        except ValueError as e:
            raise invalid(cls, data, e) from None

    @classmethod
    def read_json(cls, text: str | bytes) -> Self:
        """A ``cls`` read from JSON, checked; ``ValueError`` (msgspec's ``DecodeError`` among
        them) if the text does not hold one."""
        value: Self = json_reader(cls)(text)
        return value.checked()

    @classmethod
    def model_validate_json(cls, text: str | bytes) -> Self:
        """A ``cls`` read from JSON; a ``ValidationError`` if the text does not hold one."""
        try:
            return cls.read_json(text)
        except ValueError as e:
            raise invalid(cls, text, e) from None

    def checked(self) -> Self:
        """This value, checked beyond its types where a subclass needs it (``ValueError``)."""
        return self

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The fields as JSON builtins, lists for tuples (``mode`` is accepted for pydantic's
        signature)."""
        out: dict[str, Any] = _json_data(self)
        return out

    def model_dump_json(self, *, indent: int | None = None) -> str:
        """The value as compact JSON, or indented by ``indent`` spaces."""
        text = ENCODE(self)
        return (text if indent is None else msgspec.json.format(text, indent=indent)).decode()

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with ``update``'s fields replaced (not checked, as construction is not)."""
        return msgspec.structs.replace(self, **(update or {}))
