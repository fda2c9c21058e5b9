"""SQLite's reads of a session's records, and its view read (D205).

A read of records reads each segment's key range, a batch of rows decoded at a time; a short
read over several segments (a tail deep in a chain of branches) is one statement. In the
view read, a message's row is read for its kind and payload only and decoded straight into
its :class:`~plait.records.Message` (``records.decode_view_rows``); the few rows
a view keeps whole (summaries, events, opaque items) are read whole by key, one
statement per batch that holds any, in the caller's read transaction.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Final

from plait._collector import paused as paused_collector
from plait.errors import StoreCorruptError
from plait.layout import Segment
from plait.records import (
    Message,
    Record,
    decode_rows,
    decode_view_rows,
    dumps,
)
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX, missing_rows, whole_columns
from plait.store.sqlite._packed import PACKED_KINDS, decode_packed
from plait.store.sqlite._sql import READ_RANGES_MAX, read_ranges

if TYPE_CHECKING:
    from plait.store.base import SessionRow
    from plait.store.sql._sealing import Sealer

__all__ = ["is_small", "read_records", "read_sealed", "read_small", "read_view"]

_EXTRA: Final = (
    "CASE WHEN meta IS NULL AND tokens IS NULL THEN NULL "
    "WHEN typeof(tokens) NOT IN ('integer', 'null') THEN '-' "
    "WHEN meta IS NULL THEN tokens "
    "ELSE '[' || ifnull(tokens, 'null') || ',' || meta || ']' END"
)
"""A row's meta and tokens as one column (``_packed.decode_packed``); a count that is not
an integer gives a text no row decodes from, so that row is read whole."""
_KIND_CODE: Final = (
    "CASE kind "
    + " ".join(f"WHEN '{kind}' THEN {code}" for code, kind in enumerate(PACKED_KINDS) if kind)
    + " ELSE 0 END"
)
"""A row's kind as its code in ``_packed.PACKED_KINDS`` (0: not a kind)."""
_READ_RANGE: Final = (
    f"SELECT id, created_at * 8 + {_KIND_CODE}, payload, {_EXTRA} FROM records "
    "WHERE key >= ? AND key < ? ORDER BY key LIMIT ?"
)
"""One segment's run of positions, packed (``_packed.decode_packed``: sqlite3 costs about
a microsecond a column a row, more than SQLite takes to join them): each row's position
is its place in the run (the count is checked), so the key is not selected."""
_READ_RANGES: Final = (
    "SELECT g.key, r.key, r.id, r.kind, r.payload, r.meta, r.created_at, r.tokens "
    "FROM json_each(?) AS g CROSS JOIN records AS r "
    "ON r.key >= json_extract(g.value, '$[0]') AND r.key < json_extract(g.value, '$[1]') "
    "ORDER BY g.key, r.key"
)
"""Several key ranges (a JSON list of ``[lo, hi]``) in one statement, in the list's order."""
_SMALL_READ: Final = 512
"""Positions a read spanning several segments may cover to be read in one statement."""

_VIEW_RANGE: Final = (
    "SELECT kind, payload FROM records WHERE key >= ? AND key < ? ORDER BY key LIMIT ?"
)
"""A segment's run for a view read: a message is its kind and payload."""
_READ_KEYS: Final = (
    "SELECT key, id, kind, payload, meta, created_at, tokens FROM records "
    "WHERE key IN (SELECT value FROM json_each(?)) ORDER BY key"
)
"""The whole rows of a few keys (a JSON list): the summaries and events of a view read."""
_BATCH: Final = 4096
"""Rows fetched and decoded at a time."""


def is_small(parts: list[Segment]) -> bool:
    """Whether a read of ``parts`` is one over several segments short enough for one statement."""
    return len(parts) > 1 and parts[-1][2] - parts[0][1] <= _SMALL_READ


def read_records(db: sqlite3.Connection, row: SessionRow, parts: list[Segment]) -> list[Record]:
    """The records of ``parts``, each segment's range, read in ``db``'s open read transaction.

    Raises:
        StoreCorruptError: a segment lacks rows, or a row does not decode.
    """
    out: list[Record] = []
    with paused_collector():
        for owner, a, b in parts:
            base = owner << SEQ_BITS
            # LIMIT: the scan stops at its last row instead of stepping to the
            # next page, so a damaged page just past the range does not fail it.
            cursor = db.execute(_READ_RANGE, (base | a, base | b, b - a))
            got = 0
            # Rows are decoded a batch at a time and dropped: a long read holds its
            # records and one batch of rows, never all of both.
            while rows := cursor.fetchmany(_BATCH):
                records, whole = decode_packed(rows, range(a + got, b))
                if whole:
                    _fill(db, row, records, whole, base | (a + got))
                out.extend(records)  # type: ignore[arg-type]  # every None was filled
                got += len(rows)
            if got != b - a:
                raise missing_rows(row.id, owner, a, b, got)
    return out


_SEALED_RANGE: Final = (
    "SELECT key, id, kind, payload, meta, created_at, tokens FROM records "
    "WHERE key >= ? AND key < ? ORDER BY key LIMIT ?"
)
"""A segment's rows whole, with their keys: a sealed row's key names its data key's owner."""


def read_sealed(
    db: sqlite3.Connection, row: SessionRow, parts: list[Segment], sealer: Sealer
) -> list[Record]:
    """The records of ``parts`` in an encrypted store: each row opened, then decoded.

    Raises:
        StoreCorruptError: a segment lacks rows, or a row does not open or decode.
    """
    out: list[Record] = []
    with paused_collector():
        for owner, a, b in parts:
            base = owner << SEQ_BITS
            cursor = db.execute(_SEALED_RANGE, (base | a, base | b, b - a))
            got = 0
            while rows := cursor.fetchmany(_BATCH):
                out.extend(decode_rows(sealer.open_rows(rows), SEQ_MAX))
                got += len(rows)
            if got != b - a:
                raise missing_rows(row.id, owner, a, b, got)
    return out


def _fill(
    db: sqlite3.Connection,
    row: SessionRow,
    items: list[Any],
    whole: list[int],
    first: int,
) -> None:
    """Fill ``items[i]`` for each ``i`` of ``whole`` with its row read whole, by its key.

    ``first`` is the key of ``items[0]``; the rows are read in the caller's transaction.

    Raises:
        StoreCorruptError: a row does not decode, or is gone.
    """
    keys = dumps([first + i for i in whole])
    found = decode_rows(db.execute(_READ_KEYS, (keys,)).fetchall(), SEQ_MAX)
    if len(found) != len(whole):
        raise StoreCorruptError(f"session {row.id!r}: rows changed during the read")
    for i, record in zip(whole, found, strict=True):
        items[i] = record


def read_small(db: sqlite3.Connection, row: SessionRow, parts: list[Segment]) -> list[Record]:
    """A short read over several segments, in one statement (see :func:`is_small`).

    Checking a few rows' order costs less than a statement per segment.

    Raises:
        StoreCorruptError: a segment lacks rows, or a row does not decode.
    """
    lo, hi = parts[0][1], parts[-1][2]
    if len(parts) <= READ_RANGES_MAX:
        keys: list[int] = []
        for o, a, b in parts:
            base = o << SEQ_BITS
            keys += (base | a, base | b)
        rows = db.execute(read_ranges(len(parts)), keys).fetchall()
        # The segments run on from one to the next, so the rows in order and complete
        # hold exactly the positions lo..hi-1 (a range yields only its own owner's rows,
        # so a position found is found in its segment): one compare proves both. The
        # arms come back in their order; sorted only if the engine gave another.
        if [r[0] & SEQ_MAX for r in rows] != list(range(lo, hi)):
            rows.sort(key=_position)
            _check_counts(row, parts, [r[0] & SEQ_MAX for r in rows])
        return decode_rows(rows, SEQ_MAX)
    ranges = [((o << SEQ_BITS) | a, (o << SEQ_BITS) | b) for o, a, b in parts]
    rows = db.execute(_READ_RANGES, (dumps(ranges),)).fetchall()
    # A range yields at most its span of rows (distinct keys), so when the total is
    # right every range gave its span.
    if len(rows) != hi - lo:
        _check_counts(row, parts, [r[1] & SEQ_MAX for r in rows])
    return decode_rows(rows, SEQ_MAX, first=1)


def _position(r: tuple[int, ...]) -> int:
    return r[0] & SEQ_MAX


def _check_counts(row: SessionRow, parts: list[Segment], positions: list[int]) -> None:
    """Name the first segment whose rows are not all there (positions: the rows', sorted).

    Raises:
        StoreCorruptError: a segment has another count of rows than its span.
    """
    for owner, a, b in parts:
        got = bisect_left(positions, b) - bisect_left(positions, a)
        if got != b - a:
            raise missing_rows(row.id, owner, a, b, got)
    if len(positions) != len(set(positions)):
        raise StoreCorruptError(f"session {row.id!r}: a position was read twice")


def read_view(
    db: sqlite3.Connection, row: SessionRow, parts: list[Segment]
) -> list[Message | Record]:
    """The items of ``parts``, read in ``db``'s open read transaction.

    Raises:
        StoreCorruptError: a segment lacks rows, or a row does not decode.
    """
    out: list[Message | Record] = []
    with paused_collector():
        for owner, a, b in parts:
            base = owner << SEQ_BITS
            cursor = db.execute(_VIEW_RANGE, (base | a, base | b, b - a))
            got = 0
            while rows := cursor.fetchmany(_BATCH):
                # A row's position is its place in the run (the count is checked below).
                items, whole = decode_view_rows(rows, range(a + got, b), whole_columns)
                if whole:
                    _fill(db, row, items, whole, base | (a + got))
                out.extend(items)  # type: ignore[arg-type]  # every None was filled
                got += len(rows)
            if got != b - a:
                raise missing_rows(row.id, owner, a, b, got)
    return out
