"""What the two SQL stores share: the statements that are the same in both.

The SQLite and PostgreSQL stores keep the same tables (see ``_schema.py``, where
the schema and the migration runner are written once) and differ, for most
statements, only in spelling: placeholders (``?`` or ``%s``),
``MAX``/``GREATEST`` of two values, a boolean column (``deleted = 0`` or ``NOT
deleted``), the ``LATERAL`` join that finds a session's head. A
:class:`Dialect` holds those spellings, and :class:`SQLStore` writes every
statement that is the same in both once: reading a row, listing and lineage,
probes, scratchpad history, token tallies, the integrity check, durable bearer
sessions and live clients.

The hot paths (create, append, write, read, delete) stay in each engine's own
module: on SQLite they are a bare ``INSERT`` under a cached check, on
PostgreSQL one data-modifying statement per call, and neither shape fits the
other.

An engine gives :class:`SQLStore` its connections: two calls that run one read
statement, and context managers for a read snapshot, one write statement and a
write transaction; and it says how to count many key ranges and update many
tallies at once, which is a loop on SQLite and one array statement on
PostgreSQL.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Final

from plait._checks import MAX_INT
from plait._time import now_micros
from plait.context import Tally
from plait.errors import (
    ControllerConflictError,
    SessionNotFoundError,
    StaleSessionError,
    StoreCorruptError,
    StoreCorruptWarning,
    StoreError,
)
from plait.layout import segments
from plait.records import JSONValue, Record, dumps
from plait.store.base import BearerRow, LiveClientRow, ScratchpadEntry, SessionRow
from plait.store.sql._check import Problem
from plait.store.sql._check import check as check_store
from plait.store.sql._counts import SQLCounts
from plait.store.sql._dialect import Connection, Dialect, Statements
from plait.store.sql._moves import move_head
from plait.store.sql._objects import SQLObjects
from plait.store.sql._registry import SQLRegistry
from plait.store.sql._retention import SQLRetention
from plait.store.sql._rows import (
    SEQ_BITS,
    bases_text,
    bearer_row_from_columns,
    kept_for,
    live_row_from_columns,
    prefix_text,
    row_from_columns,
    scratchpad_entry_from_columns,
)
from plait.store.sql._schema import Migration
from plait.store.sql._sealstore import SQLSealing
from plait.store.sql._search import SQLSearch
from plait.store.sql._skim import SQLSkim

__all__ = [
    "Connection",
    "Counted",
    "Dialect",
    "SQLStore",
    "check_start",
    "created_row",
    "describe",
    "first_mpos",
    "successor",
    "written_row",
]

_SHIFT: Final = SEQ_BITS
_CHAIN_CHUNK: Final = 4096
"""First parents one recursive read follows (a loop is cut after at most this many)."""


# -- the shared cold paths -------------------------------------------------------------


def created_row(row: SessionRow, pk: int, now_us: int) -> SessionRow:
    """The row ``create`` returns: as given, with its key, first version and times."""
    return replace(
        row,
        pk=pk,
        row_version=1,
        created_at_us=now_us,
        updated_at_us=now_us,
        parent_ids=tuple(row.parent_ids),
    )


def written_row(expected: SessionRow, updated: SessionRow, now_us: int) -> SessionRow:
    """The row ``write`` returns: ``updated``'s mutable columns on ``expected``'s identity."""
    return replace(
        updated,
        pk=expected.pk,
        id=expected.id,
        workspace=expected.workspace,
        row_version=expected.row_version + 1,
        created_at_us=expected.created_at_us,
        updated_at_us=now_us,
        parent_ids=expected.parent_ids,
        lineage_operator=expected.lineage_operator,
        branched_at=expected.branched_at,
    )


def check_start(verb: str, expected: SessionRow, records: Sequence[Record]) -> None:
    """Refuse records that do not start at the head.

    Raises:
        StoreError: the first record's position is not ``expected``'s head.
    """
    if records and records[0].seq != expected.layout.end_seq:
        raise StoreError(
            f"{verb} {expected.id!r}: records start at {records[0].seq}, "
            f"the head is at {expected.layout.end_seq}"
        )


def first_mpos(row: SessionRow, records: Sequence[Record]) -> int:
    """Messages before the first of a new session's own records (checked to fill its segment).

    Raises:
        StoreError: the records are not exactly the positions the row's layout owns.
    """
    layout = row.layout
    if not records:
        return layout.end_msgs
    if records[0].seq != layout.own_lo or records[-1].seq != layout.end_seq - 1:
        raise StoreError("records do not fill the session's own segment")
    return layout.end_msgs - sum(1 for r in records if r.kind != "event")


def describe(what: str, subject: object = None) -> str:
    """Name a read in an error: ``what``, then ``subject``'s repr when there is one."""
    return what if subject is None else f"{what} {subject!r}"


class Counted(Exception):
    """Another writer counted some of these positions first: roll the batch back."""


def successor(prefix: str) -> str | None:
    """The first string after every string that starts with ``prefix``, in code point order.

    ``[prefix, successor(prefix))`` is then exactly the strings that start with
    ``prefix``. None when there is none (a prefix of nothing but the last code point).
    """
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if 0xD800 <= code <= 0xDFFF:
            code = 0xE000  # surrogates are no characters: the next one is U+E000
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return None


class SQLStore(
    SQLObjects, SQLRegistry, SQLRetention, SQLSearch, SQLSkim, SQLSealing, SQLCounts, ABC
):
    """The statements both SQL stores share, over the connections an engine hands out.

    A subclass sets :attr:`dialect` and implements the connection hooks; every
    public method here then has the semantics the store protocols describe.
    """

    dialect: Dialect
    _q: Statements
    _links: bool = True
    """Whether the schema has ``sessions.base_owner`` (a store opened with fewer migrations not)."""
    _migrations: tuple[Migration, ...]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "dialect" in cls.__dict__:
            cls._q = Statements(cls.dialect)

    # -- what an engine provides --------------------------------------------------------

    @abstractmethod
    def _check_open(self) -> None:
        """Raise :class:`StoreError` if the store is closed."""
        ...

    @abstractmethod
    def _one(self, query: str, params: Sequence[Any], what: str, subject: object = None) -> Any:
        """Run one read statement; return its first row or None.

        ``what`` (and ``subject``, shown with ``repr``) name the read in an error;
        the text is built only when there is one, since reads are the commonest call.
        """
        ...

    @abstractmethod
    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]:
        """Run one read statement; return all its rows (see :meth:`_one`)."""
        ...

    @abstractmethod
    def _snapshot(self, what: str, subject: object = None) -> AbstractContextManager[Connection]:
        """A connection whose statements all read one state of the database (see :meth:`_one`)."""
        ...

    @abstractmethod
    def _write(self, what: str) -> AbstractContextManager[Connection]:
        """A connection for one write statement, committed when the block ends."""
        ...

    @abstractmethod
    def _transaction(self, what: str) -> AbstractContextManager[Connection]:
        """A write transaction: committed when the block ends, rolled back if it raises."""
        ...

    @abstractmethod
    def _counting(self, what: str) -> AbstractContextManager[Connection]:
        """The write transaction that stores tallies (raises :class:`Counted` on a lost race)."""
        ...

    @abstractmethod
    def _update_tallies(
        self, conn: Connection, keys: list[int], tokens: list[int], running: list[str]
    ) -> int:
        """Store counts and tallies on rows not counted yet; return how many were."""
        ...

    def _side_write(self, what: str) -> AbstractContextManager[Connection]:
        """A write transaction that moves no session (object-space writes)."""
        return self._transaction(what)

    def _count_ranges(self, conn: Connection, ranges: list[tuple[int, int]]) -> list[int]:
        """Count the records in each ``[lo, hi)`` key range (a count each)."""
        count = self.dialect.sql("SELECT COUNT(*) FROM records WHERE key >= ? AND key < ?")
        return [int(conn.execute(count, r).fetchone()[0]) for r in ranges]

    def _engine_problems(self, conn: Connection) -> list[str]:
        """The engine's own integrity check (none by default)."""
        return []

    def _live_locked(self, conn: Connection, session_id: str) -> None:
        """Make the live-client writes of every process on one session take turns."""
        return None  # by default nothing: one engine's own write lock already serialises them

    def _fence(self, conn: Connection, session_id: str) -> None:
        """First in a write transaction on a session: refuse a writer whose lock was lost.

        By default nothing: an engine whose writer lock cannot be lost while its holder
        lives (SQLite's file lock) needs no fence (D232).

        Raises:
            WriterLockLostError: the engine's fence refused this writer.
        """
        return None

    def _changed(self, session_id: str) -> None:
        """Tell listeners in other processes that the session changed (called after commit)."""
        return None  # by default nothing: an engine without a change feed has none to tell

    @property
    def code_version(self) -> int:
        """The newest schema version this code knows."""
        return max((m[0] for m in self._migrations), default=0)

    # -- rows -------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRow | None:
        """Return the stored row of a live session, or None."""
        q = self._q
        kept = kept_for(session_id) if q.get_kept else None
        if kept is not None:
            # The layout last read under this id is compared in the engine: when it is
            # the same, the row comes back without it and the decoded one is used.
            r = self._one(q.get_kept, (kept[0], session_id), "get", session_id)
            return row_from_columns(r, kept, self._sealer) if r is not None else None
        r = self._one(q.get, (session_id,), "get", session_id)
        return row_from_columns(r, None, self._sealer) if r is not None else None

    def move_head(
        self,
        expected: SessionRow,
        head: SessionRow,
        hidden_id: str,
        records: Sequence[Record] = (),
    ) -> SessionRow:
        """Give the session's id to ``head``, keeping its old head as ``hidden_id`` (atomic).

        See :meth:`plait.store.base.TranscriptStore.move_head`.
        """
        self._check_open()
        with self._transaction(f"move the head of {expected.id!r}") as conn:
            self._fence(conn, expected.id)
            pk = move_head(
                conn, self.dialect, expected, head, hidden_id, records, now_micros(), self
            )
            self._records_written(pk)
            bases = head.layout.bases
            if not head.pk and bases and self._links:
                # The new head is a branch of the row it shares its layout with: link it,
                # so a delete walks up from it (see _litegc.collect and _pggc.collect).
                prefix = prefix_text(bases, bases_text(bases))
                conn.execute(self._q.link_base_owner, (bases[-1][0], prefix, pk))
            r = conn.execute(self._q.row_by_pk, (pk,)).fetchone()
        self._changed(expected.id)
        return row_from_columns(r, None, self._sealer)

    def _stale(self, conn: Connection, expected: SessionRow) -> StaleSessionError:
        """The error for a compare-and-set that lost: the version found now, if any."""
        r = conn.execute(self._q.row_by_pk, (expected.pk,)).fetchone()
        actual = row_from_columns(r, None, self._sealer).version if r is not None else None
        return StaleSessionError(expected.id, expected.version, actual)

    # -- listing and lineage ------------------------------------------------------------

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        """Return up to ``limit`` live sessions, most recently written first.

        A row that cannot be decoded is left out, with a :class:`StoreCorruptWarning`
        naming it, and the next one listed in its place: one damaged session does
        not hide the others.
        """
        if workspace is None:
            return self._listed(self._q.recent_all, (), limit)
        return self._listed(self._q.recent, (workspace,), limit)

    def recent_with_prefix(
        self, workspace: str | None, prefix: str, limit: int
    ) -> list[SessionRow]:
        """Return up to ``limit`` live sessions whose id starts with ``prefix``, newest first.

        One range of the ids' index, ``[prefix, successor)`` in code point order, so
        the listing reads only the sessions it returns; damaged rows are left out as
        :meth:`recent` leaves them.
        """
        upper = successor(prefix)
        if not prefix or upper is None:  # every id (or past the last code point)
            rows = self.recent(workspace, MAX_INT if prefix else limit)
            return [r for r in rows if r.id.startswith(prefix)][:limit]
        if workspace is None:
            return self._listed(self._q.prefix_all, (prefix, upper), limit)
        return self._listed(self._q.prefix, (prefix, upper, workspace), limit)

    def _listed(self, query: str, params: tuple[Any, ...], limit: int) -> list[SessionRow]:
        wanted = limit
        while True:
            rows = self._all(query, (*params, wanted), "list sessions")
            out: list[SessionRow] = []
            bad: list[str] = []
            for r in rows:
                try:
                    out.append(row_from_columns(r, None, self._sealer))
                except StoreCorruptError as exc:
                    bad.append(str(exc))
            if not bad or len(out) >= limit or len(rows) < wanted or wanted >= MAX_INT:
                break
            wanted = min(MAX_INT, limit + len(bad))
        if bad:
            warnings.warn(
                StoreCorruptWarning(
                    f"{len(bad)} session row(s) could not be read and are not listed "
                    f"({'; '.join(bad[:3])}); `plait db check --deep` names what is damaged"
                ),
                stacklevel=3,  # the caller of recent() or recent_with_prefix()
            )
        return out[:limit]

    def children(self, session_id: str) -> list[str]:
        """Return the ids of live children, oldest first."""
        rows = self._all(self._q.children, (session_id,), "children of", session_id)
        return [r[0] for r in rows]

    def ancestors(self, session_id: str) -> list[str]:
        """Return the chain of live first parents, nearest first (one recursive read per chunk).

        The store walks the chain itself, :data:`_CHAIN_CHUNK` links per read;
        a loop (a reused id) is cut where a session comes round again.
        """
        chain: list[str] = []
        seen = {session_id}
        current = session_id
        while True:
            found = self._all(
                self._q.ancestors, (current, _CHAIN_CHUNK), "ancestors of", session_id
            )
            for (sid,) in found:
                if sid in seen:
                    return chain
                seen.add(sid)
                chain.append(sid)
            if len(found) < _CHAIN_CHUNK:
                return chain
            current = chain[-1]

    def probe(self, row: SessionRow, seq: int) -> tuple[int, bool]:
        """Return ``(messages before seq, is a message)`` for one position."""
        parts = segments(row.layout, row.pk, seq, seq + 1)
        if not parts:
            raise StoreCorruptError(f"session {row.id!r}: no position {seq}")
        found = self._one(self._q.probe, ((parts[0][0] << _SHIFT) | seq,), "probe", row.id)
        if found is None:
            raise StoreCorruptError(f"session {row.id!r}: row at position {seq} is missing")
        return int(found[0]), found[1] != "event"

    def scratchpad_history(self, session_id: str) -> list[ScratchpadEntry]:
        """Return every stored scratchpad version of a session, oldest first."""
        rows = self._all(self._q.scratchpads, (session_id,), "scratchpad history of", session_id)
        return [scratchpad_entry_from_columns(r, self._sealer) for r in rows]

    def integrity_check(self) -> list[str]:
        """Check every live session's rows, and find rows no session owns.

        The engine's own check (SQLite's ``PRAGMA integrity_check``) comes first;
        damage is reported, never raised (see :meth:`check`).

        Returns:
            The problems found, one line each (empty when all is well).
        """
        return [str(p) for p in self.check()]

    def check(self, *, deep: bool = False) -> list[Problem]:
        """Check the store and report what is damaged, by session and record.

        Args:
            deep: also decode every record (payload, meta, token tally), every
                row's layout, settings and scratchpad history; a range that cannot
                be read is read record by record to name each one lost.

        Returns:
            The problems found (empty when all is well), the engine's own first.
        """
        return check_store(self, deep=deep)

    # -- counted once -------------------------------------------------------------------

    def _tally_rows(self, session_id: str, keys: list[int]) -> list[tuple[int, str]]:
        """The ``(key, running)`` of the counted rows among these keys (a point read each)."""
        out: list[tuple[int, str]] = []
        for key in keys:
            found = self._one(self._q.tally, (key,), "read tallies of", session_id)
            if found is not None and found[0] is not None:
                out.append((key, found[0]))
        return out

    def set_tallies(
        self, row: SessionRow, start: int, counted: Sequence[tuple[int, Tally]]
    ) -> bool:
        """Store counts and tallies from ``start`` on, unless another writer counted first."""
        if not counted:
            self._check_open()
            return True
        end = start + len(counted)
        parts = segments(row.layout, row.pk, start, end) if start >= 0 else []
        if sum(b - a for _, a, b in parts) != len(counted):
            raise StoreError(f"session {row.id!r}: positions [{start}, {end}) are not in it")
        keys: list[int] = []
        tokens: list[int] = []
        running: list[str] = []
        for owner, a, b in parts:
            base = owner << _SHIFT
            for seq in range(a, b):
                n, tally = counted[seq - start]
                keys.append(base | seq)
                tokens.append(n)
                running.append(tally.to_json())
        try:
            with self._counting(f"count {row.id!r}") as conn:
                if self._update_tallies(conn, keys, tokens, running) != len(keys):
                    raise Counted
        except Counted:
            return False
        return True

    # -- durable bearer sessions ----------------------------------------------------------

    def bearer_insert(self, row: BearerRow) -> bool:
        """Store a new durable session; False (nothing written) if its hash is taken."""
        with self._write("store a durable session") as conn:
            cur = conn.execute(
                self._q.bearer_insert,
                (
                    row.token_hash,
                    row.principal,
                    dumps(list(row.scopes)),
                    dumps(dict(row.attributes)),
                    row.created_at_us,
                    row.last_seen_at_us,
                    row.expires_at_us,
                ),
            )
            return cur.rowcount == 1

    def bearer_get(self, token_hash: str) -> BearerRow | None:
        """Return the durable session with this token hash, expired or not, or None."""
        r = self._one(self._q.bearer_get, (token_hash,), "read a durable session")
        return bearer_row_from_columns(r) if r is not None else None

    def bearer_touch(self, token_hash: str, now_us: int) -> BearerRow | None:
        """Move ``last_seen_at`` forward if the session is unexpired at ``now_us`` (atomic)."""
        with self._write("touch a durable session") as conn:
            # All rows: a RETURNING statement must finish before its transaction commits.
            r = conn.execute(self._q.bearer_touch, (now_us, token_hash, now_us)).fetchall()
        return bearer_row_from_columns(r[0]) if r else None

    def bearer_expire(self, token_hash: str, now_us: int) -> bool:
        """Set ``expires_at`` to ``now_us`` if the session is still live then."""
        with self._write("expire a durable session") as conn:
            cur = conn.execute(self._q.bearer_expire, (now_us, now_us, token_hash, now_us))
            return cur.rowcount == 1

    def bearer_purge(self, expired_before_us: int) -> int:
        """Delete durable sessions that expired before this time; return how many."""
        with self._write("purge durable sessions") as conn:
            return conn.execute(self._q.bearer_purge, (expired_before_us,)).rowcount

    # -- live clients ---------------------------------------------------------------------

    def _live_begin(self, conn: Connection, session_id: str) -> int:
        """In a transaction: lock the session's live state; return its pk.

        The session row is locked against deletion (where the engine has row
        locks) and the live writes of every process on it take turns.
        """
        found = conn.execute(self._q.live_pk, (session_id,)).fetchone()
        if found is None:
            raise SessionNotFoundError(session_id)
        self._live_locked(conn, session_id)
        return int(found[0])

    def _live_row(self, conn: Connection, pk: int, client_id: str) -> LiveClientRow | None:
        r = conn.execute(self._q.live_row, (pk, client_id)).fetchone()
        return live_row_from_columns(r) if r is not None else None

    def live_attach(
        self, row: LiveClientRow, *, takeover: bool
    ) -> tuple[LiveClientRow, str | None]:
        """Attach (or re-attach) a live client; one controller per session, atomically."""
        with self._transaction(f"attach {row.client_id!r} to {row.session_id!r}") as conn:
            pk = self._live_begin(conn, row.session_id)
            demoted: str | None = None
            if row.mode == "controller":
                found = conn.execute(self._q.live_controller, (pk,)).fetchone()
                if found is not None and found[0] != row.client_id:
                    if not takeover:
                        raise ControllerConflictError(row.session_id, found[0])
                    demoted = str(found[0])
                    conn.execute(self._q.live_demote, (pk, demoted))
            conn.execute(
                self._q.live_upsert,
                (
                    pk,
                    row.client_id,
                    row.mode,
                    row.attached_at_us,
                    row.last_seen_at_us,
                    dumps(dict(row.metadata)),
                ),
            )
            stored = self._live_row(conn, pk, row.client_id)
        self._changed(row.session_id)
        assert stored is not None
        return stored, demoted

    def live_heartbeat(
        self,
        session_id: str,
        client_id: str,
        now_us: int,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> LiveClientRow | None:
        """Move an attached client's ``last_seen_at`` (and replace its metadata if given)."""
        with self._transaction(f"heartbeat of {client_id!r} on {session_id!r}") as conn:
            pk = self._live_begin(conn, session_id)
            cur = conn.execute(
                self._q.live_heartbeat,
                (
                    now_us,
                    dumps(dict(metadata)) if metadata is not None else None,
                    pk,
                    client_id,
                ),
            )
            found = self._live_row(conn, pk, client_id)
        if cur.rowcount:
            self._changed(session_id)
        return found

    def live_release(self, session_id: str, client_id: str) -> LiveClientRow | None:
        """Detach a client (releasing control if it had it); return its last row or None."""
        with self._transaction(f"release {client_id!r} from {session_id!r}") as conn:
            pk = self._live_begin(conn, session_id)
            found = self._live_row(conn, pk, client_id)
            if found is not None:
                conn.execute(self._q.live_delete, (pk, client_id))
        if found is not None:
            self._changed(session_id)
        return found

    def live_clients(self, session_id: str) -> list[LiveClientRow]:
        """Return the clients attached to a live session, in the order they attached."""
        rows = self._all(self._q.live_clients, (session_id,), "live clients of", session_id)
        return [live_row_from_columns(r) for r in rows]
