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
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from plait._checks import MAX_INT
from plait._time import now_micros
from plait.context import Tally
from plait.errors import (
    ControllerConflictError,
    InvalidArgumentError,
    SessionNotFoundError,
    StaleSessionError,
    StoreCorruptError,
    StoreCorruptWarning,
    StoreError,
)
from plait.layout import segments
from plait.records import JSONValue, Record, dumps
from plait.store._check import Problem
from plait.store._check import check as check_store
from plait.store._moves import HIDDEN_OPERATOR, move_head
from plait.store._objects import SQLObjects
from plait.store._rows import (
    BEARER_COLUMNS,
    LIVE_COLUMNS,
    SEQ_BITS,
    SEQ_MAX,
    bearer_row_from_columns,
    live_row_from_columns,
    row_from_columns,
    scratchpad_entry_from_columns,
)
from plait.store._schema import Migration
from plait.store.base import BearerRow, LiveClientRow, ScratchpadEntry, SessionRow

__all__ = [
    "Connection",
    "Counted",
    "Dialect",
    "SQLStore",
    "check_start",
    "created_row",
    "describe",
    "first_mpos",
    "written_row",
]

_SHIFT: Final = SEQ_BITS


class Cursor(Protocol):
    """What the shared code reads of a DB-API cursor (sqlite3's or psycopg's)."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...


class Connection(Protocol):
    """What the shared code calls on a connection (sqlite3's or psycopg's)."""

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement."""
        ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL engine spells what the shared statements need."""

    param: str
    """The positional placeholder: ``?`` or ``%s``."""
    greatest: str
    """The larger of two values: ``MAX`` (SQLite's scalar form) or ``GREATEST``."""
    least: str
    """The smaller of two values: ``MIN`` or ``LEAST``."""
    live: str
    """A live (not deleted) session row, as a condition on ``deleted``."""
    live_s: str
    """The same condition on the session row ``s``."""
    select_row: str
    """``SELECT`` of a session row ``s`` with its head (its newest own record ``h``)."""
    key_share: str
    """The lock a live-client write takes on its session row (``FOR KEY SHARE`` or none)."""
    tombstone: str
    """The ``SET`` list that makes a row a tombstone giving up its id (to a value no id takes)."""
    row_lock: str = ""
    """A statement locking the session row ``pk = ?`` against appends, or none (SQLite's
    ``BEGIN IMMEDIATE`` already holds every writer off)."""

    def sql(self, template: str) -> str:
        """Spell a shared statement in this dialect.

        ``?`` becomes :attr:`param`; ``{live}``, ``{live_s}``, ``{greatest}``,
        ``{least}``, ``{select_row}`` and ``{key_share}`` become their forms.
        """
        text = template.format(
            live=self.live,
            live_s=self.live_s,
            greatest=self.greatest,
            least=self.least,
            select_row=self.select_row,
            key_share=self.key_share,
        )
        return text.replace("?", self.param) if self.param != "?" else text


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


def _tally(row: SessionRow, seq: int, text: str) -> Tally:
    try:
        return Tally.from_json(text)
    except InvalidArgumentError as exc:
        raise StoreCorruptError(f"session {row.id!r}: tally at position {seq}: {exc}") from exc


class SQLStore(SQLObjects, ABC):
    """The statements both SQL stores share, over the connections an engine hands out.

    A subclass sets :attr:`dialect` and implements the connection hooks; every
    public method here then has the semantics the store protocols describe.
    """

    dialect: Dialect
    _q: _Statements
    _migrations: tuple[Migration, ...]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "dialect" in cls.__dict__:
            cls._q = _Statements(cls.dialect)

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

    def _notify(self, conn: Connection, session_id: str) -> None:
        """Tell listeners in other processes that the session changed (at commit)."""
        return None  # by default nothing: an engine without a change feed has none to tell

    @property
    def code_version(self) -> int:
        """The newest schema version this code knows."""
        return max((m[0] for m in self._migrations), default=0)

    # -- rows -------------------------------------------------------------------------

    def get(self, session_id: str) -> SessionRow | None:
        """Return the stored row of a live session, or None."""
        r = self._one(self._q.get, (session_id,), "get", session_id)
        return row_from_columns(r) if r is not None else None

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
            pk = move_head(conn, self.dialect, expected, head, hidden_id, records, now_micros())
            self._notify(conn, expected.id)
            r = conn.execute(self._q.row_by_pk, (pk,)).fetchone()
        return row_from_columns(r)

    def _stale(self, conn: Connection, expected: SessionRow) -> StaleSessionError:
        """The error for a compare-and-set that lost: the version found now, if any."""
        r = conn.execute(self._q.row_by_pk, (expected.pk,)).fetchone()
        actual = row_from_columns(r).version if r is not None else None
        return StaleSessionError(expected.id, expected.version, actual)

    # -- listing and lineage ------------------------------------------------------------

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        """Return up to ``limit`` live sessions, most recently written first.

        A row that cannot be decoded is left out, with a :class:`StoreCorruptWarning`
        naming it, and the next one listed in its place: one damaged session does
        not hide the others.
        """
        wanted = limit
        while True:
            if workspace is None:
                rows = self._all(self._q.recent_all, (wanted,), "list sessions")
            else:
                rows = self._all(self._q.recent, (workspace, wanted), "list sessions")
            out: list[SessionRow] = []
            bad: list[str] = []
            for r in rows:
                try:
                    out.append(row_from_columns(r))
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
                stacklevel=2,
            )
        return out[:limit]

    def children(self, session_id: str) -> list[str]:
        """Return the ids of live children, oldest first."""
        rows = self._all(self._q.children, (session_id,), "children of", session_id)
        return [r[0] for r in rows]

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
        return [scratchpad_entry_from_columns(r) for r in rows]

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

    def counted_end(self, row: SessionRow) -> int:
        """Return one past the newest counted position (a backward scan of the uncounted tail)."""
        parts = segments(row.layout, row.pk, 0, row.layout.end_seq)
        if not parts:
            self._check_open()
            return 0
        with self._snapshot("count", row.id) as conn:
            for owner, a, b in reversed(parts):
                base = owner << _SHIFT
                found = conn.execute(self._q.counted, (base | a, base | b)).fetchone()
                if found is not None:
                    return (int(found[0]) & SEQ_MAX) + 1
        return 0

    def tallies(self, row: SessionRow, positions: Sequence[int]) -> dict[int, Tally]:
        """Return the stored tallies at these positions (point reads by key)."""
        keys: dict[int, int] = {}
        for seq in dict.fromkeys(positions):
            parts = segments(row.layout, row.pk, seq, seq + 1) if seq >= 0 else []
            if parts:
                keys[(parts[0][0] << _SHIFT) | seq] = seq
        if not keys:
            self._check_open()
            return {}
        found = self._tally_rows(row.id, list(keys))
        return {keys[key]: _tally(row, keys[key], text) for key, text in found}

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
            self._notify(conn, row.session_id)
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
            if cur.rowcount:
                self._notify(conn, session_id)
            return self._live_row(conn, pk, client_id)

    def live_release(self, session_id: str, client_id: str) -> LiveClientRow | None:
        """Detach a client (releasing control if it had it); return its last row or None."""
        with self._transaction(f"release {client_id!r} from {session_id!r}") as conn:
            pk = self._live_begin(conn, session_id)
            found = self._live_row(conn, pk, client_id)
            if found is not None:
                conn.execute(self._q.live_delete, (pk, client_id))
                self._notify(conn, session_id)
        return found

    def live_clients(self, session_id: str) -> list[LiveClientRow]:
        """Return the clients attached to a live session, in the order they attached."""
        rows = self._all(self._q.live_clients, (session_id,), "live clients of", session_id)
        return [live_row_from_columns(r) for r in rows]


class _Statements:
    """Every shared statement, spelled once per dialect when its store class is made."""

    def __init__(self, d: Dialect) -> None:
        order = "ORDER BY s.updated_at DESC, s.pk DESC LIMIT ?"
        # A hidden head (what an id named before a rewind) is listed only in the lineage.
        shown = f" AND (s.lineage_operator IS NULL OR s.lineage_operator <> '{HIDDEN_OPERATOR}') "
        self.get = d.sql("{select_row} WHERE s.id = ? AND {live_s}")
        self.row_by_pk = d.sql("{select_row} WHERE s.pk = ? AND {live_s}")
        self.recent_all = d.sql("{select_row} WHERE {live_s}" + shown + order)
        self.recent = d.sql("{select_row} WHERE s.workspace = ? AND {live_s}" + shown + order)
        self.live_rows = d.sql("{select_row} WHERE {live_s}")
        self.children = d.sql(
            "SELECT s.id FROM lineage l JOIN sessions s ON s.id = l.child_id "
            "WHERE l.parent_id = ? AND {live_s} ORDER BY s.pk"
        )
        self.probe = d.sql("SELECT mpos, kind FROM records WHERE key = ?")
        self.scratchpads = d.sql(
            "SELECT p.version, p.scratchpad, p.source, p.reason, p.metadata, p.created_at "
            "FROM scratchpads p JOIN sessions s ON s.pk = p.session_pk "
            "WHERE s.id = ? AND {live_s} ORDER BY p.version"
        )
        self.orphans = (
            "SELECT DISTINCT key >> 32 FROM records EXCEPT SELECT pk FROM sessions ORDER BY 1"
        )
        self.counted = d.sql(
            "SELECT key FROM records WHERE key >= ? AND key < ? AND running IS NOT NULL "
            "ORDER BY key DESC LIMIT 1"
        )
        self.tally = d.sql("SELECT running FROM records WHERE key = ?")
        self.bearer_insert = d.sql(
            f"INSERT INTO durable_sessions ({BEARER_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        )
        self.bearer_get = d.sql(
            f"SELECT {BEARER_COLUMNS} FROM durable_sessions WHERE token_hash = ?"
        )
        self.bearer_touch = d.sql(
            "UPDATE durable_sessions SET last_seen_at = {greatest}(last_seen_at, ?) "
            f"WHERE token_hash = ? AND expires_at > ? RETURNING {BEARER_COLUMNS}"
        )
        self.bearer_expire = d.sql(
            "UPDATE durable_sessions SET expires_at = ?, last_seen_at = {least}(last_seen_at, ?) "
            "WHERE token_hash = ? AND expires_at > ?"
        )
        self.bearer_purge = d.sql("DELETE FROM durable_sessions WHERE expires_at < ?")
        self.live_pk = d.sql("SELECT pk FROM sessions WHERE id = ? AND {live}{key_share}")
        self.live_row = d.sql(
            f"SELECT {LIVE_COLUMNS} FROM live_clients c JOIN sessions s ON s.pk = c.session_pk "
            "WHERE c.session_pk = ? AND c.client_id = ?"
        )
        self.live_controller = d.sql(
            "SELECT client_id FROM live_clients WHERE session_pk = ? AND mode = 'controller'"
        )
        self.live_demote = d.sql(
            "UPDATE live_clients SET mode = 'observer' WHERE session_pk = ? AND client_id = ?"
        )
        self.live_upsert = d.sql(
            "INSERT INTO live_clients (session_pk, client_id, mode, attached_at, "
            "last_seen_at, metadata) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (session_pk, client_id) DO UPDATE SET mode = excluded.mode, "
            "last_seen_at = excluded.last_seen_at, metadata = excluded.metadata"
        )
        self.live_heartbeat = d.sql(
            "UPDATE live_clients SET last_seen_at = {greatest}(last_seen_at, ?), "
            "metadata = COALESCE(?, metadata) WHERE session_pk = ? AND client_id = ?"
        )
        self.live_delete = d.sql("DELETE FROM live_clients WHERE session_pk = ? AND client_id = ?")
        self.live_clients = d.sql(
            f"SELECT {LIVE_COLUMNS} FROM live_clients c JOIN sessions s "
            "ON s.pk = c.session_pk WHERE s.id = ? AND {live_s} "
            "ORDER BY c.attached_at, c.client_id"
        )
