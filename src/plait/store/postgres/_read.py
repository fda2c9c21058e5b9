"""PostgreSQL's record reads: one statement over a read's segments, decoded a batch at a time.

:func:`scan_records` runs ``READ`` (records), :func:`scan_view` ``READ_VIEW`` (a history's
messages as messages, ``records.decode_view_rows``); each checks that every segment
had all its rows.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Any, Final

from plait._collector import paused as paused_collector
from plait.errors import StoreCorruptError
from plait.layout import Segment
from plait.records import (
    Message,
    Record,
    decode_records,
    decode_rows,
    decode_view_rows,
)
from plait.store.postgres._sql import READ, READ_ONE, READ_VIEW, READ_VIEW_ONE, key_ranges
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX, missing_rows, whole_columns

if TYPE_CHECKING:
    import psycopg

    from plait.store.base import SessionRow
    from plait.store.sql._sealing import Sealer

__all__ = ["READ_BATCH", "scan_records", "scan_view"]

READ_BATCH: Final = 4096
"""Rows fetched and decoded at a time by a long read."""


def scan_records(
    conn: psycopg.Connection[tuple[Any, ...]],
    row: SessionRow,
    parts: list[Segment],
    sealer: Sealer | None = None,
) -> list[Record]:
    """``READ`` over ``parts`` (``READ_ONE`` for one segment), each segment's rows checked.

    In an encrypted store (``sealer``) every read is ``READ``: a sealed row's key names
    the session whose data key opens it.

    Raises:
        StoreCorruptError: a segment lacks rows, or a row does not open or decode.
    """
    out: list[Record] = []
    if len(parts) == 1 and sealer is None:
        owner, a, b = parts[0]
        with paused_collector():
            cursor = conn.execute(READ_ONE, ((owner << SEQ_BITS) | a, (owner << SEQ_BITS) | b))
            # A segment's range holds at most its span: when all its rows came (checked
            # below), each row's position is its place in the run.
            while rows := cursor.fetchmany(READ_BATCH):
                out.extend(decode_records(rows, range(a + len(out), b)))
        if len(out) != b - a:
            raise missing_rows(row.id, owner, a, b, len(out))
        return out
    counts = [0] * len(parts)
    with paused_collector():
        cursor = conn.execute(READ, key_ranges(parts))
        # Decoded a batch at a time: the read holds its records and one batch of rows.
        while rows := cursor.fetchmany(READ_BATCH):
            for r in rows:
                counts[r[0] - 1] += 1
            if sealer is not None:
                rows = sealer.open_rows(rows, first=1)
            out.extend(decode_rows(rows, SEQ_MAX, first=1))
    for (owner, a, b), got in zip(parts, counts, strict=True):
        if got != b - a:
            raise missing_rows(row.id, owner, a, b, got)
    return out


def scan_view(
    conn: psycopg.Connection[tuple[Any, ...]], row: SessionRow, parts: list[Segment]
) -> list[Message | Record]:
    """``READ_VIEW`` over ``parts`` (``READ_VIEW_ONE`` for one segment).

    Raises:
        StoreCorruptError: the segments lack rows, or a row does not decode.
    """
    if len(parts) == 1:
        owner, a, b = parts[0]
        params: tuple[Any, ...] = ((owner << SEQ_BITS) | a, (owner << SEQ_BITS) | b)
        cursor = conn.execute(READ_VIEW_ONE, params)
    else:
        cursor = conn.execute(READ_VIEW, key_ranges(parts))
    # Rows come segment by segment in key order, and a segment's range holds at most its
    # span: when all rows came, each segment's are its span, position by position.
    seqs = chain.from_iterable(range(a, b) for _, a, b in parts)
    out: list[Message | Record] = []
    with paused_collector():
        while rows := cursor.fetchmany(READ_BATCH):
            items, _ = decode_view_rows(rows, seqs, whole_columns)  # each kept whole: its columns
            out.extend(items)  # type: ignore[arg-type]  # so no item is None
    want = sum(b - a for _, a, b in parts)
    if len(out) != want:
        raise StoreCorruptError(
            f"session {row.id!r}: expected {want} rows in {len(parts)} segment(s), found {len(out)}"
        )
    return out
