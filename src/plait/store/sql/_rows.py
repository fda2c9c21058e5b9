"""Encoding and decoding a session row, shared by the SQL stores.

Both stores select the same columns in the same order (their ``_SELECT_ROW``):
the ``sessions`` columns, then the session's newest own record (``key``,
``mpos``, ``kind``, ``created_at``, or NULLs when it has none). Appends do not
write the session row, so its head is read from that record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from plait.errors import StoreCorruptError
from plait.layout import Layout, branched_from
from plait.records import dumps
from plait.store.base import BearerRow, LiveClientRow, ScratchpadEntry, SessionRow

if TYPE_CHECKING:
    from plait.store.sql._sealing import DataKey, Sealer

__all__ = [
    "BEARER_COLUMNS",
    "LIVE_COLUMNS",
    "ROW_COLUMNS",
    "SCRATCHPAD_COLUMNS",
    "SEQ_BITS",
    "SEQ_MAX",
    "bases_of",
    "bases_text",
    "bearer_row_from_columns",
    "kept_as",
    "kept_for",
    "live_row_from_columns",
    "missing_rows",
    "prefix_text",
    "row_from_columns",
    "row_values",
    "scratchpad_entry_from_columns",
    "scratchpad_values",
]

SEQ_BITS: Final = 32
"""A record's key is ``owner_pk << SEQ_BITS | seq``."""
SEQ_MAX: Final = (1 << SEQ_BITS) - 1


ROW_COLUMNS: Final = (
    "title",
    "bases",
    "end_seq",
    "end_msgs",
    "view_start",
    "view_msgs",
    "status",
    "scratchpad",
    "scratchpad_version",
    "metadata",
)
"""The ``sessions`` columns a create or a write sets from a row, in :func:`row_values`' order."""

SCRATCHPAD_COLUMNS: Final = ("version", "scratchpad", "source", "reason", "metadata")
"""The ``scratchpads`` columns :func:`scratchpad_values` gives, in order."""


SEALED_ROW: Final = frozenset({"title", "scratchpad", "metadata"})
"""The :data:`ROW_COLUMNS` an encrypted store seals (D320)."""
_SEALED_AT: Final = {"title": 3, "scratchpad": 16, "metadata": 18}
"""Where the sealed columns are in a selected row (see :func:`row_from_columns`)."""
_SP_NAMES: Final = tuple(f"history.{c}" for c in SCRATCHPAD_COLUMNS)
"""A scratchpad version's column names as its seal binds them (apart from the row's)."""
SEALED_SCRATCHPAD: Final = frozenset({"history.scratchpad", "history.reason", "history.metadata"})
"""The :data:`SCRATCHPAD_COLUMNS` an encrypted store seals."""
_SEALED_SP_AT: Final = {"history.scratchpad": 1, "history.reason": 3, "history.metadata": 4}


def row_values(
    row: SessionRow, sealer: Sealer | None = None, key: DataKey | None = None
) -> tuple[Any, ...]:
    """The :data:`ROW_COLUMNS` of a row, encoded as stored (JSON columns through the codec).

    With a ``sealer`` (an encrypted store), its sealed columns are sealed under ``key``,
    else under the data key of the row's session.
    """
    values = _row_values(row)
    if sealer is None:
        return values
    key = key if key is not None else sealer.owner_key(row.pk)
    return sealer.seal_columns(key, ROW_COLUMNS, values, SEALED_ROW)


def _row_values(row: SessionRow) -> tuple[Any, ...]:
    lay = row.layout
    return (
        row.title,
        bases_text(lay.bases, branched_from(lay.bases)),
        lay.end_seq,
        lay.end_msgs,
        lay.view_start,
        lay.view_msgs,
        row.status,
        dumps(dict(row.scratchpad)) if row.scratchpad is not None else None,
        row.scratchpad_version,
        dumps(dict(row.metadata)),
    )


def bases_text(
    bases: tuple[tuple[int, int], ...], cut_from: tuple[tuple[int, int], ...] | None = None
) -> str:
    """The ``bases`` column of a layout: compact JSON ``[[owner,hi],...]``.

    Encoded without the general encoder's checks (the values are the integers
    a layout holds). A layout deep in a chain of branches has a pair per
    ancestor and is its source's layout plus one pair: when the source's text
    is known (it was just read, see :func:`bases_of`), only that pair is encoded.
    Found by the tuples' identity, not their value: hashing a thousand pairs
    would cost more than the read it serves. ``cut_from`` is
    :func:`~plait.layout.branched_from` of ``bases``: when given, ``bases`` is that
    tuple plus one pair, and no pair is compared.
    """
    if len(bases) * 8 <= _SHORT_BASES:
        # Spelled as the encoder spells them, without its Python layers (a root's branch
        # has one pair).
        return f"[{','.join([f'[{int(o)},{int(h)}]' for o, h in bases])}]"
    kept = _by_identity.get(id(bases))
    if kept is not None and kept[0] is bases:
        return kept[1]
    if cut_from is not None:
        source = _by_identity.get(id(cut_from))
        known = source is not None and source[0] is cut_from
    else:
        # A branch's segments before its last are its source's, the very same pair objects.
        source = _by_last_pair.get(id(bases[-2]))
        known = source is not None and len(source[0]) == len(bases) - 1 and source[0] == bases[:-1]
    if known and source is not None and source[1].endswith("]]"):
        # (The list's own bracket ends a text spelled here; one read back may differ.)
        owner, hi = bases[-1]
        text = f"{source[1][:-1]},[{int(owner)},{int(hi)}]]"
        _spliced[0] = (text, source[1])
    else:
        text = _ENCODE_PAIRS(bases)
    _keep(text, bases)
    return text


def prefix_text(bases: tuple[tuple[int, int], ...], text: str) -> str:
    """The ``bases`` text of all but the last segment, given the text of them all.

    The source's own text when :func:`bases_text` just spelled ``text`` from it (the
    very string: no copy); else cut out of ``text`` when its last pair is spelled as
    :func:`bases_text` spells it (so an owner's stored text compares equal to it);
    encoded anew if not.
    """
    if len(bases) <= 1:
        return "[]"
    spliced = _spliced[0]
    if spliced is not None and spliced[0] is text:
        return spliced[1]
    owner, hi = bases[-1]
    last = f",[{int(owner)},{int(hi)}]]"
    if text.endswith(last):
        return f"{text[: -len(last)]}]"
    return bases_text(bases[:-1])


_spliced: list[tuple[str, str] | None] = [None]
"""The last text :func:`bases_text` spelled from its source's, with the source's text
(held, so the identity of the one names the other): the prefix an owner check compares."""


_ENCODE_PAIRS = json.JSONEncoder(separators=(",", ":")).encode  # C encoder; tuples as arrays


def scratchpad_values(
    entry: ScratchpadEntry, sealer: Sealer | None = None, owner: int = 0
) -> tuple[Any, ...]:
    """The :data:`SCRATCHPAD_COLUMNS` of a scratchpad version, encoded as stored.

    With a ``sealer``, its sealed columns are sealed under the data key of ``owner``.
    """
    values = (
        entry.version,
        dumps(dict(entry.scratchpad)) if entry.scratchpad is not None else None,
        entry.source,
        entry.reason,
        dumps(dict(entry.metadata)),
    )
    if sealer is None:
        return values
    key = sealer.owner_key(owner)
    return sealer.seal_columns(key, _SP_NAMES, values, SEALED_SCRATCHPAD)


def missing_rows(session_id: str, owner: int, lo: int, hi: int, found: int) -> StoreCorruptError:
    """The error of a read whose segment ``[lo, hi)`` of ``owner`` gave ``found`` rows."""
    return StoreCorruptError(
        f"session {session_id!r}: expected {hi - lo} rows at [{lo}, {hi}) "
        f"of owner {owner}, found {found}"
    )


def row_from_columns(
    r: Sequence[Any], kept: tuple[str, _Bases] | None = None, sealer: Sealer | None = None
) -> SessionRow:
    """Decode one selected row into a :class:`SessionRow`.

    ``kept`` is the layout (text and tuple) the statement compared the row's ``bases``
    with (see :func:`kept_for`): the column is NULL when they were equal. With a
    ``sealer`` (an encrypted store), its sealed columns are opened first.

    Raises:
        StoreCorruptError: a column does not hold what it should, or does not open.
    """
    if sealer is not None:
        r = sealer.open_columns(r, _SEALED_AT, r[0], f"session row {r[1]!r}")
    try:
        end_seq, end_msgs, updated = r[8], r[9], r[5]
        if r[19] is not None:  # the newest own record
            head_end = (r[19] & SEQ_MAX) + 1
            if head_end > end_seq:
                end_seq, end_msgs = head_end, r[20] + (r[21] != "event")
                updated = max(updated, r[22])
        text = r[7]
        if text is None and kept is not None:
            bases = kept[1]
            held = _by_identity.get(id(bases))
            if held is None or held[0] is not bases:
                _keep(kept[0], bases, r[0])  # what a branch of it looks its text up by
        else:
            bases = bases_of(text, r[0])
            if len(text) > _SHORT_BASES:
                _put(_by_id, r[1], (text, bases))
        row = SessionRow(
            r[1],
            r[2],
            Layout(bases, end_seq, end_msgs, r[10], r[11]),
            r[0],
            r[6],
            r[4],
            updated,
            r[3],
            _parents(r[12]) if r[12] != "[]" else (),
            r[13],
            r[14],
            r[15],
            json.loads(r[16]) if r[16] is not None else None,
            r[17],
            json.loads(r[18]) if r[18] != "{}" else {},
        )
    except (ValueError, TypeError, IndexError, RecursionError) as exc:
        raise StoreCorruptError(
            f"session row {r[1]!r} could not be decoded: {_bad_json(r)}{exc}"
        ) from exc
    if not _well_typed(row):
        raise StoreCorruptError(
            f"session row {r[1]!r} could not be decoded: {_wrong_column(row)} "
            "does not hold what it should"
        )
    return row


def _parents(text: str) -> tuple[str, ...]:
    """Decode ``parent_ids``: one parent (a branch's) is read without the JSON decoder.

    An id is printable (D170), so the text holds an escape only where the id holds a
    quote or a backslash; such an id, and any other list, goes through the decoder.
    """
    if len(text) > 3 and text.startswith('["') and text.endswith('"]'):
        inner = text[2:-2]
        if '"' not in inner and "\\" not in inner and inner.isprintable():
            return (inner,)
    return tuple(json.loads(text))


_JSON_COLUMNS: Final = ((7, "bases"), (12, "parent_ids"), (16, "scratchpad"), (18, "metadata"))


def _bad_json(r: Sequence[Any]) -> str:
    """``"<column>: "`` for the first JSON column of a row that does not decode, else ``""``."""
    for i, name in _JSON_COLUMNS:
        try:
            if i < len(r) and r[i] is not None:
                json.loads(r[i])
        except (ValueError, TypeError, RecursionError):
            return f"{name}: "
    return ""


def _well_typed(row: SessionRow) -> bool:
    """Whether every column decoded to the type the row promises (a foreign writer's may not).

    Written out test by test: it runs on every row read, and a loop or a generator
    costs several times more.
    """
    lay = row.layout
    title, operator, branched = row.title, row.lineage_operator, row.branched_at
    return (
        type(row.id) is str
        and type(row.workspace) is str
        and (title is None or type(title) is str)
        and (operator is None or type(operator) is str)
        and type(row.status) is str
        and type(row.metadata) is dict
        and (row.scratchpad is None or type(row.scratchpad) is dict)
        and (branched is None or type(branched) is int)
        and (not row.parent_ids or all(type(p) is str for p in row.parent_ids))
        and type(row.pk) is int
        and type(row.row_version) is int
        and type(row.created_at_us) is int
        and type(row.updated_at_us) is int
        and type(row.scratchpad_version) is int
        and type(lay.end_seq) is int
        and type(lay.end_msgs) is int
        and type(lay.view_start) is int
        and type(lay.view_msgs) is int
    )


def _wrong_column(row: SessionRow) -> str:
    """The first column of a row :func:`_well_typed` refused (to name it in the error)."""
    text_or_none = {"title": row.title, "lineage_operator": row.lineage_operator}
    for name, value in text_or_none.items():
        if value is not None and type(value) is not str:
            return f"{name} (a {type(value).__name__}, not text)"
    if type(row.metadata) is not dict:
        return f"metadata (a {type(row.metadata).__name__}, not a JSON object)"
    if row.scratchpad is not None and type(row.scratchpad) is not dict:
        return f"scratchpad (a {type(row.scratchpad).__name__}, not a JSON object)"
    if not all(type(p) is str for p in row.parent_ids):
        return "parent_ids (not a list of ids)"
    return "a column"


_BASES_CACHED: Final = 256
"""Long layouts kept decoded (a layout grows by a segment per branch in a chain)."""
_SHORT_BASES: Final = 256
"""Layout texts at most this long are decoded each time: cheaper than looking them up."""
_Bases = tuple[tuple[int, int], ...]
_by_owner: dict[int, tuple[str, _Bases]] = {}
"""The long layout last read per session key, with its text."""
_by_text: dict[tuple[int, str], tuple[str, _Bases]] = {}
"""Long layouts by their text's length and end (a row's first read: a branch's text was
just written), each with its whole text to compare: hashing 12 KB would cost more than
the read it serves, and a branch's end names its source and its cut."""
_by_identity: dict[int, tuple[_Bases, str]] = {}
"""Long layouts by ``id()``; each entry holds its tuple, so the id stays that tuple's."""
_by_last_pair: dict[int, tuple[_Bases, str]] = {}
"""The same by the ``id()`` of their last pair (held by the tuple), to find a branch's source."""
_by_id: dict[str, tuple[str, _Bases]] = {}
"""The long layout last read under each session id, with its text (see :func:`kept_for`)."""
_TEXT_END: Final = 48
"""Characters of a long layout's end that, with its length, find it by its text."""


def _keep(text: str, bases: _Bases, pk: int | None = None) -> None:
    """Remember a long layout's text (bounded: the oldest entries go when one is full).

    Never emptied at once: emptied, every few hundred branches written, each session
    read again and again would decode its layout anew in the same moment, and a
    thousand-pair tuple for each of them would be freed together. (The oldest go first,
    however often they were read since: a layout dropped is kept again at its next read.)
    """
    if pk is not None:
        _put(_by_owner, pk, (text, bases))
    _put(_by_text, (len(text), text[-_TEXT_END:]), (text, bases))
    _put(_by_identity, id(bases), (bases, text))
    _put(_by_last_pair, id(bases[-1]), (bases, text))


def _put(kept: dict[Any, Any], key: Any, value: Any) -> None:
    """Set ``kept[key]``, dropping the oldest eighth of the entries first when it is full.

    (A few at a time: finding the oldest walks past the places of those dropped
    before. Every entry holds what it is checked against, so one dict dropping an
    entry the others still hold leaves nothing inconsistent; rows are decoded
    outside the store's lock, so another thread may have dropped one already.)
    """
    if len(kept) >= _BASES_CACHED and key not in kept:
        # list(kept) is one call: another thread cannot change the dict while it is made.
        for old in list(kept)[: _BASES_CACHED // 8]:
            kept.pop(old, None)
    kept[key] = value


def kept_for(session_id: str) -> tuple[str, _Bases] | None:
    """The long layout last read under this id, with its text, or None.

    A store compares the text with the row's in the statement that reads the row
    (a stale one just does not match), so the id only chooses what to compare.
    """
    return _by_id.get(session_id)


def kept_as(pk: int, text: str, bases: _Bases) -> None:
    """Remember that the row ``pk`` was written with ``bases``, whose column is ``text``.

    A new branch's text was just made by :func:`bases_text`: kept by the row's key,
    its first read is a compare of the text read with it, as any later read is.
    """
    if len(text) > _SHORT_BASES:
        _put(_by_owner, pk, (text, bases))


def bases_of(text: str, pk: int | None = None) -> tuple[tuple[int, int], ...]:
    """Decode a ``bases`` column; long ones are decoded once and kept.

    Every read of a row decodes its layout, and a session deep in a chain of
    branches has a segment per ancestor (12 KB of JSON at a thousand). The
    layout is kept by the row's key ``pk`` with its text, and by its text: a
    row read again is found by its key when the text read is equal to the kept
    one (a compare of the bytes, cheaper than hashing them); either way the
    kept layout can never be the wrong one.

    Raises:
        ValueError: the text is not a list of ``[owner, hi]`` pairs (or TypeError).
    """
    if text == "[]":
        return ()
    if len(text) <= _SHORT_BASES:
        return tuple((int(o), int(h)) for o, h in json.loads(text))
    if pk is not None:
        kept = _by_owner.get(pk)
        if kept is not None and kept[0] == text:
            return kept[1]
    by_text = _by_text.get((len(text), text[-_TEXT_END:]))
    if by_text is not None and by_text[0] == text:
        found = by_text[1]
    else:
        found = tuple((int(o), int(h)) for o, h in json.loads(text))
    _keep(text, found, pk)
    return found


def scratchpad_entry_from_columns(
    r: Sequence[Any], sealer: Sealer | None = None
) -> ScratchpadEntry:
    """Decode ``(version, scratchpad, source, reason, metadata, created_at)`` of the history.

    With a ``sealer``, its sealed columns are opened first (a version keeps the key of
    the row that wrote it: a rewind moves the history to the id's new row).
    """
    if sealer is not None:
        r = sealer.open_columns(r, _SEALED_SP_AT, None, f"scratchpad version {r[0]!r}")
    try:
        return ScratchpadEntry(
            version=r[0],
            scratchpad=json.loads(r[1]) if r[1] is not None else None,
            source=r[2],
            reason=r[3],
            metadata=json.loads(r[4]),
            created_at_us=r[5],
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise StoreCorruptError(f"scratchpad version {r[0]!r} could not be decoded: {exc}") from exc


BEARER_COLUMNS: Final = (
    "token_hash, principal, scopes, attributes, created_at, last_seen_at, expires_at"
)
"""The ``durable_sessions`` columns :func:`bearer_row_from_columns` reads, in order."""

LIVE_COLUMNS: Final = "s.id, c.client_id, c.mode, c.attached_at, c.last_seen_at, c.metadata"
"""The columns :func:`live_row_from_columns` reads (``live_clients c`` joined to ``sessions s``)."""


def bearer_row_from_columns(r: Sequence[Any]) -> BearerRow:
    """Decode the :data:`BEARER_COLUMNS` of one ``durable_sessions`` row.

    Raises:
        StoreCorruptError: a column does not hold what it should.
    """
    try:
        return BearerRow(
            token_hash=r[0],
            principal=r[1],
            scopes=tuple(json.loads(r[2])),
            attributes=json.loads(r[3]),
            created_at_us=r[4],
            last_seen_at_us=r[5],
            expires_at_us=r[6],
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise StoreCorruptError(f"durable session could not be decoded: {exc}") from exc


def live_row_from_columns(r: Sequence[Any]) -> LiveClientRow:
    """Decode the :data:`LIVE_COLUMNS` of one ``live_clients`` row.

    Raises:
        StoreCorruptError: a column does not hold what it should.
    """
    try:
        return LiveClientRow(
            session_id=r[0],
            client_id=r[1],
            mode=r[2],
            attached_at_us=r[3],
            last_seen_at_us=r[4],
            metadata=json.loads(r[5]),
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise StoreCorruptError(f"live client {r[1]!r} could not be decoded: {exc}") from exc


def whole_columns(text: Any, seq: int) -> tuple[Any, Any, Any, Any]:
    """The ``(id, meta, created_at, tokens)`` a view read packs as one JSON array.

    Both SQL stores send a summary's, event's or opaque item's other columns with its
    view row so, as ``[id, meta, created_at, tokens]``
    (:func:`plait.records.decode_view_rows`'s ``unpack``).

    Raises:
        StoreCorruptError: the text is not such an array.
    """
    try:
        rid, meta, created, tokens = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreCorruptError(f"record seq={seq}: its columns do not decode: {exc!r}") from exc
    return rid, meta, created, tokens
