"""What retention asks of a store: idle sessions, what an erase would free, the space kept.

Retention (``client.sessions.retain``) removes the sessions idle for longer than asked,
each through the store's own :meth:`~plait.store.base.TranscriptStore.erase`, so whatever
an erase does (overwriting, an index cleaned, a key destroyed) a retention does too. What
it needs beside that verb is optional, a :class:`RetentionStore`, and written once here
for both SQL stores:

* :meth:`~RetentionStore.idle_sessions`: the live sessions (hidden heads are their
  session's) whose last write is older than a time: the row's ``updated_at`` or its
  newest own record, whichever is later (an append moves only the record).
* :meth:`~RetentionStore.erase_plan`: what erasing some sessions would remove now, read
  in one snapshot by the same rule the erase follows (a live layout's shared prefix
  stays; a tombstone nobody reads goes), so a dry run reports what a real run does.
* :meth:`~RetentionStore.footprint` and :meth:`~RetentionStore.reclaim`: the store's
  size as its engine counts it, and giving the freed space back (SQLite's incremental
  vacuum, PostgreSQL's ``VACUUM``).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from plait.errors import StoreCorruptError
from plait.store._protocols import ErasePlan, Footprint
from plait.store.base import HIDDEN_OPERATOR, SessionRow
from plait.store.sql._moves import hidden_heads
from plait.store.sql._rows import SEQ_BITS, row_from_columns

if TYPE_CHECKING:
    from plait.store.sql._dialect import Connection, Dialect
    from plait.store.sql._sealing import Sealer

__all__ = ["SQLRetention"]

_SHIFT: Final = SEQ_BITS


def _bases(text: str) -> list[tuple[int, int]]:
    return [(int(owner), int(hi)) for owner, hi in json.loads(text)]


class SQLRetention:
    """The :class:`RetentionStore` verbs over an engine's connections (both SQL stores)."""

    __slots__ = ()

    dialect: Dialect
    _sealer: Sealer | None
    """The store's sealer (:class:`~plait.store.sql._sealstore.SQLSealing`); None: not encrypted."""

    @abstractmethod
    def _check_open(self) -> None: ...

    @abstractmethod
    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]: ...

    @abstractmethod
    def _snapshot(
        self, what: str, subject: object = None
    ) -> AbstractContextManager[Connection]: ...

    @abstractmethod
    def _store_bytes(self, conn: Connection) -> tuple[int, int | None]:
        """The store's size and the free bytes inside it (None: unknown)."""
        ...

    @abstractmethod
    def reclaim(self, *, full: bool = False) -> str:
        """Give the space freed by deletions back (see :class:`RetentionStore`)."""
        ...

    _octets: str = "length(CAST({} AS BLOB))"
    """The byte length of a text column in the engine's spelling."""

    def idle_sessions(
        self, before_us: int, workspace: str | None, limit: int
    ) -> list[SessionRow]:
        """Live sessions whose last write is before ``before_us`` (see :class:`RetentionStore`)."""
        self._check_open()
        shown = f"(s.lineage_operator IS NULL OR s.lineage_operator <> '{HIDDEN_OPERATOR}')"
        where = "{live_s} AND " + shown + " AND s.updated_at < ?"
        params: tuple[Any, ...] = (before_us,)
        if workspace is not None:
            where += " AND s.workspace = ?"
            params = (*params, workspace)
        # An append writes no row; the row read joins the newest own record, whose time
        # the row's updated_at then shows (row_from_columns), and that is looked at again.
        query = self.dialect.sql(
            "{select_row} WHERE " + where + " ORDER BY s.updated_at, s.pk LIMIT ?"
        )
        rows = self._all(query, (*params, limit), "list idle sessions")
        out = []
        for r in rows:
            try:
                row = row_from_columns(r, None, self._sealer)
            except StoreCorruptError:
                continue  # a row that cannot be read is not removed (`plait db check` names it)
            if row.updated_at_us < before_us:
                out.append(row)
        return out

    def erase_plan(self, session_ids: Sequence[str]) -> ErasePlan:
        """What erasing each of ``session_ids`` would remove (see :class:`RetentionStore`)."""
        self._check_open()
        d = self.dialect
        with self._snapshot("plan an erase") as conn:
            found: list[str] = []
            heads = 0
            erased: set[int] = set()
            pk_of = d.sql("SELECT pk FROM sessions WHERE id = ? AND {live}")
            for sid in dict.fromkeys(session_ids):
                top = conn.execute(pk_of, (sid,)).fetchone()
                if top is None:
                    continue
                found.append(sid)
                erased.add(int(top[0]))
                for hidden in hidden_heads(conn, d, sid):
                    got = conn.execute(pk_of, (hidden,)).fetchone()
                    if got is not None and int(got[0]) not in erased:
                        erased.add(int(got[0]))
                        heads += 1
            if not erased:
                return ErasePlan((), 0, 0, 0)
            # What stays read: every live layout but the erased ones (as erase_sessions
            # and the collection that follows it read them).
            read_upto: dict[int, int] = {}
            for pk, bases in conn.execute(
                d.sql("SELECT pk, bases FROM sessions WHERE {live}")
            ).fetchall():
                if int(pk) in erased:
                    continue
                for owner, hi in _bases(bases):
                    read_upto[owner] = max(read_upto.get(owner, 0), hi)
            ranges = [(pk, read_upto.get(pk, 0)) for pk in sorted(erased)]
            for (pk,) in conn.execute(
                d.sql("SELECT pk FROM sessions WHERE NOT ({live})")
            ).fetchall():
                if int(pk) not in read_upto:
                    ranges.append((int(pk), 0))  # a tombstone nobody reads is collected
            size = self._octets.format("payload") + " + COALESCE(" + self._octets.format(
                "meta"
            ) + ", 0)"
            count = d.sql(
                f"SELECT COUNT(*), COALESCE(SUM({size}), 0) FROM records "
                "WHERE key >= ? AND key < ?"
            )
            records = octets = 0
            for pk, lo in ranges:
                n, b = conn.execute(count, ((pk << _SHIFT) | lo, (pk + 1) << _SHIFT)).fetchone()
                records += int(n)
                octets += int(b)
        return ErasePlan(tuple(found), heads, records, octets)

    def footprint(self) -> Footprint:
        """How much the store holds now (see :class:`Footprint`)."""
        self._check_open()
        with self._snapshot("measure the store") as conn:
            counts = conn.execute(
                "SELECT (SELECT COUNT(*) FROM records), (SELECT COUNT(*) FROM sessions), "
                "(SELECT COUNT(*) FROM checkpoint_objects)"
            ).fetchone()
            size, free = self._store_bytes(conn)
        return Footprint(int(counts[0]), int(counts[1]), int(counts[2]), size, free)
