"""The one codec: a record to the JSON a store keeps, and back.

:func:`encode_payload` writes a record's kind-specific payload; :func:`decode_record`
rebuilds a record from its stored columns and refuses a row that does not fit its
kind (:class:`~plait.errors.StoreCorruptError`). Both have a fast path for the
text-only message, which is most of every transcript.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from plait._checks import check_json
from plait.errors import StoreCorruptError
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

__all__ = ["decode_record", "encode_payload"]

_ENCODE_STR = json.encoder.encode_basestring  # the C string encoder, ensure_ascii=False
_PLAIN_KINDS = frozenset({"system", "user", "assistant"})
"""Kinds whose payload may be just ``{"content": ...}`` (the decoder's fast path)."""


def encode_payload(record: Record) -> str:
    """Encode a record's payload as the JSON a store keeps.

    Raises:
        InvalidMessageError: if the payload holds something JSON cannot carry.
    """
    # A text-only message is most of every transcript: build its JSON directly.
    if (
        (isinstance(record, UserRecord) and not record.images)
        or (isinstance(record, AssistantRecord) and not record.tool_calls and not record.images)
        or isinstance(record, SystemRecord)
    ):
        return '{"content":' + _ENCODE_STR(record.content) + "}"
    # A tool's output can be long; its size is bounded where it is made, not here.
    return check_json(record.payload, "the record", max_chars=sys.maxsize)


def _checked(record: Record) -> Record:
    """Check a decoded record's field types; a wrong one is a TypeError (the row is corrupt)."""
    text = getattr(record, "content", "")
    if not isinstance(text, str):
        raise TypeError("content is not a string")
    images = getattr(record, "images", 0)
    if not isinstance(images, int) or isinstance(images, bool) or images < 0:
        raise TypeError("images is not a count")
    if isinstance(record, AssistantRecord):
        for call in record.tool_calls:
            if not (isinstance(call.id, str) and isinstance(call.name, str)):
                raise TypeError("a tool call id or name is not a string")
            if not isinstance(call.arguments, Mapping):
                raise TypeError("tool call arguments are not an object")
    elif isinstance(record, ToolRecord):
        if not isinstance(record.tool_call_id, str):
            raise TypeError("tool_call_id is not a string")
        if record.tool_name is not None and not isinstance(record.tool_name, str):
            raise TypeError("tool_name is not a string")
    elif isinstance(record, SummaryRecord):
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
_loads = json.loads
_CONTENT_ONLY = '{"content":"'


def _kind_fields(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The kind-specific constructor arguments of a decoded payload."""
    if kind in ("user", "system"):
        fields: dict[str, Any] = {"content": body["content"]}
        if kind == "user":
            fields["images"] = body.get("images", 0)
        return fields
    if kind == "assistant":
        calls = tuple(
            ToolCall(c["id"], c["name"], c.get("arguments") or {})
            for c in body.get("tool_calls") or ()
        )
        return {
            "content": body.get("content", ""),
            "tool_calls": calls,
            "images": body.get("images", 0),
        }
    if kind == "tool":
        return {
            "content": body["content"],
            "tool_call_id": body["tool_call_id"],
            "tool_name": body.get("tool_name"),
            "ok": bool(body.get("ok", True)),
            "images": body.get("images", 0),
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
                return cls(
                    seq=seq,
                    id=id,
                    created_at_us=created_at_us,
                    meta=meta_map,
                    tokens=tokens,
                    content=text,  # type: ignore[call-arg]
                )
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
