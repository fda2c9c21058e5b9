"""The PostgreSQL store's connections: the pool, error wrapping, the shared statements' hooks.

:class:`PgConnection` is the base of :class:`~plait.store.postgres.PostgresStore`:
pooled autocommit connections with every driver error wrapped (damaged storage is
:class:`StoreCorruptError`, text that is not Unicode :class:`InvalidMessageError`),
transactions and read snapshots, migrations under an advisory lock, and the hooks
:class:`~plait.store.sql._store.SQLStore`'s shared statements call. The store itself keeps
the hot paths (create, append, write, read), deletion, writer locks and the change
feed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final

from plait.errors import InvalidMessageError, PlaitError, StoreCorruptError, StoreError
from plait.store.base import SessionRow
from plait.store.postgres import _text as pgtext
from plait.store.postgres._feed import Notifier
from plait.store.postgres._locks import lock_key
from plait.store.postgres._open import apply_schema, current_version
from plait.store.postgres._prep import int_array, run_prepared
from plait.store.postgres._recency import MOVE_OWED, OwedMoves
from plait.store.sql._schema import Migration
from plait.store.sql._search import PG_HITS, PG_REINDEX, index_text
from plait.store.sql._store import Connection, Counted, SQLStore, describe

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

    from plait.store.sql._sealtext import SealedTerms

__all__ = ["PgConnection"]

_DAMAGED: Final = frozenset({"XX001", "XX002"})
"""SQLSTATEs of damaged storage: ``data_corrupted`` and ``index_corrupted``."""

SPARE_FOR: Final = 30.0
"""Seconds the store keeps a connection out of the pool as its spare (see ``_give``)."""

_KEPT_UNTIL: Final = "_plait_kept_until"
"""The attribute of a pooled connection: until when it may be the store's spare."""

_CURSOR: Final = "_plait_cursor"
"""The attribute of a pooled connection that holds its cursor (see :func:`cursor_of`)."""


def cursor_of(conn: psycopg.Connection[tuple[Any, ...]]) -> psycopg.Cursor[tuple[Any, ...]]:
    """The cursor kept on ``conn`` for statements whose rows are fetched at once.

    A new cursor per statement costs a fresh adaptation context, whose dumpers and
    loaders are looked up again on every call; one kept per connection reuses them.
    It is kept on the connection object itself, not by the store, so it goes when the
    pool drops the connection. Only for a statement fetched before the next one runs
    on the connection: a result still being iterated must have a cursor of its own.
    """
    cur: psycopg.Cursor[tuple[Any, ...]] | None = conn.__dict__.get(_CURSOR)
    if cur is None or cur.closed:
        cur = conn.cursor()
        setattr(conn, _CURSOR, cur)
    return cur


_RETAINED_TABLES: Final = (
    "records",
    "sessions",
    "lineage",
    "scratchpads",
    "live_clients",
    "checkpoint_objects",
    "checkpoint_parts",
    "record_tokens",
    "record_token_marks",
)
"""The tables an erase or a checkpoint prune deletes rows of: what retention measures."""


class PgConnection(SQLStore):
    """Pooled connections to one schema, and what every statement of the store runs in.

    A subclass opens the pool and sets the attributes below in its ``__init__``.
    """

    _location: str
    _channel: str
    _closed: bool
    _pool: psycopg_pool.ConnectionPool[psycopg.Connection[tuple[Any, ...]]]
    _namespace: str
    _schema: str | None
    _migrations: tuple[Migration, ...]
    _notifier: Notifier
    _owed: OwedMoves
    _driver_errors: tuple[type[Exception], ...]
    _hits_sql = PG_HITS
    _reindex_sql = PG_REINDEX

    def _bad_query(self, exc: StoreError) -> bool:
        return False  # websearch_to_tsquery reads any text: it has no syntax errors

    def _search_rows(self, query: str, params: Sequence[Any]) -> list[Any]:
        # Never prepared: a prepared search soon gets PostgreSQL's generic plan, which
        # cannot tell a rare term from a common one and reads every record (150 ms at
        # 10k records, against 3 ms through the text index).
        terms = self._token_terms()
        with self._conn("search") as conn:
            if terms is not None:  # an encrypted store's tokens (store/postgres/_text.py, D326)
                return pgtext.search(conn, params[0], params[1], terms, index_text)
            return cursor_of(conn).execute(query, params, prepare=False).fetchall()
    """What :meth:`_wrapped` turns into the store's errors: psycopg's, and bad text."""
    _conflict: type[Exception]
    """psycopg's ``UniqueViolation``: an append's compare-and-set that lost."""
    _idle_status: int
    """libpq's transaction status of a connection between statements (``IDLE``)."""
    _spare: tuple[psycopg.Connection[tuple[Any, ...]]] | None
    """The connection the store keeps out of the pool for its next call (see ``_give``)."""
    _spare_mutex: threading.Lock
    _waiting: int
    """Threads waiting for a connection of the pool (under ``_spare_mutex``)."""

    # -- an encrypted store's full-text index (store/postgres/_text.py, D326) -------------------

    def _token_terms(self) -> SealedTerms | None:
        """An encrypted store's hasher (None: not encrypted), once it has its token table."""
        terms = self._search_terms()
        if terms is not None and self.code_version < pgtext.SEALED_VERSION:
            raise StoreError(
                "this encrypted store was opened without its table of hashed terms "
                f"(migration {pgtext.SEALED_VERSION})"
            )
        return terms

    def _catch_up(self) -> None:
        terms = self._token_terms()
        if terms is not None:
            with self._conn("index the records' text") as conn:
                pgtext.catch_up(conn, self._text_lock(), terms, index_text)

    def _text_lock(self) -> int:
        return lock_key(self._namespace + "\0text", "")

    def reindex(self) -> None:
        """Rebuild the full-text index from the records (``plait db reindex``).

        Raises:
            StoreError: the store has no full-text index, or the rebuild failed.
        """
        terms = self._token_terms()
        if terms is None:
            super().reindex()
            return
        self._indexed()
        with self._conn("reindex") as conn:
            pgtext.reindex(conn, self._text_lock(), terms, index_text)

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
        except (psycopg.Error, UnicodeEncodeError) as exc:
            raise self._wrapped(what, exc) from exc

    def _wrapped(self, what: str, exc: Exception) -> PlaitError:
        """The store's error for a driver error (see :meth:`_guard`)."""
        if isinstance(exc, UnicodeEncodeError):
            # Text with a lone surrogate cannot be sent as UTF-8: bad input, and nothing
            # was written (parameters are encoded before anything is sent).
            return InvalidMessageError(
                f"{what}: text is not valid Unicode ({exc.reason} at {exc.start})"
            )
        if getattr(exc, "sqlstate", None) in _DAMAGED:
            return StoreCorruptError(
                f"{self._location}: {what}: {exc} (the server reports damaged data; "
                "`plait db check --deep` names the sessions and records it affects)"
            )
        return StoreError(f"{self._location}: {what}: {exc}")

    @contextmanager
    def _conn(self, what: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """A pooled connection (autocommit), with driver errors wrapped."""
        if self._closed:
            raise StoreError(f"{self._location}: the store is closed")
        try:
            conn = self._take()
            try:
                yield conn
            finally:
                self._give(conn)
        except self._driver_errors as exc:
            raise self._wrapped(what, exc) from exc

    def _take(self) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection of the pool: the spare one if it is free (see :meth:`_give`)."""
        with self._spare_mutex:
            spare, self._spare = self._spare, None
            if spare is None:
                self._waiting += 1
        if spare is not None:
            return spare[0]
        try:
            conn = self._pool.getconn()
        finally:
            with self._spare_mutex:
                self._waiting -= 1
        conn.__dict__[_KEPT_UNTIL] = time.monotonic() + SPARE_FOR
        return conn

    def _give(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Keep ``conn`` as the spare connection, or give it back to the pool.

        A round trip through the pool (its lock, statistics, logging and checks)
        costs as much client time as the statement of an append: the next call of any
        thread takes the spare instead. It stays checked out of the pool for at most
        ``SPARE_FOR`` seconds, then goes back, and the pool applies its checks and
        lifetimes to it as to any other; one that is broken, closed or not idle goes
        back at once, to be reset or replaced there. While another thread waits for the
        pool, every connection goes back to it: with the pool's last connection kept as
        the spare, that thread would wait for as long as the others kept calling.
        """
        if (
            not self._closed
            and conn.pgconn.transaction_status == self._idle_status
            and time.monotonic() < conn.__dict__[_KEPT_UNTIL]
        ):
            with self._spare_mutex:
                if self._spare is None and not self._waiting:
                    self._spare = (conn,)
                    return
        self._pool.putconn(conn)

    def _close_pool(self) -> None:
        """Give the spare connection back and close the pool."""
        with self._spare_mutex:
            spare, self._spare = self._spare, None
        if spare is not None:
            self._pool.putconn(spare[0])
        self._pool.close()

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

    # -- the connection hooks of the shared statements (store/sql/_store.py) -------------------

    def _one(self, query: str, params: Sequence[Any], what: str, subject: object = None) -> Any:
        # What failed is named only when something did: most calls never need the text.
        if self._closed:
            raise StoreError(f"{self._location}: the store is closed")
        try:
            conn = self._take()
            try:
                return cursor_of(conn).execute(query, params).fetchone()
            finally:
                self._give(conn)
        except self._driver_errors as exc:
            raise self._wrapped(describe(what, subject), exc) from exc

    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]:
        if self._closed:  # as _one
            raise StoreError(f"{self._location}: the store is closed")
        try:
            conn = self._take()
            try:
                return cursor_of(conn).execute(query, params).fetchall()
            finally:
                self._give(conn)
        except self._driver_errors as exc:
            raise self._wrapped(describe(what, subject), exc) from exc

    def _write(self, what: str) -> AbstractContextManager[psycopg.Connection[tuple[Any, ...]]]:
        # A write may move a session in the "most recent" order: the moves owed go first.
        self._owed.flush()
        return self._conn(what)  # one statement is its own transaction (autocommit)

    @contextmanager
    def _transaction(self, what: str) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        self._owed.flush()  # as _write
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

    def _counted_ends_in(
        self, conn: Connection, ranges: list[Iterable[tuple[int, int]]]
    ) -> list[int | None]:
        # Every segment of every row in one statement (a page of a listing is one round
        # trip, not one per segment), then each row's newest segment that has one.
        per_row = [list(row_ranges) for row_ranges in ranges]
        flat = [rng for row_ranges in per_row for rng in row_ranges]
        tops = conn.execute(
            "SELECT (SELECT key FROM records WHERE key >= g.lo AND key < g.hi "
            "AND running IS NOT NULL ORDER BY key DESC LIMIT 1) "
            "FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS g(lo, hi, n) "
            "ORDER BY g.n",
            ([lo for lo, _ in flat], [hi for _, hi in flat]),
        ).fetchall()
        found = iter(top for (top,) in tops)
        out: list[int | None] = []
        for row_ranges in per_row:
            mine = [next(found) for _ in row_ranges]
            out.append(next((int(t) for t in mine if t is not None), None))
        return out

    # -- retention (store/sql/_retention.py) --------------------------------------------------

    _octets = "octet_length({})"

    def _store_bytes(self, conn: Connection) -> tuple[int, int | None]:
        found = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
            "AND c.relname = ANY(%s)",
            (list(_RETAINED_TABLES),),
        ).fetchone()
        return int(found[0]), None  # what is free inside the tables, PostgreSQL does not say

    def reclaim(self, *, full: bool = False) -> str:
        """``VACUUM`` the tables a deletion frees rows of (D312).

        A plain ``VACUUM`` makes the deleted rows' space reusable by later writes and
        gives back only empty pages at a table's end; ``full`` runs ``VACUUM FULL``,
        which rewrites each table and gives all of it back, holding an exclusive lock
        on the table meanwhile (every read and write of it waits).
        """
        self._check_open()
        verb = "VACUUM FULL" if full else "VACUUM"
        with self._conn("give space back") as conn:  # autocommit: VACUUM runs outside one
            for table in _RETAINED_TABLES:
                conn.execute(f"{verb} {table}")
        return verb.lower()

    def _live_locked(self, conn: Connection, session_id: str) -> None:
        # Transaction-scoped, and not the writer lock's key: the live writes of every
        # process on one session take turns (the row itself is locked FOR KEY SHARE).
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s::bigint)",
            (lock_key(self._namespace + "\0live", session_id),),
        )

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        """Return up to ``limit`` live sessions, most recently written first."""
        if self._closed:
            raise StoreError(f"{self._location}: the store is closed")
        self._owed.flush()  # this store's appends are in the order before it is read
        return super().recent(workspace, limit)

    def recent_with_prefix(
        self, workspace: str | None, prefix: str, limit: int
    ) -> list[SessionRow]:
        """Return up to ``limit`` live sessions whose id starts with ``prefix``, newest first."""
        if self._closed:
            raise StoreError(f"{self._location}: the store is closed")
        self._owed.flush()  # as recent()
        return super().recent_with_prefix(workspace, prefix, limit)

    def _move_owed(self, pks: list[int], times: list[int]) -> None:
        """Write the moves the appends owe (store/postgres/_recency.py)."""
        with self._conn("order recent appends") as conn:
            run_prepared(conn, MOVE_OWED, (int_array(pks), int_array(times)))

    def _changed(self, session_id: str) -> None:
        # After the commit, never in it (see store/postgres/_feed.py): to every process listening.
        self._notifier.changed(session_id)
