"""The machinery of the vocabulary: a typed body per event type, its JSON form, its versions.

Each standard event type is one frozen class (a *body*) whose fields are the payload's keys,
plus the usage columns the event fills (``model``, ``input_tokens``, ..., ``duration_ms``).
A body is checked when it is built, so what a recorder, a transport, an importer or a user
emits fits its type before anything is hashed or written; reading an event back builds the
body without checking again (:meth:`Body.of`).

Three kinds of fields:

- plain fields are always in the payload (``None`` included);
- :func:`optional` fields are left out of the payload while they hold their default, so
  payloads written before the field existed read back unchanged;
- :func:`column` fields live in the event's typed columns only, never in the payload.

Payload keys that no field names are kept in :attr:`Body.extra` when read (nothing is
dropped); a body built in code may carry extra keys only if its type is *open* (a note, an
approval request: the program decides what it says).

**Versions.** A type starts at version 1, whose payloads carry no version key. A type whose
shape changes gets ``VERSION = n`` and writes ``"$v": n``; an *upcaster* registered with
:func:`upcaster` lifts a payload of version ``k`` to ``k + 1``. Payloads are lifted when read
(:func:`lift`), never rewritten, so every hash in every old log stays valid. A payload of a
version this code does not know is refused with :class:`~agentlog.errors.EventVersionError`.
This is eventsourcing's upcasting (``class_version`` in the stored state) applied to payloads.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, Self, TypeVar, Union, get_args, get_origin, get_type_hints

from ..errors import _MISSING, EventSchemaError, EventVersionError
from .event import BlobRef, Event

__all__ = ["VERSION_KEY", "Body", "Keys", "Text", "Value", "body_class", "body_of", "check_payload", "column", "event_type", "json_path",
           "lift", "optional", "registry", "upcaster"]

#: The payload key of a body's version, present when the version is above 1.
VERSION_KEY: Final = "$v"

Text = str | BlobRef
"""A string that the store may have moved to a blob (long text is stored once, by hash)."""

B = TypeVar("B", bound="Body")
Checker = Callable[[Any, str, str], Any]
"""``check(value, event type, field path) -> value``: raises :class:`EventSchemaError`."""

_WHERE: Final = "agentlog_where"
_PAYLOAD, _OPTIONAL, _COLUMN = "payload", "optional", "column"

_REGISTRY: dict[str, type[Body]] = {}
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def optional(default: Any = None) -> Any:
    """A payload field left out of the payload while it holds ``default``.

    >>> @event_type("doc.example")
    ... @dataclass(frozen=True, slots=True, kw_only=True)
    ... class Example(Body):
    ...     text: str
    ...     note: str | None = optional()
    >>> Example(text="hi").to_payload()
    {'text': 'hi'}
    """
    return field(default=default, metadata={_WHERE: _OPTIONAL})


def column(default: Any = None) -> Any:
    """A field kept in the event's typed usage columns, not in the payload."""
    return field(default=default, metadata={_WHERE: _COLUMN})


class Keys:
    """The field names of a body, as attributes: ``LLMResponse.K.usage == "usage"``.

    Code that must read a payload without building a body (the fold's hot path, SQL) spells
    a key this way, so a misspelled key fails loudly instead of reading ``None``.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.__dict__.update({name: name for name in names})

    def __getattr__(self, name: str) -> str:
        raise AttributeError(f"no field {name!r}; the fields are {', '.join(sorted(self.__dict__))}")


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    where: str
    check: Checker
    default: Any
    required: bool
    revive: Callable[..., Any] | None
    """For a nested value (``Usage``): builds it from its JSON form when read unchecked."""
    passes: frozenset[type] = frozenset()
    """The types whose values :attr:`check` returns as they are with no further look (a
    field's plain types but ``float``, whose value must be finite): a body's check of such a
    value is a set lookup, not a call."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Body:
    """The typed body of one event type; subclasses are registered with :func:`event_type`.

    >>> from agentlog.events import ToolCall
    >>> call = ToolCall(key="k", name="lookup", args={"id": 7}, idempotency_key="run-1:3")
    >>> call.to_payload()["args"]
    {'id': 7}
    >>> ToolCall.from_payload(call.to_payload()) == call
    True
    >>> ToolCall(key="k", name=7, args={}, idempotency_key="run-1:3")
    Traceback (most recent call last):
    ...
    agentlog.errors.EventSchemaError: tool.call name: 7 (int); expected str
    """

    TYPE: ClassVar[str] = ""
    """The event type, e.g. ``llm.response``."""
    VERSION: ClassVar[int] = 1
    """The payload version this code writes."""
    OPEN: ClassVar[bool] = False
    """True if a body built in code may carry payload keys that no field names."""
    K: ClassVar[Keys]
    """The field names, as attributes."""
    _fields_: ClassVar[tuple[_Field, ...]] = ()
    _payload_fields_: ClassVar[tuple[tuple[str, bool, Any], ...]] = ()
    """``(name, optional, default)`` of the payload fields, in order (what :meth:`to_payload`
    reads for every event written)."""
    _names_: ClassVar[frozenset[str]] = frozenset()

    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """Payload keys that no field names (kept as read; allowed when built only for open types)."""

    def __post_init__(self) -> None:
        for f in self._fields_:
            value = getattr(self, f.name)
            if type(value) in f.passes:
                continue
            checked = f.check(value, self.TYPE, f.name)
            if checked is not value:
                object.__setattr__(self, f.name, checked)
        if self.extra:
            if not self.OPEN:
                first = min(str(k) for k in self.extra)
                raise EventSchemaError(self.TYPE, first, self.extra[first],
                                       f"one of the fields {', '.join(sorted(self._names_))}")
            clash = self._names_.intersection(self.extra)
            if clash:
                name = min(clash)
                raise EventSchemaError(self.TYPE, f"extra.{name}", self.extra[name],
                                       "a key that is not a field (pass it as the field)")

    # --- to and from JSON --------------------------------------------------------------------

    def to_payload(self) -> dict[str, Any]:
        """The payload of the event: a JSON-like dict (with :class:`BlobRef` objects)."""
        out: dict[str, Any] = dict(self.extra) if self.extra else {}
        for name, optional_, default in self._payload_fields_:
            value = getattr(self, name)
            if optional_ and (value is default or value == default):
                continue
            out[name] = value.to_json() if isinstance(value, Value) else value
        if self.VERSION > 1:
            out[VERSION_KEY] = self.VERSION
        return out

    def columns(self) -> dict[str, Any]:
        """The typed usage columns this body fills (``model``, tokens, ``cost_usd``, ...)."""
        return {f.name: getattr(self, f.name) for f in self._fields_ if f.where is _COLUMN}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *,
                     columns: Mapping[str, Any] | None = None, check: bool = True) -> Self:
        """Build the body of a payload (lifted to this version first) and the event's columns.

        Args:
            payload: the event's payload.
            columns: the event's usage columns (for :func:`column` fields).
            check: check every field (as when emitting or importing); ``False`` trusts a
                payload read from a verified log and only builds the object.

        Raises:
            EventSchemaError: a field is missing or has the wrong type (``check=True``).
            EventVersionError: the payload is newer than this code knows.
        """
        data = lift(cls.TYPE, payload)
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        names = cls._names_
        for key, value in data.items():
            if key in names:
                values[key] = value
            elif key != VERSION_KEY:
                extra[key] = value
        for f in cls._fields_:
            if f.where is _COLUMN:
                if columns is not None and f.name in columns:
                    values[f.name] = columns[f.name]
            elif f.name not in values and f.required:
                if check:
                    raise EventSchemaError(cls.TYPE, f.name, _MISSING, _describe_field(cls, f.name))
                values[f.name] = None
        if check:
            return cls(extra=extra, **values)
        return cls._unchecked(values, extra)

    @classmethod
    def _unchecked(cls, values: Mapping[str, Any], extra: Mapping[str, Any]) -> Self:
        obj = object.__new__(cls)
        setter = object.__setattr__
        for f in cls._fields_:
            value = values.get(f.name, f.default)
            if f.revive is not None and isinstance(value, Mapping):
                value = f.revive(value)
            setter(obj, f.name, value)
        setter(obj, "extra", dict(extra))
        return obj

    @classmethod
    def of(cls, event: Event) -> Self:
        """The body of an event read from a log (not checked again; see :meth:`from_payload`).

        Raises:
            EventSchemaError: ``event`` is not of this type.
        """
        if event.type != cls.TYPE:
            raise EventSchemaError(cls.TYPE, "type", event.type, f"an event of type {cls.TYPE}")
        return cls.from_payload(event.payload, columns=_event_columns(event), check=False)


class Value:
    """A nested value of a body (e.g. :class:`~agentlog.events.Usage`): JSON in, JSON out.

    Subclasses are frozen dataclasses that define ``to_json()``, ``from_json(data, where=)``
    and :attr:`FIELDS`, the keys of their JSON form.
    """

    __slots__ = ()
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict[str, Any]:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    @classmethod
    def from_json(cls, data: Any, *, where: str = "") -> Any:  # pragma: no cover
        raise NotImplementedError


def _event_columns(event: Event) -> dict[str, Any]:
    return {"model": event.model, "input_tokens": event.input_tokens,
            "output_tokens": event.output_tokens, "cached_tokens": event.cached_tokens,
            "cost_usd": event.cost_usd, "duration_ms": event.duration_ms}


# --- registering types -----------------------------------------------------------------------


def event_type(name: str, *, version: int = 1, open: bool = False) -> Callable[[type[B]], type[B]]:
    """Register a frozen dataclass (a :class:`Body` subclass) as the body of event type ``name``.

    Args:
        name: the dotted event type.
        version: the payload version written (see :func:`upcaster`).
        open: a body built in code may carry extra payload keys.
    """
    def register(cls: type[B]) -> type[B]:
        if not (isinstance(cls, type) and issubclass(cls, Body) and dataclasses.is_dataclass(cls)):
            raise TypeError(f"{cls!r} must be a dataclass subclassing Body")
        if name in _REGISTRY and _REGISTRY[name].__qualname__ != cls.__qualname__:
            raise ValueError(f"event type {name!r} is already {_REGISTRY[name].__qualname__}")
        cls.TYPE, cls.VERSION, cls.OPEN = name, version, open
        setattr(cls, "_fields_", _COMPILED_ON_USE)  # noqa: B010 - a descriptor where a tuple is typed
        setattr(cls, "_payload_fields_", _PAYLOAD_FIELDS_ON_USE)  # noqa: B010 - the same
        own = [f for f in dataclasses.fields(cls) if f.name != "extra"]
        cls._names_ = frozenset(f.name for f in own if f.metadata.get(_WHERE, _PAYLOAD) != _COLUMN)
        cls.K = Keys([f.name for f in own])
        _REGISTRY[name] = cls
        return cls
    return register


class _CompiledOnUse:
    """``cls._fields_`` of a registered body until it is first read: then its fields' checkers
    are built from the annotations and stored on the class in its place. Resolving the
    annotations and building the checkers is a quarter of importing the vocabulary, and a
    process uses a few of its 27 types (a resume: the run, span and approval events)."""

    def __get__(self, obj: Any, owner: type[Body]) -> tuple[_Field, ...]:
        fields = _compile(owner)
        owner._fields_ = fields
        owner._payload_fields_ = tuple((f.name, f.where is _OPTIONAL, f.default) for f in fields
                                       if f.where is not _COLUMN)
        return fields


class _PayloadFieldsOnUse:
    """``cls._payload_fields_`` (name, optional, default of each payload field, read by
    ``to_payload``) until it is first read: made with ``_fields_``, which it compiles."""

    def __get__(self, obj: Any, owner: type[Body]) -> tuple[tuple[str, bool, Any], ...]:
        owner._fields_  # noqa: B018 - compiles the fields and sets both on the class
        return owner.__dict__["_payload_fields_"]  # type: ignore[no-any-return]


_COMPILED_ON_USE: Final = _CompiledOnUse()
_PAYLOAD_FIELDS_ON_USE: Final = _PayloadFieldsOnUse()


def upcaster(type: str, from_version: int) -> Callable[[Callable[[dict[str, Any]], dict[str, Any]]],
                                                       Callable[[dict[str, Any]], dict[str, Any]]]:
    """Register ``fn(payload) -> payload`` lifting ``type`` from ``from_version`` to the next.

    The function gets a copy it may change, and returns the payload of the next version.
    """
    def register(fn: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        _UPCASTERS[(type, from_version)] = fn
        return fn
    return register


def registry() -> Mapping[str, type[Body]]:
    """Every registered event type and its body class."""
    return types.MappingProxyType(_REGISTRY)


def body_class(type: str) -> type[Body] | None:
    """The body class of an event type, or ``None`` for a type outside the vocabulary."""
    return _REGISTRY.get(type)


def body_of(event: Event) -> Body | None:
    """The typed body of an event read from a log, or ``None`` for a type outside the vocabulary.

    >>> from agentlog.events import Event
    >>> body_of(Event(seq=0, type="run.started", payload={"inputs": {"q": 1}})).inputs
    {'q': 1}
    """
    cls = _REGISTRY.get(event.type)
    return None if cls is None else cls.of(event)


def check_payload(type: str, payload: Mapping[str, Any], columns: Mapping[str, Any] | None = None,
                  *, strict: bool = True) -> Body | None:
    """Check a payload of a standard type as it is emitted or imported (``None`` for other types).

    Args:
        strict: refuse keys that no field names (for a type that is not open), as for a
            program's own events, where such a key is a typo. ``False`` keeps them in
            :attr:`Body.extra`, as for events imported from another system, whose extra keys
            are data; every field is checked either way.

    Raises:
        EventSchemaError: it does not fit its type.
        EventVersionError: it is newer than this code knows.
    """
    cls = _REGISTRY.get(type)
    if cls is None:
        return None
    if strict:
        return cls.from_payload(payload, columns=columns, check=True)
    known = {k: v for k, v in payload.items() if k in cls._names_ or k == VERSION_KEY}
    if len(known) == len(payload):  # no extra keys: the checked body is the body
        return cls.from_payload(payload, columns=columns, check=True)
    cls.from_payload(known, columns=columns, check=True)
    return cls.from_payload(payload, columns=columns, check=False)


def lift(type: str, payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """``payload`` lifted to the version of ``type`` this code writes (the same object if it is).

    >>> lift("llm.response", {"key": "k", "usage": {"input_tokens": 1, "cost_usd": None}})["$v"]
    3
    >>> lift("note", {"text": "hi"})
    {'text': 'hi'}

    Raises:
        EventVersionError: the payload's version is newer than this code knows.
    """
    cls = _REGISTRY.get(type)
    if cls is None:
        return payload
    version = payload.get(VERSION_KEY, 1)
    if version == cls.VERSION:
        return payload
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version:
        raise EventSchemaError(type, VERSION_KEY, version, "a version number >= 1")
    if version > cls.VERSION:
        raise EventVersionError(type, VERSION_KEY, version, f"version {cls.VERSION} or older")
    data = dict(payload)
    while version < cls.VERSION:
        data = _UPCASTERS[(type, version)](data)
        version += 1
        data[VERSION_KEY] = version
    return data


def json_path(cls: type[Body], *names: str) -> str:
    """The JSON path of a payload field, for SQL: ``json_path(LLMResponse, "usage", "cached_tokens")``.

    The first name must be a payload field of ``cls``; a nested name must be a field of the
    nested value's class.

    >>> from agentlog.events import LLMResponse
    >>> json_path(LLMResponse, "usage", "cached_tokens")
    '$.usage.cached_tokens'
    """
    if not names or names[0] not in cls._names_:
        raise AttributeError(f"{cls.TYPE} has no payload field {names[:1]!r}")
    if len(names) > 1:
        hints = get_type_hints(cls)
        nested = _value_class(hints[names[0]])
        if nested is None or names[1] not in nested.FIELDS:
            raise AttributeError(f"{cls.TYPE}.{names[0]} has no field {names[1]!r}")
    return "$." + ".".join(names)


def _describe_field(cls: type[Body], name: str) -> str:
    hint = get_type_hints(cls)[name]
    return _describe(hint)


# --- checkers built from the annotations ----------------------------------------------------


def _compile(cls: type[Body]) -> tuple[_Field, ...]:
    hints = get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        where = f.metadata.get(_WHERE, _PAYLOAD)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = f.default if f.default is not dataclasses.MISSING else None
        nested = _value_class(hints[f.name])
        simple = _simple_types(hints[f.name])
        passes = frozenset() if simple is None else simple - {float}
        out.append(_Field(f.name, where, _checker(hints[f.name]), default, required=not has_default,
                          revive=None if nested is None else nested.from_json, passes=passes))
    return tuple(out)


def _describe(hint: Any) -> str:
    if hint is Any:
        return "a JSON value"
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(hint))
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if hint is type(None):
        return "null"
    if hint is BlobRef:
        return "a blob reference"
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        return "a list"
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return "an object"
    return getattr(hint, "__name__", str(hint))


def _value_class(hint: Any) -> type[Any] | None:
    for candidate in (hint, *get_args(hint)):
        if isinstance(candidate, type) and issubclass(candidate, Value):
            return candidate
    return None


def _checker(hint: Any) -> Checker:
    """A function that checks a value against an annotation (and revives nested values)."""
    expected = _describe(hint)
    nested = _value_class(hint)
    simple = _simple_types(hint)
    literals = _literals(hint)
    containers = _containers(hint)

    def check(value: Any, type_: str, path: str) -> Any:
        t = type(value)
        if simple is None or t in simple:
            if t is float and not math.isfinite(value):
                raise EventSchemaError(type_, path, value, "a finite number")
            return value
        if literals and value in literals and t in (str, int, bool):
            return value
        if nested is not None:
            if isinstance(value, nested):
                return value
            if t is dict or isinstance(value, Mapping):
                return nested.from_json(value, where=f"{type_} {path}")
        if "list" in containers and t in (list, tuple):
            return value
        if "map" in containers and (t is dict or isinstance(value, Mapping)):
            for key in value:
                if type(key) is not str:
                    raise EventSchemaError(type_, f"{path}.{key!r}", key, "string keys")
            return value
        raise EventSchemaError(type_, path, value, expected)

    return check


def _flatten(hint: Any) -> Iterator[Any]:
    if get_origin(hint) in (Union, types.UnionType):
        for arg in get_args(hint):
            yield from _flatten(arg)
    else:
        yield hint


def _simple_types(hint: Any) -> frozenset[type] | None:
    """The plain types a value may have (``None`` means any value: the hint is ``Any``)."""
    out: set[type] = set()
    for h in _flatten(hint):
        if h is Any:
            return None
        if h is type(None):
            out.add(type(None))
        elif h in (str, int, bool):
            out.add(h)
        elif h is float:
            out.update((float, int))
        elif h is BlobRef:
            out.add(BlobRef)
    return frozenset(out)  # a bool is not an int here, nor an int a bool


def _literals(hint: Any) -> frozenset[Any]:
    return frozenset(a for h in _flatten(hint) if get_origin(h) is Literal for a in get_args(h))


def _containers(hint: Any) -> frozenset[str]:
    out = set()
    for h in _flatten(hint):
        origin = get_origin(h) or h
        if origin in (list, tuple, Sequence, typing.Sequence):
            out.add("list")
        elif origin in (dict, Mapping, typing.Mapping):
            out.add("map")
    return frozenset(out)
