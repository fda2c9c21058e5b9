"""SQLite's packed columns: a full read's rows as four columns, decoded in one loop (D223).

``sqlite3`` costs about as much a column as the values cost to join, so a full read selects
four: the record's id, ``created_at * 8 + code`` (the kind's code in :data:`PACKED_KINDS`),
the payload, and ``extra`` (meta and tokens in one). This is the SQLite store's packing and
its decoder; the shapes it builds in place are the codec's (:mod:`plait.records.kit`). With
orjson installed (``plait[fast]``) each payload is read by it and the shapes checked on its
dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from plait._collector import paused as paused_collector
from plait.records import AssistantRecord, Record, SystemRecord, ToolCall, ToolRecord, UserRecord
from plait.records.kit import (
    BLANKS_WORK,
    MISFIT,
    TEXT_HEAD,
    AssistantBlank,
    CallBlank,
    SystemBlank,
    ToolBlank,
    UserBlank,
    call_row,
    decode_fields,
    scan_string,
    scan_value,
    tool_row,
)

_orjson_loads: Callable[[str], Any] | None
try:  # the optional extra plait[fast]: orjson reads a payload at a fraction of json's cost
    from orjson import loads as _orjson_loads  # type: ignore[import-not-found,unused-ignore,no-redef]
except ImportError:  # pragma: no cover - the default install
    _orjson_loads = None

__all__ = ["PACKED_KINDS", "decode_packed"]

_fast_loads: Callable[[str], Any] | None = _orjson_loads
"""orjson's ``loads`` when it is installed (``plait[fast]``), else None: ``json`` reads all."""


PACKED_KINDS: Final = ("", "assistant", "user", "tool", "system", "summary", "event", "opaque")
"""The kinds by their code in :func:`decode_packed`'s rows (0, the empty kind: not a kind)."""


def decode_packed(
    rows: Iterable[Sequence[Any]], seqs: Iterable[int]
) -> tuple[list[Record | None], list[int]]:
    """Decode rows ``(id, created_at * 8 + code, payload, extra)`` at positions ``seqs``.

    ``code`` is the kind's place in :data:`PACKED_KINDS`; ``extra`` holds meta and tokens: None
    when both are NULL, the count when meta is NULL and the count an integer, else the
    text ``[tokens, meta]``. A store's driver costs about as much a column as the
    values cost to join, and these four hold what six would.

    Returns:
        The records in row order, and the indexes of rows left None: a row whose packed
        columns are not what the store packs (no kind, a time that is not an integer, an
        extra that does not decode) is for the store to read whole and decode with
        :func:`plait.records.decode_rows`, which names what is wrong.

    Raises:
        StoreCorruptError: a row does not fit its kind (see :func:`plait.records.decode_record`).
    """
    if _fast_loads is not None and BLANKS_WORK:
        return _loaded_packed(rows, seqs, _fast_loads)
    with paused_collector():
        out: list[Record | None] = []
        whole: list[int] = []
        add = out.append
        scan = scan_string
        fast = BLANKS_WORK
        for (rid, cc, payload, extra), seq in zip(rows, seqs, strict=False):
            # The same paths as decode_records', on the packed columns: the kind's code
            # and the time are the low bits and the rest of one integer.
            if (extra is None or type(extra) is int) and fast:
                try:
                    if payload.startswith(TEXT_HEAD):
                        text, i = scan(payload, 12)
                        code = cc & 7
                        if i == len(payload) - 1:
                            if payload[i] == "}":
                                if code == 1:
                                    r: Any = AssistantBlank()
                                    r.tool_calls = ()
                                    r.images = 0
                                    cls: type[Record] = AssistantRecord
                                elif code == 2:
                                    r = UserBlank()
                                    r.images = 0
                                    r.added = None
                                    cls = UserRecord
                                elif code == 4:
                                    r = SystemBlank()
                                    cls = SystemRecord
                                else:
                                    raise ValueError(code)
                                r.seq = seq
                                r.id = rid
                                r.created_at_us = cc >> 3
                                r.meta = {}
                                r.tokens = extra
                                r.content = text
                                r.__class__ = cls
                                add(r)
                                continue
                        elif code == 3:
                            r = tool_row(payload, i, text, seq, rid, cc >> 3, extra)
                            if r is not None:
                                add(r)
                                continue
                        elif code == 1:
                            r = call_row(payload, i, text, seq, rid, cc >> 3, extra)
                            if r is not None:
                                add(r)
                                continue
                except MISFIT:
                    pass
            r = _packed_row(rid, cc, payload, extra, seq)
            if r is None:
                whole.append(len(out))
            add(r)
        return out, whole


def _loaded_packed(
    rows: Iterable[Sequence[Any]], seqs: Iterable[int], loads: Callable[[str], Any]
) -> tuple[list[Record | None], list[int]]:
    """:func:`decode_packed` with ``loads`` (orjson's) reading each payload whole.

    A payload it reads is checked for the written shapes, key by key, as
    ``records._codec.written_fields`` checks them; one it refuses (orjson
    refuses some texts ``json.loads`` reads: lone surrogates, numbers out of range)
    goes to the general path, which reads it with ``json``.
    """
    with paused_collector():
        out: list[Record | None] = []
        whole: list[int] = []
        add = out.append
        for (rid, cc, payload, extra), seq in zip(rows, seqs, strict=False):
            if extra is None or type(extra) is int:
                try:
                    body = loads(payload)
                    code = cc & 7
                    if type(body) is dict:
                        n = len(body)
                        text = body["content"]
                        if type(text) is not str:
                            pass
                        elif n == 1:
                            if code == 1:
                                r: Any = AssistantBlank()
                                r.tool_calls = ()
                                r.images = 0
                                cls: type[Record] = AssistantRecord
                            elif code == 2:
                                r = UserBlank()
                                r.images = 0
                                r.added = None
                                cls = UserRecord
                            elif code == 4:
                                r = SystemBlank()
                                cls = SystemRecord
                            else:
                                raise ValueError(code)
                            r.seq = seq
                            r.id = rid
                            r.created_at_us = cc >> 3
                            r.meta = {}
                            r.tokens = extra
                            r.content = text
                            r.__class__ = cls
                            add(r)
                            continue
                        elif n == 4 and code == 3:
                            call_id, name, ok = body["tool_call_id"], body["tool_name"], body["ok"]
                            if (
                                type(call_id) is str
                                and (name is None or type(name) is str)
                                and (ok is True or ok is False)
                            ):
                                r = ToolBlank()
                                r.seq = seq
                                r.id = rid
                                r.created_at_us = cc >> 3
                                r.meta = {}
                                r.tokens = extra
                                r.content = text
                                r.tool_call_id = call_id
                                r.tool_name = name
                                r.ok = ok
                                r.images = 0
                                r.__class__ = ToolRecord
                                add(r)
                                continue
                        elif n == 2 and code == 1:
                            calls = _loaded_calls(body["tool_calls"])
                            if calls is not None:
                                r = AssistantBlank()
                                r.seq = seq
                                r.id = rid
                                r.created_at_us = cc >> 3
                                r.meta = {}
                                r.tokens = extra
                                r.content = text
                                r.tool_calls = calls
                                r.images = 0
                                r.__class__ = AssistantRecord
                                add(r)
                                continue
                except (*MISFIT, KeyError):
                    pass
            r = _packed_row(rid, cc, payload, extra, seq)
            if r is None:
                whole.append(len(out))
            add(r)
        return out, whole


def _loaded_calls(raw: Any) -> tuple[ToolCall, ...] | None:
    """The tool calls of a decoded ``tool_calls`` in the written shape, or None."""
    if type(raw) is not list:
        return None
    calls: list[ToolCall] = []
    for c in raw:
        if type(c) is not dict or len(c) != 3:
            return None
        call_id, name, arguments = c.get("id"), c.get("name"), c.get("arguments")
        if type(call_id) is not str or type(name) is not str or type(arguments) is not dict:
            return None
        t: Any = CallBlank()
        t.id = call_id
        t.name = name
        t.arguments = arguments
        t.__class__ = ToolCall
        calls.append(t)
    return tuple(calls)


def _packed_row(rid: Any, cc: Any, payload: Any, extra: Any, seq: int) -> Record | None:
    """A packed row by the general path, or None for a row to read whole."""
    if type(cc) is not int or not cc & 7:
        return None
    meta, tokens = None, extra
    if extra is not None and type(extra) is not int:
        try:
            # The array is the store's brackets around its two columns: a meta that
            # does not end where its column does leaves text over, or adds an item.
            both, end = scan_value(extra, 0)
        except MISFIT:
            return None
        if not (end == len(extra) and type(both) is list and len(both) == 2):
            return None
        tokens, meta = both
        if type(meta) is not dict:
            return None
    return decode_fields(PACKED_KINDS[cc & 7], payload, seq, rid, cc >> 3, meta, tokens)
