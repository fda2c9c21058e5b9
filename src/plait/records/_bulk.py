"""The bulk decoders: every row of a read into its record, or into its message for a view.

Most of an agent's transcript is three shapes of row, each as the codec writes it: a
text-only message (``{"content":"..."}``), a tool call (``{"content":"...","tool_calls":
[{"id":"...","name":"...","arguments":{...}}]}``) and a tool result (``{"content":"...",
"tool_call_id":"...","tool_name":"...","ok":true}``). A row in one of them is read piece by
piece where the codec puts each piece: each string by the C string scanner, the arguments
by the C value scanner, the text between them compared in place. That is the JSON grammar
for exactly that text, so it gives what ``json.loads`` gives, without the dicts and lists of
the payload that a record does not keep; anything else (another key order, images, extra
keys, whitespace, a damaged row) is read by ``records._codec``'s general path, which checks
it and names what is wrong. A record is built in a blank (``records._blanks``), inline.

SQLite's full reads select four packed columns (:func:`decode_packed`); with orjson installed
(``plait[fast]``) they read each payload with it and check the shapes on its dict (D223).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from plait.records._blanks import (
    BLANKS_WORK,
    AssistantBlank,
    CallBlank,
    SystemBlank,
    ToolBlank,
    UserBlank,
)
from plait.records._codec import (
    MESSAGE_KINDS,
    ROLES,
    collector_paused,
    decode_one,
    decode_record,
    view_message,
    whole_columns,
    written_fields,
)
from plait.records._messages import Message, build_message
from plait.records._model import (
    AssistantRecord,
    Record,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)

_orjson_loads: Callable[[str], Any] | None
try:  # the optional extra plait[fast]: orjson reads a payload at a fraction of json's cost
    from orjson import loads as _orjson_loads  # type: ignore[import-not-found,unused-ignore,no-redef]
except ImportError:  # pragma: no cover - the default install
    _orjson_loads = None

__all__ = ["PACKED_KINDS", "decode_packed", "decode_records", "decode_rows", "decode_view_rows"]

_scan_string: Final = json.decoder.scanstring  # type: ignore[attr-defined]  # the C scanner
_scan_value: Final = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_fast_loads: Callable[[str], Any] | None = _orjson_loads
"""orjson's ``loads`` when it is installed (``plait[fast]``), else None: ``json`` reads all."""
_HEAD: Final = '{"content":"'
"""Every message payload the codec writes starts so; its text starts at 12."""
_CALLS: Final = ',"tool_calls":[{"id":"'
_NAME: Final = ',"name":"'
_ARGS: Final = ',"arguments":'
_NEXT_CALL: Final = '},{"id":"'
_LAST_CALL: Final = "}]}"
_CALL_ID: Final = ',"tool_call_id":"'
_TOOL_NAME: Final = ',"tool_name":"'
_NO_NAME: Final = ',"tool_name":null'
_OK: Final = ',"ok":true}'
_NOT_OK: Final = ',"ok":false}'
_MISFIT: Final = (AttributeError, TypeError, ValueError, StopIteration, RecursionError)
"""What reading a row that is not in a written shape may raise (the general path reads it)."""


def _calls(payload: str, i: int) -> tuple[ToolCall, ...] | None:
    """The tool calls of a tool call's payload written by the codec, read from ``i`` on.

    ``i`` is where its text's string ends; None when the rest is not the written shape.

    Raises:
        ValueError, StopIteration, RecursionError: a string or the arguments do not scan
            (the general path reads the row, or says what is wrong).
    """
    if not payload.startswith(_CALLS, i):
        return None
    scan = _scan_string
    i += 22
    calls: list[ToolCall] = []
    while True:
        call_id, i = scan(payload, i)
        if not payload.startswith(_NAME, i):
            return None
        name, i = scan(payload, i + 9)
        if not payload.startswith(_ARGS, i):
            return None
        arguments, i = _scan_value(payload, i + 13)
        if type(arguments) is not dict:
            return None
        c: Any = CallBlank()
        c.id = call_id
        c.name = name
        c.arguments = arguments
        c.__class__ = ToolCall
        calls.append(c)
        if payload.startswith(_NEXT_CALL, i):
            i += 9
        elif i + 3 == len(payload) and payload.endswith(_LAST_CALL):
            return tuple(calls)
        else:
            return None


def _result(payload: str, i: int) -> tuple[str, str | None, bool] | None:
    """A tool result's ``(tool_call_id, tool_name, ok)`` as the codec writes them, from ``i``.

    ``i`` is where its text's string ends; None when the rest is not the written shape.

    Raises:
        ValueError: a string does not scan (the general path says what is wrong).
    """
    if not payload.startswith(_CALL_ID, i):
        return None
    call_id, i = _scan_string(payload, i + 17)
    name: str | None = None
    if payload.startswith(_TOOL_NAME, i):
        name, i = _scan_string(payload, i + 14)
    elif payload.startswith(_NO_NAME, i):
        i += 17
    else:
        return None
    rest = len(payload) - i
    if rest == 11 and payload.endswith(_OK):
        return call_id, name, True
    if rest == 12 and payload.endswith(_NOT_OK):
        return call_id, name, False
    return None


def _tool_row(
    payload: str, i: int, text: str, seq: int, rid: Any, created: Any, tokens: Any
) -> Record | None:
    """A tool result's record built in its blank, or None (see :func:`_result`).

    Its text is read up to ``i``; None when the rest is not the written shape.
    """
    result = _result(payload, i)
    if result is None:
        return None
    r: Any = ToolBlank()
    r.seq = seq
    r.id = rid
    r.created_at_us = created
    r.meta = {}
    r.tokens = tokens
    r.content = text
    r.tool_call_id, r.tool_name, r.ok = result
    r.images = 0
    r.__class__ = ToolRecord
    return r  # type: ignore[no-any-return]


def _call_row(
    payload: str, i: int, text: str, seq: int, rid: Any, created: Any, tokens: Any
) -> Record | None:
    """A tool call's record built in its blank, or None (see :func:`_calls`).

    Its text is read up to ``i``; None when the rest is not the written shape.
    """
    calls = _calls(payload, i)
    if calls is None:
        return None
    r: Any = AssistantBlank()
    r.seq = seq
    r.id = rid
    r.created_at_us = created
    r.meta = {}
    r.tokens = tokens
    r.content = text
    r.tool_calls = calls
    r.images = 0
    r.__class__ = AssistantRecord
    return r  # type: ignore[no-any-return]


def decode_records(rows: Iterable[Sequence[Any]], seqs: Iterable[int]) -> list[Record]:
    """Decode rows ``(id, kind, payload, meta, created_at, tokens)`` at positions ``seqs``.

    A store that reads one contiguous run of positions passes a ``range`` (and
    selects no key); the collector is paused while it runs.

    Raises:
        StoreCorruptError: a row does not fit its kind (see :func:`decode_record`).
    """
    if not BLANKS_WORK:  # pragma: no cover - a Python that refuses the class assignment
        return [
            decode_one(k, p, q, i, c, m, t)
            for (i, k, p, m, c, t), q in zip(rows, seqs, strict=False)
        ]
    with collector_paused():
        out: list[Record] = []
        add = out.append
        scan = _scan_string
        # seqs may run on past the rows (a range to a segment's end, or one iterator over
        # several batches): zip stops at the last row, before taking another seq.
        for (rid, kind, payload, meta, created, tokens), seq in zip(rows, seqs, strict=False):
            if meta is None:
                # Built inline, each in its blank (records._blanks): a call per row costs
                # more than the stores. Any other shape, and any payload that is not
                # text, goes to the general path, which checks it.
                try:
                    if payload.startswith(_HEAD):
                        text, i = scan(payload, 12)
                        if i == len(payload) - 1:
                            if payload[i] == "}":
                                if kind == "assistant":
                                    r: Any = AssistantBlank()
                                    r.tool_calls = ()
                                    r.images = 0
                                    cls: type[Record] = AssistantRecord
                                elif kind == "user":
                                    r = UserBlank()
                                    r.images = 0
                                    r.added = None
                                    cls = UserRecord
                                elif kind == "system":
                                    r = SystemBlank()
                                    cls = SystemRecord
                                else:
                                    raise ValueError(kind)
                                r.seq = seq
                                r.id = rid
                                r.created_at_us = created
                                r.meta = {}
                                r.tokens = tokens
                                r.content = text
                                r.__class__ = cls
                                add(r)
                                continue
                        elif kind == "tool":
                            r = _tool_row(payload, i, text, seq, rid, created, tokens)
                            if r is not None:
                                add(r)
                                continue
                        elif kind == "assistant":
                            r = _call_row(payload, i, text, seq, rid, created, tokens)
                            if r is not None:
                                add(r)
                                continue
                except _MISFIT:
                    pass
            add(decode_one(kind, payload, seq, rid, created, meta, tokens))
        return out


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
        :func:`decode_rows`, which names what is wrong.

    Raises:
        StoreCorruptError: a row does not fit its kind (see :func:`decode_record`).
    """
    if _fast_loads is not None and BLANKS_WORK:
        return _loaded_packed(rows, seqs, _fast_loads)
    with collector_paused():
        out: list[Record | None] = []
        whole: list[int] = []
        add = out.append
        scan = _scan_string
        fast = BLANKS_WORK
        for (rid, cc, payload, extra), seq in zip(rows, seqs, strict=False):
            # The same paths as decode_records', on the packed columns: the kind's code
            # and the time are the low bits and the rest of one integer.
            if (extra is None or type(extra) is int) and fast:
                try:
                    if payload.startswith(_HEAD):
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
                            r = _tool_row(payload, i, text, seq, rid, cc >> 3, extra)
                            if r is not None:
                                add(r)
                                continue
                        elif code == 1:
                            r = _call_row(payload, i, text, seq, rid, cc >> 3, extra)
                            if r is not None:
                                add(r)
                                continue
                except _MISFIT:
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
    :func:`~plait.records._codec.written_fields` checks them; one it refuses (orjson
    refuses some texts ``json.loads`` reads: lone surrogates, numbers out of range)
    goes to the general path, which reads it with ``json``.
    """
    with collector_paused():
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
                except (*_MISFIT, KeyError):
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
            both, end = _scan_value(extra, 0)
        except _MISFIT:
            return None
        if not (end == len(extra) and type(both) is list and len(both) == 2):
            return None
        tokens, meta = both
        if type(meta) is not dict:
            return None
    return decode_one(PACKED_KINDS[cc & 7], payload, seq, rid, cc >> 3, meta, tokens)


def decode_rows(rows: Iterable[Sequence[Any]], seq_mask: int, first: int = 0) -> list[Record]:
    """Decode the rows of one read: each ``(key, id, kind, payload, meta, created_at, tokens)``.

    The columns start at index ``first`` of each row (a store may select others
    before them); a record's ``seq`` is ``key & seq_mask``. The collector is
    paused while it runs (and left as it was found).

    Raises:
        StoreCorruptError: a row does not fit its kind (see :func:`decode_record`).
    """
    rows = rows if isinstance(rows, Sequence) else list(rows)
    end = first + 7
    return decode_records(
        [row[first + 1 : end] for row in rows], [row[first] & seq_mask for row in rows]
    )


def decode_view_rows(
    rows: Iterable[Sequence[Any]], seqs: Iterable[int]
) -> tuple[list[Message | Record | None], list[int]]:
    """Decode the rows of a view read, at positions ``seqs``: messages as :class:`Message`.

    Each row is ``(kind, payload)``, or ``(kind, payload, whole)``: ``whole`` is
    None for a message and, for the rows a view keeps whole, the JSON array
    ``[id, meta, created_at, tokens]`` (a store that can send it with the row).
    A row of a message kind becomes the message a history shows (its meta, id,
    time and count are not what a message holds, and are not decoded); a summary,
    event or opaque row with its ``whole`` becomes its record, and one without is
    ``None``, its index listed for the store to read whole.

    Returns:
        The decoded items in row order, and the indexes of the ``None`` ones.

    Raises:
        StoreCorruptError: a row does not fit its kind (see :func:`decode_record`).
    """
    with collector_paused():
        out: list[Message | Record | None] = []
        whole: list[int] = []
        add = out.append
        role_of = ROLES.get
        scan = _scan_string
        build = build_message
        for row, seq in zip(rows, seqs, strict=False):  # seqs may run on: see decode_records
            kind, payload = row[0], row[1]
            if kind in MESSAGE_KINDS:
                # Its other columns are not the message's, so they are not read.
                role = role_of(kind, kind)
                try:
                    if payload.startswith(_HEAD):
                        text, i = scan(payload, 12)
                        if i == len(payload) - 1:
                            # The string ends one before the text's end, at its closing '}'.
                            if payload[i] == "}" and kind != "tool":
                                add(build(role, text, (), None, None, None, 0, seq))
                                continue
                        elif kind == "tool":
                            result = _result(payload, i)
                            if result is not None:
                                add(build(role, text, (), *result, 0, seq))
                                continue
                        elif kind == "assistant":
                            calls = _calls(payload, i)
                            if calls is not None:
                                add(build(role, text, calls, None, None, None, 0, seq))
                                continue
                except _MISFIT:
                    pass
                fields = written_fields(kind, payload)
                add(
                    view_message(kind, payload, seq)
                    if fields is None
                    else build(role, *fields, seq)
                )
            elif len(row) > 2 and row[2] is not None:
                rid, meta, created, tokens = whole_columns(row[2], seq)
                add(
                    decode_record(
                        kind,
                        payload,
                        seq=seq,
                        id=rid,
                        created_at_us=created,
                        meta=meta,
                        tokens=tokens,
                    )
                )
            else:
                whole.append(len(out))
                add(None)
        return out, whole
