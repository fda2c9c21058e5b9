"""The one codec: a record to the JSON a store keeps, and back.

:func:`encode_payload` writes a record's kind-specific payload; :func:`decode_record`
rebuilds a record from its stored columns and refuses a row that does not fit its
kind (:class:`~plait.errors.StoreCorruptError`); :func:`decode_rows` does that for
every row of a read, with the cyclic garbage collector paused (a full load makes
tens of thousands of objects that all live on, so its collections find nothing).
Both directions have a fast path for the text-only message, which is most of
every transcript: it is built without the dataclass constructor's keyword
handling, by setting its fields directly (the values are what the store wrote,
checked by kind and by shape before they get there).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from plait._checks import MAX_JSON_DEPTH, check_json
from plait.errors import StoreCorruptError
from plait.records._blanks import (
    assistant_record,
    system_record,
    tool_call,
    tool_record,
    user_record,
)
from plait.records._messages import Message, build_message
from plait.records._model import (
    AssistantRecord,
    EventRecord,
    JSONValue,
    OpaqueRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)

__all__ = [
    "MESSAGE_KINDS",
    "ROLES",
    "decode_one",
    "decode_record",
    "encode_payload",
    "view_message",
    "written_fields",
]

_ENCODE_STR = json.encoder.encode_basestring  # the C string encoder, ensure_ascii=False
_PLAIN_KINDS = frozenset({"system", "user", "assistant"})
"""Kinds whose payload may be just ``{"content": ...}`` (the decoder's fast path)."""


def encode_payload(record: Record) -> str:
    """Encode a record's payload as the JSON a store keeps.

    Raises:
        InvalidMessageError: if the payload holds something JSON cannot carry.
    """
    # A text-only message, a tool call and a tool result are most of every transcript:
    # their JSON is built directly, key by key in the order ``payload`` gives them (what
    # the bulk decoder reads fastest), when every field is of the type its slot declares.
    kind = type(record)
    if kind is UserRecord or kind is SystemRecord or kind is AssistantRecord:
        content = record.content  # type: ignore[attr-defined]
        if type(content) is str and not getattr(record, "images", 0):
            if kind is AssistantRecord:
                calls = record.tool_calls  # type: ignore[attr-defined]
                if not calls:
                    return f'{{"content":{_ENCODE_STR(content)}}}'
                encoded = _calls(calls)
                if encoded is not None:
                    return f'{{"content":{_ENCODE_STR(content)},"tool_calls":{encoded}}}'
            elif kind is SystemRecord or record.added is None:  # type: ignore[attr-defined]
                return f'{{"content":{_ENCODE_STR(content)}}}'
    elif kind is ToolRecord:
        assert isinstance(record, ToolRecord)
        content, call_id, name, ok = (
            record.content, record.tool_call_id, record.tool_name, record.ok
        )
        if (
            type(content) is str
            and type(call_id) is str
            and (name is None or type(name) is str)
            and type(ok) is bool
            and not record.images
        ):
            named = "null" if name is None else _ENCODE_STR(name)
            return (
                f'{{"content":{_ENCODE_STR(content)},"tool_call_id":{_ENCODE_STR(call_id)},'
                f'"tool_name":{named},"ok":{"true" if ok else "false"}}}'
            )
    # A tool's output can be long; its size is bounded where it is made, not here.
    return check_json(record.payload, "the record", max_chars=sys.maxsize)


def _calls(calls: tuple[ToolCall, ...]) -> str | None:
    """The JSON of a reply's tool calls, or None when a field is not of its declared type.

    The arguments go through :func:`check_json` (a record built by hand may hold
    anything); the rest is strings.
    """
    parts: list[str] = []
    for call in calls:
        if type(call.id) is not str or type(call.name) is not str:
            return None
        args = call.arguments
        # The nesting limit counts the payload's three levels above the arguments.
        encoded = check_json(
            args if type(args) is dict else dict(args),
            "the record",
            max_depth=MAX_JSON_DEPTH - 3,
            max_chars=sys.maxsize,
        )
        parts.append(
            f'{{"id":{_ENCODE_STR(call.id)},"name":{_ENCODE_STR(call.name)},'
            f'"arguments":{encoded}}}'
        )
    return "[" + ",".join(parts) + "]"


def _checked(record: Record) -> Record:
    """Check a decoded summary's, event's or opaque item's field types.

    A message row's fields are checked as they are read (:func:`_fields`). A wrong one
    is a TypeError or ValueError: the row is corrupt.
    """
    if isinstance(record, SummaryRecord):
        if not isinstance(record.content, str):
            raise TypeError("content is not a string")
        lo, hi = record.folds_from, record.folds_to
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
            raise TypeError("folds are not positions")
        if not 0 <= lo <= hi <= record.seq:
            raise ValueError(f"folds [{lo}, {hi}) do not lie before position {record.seq}")
    elif isinstance(record, EventRecord) and (
        not isinstance(record.name, str) or not isinstance(record.data, Mapping)
    ):
        raise TypeError("an event needs a string name and object data")
    elif isinstance(record, OpaqueRecord) and (
        not isinstance(record.format, str) or not isinstance(record.item, Mapping)
    ):
        raise TypeError("an opaque item needs a string format and an object item")
    return record


_scan_string = json.decoder.scanstring  # type: ignore[attr-defined]  # the C string scanner
_scan_value = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads' scanner
_loads = json.loads
_CONTENT_ONLY = '{"content":"'


def _kind_fields(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The kind-specific constructor arguments of a decoded payload."""
    if kind in MESSAGE_KINDS:
        content, calls, call_id, name, ok, images = _fields(kind, body)
        if kind == "system":
            return {"content": content}
        if kind == "user":
            return {"content": content, "images": images, "added": _added(body)}
        if kind == "assistant":
            return {"content": content, "tool_calls": calls, "images": images}
        return {
            "content": content,
            "tool_call_id": call_id,
            "tool_name": name,
            "ok": ok,
            "images": images,
        }
    if kind == "summary":
        lo, hi = body["folds"]
        return {"content": body["content"], "folds_from": lo, "folds_to": hi}
    if kind == "opaque":
        return {"format": body["format"], "item": body["item"]}
    return {"name": body["name"], "data": body.get("data") or {}}  # event


_CLASSES: dict[str, type[Record]] = {
    "system": SystemRecord,
    "user": UserRecord,
    "assistant": AssistantRecord,
    "tool": ToolRecord,
    "summary": SummaryRecord,
    "opaque": OpaqueRecord,
    "event": EventRecord,
}


_PLAIN: dict[str, Callable[..., Record]] = {
    "system": system_record,
    "user": user_record,
    "assistant": assistant_record,
}
"""Each plain kind's builder: ``build(seq, id, created_at_us, meta, tokens, content)``."""


MESSAGE_KINDS: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
"""Kinds whose view is a :class:`Message` of the record alone (a summary's needs its folds)."""
ROLES: dict[str, str] = {kind: kind for kind in _PLAIN_KINDS}
"""Each plain kind's role, one shared string: a message does not keep a copy per row."""


Fields = tuple[str, tuple[ToolCall, ...], str | None, str | None, bool | None, int]
"""A message row's own fields: content, tool calls, tool call id, tool name, ok, images."""


def _parse(text: str) -> Any:
    """``json.loads(text)`` of a stored JSON text.

    The codec writes one JSON value with nothing around it: the C scanner reads that
    alone, without ``json.loads``'s checks around it (the BOM, the whitespace on both
    sides), which cost about as much as scanning a short payload. Any other text goes
    to ``json.loads``, which reads it or says what is wrong.
    """
    try:
        value, end = _scan_value(text, 0)
    except (StopIteration, ValueError):
        return _loads(text)
    return value if end == len(text) else _loads(text)


def _call(raw: Any) -> ToolCall:
    """The :class:`ToolCall` of one of a payload's ``tool_calls``, each field checked.

    Raises:
        KeyError, TypeError, AttributeError: it is not a tool call.
    """
    call_id, name, arguments = raw["id"], raw["name"], raw.get("arguments") or {}
    if not (isinstance(call_id, str) and isinstance(name, str)):
        raise TypeError("a tool call id or name is not a string")
    if type(arguments) is not dict and not isinstance(arguments, Mapping):
        raise TypeError("tool call arguments are not an object")
    return tool_call(call_id, name, arguments)


def _fields(kind: str, payload: Any) -> Fields:
    """The fields of a message row's payload (a JSON text or its object), each checked.

    Raises:
        KeyError, TypeError, ValueError: the payload does not fit its kind.
    """
    body = _parse(payload) if isinstance(payload, str) else payload
    if type(body) is not dict and not isinstance(body, Mapping):
        raise TypeError("the payload is not a JSON object")
    content = body.get("content", "") if kind == "assistant" else body["content"]
    if not isinstance(content, str):
        raise TypeError("content is not a string")
    if kind == "system":
        return content, (), None, None, None, 0
    images = body.get("images", 0)
    if type(images) is not int or images < 0:
        raise TypeError("images is not a count")
    if kind == "tool":
        call_id, name = body["tool_call_id"], body.get("tool_name")
        if not isinstance(call_id, str):
            raise TypeError("tool_call_id is not a string")
        if name is not None and not isinstance(name, str):
            raise TypeError("tool_name is not a string")
        ok = body.get("ok", True)
        return content, (), call_id, name, ok if ok is True or ok is False else bool(ok), images
    raw = body.get("tool_calls") if kind == "assistant" else None
    calls = tuple([_call(c) for c in raw]) if raw else ()
    return content, calls, None, None, None, images


def written_fields(kind: str, payload: Any) -> Fields | None:
    """The fields of a tool call's or tool result's payload in the shape the codec writes it.

    ``{"content", "tool_call_id", "tool_name", "ok"}`` for a tool result,
    ``{"content", "tool_calls": [{"id", "name", "arguments"}, ...]}`` for a tool call,
    each value of its JSON type: read with the one scanner call and a check per field,
    equal to :func:`_fields` of the same payload. None for any other payload or kind
    (with images, say, or damaged): :func:`_fields` then reads it, or says what is wrong.
    """
    if kind != "tool" and kind != "assistant":
        return None
    try:
        body, end = _scan_value(payload, 0)
    except (StopIteration, TypeError, ValueError, RecursionError):
        return None
    if end != len(payload) or type(body) is not dict:
        return None
    get = body.get
    if kind == "tool":
        content, call_id = get("content"), get("tool_call_id")
        name, ok = get("tool_name"), get("ok")
        if (
            len(body) == 4
            and type(content) is str
            and type(call_id) is str
            and (name is None or type(name) is str)
            and (ok is True or ok is False)
        ):
            return content, (), call_id, name, ok, 0
        return None
    content, raw = get("content"), get("tool_calls")
    if len(body) != 2 or type(content) is not str or type(raw) is not list:
        return None
    calls: list[ToolCall] = []
    for c in raw:
        if type(c) is not dict or len(c) != 3:
            return None
        call_id, name, arguments = c.get("id"), c.get("name"), c.get("arguments")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not dict:
            return None
        calls.append(tool_call(call_id, name, arguments))
    return content, tuple(calls), None, None, None, 0


_CORRUPT = (KeyError, TypeError, ValueError, AttributeError, RecursionError)
"""What a payload that does not fit its kind raises while it is decoded."""


def _added(body: Any) -> str | None:
    """A user payload's ``added`` (what put the message there), checked.

    Raises:
        TypeError: it is not text.
    """
    body = _parse(body) if isinstance(body, str) else body
    added = body.get("added")
    if added is not None and not isinstance(added, str):
        raise TypeError("added is not a string")
    return added


def view_message(kind: str, payload: Any, seq: int) -> Message:
    """The message a history shows of a message row, checked as :func:`decode_record` checks.

    Built straight from the payload, with no record in between: a tool call or a tool
    result (half of an agent's transcript) costs its JSON and one message. The result
    equals ``Message.from_record(decode_record(...))`` of the same row.

    Raises:
        StoreCorruptError: the payload does not fit its kind.
    """
    try:
        content, calls, call_id, name, ok, images = _fields(kind, payload)
        added = _added(payload) if kind == "user" else None
    except _CORRUPT as exc:
        raise StoreCorruptError(f"record seq={seq} kind={kind!r}: {exc!r}") from exc
    message = build_message(ROLES.get(kind, kind), content, calls, call_id, name, ok, images, seq)
    return message if added is None else replace(message, added=added)


def _called_record(
    kind: str, payload: Any, seq: int, rid: str, created: int, meta: Any, tokens: Any
) -> Record | None:
    """A tool call's or tool result's record, built in a blank (``records._blanks``).

    Equal to :func:`decode_record` of the same row; None for another kind, or when its
    meta is not a JSON object or its payload does not fit (decode_record then says
    what is wrong).
    """
    if kind != "tool" and kind != "assistant":
        return None
    try:
        meta_map = {} if meta is None else _parse(meta) if isinstance(meta, str) else meta
        if type(meta_map) is not dict and not isinstance(meta_map, Mapping):
            return None
        fields = written_fields(kind, payload)
        content, calls, call_id, name, ok, images = (
            _fields(kind, payload) if fields is None else fields
        )
    except _CORRUPT:
        return None
    if kind == "tool":
        return tool_record(seq, rid, created, meta_map, tokens, content, call_id, name, ok, images)
    return assistant_record(seq, rid, created, meta_map, tokens, content, calls, images)


def decode_one(
    kind: str, payload: Any, seq: int, rid: str, created: int, meta: Any, tokens: Any
) -> Record:
    """The record of one stored row by the general path: :func:`decode_record`'s record.

    A tool call or result is built in a blank; any other row, and one that does not
    fit, by :func:`decode_record`, which says what is wrong.

    Raises:
        StoreCorruptError: the row does not fit its kind.
    """
    called = _called_record(kind, payload, seq, rid, created, meta, tokens)
    if called is not None:
        return called
    return decode_record(
        kind, payload, seq=seq, id=rid, created_at_us=created, meta=meta, tokens=tokens
    )


def decode_record(
    kind: str,
    payload: str | Mapping[str, JSONValue],
    *,
    seq: int,
    id: str,
    created_at_us: int,
    meta: str | Mapping[str, JSONValue] | None = None,
    tokens: int | None = None,
) -> Record:
    """Rebuild a record from its stored columns (the inverse of :func:`encode_payload`).

    Raises:
        StoreCorruptError: if the kind is unknown or the payload does not fit it.
    """
    cls = _CLASSES.get(kind)
    if cls is None:
        raise StoreCorruptError(f"record seq={seq}: unknown kind {kind!r}")
    try:
        meta_map: Mapping[str, Any] = _loads(meta) if isinstance(meta, str) else (meta or {})
        if not isinstance(meta_map, Mapping):
            raise TypeError("meta is not a JSON object")
        # Most rows are text-only messages, '{"content":"..."}': scan the one string with the
        # C scanner (exactly what json.loads would do) instead of the general decoder.
        if (
            kind in _PLAIN_KINDS
            and isinstance(payload, str)
            and payload.startswith(_CONTENT_ONLY)
            and payload.endswith('"}')
        ):
            text, end = _scan_string(payload, 12)
            if end == len(payload) - 1:
                return _PLAIN[kind](seq, id, created_at_us, meta_map, tokens, text)
        body: Mapping[str, Any] = _loads(payload) if isinstance(payload, str) else payload
        if not isinstance(body, Mapping):
            raise TypeError("the payload is not a JSON object")
        return _checked(
            cls(
                seq=seq,
                id=id,
                created_at_us=created_at_us,
                meta=meta_map,
                tokens=tokens,
                **_kind_fields(kind, body),
            )
        )
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the decoder's stack (written by no plait)
        raise StoreCorruptError(f"record seq={seq} kind={kind!r}: {exc!r}") from exc
