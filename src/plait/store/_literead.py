"""SQLite's view read: a history's messages read as messages (D205).

A message's row is read for its kind and payload only and decoded straight into
its :class:`~plait.records.Message` (``records.decode_view_rows``); the few rows
a view keeps whole (summaries, events, opaque items) are read whole by key, one
statement per batch that holds any, in the caller's read transaction.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Final

from plait.errors import StoreCorruptError
from plait.layout import Segment
from plait.records import Message, Record, collector_paused, decode_rows, decode_view_rows, dumps
from plait.store._rows import SEQ_BITS, SEQ_MAX

if TYPE_CHECKING:
    from plait.store.base import SessionRow

__all__ = ["read_view"]

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


def read_view(
    db: sqlite3.Connection, row: SessionRow, parts: list[Segment]
) -> list[Message | Record]:
    """The items of ``parts``, read in ``db``'s open read transaction.

    Raises:
        StoreCorruptError: a segment lacks rows, or a row does not decode.
    """
    out: list[Message | Record] = []
    with collector_paused():
        for owner, a, b in parts:
            base = owner << SEQ_BITS
            cursor = db.execute(_VIEW_RANGE, (base | a, base | b, b - a))
            got = 0
            while rows := cursor.fetchmany(_BATCH):
                # A row's position is its place in the run (the count is checked below).
                items, whole = decode_view_rows(rows, range(a + got, b))
                if whole:
                    keys = dumps([base | (a + got + i) for i in whole])
                    found = decode_rows(db.execute(_READ_KEYS, (keys,)).fetchall(), SEQ_MAX)
                    if len(found) != len(whole):
                        raise StoreCorruptError(
                            f"session {row.id!r}: rows of owner {owner} at [{a}, {b}) "
                            "changed during the read"
                        )
                    for i, record in zip(whole, found, strict=True):
                        items[i] = record
                out.extend(items)  # type: ignore[arg-type]  # every None was filled
                got += len(rows)
            if got != b - a:
                raise StoreCorruptError(
                    f"session {row.id!r}: expected {b - a} rows at [{a}, {b}) "
                    f"of owner {owner}, found {got}"
                )
    return out
