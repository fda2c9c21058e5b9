"""The PostgreSQL store: for sessions shared by several machines or users.

Same data model as the SQLite store (see ``plait.store.sqlite`` and
``docs/architecture.md``), kept in the same tables:

* ``sessions``: one row per session, with its copy-on-write layout.
* ``records``: one row per record, keyed by ``owner << 32 | seq``, so a session's
  rows are one range of the primary-key index: appending inserts at the end of
  that range and reading any slice is one index range scan.
* ``lineage``: parent -> child edges, so children are found without a scan.
* ``scratchpads``: every version of every scratchpad.
* ``plait_schema``: the migrations applied.

What differs, and why:

* **Round trips dominate.** A statement costs a network round trip, so every
  hot operation is ONE statement in its own (autocommit) transaction: an append
  checks the session is live, inserts its records (the primary key is the
  compare-and-set), moves ``updated_at`` only when another session is ahead,
  and notifies listeners, all in one statement built from data-modifying CTEs.
  Records travel as arrays (``unnest``), so the statement's shape does not
  depend on how many there are and the server keeps it prepared; the common
  one-record append sends scalars, cheaper to build and to send.
* **Concurrency is row locks, not one writer.** An append takes ``FOR KEY
  SHARE`` on its session row, which only a delete (it changes the row's key)
  conflicts with; a row write is a conditional ``UPDATE`` whose ``WHERE`` is the
  compare-and-set; a fork locks the rows of the sessions it shares rows with, and
  a delete locks what it collects before looking again, so a fork and the delete
  of its source never lose rows between them.
* **Writer locks are advisory locks** held on one connection (never a pooled
  one) that the stores of a process on the same database and schema share, as
  the protocol says a lock belongs to the process: they die with the
  connection, so with the process, however it ends.
* **Every committed write notifies** ``plait_session`` with the session's id
  (see :meth:`PostgresStore.changes`).
* **Migrations are not applied to an existing schema by default**: a shared
  server is not one user's file. A fresh schema is created.

Like any libpq connection, a store must not be used across ``os.fork()``: open
it in the process that uses it.

psycopg 3 and psycopg-pool are imported lazily: ``pip install 'plait[postgres]'``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final

from plait._time import now_micros
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreError,
)
from plait.layout import segments
from plait.records import Record, decode_record, dumps, encode_payload
from plait.store._moves import erase_sessions, hidden_heads
from plait.store._pgfeed import ChangeFeed
from plait.store._pglocks import AdvisoryLocks, lock_key
from plait.store._pgopen import (
    PG_DDL,
    apply_schema,
    current_version,
    location_of,
    open_schema,
    parse_target,
)
from plait.store._pgsql import (
    APPEND,
    APPEND_ONE,
    CREATE,
    HEAD,
    READ,
    REFERENCED,
    SELECT_ROW,
    WRITE,
    record_arrays,
)
from plait.store._rows import ROW_COLUMNS, SEQ_BITS, SEQ_MAX, row_values, scratchpad_values
from plait.store._schema import Migration, checked_migrations, migrations
from plait.store._sql import (
    Connection,
    Counted,
    Dialect,
    SQLStore,
    check_start,
    created_row,
    describe,
    first_mpos,
    written_row,
)
from plait.store.base import ScratchpadEntry, SessionRow

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["MIGRATIONS", "PostgresStore"]

MIGRATIONS: Final[tuple[Migration, ...]] = migrations(PG_DDL)
"""The schema, numbered and ordered (written once for both SQL stores, in ``_schema.py``).

Applied each in one transaction under an advisory lock.
"""


_SHIFT: Final = SEQ_BITS
_SEQ_MAX: Final = SEQ_MAX
_CHANNEL: Final = "plait_session"
_DAMAGED: Final = frozenset({"XX001", "XX002"})
"""SQLSTATEs of damaged storage: ``data_corrupted`` and ``index_corrupted``."""
_SP_PARAMS: Final = ("sp_version", "sp", "sp_source", "sp_reason", "sp_metadata")
_NO_SP: Final = (0, None, None, None, "{}")  # the scratchpad insert's values when it does not run


class PostgresStore(SQLStore):
    """Sessions in a PostgreSQL database, shared by every process that opens it.

    Args:
        url: a ``postgresql://`` (or ``postgres://``) URL or a libpq conninfo
            string. A URL may name a schema as ``?schema=name``.
        schema: keep plait's tables in this schema (created if missing) rather
            than the connection's default one; every pooled connection gets it
            as its ``search_path``. Lower-case letters, digits and ``_``.
        auto_migrate: upgrade an existing older schema when opening. False by
            default: a shared server is not one user's file, so an older schema
            raises :class:`SchemaOutdatedError` naming ``plait db migrate``. A
            database (or schema) without plait's tables is always set up.
        migrations: the migrations to apply (tests pass extra ones).
        pool_size: the most connections the store's pool opens at once.
        connect_timeout: seconds to wait for the server when connecting.

    Raises:
        MissingDependencyError: psycopg is not installed (``plait[postgres]``).
        InvalidArgumentError: the schema name is not a plain identifier.
        StoreError: the URL is invalid or the server cannot be reached.
        SchemaTooNewError: the schema was written by a newer plait.
        SchemaOutdatedError: the schema is older and ``auto_migrate`` is False.
    """

    dialect = Dialect(
        param="%s",
        greatest="GREATEST",
        least="LEAST",
        live="NOT deleted",
        live_s="NOT s.deleted",
        select_row=SELECT_ROW,
        key_share=" FOR KEY SHARE",
        # chr(1): a control character, which no session id may hold (PostgreSQL text
        # cannot hold the NUL SQLite's tombstones use).
        tombstone="deleted = true, id = chr(1) || pk",
        row_lock="SELECT 1 FROM sessions WHERE pk = %s FOR UPDATE",
    )

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        auto_migrate: bool = False,
        migrations: Sequence[Migration] = MIGRATIONS,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:
            raise MissingDependencyError("the PostgreSQL store", "postgres") from exc
        if pool_size < 1:
            raise InvalidArgumentError(f"pool_size must be at least 1, not {pool_size}")
        conninfo, schema, params = parse_target(url, schema)
        self._schema = schema
        self._location = location_of(params, schema)
        self._migrations = checked_migrations(migrations)
        self._channel = _CHANNEL if schema is None else f"{_CHANNEL}.{schema}"
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = max(2, round(connect_timeout))
        if "application_name" not in params:
            kwargs["application_name"] = "plait"
        if schema is not None:
            # Set at connection start-up: no extra round trip, and every pooled
            # connection (including ones the pool opens later) gets it.
            kwargs["options"] = f"{params.get('options') or ''} -c search_path={schema}".strip()
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._closed = False
        self._feed = ChangeFeed(conninfo, kwargs, self._channel, self._guard)
        # One direct connection first: an unreachable server fails here at once (a pool
        # would retry in the background), and it sets up or checks the schema.
        try:
            setup = psycopg.connect(conninfo, **kwargs)
        except psycopg.Error as exc:
            raise StoreError(f"{self._location}: cannot connect to PostgreSQL: {exc}") from exc
        # Name what the connection reached (libpq fills in defaults the URL left out).
        info = setup.info
        server = (info.host, str(info.port), info.dbname)
        self._location = location_of(
            {"user": info.user, "host": info.host, "port": info.port, "dbname": info.dbname},
            schema,
        )
        try:
            with setup:
                self._namespace = open_schema(
                    setup, self._schema, self._location, self._migrations, auto=auto_migrate
                )
        except psycopg.Error as exc:
            raise StoreError(f"{self._location}: cannot open as a plait store: {exc}") from exc
        # Stores of this process on the same server, database and schema share writer locks.
        self._locks = AdvisoryLocks(
            (*server, self._namespace), self._namespace, conninfo, kwargs, self._guard, self._conn
        )
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = (
            psycopg_pool.ConnectionPool(
                conninfo,
                kwargs=kwargs,
                min_size=1,
                max_size=pool_size,
                open=True,
                name=f"plait {self._location}",
                timeout=max(connect_timeout, 1.0) * 3,
            )
        )

    # -- plumbing ---------------------------------------------------------------------

    @property
    def location(self) -> str:
        """The server, database and schema as a URL, without the password."""
        return self._location

    @property
    def channel(self) -> str:
        """The NOTIFY channel of this store's writes (``plait_session``, ``.schema`` added)."""
        return self._channel

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        with self._conn("read the schema version") as conn:
            return current_version(conn)

    @contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        """Turn driver errors into :class:`StoreError` (chained): none leaks.

        Damaged storage (SQLSTATE ``XX001``, ``XX002``) is :class:`StoreCorruptError`.

        Text that is not Unicode (a lone surrogate) is :class:`InvalidMessageError`.
        """
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            if getattr(exc, "sqlstate", None) in _DAMAGED:
                raise StoreCorruptError(
                    f"{self._location}: {what}: {exc} (the server reports damaged data; "
                    "`plait db check --deep` names the sessions and records it affects)"
                ) from exc
            raise StoreError(f"{self._location}: {what}: {exc}") from exc
        except UnicodeEncodeError as exc:
            # Text with a lone surrogate cannot be sent as UTF-8: bad input, and nothing
            # was written (parameters are encoded before anything is sent).
            raise InvalidMessageError(
                f"{what}: text is not valid Unicode ({exc.reason} at {exc.start})"
            ) from exc

    @contextmanager
    def _conn(self, what: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A pooled connection (autocommit), with driver errors wrapped."""
        if self._closed:
            raise StoreError(f"{self._location}: the store is closed")
        with self._guard(what), self._pool.connection() as conn:
            yield conn

    def migrate(self) -> list[int]:
        """Apply every pending migration, each in its own transaction.

        Safe to run from several processes at once: an advisory lock makes them
        take turns, and each applies only what is still pending.

        Returns:
            The versions applied (empty when already current).

        Raises:
            SchemaTooNewError: the schema was written by a newer plait.
            StoreError: the server refused (a migration failed; it was rolled back).
        """
        with self._conn("migrate") as conn:
            return apply_schema(
                conn, self._namespace, self._schema, self._location, self._migrations
            )

    # -- the connection hooks of the shared statements (store/_sql.py) -------------------

    def _one(self, query: str, params: Sequence[Any], what: str, subject: object = None) -> Any:
        with self._conn(describe(what, subject)) as conn:
            return conn.execute(query, params).fetchone()

    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]:
        with self._conn(describe(what, subject)) as conn:
            return conn.execute(query, params).fetchall()

    def _write(self, what: str) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]:
        return self._conn(what)  # one statement is its own transaction (autocommit)

    @contextmanager
    def _transaction(self, what: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        with self._conn(what) as conn, conn.transaction():
            yield conn

    @contextmanager
    def _snapshot(
        self, what: str, subject: object = None
    ) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        with self._conn(describe(what, subject)) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                yield conn
            finally:
                conn.execute("ROLLBACK")

    @contextmanager
    def _counting(self, what: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        from psycopg import errors as pgerrors

        try:
            with self._conn(what) as conn, conn.transaction():
                yield conn
        except StoreError as exc:
            # Two writers counting the same shared rows at once: one wins, as with Counted.
            if isinstance(exc.__cause__, pgerrors.DeadlockDetected):
                raise Counted from None
            raise

    def _update_tallies(
        self, conn: Connection, keys: list[int], tokens: list[int], running: list[str]
    ) -> int:
        return conn.execute(
            "UPDATE records r SET tokens = u.t, running = u.r "
            "FROM unnest(%s::bigint[], %s::integer[], %s::text[]) AS u(k, t, r) "
            "WHERE r.key = u.k AND r.running IS NULL",
            (keys, tokens, running),
        ).rowcount

    def _tally_rows(self, session_id: str, keys: list[int]) -> list[tuple[int, str]]:
        rows = self._all(
            "SELECT key, running FROM records WHERE key = ANY(%s::bigint[]) "
            "AND running IS NOT NULL",
            (keys,),
            "read tallies of",
            session_id,
        )
        return [(int(k), str(t)) for k, t in rows]

    def _count_ranges(self, conn: Connection, ranges: list[tuple[int, int]]) -> list[int]:
        rows = conn.execute(
            "SELECT (SELECT count(*) FROM records WHERE key >= g.lo AND key < g.hi) "
            "FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS g(lo, hi, n) "
            "ORDER BY g.n",
            ([lo for lo, _ in ranges], [hi for _, hi in ranges]),
        ).fetchall()
        return [int(n) for (n,) in rows]

    def _live_locked(self, conn: Connection, session_id: str) -> None:
        # Transaction-scoped, and not the writer lock's key: the live writes of every
        # process on one session take turns (the row itself is locked FOR KEY SHARE).
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s::bigint)",
            (lock_key(self._namespace + "\0live", session_id),),
        )

    def _notify(self, conn: Connection, session_id: str) -> None:
        # Delivered at commit, to every process listening through changes().
        conn.execute("SELECT pg_notify(%s, %s)", (self._channel, session_id))

    # -- sessions ---------------------------------------------------------------------

    def create(self, row: SessionRow, records: Sequence[Record] = ()) -> SessionRow:
        """Insert a new session, its first own records and its lineage edges (one statement).

        Raises:
            SessionExistsError: the id is taken.
            SessionNotFoundError: a session it shares rows with was deleted meanwhile.
        """
        from psycopg import errors as pgerrors

        mpos = first_mpos(row, records)
        owners = sorted({owner for owner, _ in row.layout.bases})
        now = now_micros()
        params: dict[str, Any] = {
            "owners": owners,
            "n_owners": len(owners),
            "id": row.id,
            "workspace": row.workspace,
            "now": now,
            "parent_ids": dumps(list(row.parent_ids)),
            "lineage_operator": row.lineage_operator,
            "branched_at": row.branched_at,
            **dict(zip(ROW_COLUMNS, row_values(row), strict=True)),
            "parents": list(dict.fromkeys(row.parent_ids)),
            "channel": self._channel,
            **record_arrays(records, mpos),
        }
        with self._conn(f"create {row.id!r}") as conn:
            try:
                found = conn.execute(CREATE, params).fetchone()
            except pgerrors.UniqueViolation as exc:
                if exc.diag.constraint_name == "sessions_id_key":
                    raise SessionExistsError(row.id) from None
                raise
            except pgerrors.SequenceGeneratorLimitExceeded as exc:
                raise StoreError(f"{self._location}: session key space exhausted") from exc
        if found is None or found[0] is None:
            source = row.parent_ids[0] if row.parent_ids else row.id
            raise SessionNotFoundError(source, "deleted while a branch of it was created")
        return created_row(row, int(found[0]), now)

    def append(self, expected: SessionRow, records: Sequence[Record]) -> SessionRow:
        """Append records at the head: one statement, compare-and-set by primary key.

        A record's key is ``owner << 32 | seq``, so a second writer appending at
        the same head collides on the key: the insert is the compare-and-set and
        the session row is not written. In the same statement (one round trip,
        one transaction): the session must be live (its row is locked ``FOR KEY
        SHARE``, which only a delete conflicts with); its ``updated_at`` moves
        only when another session is ahead of it in "most recently active"
        order; and ``plait_session`` is notified.

        Raises:
            StaleSessionError: another writer appended first (nothing written).
            SessionNotFoundError: the session is gone.
        """
        from psycopg import errors as pgerrors

        if not records:
            self._check_open()
            return expected
        lay = expected.layout
        check_start("append", expected, records)
        messages = sum(1 for r in records if r.kind != "event")
        created = records[-1].created_at_us
        params: dict[str, Any] = {
            "pk": expected.pk,
            "id": expected.id,
            "now": max(now_micros(), created),
            "channel": self._channel,
        }
        if len(records) == 1:
            record = records[0]
            if record.seq > _SEQ_MAX:
                raise StoreError(f"position {record.seq} exceeds the store's limit {_SEQ_MAX}")
            params["seq"] = record.seq
            params["mpos"] = lay.end_msgs
            params["rid"] = record.id
            params["kind"] = record.kind
            params["payload"] = encode_payload(record)
            params["meta"] = dumps(dict(record.meta)) if record.meta else None
            params["created"] = record.created_at_us
            params["tokens"] = record.tokens
            statement = APPEND_ONE
        else:
            params.update(record_arrays(records, lay.end_msgs))
            statement = APPEND
        with self._conn(f"append {expected.id!r}") as conn:
            try:
                found = conn.execute(statement, params).fetchone()
            except pgerrors.UniqueViolation:  # the compare-and-set: another writer was first
                stale = self._stale(conn, expected)
                if stale.actual is None:
                    raise SessionNotFoundError(expected.id) from None
                raise stale from None
        if found is None or not found[0]:
            raise SessionNotFoundError(expected.id)
        if found[1] is not None:
            created = int(found[1])
        return expected.with_head(
            lay.appended(len(records), messages), max(created, expected.updated_at_us)
        )

    def write(
        self,
        expected: SessionRow,
        updated: SessionRow,
        records: Sequence[Record] = (),
        scratchpad: ScratchpadEntry | None = None,
    ) -> SessionRow:
        """Compare-and-set the session row and head, update it and append (one statement).

        Raises:
            StaleSessionError: the row or the head changed since ``expected`` (nothing written).
            SessionNotFoundError: the session is gone.
        """
        from psycopg import errors as pgerrors

        check_start("write", expected, records)
        sp = scratchpad
        params: dict[str, Any] = {
            "pk": expected.pk,
            "id": expected.id,
            "row_version": expected.row_version,
            "head": expected.layout.end_seq,
            "now": now_micros(),
            **dict(zip(ROW_COLUMNS, row_values(updated), strict=True)),
            "has_sp": sp is not None,
            **dict(zip(_SP_PARAMS, _NO_SP if sp is None else scratchpad_values(sp), strict=True)),
            "channel": self._channel,
            **record_arrays(records, expected.layout.end_msgs),
        }
        with self._conn(f"write {expected.id!r}") as conn:
            try:
                found = conn.execute(WRITE, params).fetchone()
            except pgerrors.UniqueViolation:  # a record collided: another writer appended
                found = None
            if found is None or found[0] is None:
                stale = self._stale(conn, expected)
                if stale.actual is None:
                    raise SessionNotFoundError(expected.id)
                raise stale
        return written_row(expected, updated, int(found[0]))

    # -- records ----------------------------------------------------------------------

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at positions ``[lo, hi)``: one range scan per segment.

        All segments are read by one statement, so from one snapshot.
        """
        out: list[Record] = []
        parts = segments(row.layout, row.pk, max(lo, 0), min(hi, row.layout.end_seq))
        if not parts:
            self._check_open()
            return out
        los = [(owner << _SHIFT) | a for owner, a, _ in parts]
        his = [(owner << _SHIFT) | b for owner, _, b in parts]
        with self._conn(f"read {row.id!r}") as conn:
            rows = conn.execute(READ, (los, his)).fetchall()
        counts = [0] * len(parts)
        for n, key, rid, kind, payload, meta, created, tokens in rows:
            counts[n - 1] += 1
            out.append(
                decode_record(
                    kind,
                    payload,
                    seq=key & _SEQ_MAX,
                    id=rid,
                    created_at_us=created,
                    meta=meta,
                    tokens=tokens,
                )
            )
        for (owner, a, b), got in zip(parts, counts, strict=True):
            if got != b - a:
                raise StoreCorruptError(
                    f"session {row.id!r}: expected {b - a} rows at [{a}, {b}) "
                    f"of owner {owner}, found {got}"
                )
        return out

    # -- collections ------------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Delete a session; its rows stay while another session's layout reads them.

        Raises:
            SessionNotFoundError: no live session has this id.
        """
        with self._conn(f"delete {session_id!r}") as conn, conn.transaction():
            # Its hidden heads (what it named before a rewind) go with it, first.
            for sid in [*hidden_heads(conn, self.dialect, session_id), session_id]:
                # Changing the id takes the row's strongest lock: appends in flight finish
                # first, later ones find the session gone.
                found = conn.execute(
                    "WITH t AS (UPDATE sessions SET deleted = true, id = chr(1) || pk "
                    "WHERE id = %(id)s AND NOT deleted RETURNING pk), "
                    "l AS (DELETE FROM lineage WHERE child_id = %(id)s "
                    "AND EXISTS (SELECT FROM t)), "
                    "p AS (DELETE FROM scratchpads WHERE session_pk IN (SELECT pk FROM t)), "
                    "c AS (DELETE FROM live_clients WHERE session_pk IN (SELECT pk FROM t)) "
                    "SELECT pk, pg_notify(%(channel)s, %(id)s) FROM t",
                    {"id": sid, "channel": self._channel},
                ).fetchone()
            if found is None:
                raise SessionNotFoundError(session_id)
            self._collect(conn)

    def erase(self, session_id: str) -> None:
        """Delete a session and its hidden heads, and every record of theirs nobody reads.

        The rows go in this transaction; PostgreSQL reclaims their space (and overwrites
        it) at its next ``VACUUM`` of the tables, which autovacuum runs by itself.

        Raises:
            SessionNotFoundError: no live session has this id.
        """
        with self._conn(f"erase {session_id!r}") as conn, conn.transaction():
            erase_sessions(conn, self.dialect, session_id)
            self._collect(conn)
            self._notify(conn, session_id)

    def _collect(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Drop the tombstones no live layout reads any more, with their rows.

        Lock the candidates first, then look again: a fork that locked one of them
        (``FOR KEY SHARE``, see ``CREATE``) has committed by then and is seen by
        the second look (a fresh snapshot); a fork that comes later waits for this
        transaction and then finds its source gone.
        """
        candidates = [
            int(r[0])
            for r in conn.execute(
                f"SELECT pk FROM sessions WHERE deleted AND pk NOT IN ({REFERENCED}) "
                "ORDER BY pk FOR UPDATE"
            ).fetchall()
        ]
        if not candidates:
            return
        conn.execute(
            f"WITH garbage AS (SELECT pk FROM sessions WHERE pk = ANY(%s::bigint[]) "
            f"AND deleted AND pk NOT IN ({REFERENCED})), "
            "gone AS (DELETE FROM records r USING garbage g "
            "WHERE r.key >= (g.pk << 32) AND r.key < ((g.pk + 1) << 32)) "
            "DELETE FROM sessions WHERE pk IN (SELECT pk FROM garbage)",
            (candidates,),
        )

    def stamp(self, session_id: str) -> str | None:
        """Return ``<created>.<version>.<head>`` of a live session, or None."""
        with self._conn(f"stamp {session_id!r}") as conn:
            found = conn.execute(
                f"SELECT s.created_at, s.version, {HEAD} FROM sessions s "
                "WHERE s.id = %s AND NOT s.deleted",
                (session_id,),
            ).fetchone()
        if found is None:
            return None
        return f"{found[0]:x}.{found[1]}.{found[2]}"

    # -- writer locks (store/_pglocks.py) ----------------------------------------------

    def lock(self, session_id: str) -> bool:
        """Take the session's writer lock for this process; False if another process has it.

        A PostgreSQL session-level advisory lock on the 64-bit hash of the schema
        and the id (see :func:`lock_key`), held on one connection that every
        store of this process on the same database and schema shares (never a
        pooled one). It is released when every store of the process that took it
        has let go (:meth:`unlock`, :meth:`close`), and by the server when the
        connection drops: the process died, kill -9 included. Taking it again
        does nothing.

        Raises:
            StoreError: the store is closed or the server cannot be reached.
        """
        self._check_open()
        return self._locks.lock(session_id)

    def unlock(self, session_id: str) -> None:
        """Release this store's hold on the session's writer lock (a no-op if not held).

        The lock itself is released when no store of this process holds it.
        """
        self._locks.unlock(session_id)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the session's writer lock (a snapshot).

        False while this process holds it, through this store or another one on
        the same database and schema. A holder that just died (its connection not
        yet dropped by the server) does not count.
        """
        self._check_open()
        return self._locks.locked_elsewhere(session_id)

    # -- notifications ----------------------------------------------------------------

    def changes(self, timeout: float | None = None) -> Iterator[str]:
        """Listen for committed writes to this store's sessions, from every process.

        Every committed write (create, append, write, delete) notifies the
        channel :attr:`channel` (``plait_session``; ``plait_session.<schema>``
        for a store in a named schema) with the session's id. Listening starts
        when this method is called, on a connection the store keeps for it, so
        a write committed after the call is never missed, and notifications that
        arrive between iterations wait for the next one (or the next call).
        There is no polling: the iterator sleeps on the connection's socket.

        Example::

            feed = store.changes(timeout=5.0)
            ...  # another process appends to session "s"
            for session_id in feed:
                print("changed:", session_id)

        Args:
            timeout: end the iteration after this many seconds without a
                notification; None waits for ever.

        Returns:
            An iterator of session ids, one per notification (PostgreSQL
            folds repeats within one transaction), this store's own writes
            included.

        Raises:
            StoreError: the store is closed or the server cannot be reached.
        """
        self._check_open()
        return self._feed.listen(timeout)

    # -- lifecycle --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._location}: the store is closed")

    def close(self) -> None:
        """Close the pool and the store's own connections, releasing its writer locks.

        Idempotent.
        """
        import psycopg

        if self._closed:
            return
        self._closed = True
        # Every step runs even if one fails (a server that went away): what this store
        # holds is let go whatever happens.
        with contextlib.suppress(psycopg.Error):
            self._pool.close()
        self._locks.close(StoreError)
        self._feed.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._location!r})"
