"""The PostgreSQL store's connections: the pool, error wrapping, the shared statements' hooks.

:class:`PgConnection` is the base of :class:`~plait.store.postgres.PostgresStore`:
pooled autocommit connections with every driver error wrapped (damaged storage is
:class:`StoreCorruptError`, text that is not Unicode :class:`InvalidMessageError`),
transactions and read snapshots, migrations under an advisory lock, and the hooks
:class:`~plait.store._sql.SQLStore`'s shared statements call. The store itself keeps
the hot paths (create, append, write, read), deletion, writer locks and the change
feed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final

from plait.errors import InvalidMessageError, StoreCorruptError, StoreError
from plait.store._pgfeed import Notifier
from plait.store._pglocks import lock_key
from plait.store._pgopen import apply_schema, current_version
from plait.store._pgrecency import MOVE_OWED, OwedMoves
from plait.store._schema import Migration
from plait.store._sql import Connection, Counted, SQLStore, describe
from plait.store.base import SessionRow

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ["PgConnection"]

_DAMAGED: Final = frozenset({"XX001", "XX002"})
"""SQLSTATEs of damaged storage: ``data_corrupted`` and ``index_corrupted``."""


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
        """Write the moves the appends owe (store/_pgrecency.py)."""
        with self._conn("order recent appends") as conn:
            conn.execute(MOVE_OWED, (pks, times))

    def _changed(self, session_id: str) -> None:
        # After the commit, never in it (see store/_pgfeed.py): to every process listening.
        self._notifier.changed(session_id)
