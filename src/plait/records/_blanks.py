"""Bulk builders of records and tool calls: filled in a blank, then given their class.

A frozen dataclass's constructor sets each field through ``object.__setattr__`` (a
call per field, after its keyword handling), and its slot descriptors' setters are a
call per field too. A blank is a plain class with the same slots as a frozen one and
no frozen ``__setattr__``: a decoder fills every slot with plain stores, the cheapest
Python has, then assigns ``__class__``. The layouts are the same, so the object *is*
an instance of the frozen class from then on, frozen, equal to what its constructor
builds from the same fields. A read of 10k records builds them at about 40% of what
the setters cost.

A blank of a record kind derives from :class:`~plait.records.Record` itself (the
class assignment needs the same base and the same added slots) and takes ``object``'s
``__setattr__`` and ``__delattr__`` (with either left as ``Record``'s frozen one,
every store would go through it). Each builder is checked at import against the
constructor; a Python that refuses the class assignment gets the constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from plait.records._model import (
    AssistantRecord,
    JSONValue,
    Record,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)

__all__ = [
    "BLANKS_WORK",
    "AssistantBlank",
    "CallBlank",
    "SystemBlank",
    "ToolBlank",
    "UserBlank",
    "assistant_record",
    "system_record",
    "tool_call",
    "tool_record",
    "user_record",
]


class CallBlank:
    """:class:`ToolCall`'s slots, plainly settable (see the module's docstring)."""

    __slots__ = ToolCall.__slots__
    id: str
    name: str
    arguments: Mapping[str, JSONValue]


# Each blank is made by calling its class with no arguments: ``object``'s ``__init__``
# (Record's would want the fields) costs less than ``object.__new__(cls)`` called by name.
class SystemBlank(Record):
    """:class:`SystemRecord`'s slots, plainly settable."""

    __slots__ = SystemRecord.__slots__
    __init__ = object.__init__
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


class UserBlank(Record):
    """:class:`UserRecord`'s slots, plainly settable."""

    __slots__ = UserRecord.__slots__
    __init__ = object.__init__
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


class AssistantBlank(Record):
    """:class:`AssistantRecord`'s slots, plainly settable."""

    __slots__ = AssistantRecord.__slots__
    __init__ = object.__init__
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


class ToolBlank(Record):
    """:class:`ToolRecord`'s slots, plainly settable."""

    __slots__ = ToolRecord.__slots__
    __init__ = object.__init__
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__


def _blank_call(call_id: str, name: str, arguments: Mapping[str, JSONValue]) -> ToolCall:
    """``ToolCall(call_id, name, arguments)``, built in a blank."""
    c: Any = CallBlank()
    c.id = call_id
    c.name = name
    c.arguments = arguments
    c.__class__ = ToolCall
    return c  # type: ignore[no-any-return]


def _blank_system(
    seq: int, rid: str, created: int, meta: Mapping[str, JSONValue], tokens: int | None, text: str
) -> Record:
    r: Any = SystemBlank()
    r.seq = seq
    r.id = rid
    r.created_at_us = created
    r.meta = meta
    r.tokens = tokens
    r.content = text
    r.__class__ = SystemRecord
    return r  # type: ignore[no-any-return]


def _blank_user(
    seq: int,
    rid: str,
    created: int,
    meta: Mapping[str, JSONValue],
    tokens: int | None,
    text: str,
    images: int = 0,
) -> Record:
    r: Any = UserBlank()
    r.seq = seq
    r.id = rid
    r.created_at_us = created
    r.meta = meta
    r.tokens = tokens
    r.content = text
    r.images = images
    r.added = None
    r.__class__ = UserRecord
    return r  # type: ignore[no-any-return]


def _blank_assistant(
    seq: int,
    rid: str,
    created: int,
    meta: Mapping[str, JSONValue],
    tokens: int | None,
    text: str,
    calls: tuple[ToolCall, ...] = (),
    images: int = 0,
) -> Record:
    r: Any = AssistantBlank()
    r.seq = seq
    r.id = rid
    r.created_at_us = created
    r.meta = meta
    r.tokens = tokens
    r.content = text
    r.tool_calls = calls
    r.images = images
    r.__class__ = AssistantRecord
    return r  # type: ignore[no-any-return]


def _blank_tool(
    seq: int,
    rid: str,
    created: int,
    meta: Mapping[str, JSONValue],
    tokens: int | None,
    text: str,
    call_id: str,
    name: str | None,
    ok: bool,
    images: int,
) -> Record:
    r: Any = ToolBlank()
    r.seq = seq
    r.id = rid
    r.created_at_us = created
    r.meta = meta
    r.tokens = tokens
    r.content = text
    r.tool_call_id = call_id
    r.tool_name = name
    r.ok = ok
    r.images = images
    r.__class__ = ToolRecord
    return r  # type: ignore[no-any-return]


def _made_system(
    seq: int, rid: str, created: int, meta: Mapping[str, JSONValue], tokens: int | None, text: str
) -> Record:
    return SystemRecord(
        seq=seq, id=rid, created_at_us=created, meta=meta, tokens=tokens, content=text
    )


def _made_user(
    seq: int,
    rid: str,
    created: int,
    meta: Mapping[str, JSONValue],
    tokens: int | None,
    text: str,
    images: int = 0,
) -> Record:
    return UserRecord(
        seq=seq,
        id=rid,
        created_at_us=created,
        meta=meta,
        tokens=tokens,
        content=text,
        images=images,
    )


def _made_assistant(
    seq: int,
    rid: str,
    created: int,
    meta: Mapping[str, JSONValue],
    tokens: int | None,
    text: str,
    calls: tuple[ToolCall, ...] = (),
    images: int = 0,
) -> Record:
    return AssistantRecord(
        seq=seq,
        id=rid,
        created_at_us=created,
        meta=meta,
        tokens=tokens,
        content=text,
        tool_calls=calls,
        images=images,
    )


def _made_tool(
    seq: int,
    rid: str,
    created: int,
    meta: Mapping[str, JSONValue],
    tokens: int | None,
    text: str,
    call_id: str,
    name: str | None,
    ok: bool,
    images: int,
) -> Record:
    return ToolRecord(
        seq=seq,
        id=rid,
        created_at_us=created,
        meta=meta,
        tokens=tokens,
        content=text,
        tool_call_id=call_id,
        tool_name=name,
        ok=ok,
        images=images,
    )


def _blanks_work() -> bool:
    """Whether every blank builds what its constructor does (the same type, equal)."""
    args = (7, "r", 1, {"k": 1}, 3, "t")
    call = _blank_call("c", "f", {"a": 1})
    pairs: list[tuple[object, object]] = [
        (call, ToolCall("c", "f", {"a": 1})),
        (_blank_system(*args), _made_system(*args)),
        (_blank_user(*args, 2), _made_user(*args, 2)),
        (_blank_assistant(*args, (call,), 1), _made_assistant(*args, (call,), 1)),
        (_blank_tool(*args, "c", "f", False, 1), _made_tool(*args, "c", "f", False, 1)),
    ]
    return all(type(a) is type(b) and a == b for a, b in pairs)


try:
    _WORKS = _blanks_work()
except TypeError:  # pragma: no cover - a Python that refuses the class assignment
    _WORKS = False

BLANKS_WORK: Final = _WORKS
"""Whether a blank given its frozen class is what the constructor builds (checked at import):
a bulk decoder that fills blanks itself, without these builders, does so only then."""

tool_call: Final[Callable[[str, str, Mapping[str, JSONValue]], ToolCall]] = (
    _blank_call if _WORKS else ToolCall
)
"""``tool_call(id, name, arguments)``: the :class:`ToolCall` of those fields."""
system_record: Final[Callable[..., Record]] = _blank_system if _WORKS else _made_system
"""``system_record(seq, id, created_at_us, meta, tokens, content)``: its :class:`SystemRecord`."""
user_record: Final[Callable[..., Record]] = _blank_user if _WORKS else _made_user
"""``user_record(seq, id, created_at_us, meta, tokens, content, images=0)``."""
assistant_record: Final[Callable[..., Record]] = _blank_assistant if _WORKS else _made_assistant
"""``assistant_record(seq, id, created_at_us, meta, tokens, content, tool_calls=(), images=0)``."""
tool_record: Final[Callable[..., Record]] = _blank_tool if _WORKS else _made_tool
"""``tool_record(seq, id, created_at_us, meta, tokens, content, tool_call_id, tool_name, ok,
images)``: its :class:`ToolRecord`."""
