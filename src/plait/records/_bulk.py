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

SQLite's full reads select four packed columns; their decoder is the SQLite store's
(``store/sqlite/_packed.py``), built from the pieces :mod:`plait.records.kit` names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from plait._collector import paused as collector_paused
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
    decode_one,
    decode_record,
    view_message,
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

__all__ = ["decode_records", "decode_rows", "decode_view_rows"]

_scan_string: Final = json.decoder.scanstring  # type: ignore[attr-defined]  # the C scanner
_scan_value: Final = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
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
    rows: Iterable[Sequence[Any]],
    seqs: Iterable[int],
    unpack: Callable[[Any, int], tuple[Any, Any, Any, Any]] | None = None,
) -> tuple[list[Message | Record | None], list[int]]:
    """Decode the rows of a view read, at positions ``seqs``: messages as :class:`Message`.

    Each row is ``(kind, payload)``, or ``(kind, payload, whole)``: ``whole`` is
    None for a message and, for the rows a view keeps whole, the store's packing of
    their other columns, which ``unpack(whole, seq)`` turns into ``(id, meta,
    created_at, tokens)`` (a store that can send them with the row says how it
    packed them; without ``unpack`` the rows are left for it to read whole).
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
            elif unpack is not None and len(row) > 2 and row[2] is not None:
                rid, meta, created, tokens = unpack(row[2], seq)
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
