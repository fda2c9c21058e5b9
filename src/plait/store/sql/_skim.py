"""A read of a range's messages without its events: the SQL both stores share.

A framework's saver (LangGraph's, :mod:`plait.integrations.langgraph`) interleaves
many event records (its checkpoints) with the messages of a conversation. To read a
long session's messages cold, decoding every event first costs most of the read;
:meth:`SQLSkim.read_messages` leaves the event rows undecoded in the database.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final

from plait._collector import paused as paused_collector
from plait.layout import segments
from plait.records import Record, decode_rows
from plait.store.base import SessionRow
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX

if TYPE_CHECKING:
    from plait.store.sql._dialect import Connection, Dialect

__all__ = ["SQLSkim"]

_MESSAGES: Final = (
    "SELECT key, id, kind, payload, meta, created_at, tokens FROM records "
    "WHERE key >= ? AND key < ? AND kind <> 'event' ORDER BY key"
)


class SQLSkim:
    """:meth:`read_messages` over an engine's connections (a mixin of the SQL stores)."""

    __slots__ = ()

    if TYPE_CHECKING:
        dialect: Dialect

        def _snapshot(
            self, what: str, subject: object = None
        ) -> AbstractContextManager[Connection]: ...

    def read_messages(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at ``[lo, hi)`` that are not events, one range scan a segment.

        The event rows are skipped by the database, never sent nor decoded; all
        segments are read from one snapshot.
        """
        parts = segments(row.layout, row.pk, max(lo, 0), min(hi, row.layout.end_seq))
        if not parts:
            return []
        query = self.dialect.sql(_MESSAGES)
        out: list[Record] = []
        what = f"read the messages of {row.id!r}"
        with self._snapshot(what, row.id) as conn, paused_collector():
            for owner, a, b in parts:
                base = owner << SEQ_BITS
                rows = conn.execute(query, (base | a, base | b)).fetchall()
                out.extend(decode_rows(rows, SEQ_MAX))
        return out
