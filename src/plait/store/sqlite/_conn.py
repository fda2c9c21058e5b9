"""The SQLite store's connection: transactions, the shared statements' hooks, migrations.

:class:`LiteConnection` is the base of :class:`~plait.store.sqlite.SQLiteStore`: one
``sqlite3`` connection under a lock, the write transactions (``BEGIN IMMEDIATE``,
with the recency moves the append fast path owes written first, D166), the read
snapshot, the hooks :class:`~plait.store.sql._store.SQLStore`'s shared statements call,
and the migrations. The store itself keeps the hot paths (create, append, write,
read), deletion and the writer locks. :func:`failed` is the one place a driver
error becomes the store's error: a damaged file is :class:`StoreCorruptError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final

from plait._files import usable_path
from plait._time import now_micros
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    StoreCorruptError,
    StoreError,
    shown,
)
from plait.store.base import SessionRow
from plait.store.sql._due import DueCall
from plait.store.sql._schema import Migration, apply_migrations, check_schema, schema_table
from plait.store.sql._store import Connection, SQLStore, describe
from plait.store.sqlite._recency import Recency
from plait.store.sqlite._sql import SQLITE_DDL
from plait.store.sqlite._text import TextFeed, catch_up, reindex, search_shards

__all__ = [
    "CHECKPOINT_PAGES",
    "TOP_TTL",
    "LiteConnection",
    "failed",
    "not_unicode",
    "path_argument",
    "rollback",
]

TOP_TTL: Final = 0.1
"""Seconds an append trusts that its session is live (see store/sqlite/_recency.py)."""
CHECKPOINT_PAGES: Final = 8192
"""Rows a store writes between its checkpoints of the log (about a page each; D211)."""
_KEYS_PER_READ: Final = 500
"""Keys one ``IN (...)`` read asks for (well under SQLite's limit on parameters)."""
_TALLIES_IN: dict[int, str] = {}  # the tallies read for n keys, built once per n
_log = logging.getLogger("plait.store")

_DAMAGED: Final = frozenset({11, 26})
"""SQLite's primary result codes for a damaged file: ``SQLITE_CORRUPT`` and ``SQLITE_NOTADB``."""


def failed(what: str, exc: sqlite3.DatabaseError) -> StoreError:
    """The store's error for a driver error: every SQLite error of this store passes here.

    A damaged file (a page that does not decode, a header that is not SQLite's)
    is :class:`StoreCorruptError`, naming the check that finds what is lost;
    anything else (a lock held too long, a full disk) is :class:`StoreError`.
    """
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code in _DAMAGED:
        return StoreCorruptError(
            f"{what}: {exc} (the database file is damaged; `plait db check --deep` "
            "names the sessions and records it affects, and how to recover them)"
        )
    return StoreError(f"{what}: {exc}")


def not_unicode(exc: UnicodeEncodeError) -> InvalidMessageError:
    """Text with a lone surrogate cannot be stored as UTF-8: bad input, nothing written."""
    return InvalidMessageError(f"text is not valid Unicode ({exc.reason} at {exc.start})")


def path_argument(path: object) -> str:
    """The database file a path argument names (a usable path: see :func:`usable_path`)."""
    try:
        raw = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgumentError(f"a store path is a str or a path, not {shown(path)}") from None
    return usable_path(raw, path)


def rollback(db: sqlite3.Connection) -> None:
    """End the open transaction, if any, keeping the error that ended it."""
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


_INCREMENTAL: Final = 2
"""``PRAGMA auto_vacuum``'s value for incremental mode."""


class LiteConnection(SQLStore):
    """One SQLite connection under a lock, and what every statement of the store runs in.

    A subclass opens ``_db`` and sets the attributes below in its ``__init__``.
    """

    _db: sqlite3.Connection
    _lock: threading.RLock
    _closed: bool
    _path: str
    _recency: Recency
    _owed_timer: DueCall
    _migrations: tuple[Migration, ...]
    _memory: bool
    _synced_changes: int
    _checkpoint_every: int
    _text: TextFeed
    """The full-text index's feed: what this connection wrote since it caught up."""
    _hits_sql = ""  # the FTS5 tables are read one by one (search_shards)
    _reindex_sql = ()

    # -- full-text search (store/sqlite/_text.py) -----------------------------------------

    def _bad_query(self, exc: StoreError) -> bool:
        # FTS5 reports a query it cannot parse as an OperationalError: a syntax error,
        # or a "column" it does not have (``word:`` names a column in its syntax).
        cause = exc.__cause__
        text = str(cause)
        return isinstance(cause, sqlite3.OperationalError) and (
            text.startswith("fts5:")
            or "no such column" in text
            or "unterminated string" in text
            or "unknown special" in text
        )

    def _records_written(self, pk: int) -> None:
        self._text.dirty.add(pk)

    def _catch_up(self) -> None:
        with self._lock:
            self._check_open()
            terms = self._search_terms()
            try:
                catch_up(self._db, self._text, terms)
            except sqlite3.DatabaseError as exc:
                raise failed("index the records' text", exc) from exc
            self._wrote(self._db.total_changes)

    def _search_rows(self, query: str, params: Sequence[Any]) -> list[Any]:
        with self._lock:
            self._check_open()
            try:
                return search_shards(self._db, params[0], params[1], self._search_terms())
            except sqlite3.DatabaseError as exc:
                raise failed("search", exc) from exc

    def reindex(self) -> None:
        """Rebuild the full-text index from the records (``plait db reindex``).

        Raises:
            StoreError: the store has no full-text index, or the rebuild failed.
        """
        self._indexed()
        with self._lock:
            self._check_open()
            try:
                reindex(self._db, self._text, self._search_terms())
            except sqlite3.DatabaseError as exc:
                raise failed("reindex", exc) from exc

    @property
    def location(self) -> str:
        """The database path, or ``:memory:``."""
        return self._path

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        with self._lock:
            return self._current_version()

    def _current_version(self) -> int:
        row = self._db.execute("SELECT MAX(version) FROM plait_schema").fetchone()
        return int(row[0] or 0)

    def _migrate(self, auto: bool, key: str | bytes | None = None) -> None:
        with self._lock:
            # An encrypted store opened without its key, or with another, is refused
            # before a migration writes anything (D321).
            if self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'data_keys'"
            ).fetchone():
                found = self._db.execute("SELECT wrapped FROM data_keys WHERE kid = 0").fetchone()
                if found is not None:
                    self._refuse_another_key(key, bytes(found[0]), self._path)
            self._db.execute(schema_table(SQLITE_DDL))
            if check_schema(self._path, self._current_version(), self.code_version, auto=auto):
                self.migrate()

    def migrate(self) -> list[int]:
        """Apply every pending migration, each in its own transaction.

        Returns:
            The versions applied (empty when already current).
        """
        with self._lock:
            return apply_migrations(
                self._migrations,
                self._tx,
                lambda _: self._current_version(),  # another process may have migrated
                param="?",
                now_us=now_micros,
            )

    @contextmanager
    def _tx(self, what: str = "write") -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front so it never deadlocks on upgrade."""
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    # See append(): the moves owed first, and then any other write may
                    # change the order, or the liveness of a session.
                    self._recency.write_owed(db, now_micros())
                    self._recency.forget()
                    yield db
                except BaseException:
                    rollback(db)
                    raise
                db.execute("COMMIT")
                self._recency.settle()
            except sqlite3.DatabaseError as exc:
                rollback(db)
                raise failed(what, exc) from exc
            self._wrote(db.total_changes)

    @contextmanager
    def _snapshot(self, what: str = "read", subject: object = None) -> Iterator[sqlite3.Connection]:
        """A read transaction: several statements see one state of the database."""
        with self._lock:
            self._check_open()
            db = self._db
            try:
                db.execute("BEGIN")
                try:
                    yield db
                finally:
                    # A read changes nothing: roll back, which (unlike COMMIT) still
                    # works after a statement that met a damaged page.
                    rollback(db)
            except sqlite3.DatabaseError as exc:
                raise failed(describe(what, subject), exc) from exc

    @contextmanager
    def _key_reader(self) -> Iterator[sqlite3.Connection]:
        """Where a data key is read: in the transaction this thread has open, if any.

        (A key is first needed inside a read or a write; the one connection cannot
        open a second transaction.)
        """
        with self._lock:
            if not self._db.in_transaction:
                with self._snapshot("read a data key") as db:
                    yield db
                return
            try:
                yield self._db
            except sqlite3.DatabaseError as exc:
                raise failed("read a data key", exc) from exc

    # -- the connection hooks of the shared statements (store/sql/_store.py) -------------------

    # Reads are the commonest calls: plain methods under the lock, with the error's
    # text built only when there is an error.

    def _one(self, query: str, params: Sequence[Any], what: str, subject: object = None) -> Any:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self._path}: the store is closed")
            try:
                return self._db.execute(query, params).fetchone()
            except sqlite3.DatabaseError as exc:
                raise failed(describe(what, subject), exc) from exc

    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self._path}: the store is closed")
            try:
                return self._db.execute(query, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise failed(describe(what, subject), exc) from exc

    def _write(self, what: str) -> AbstractContextManager[sqlite3.Connection]:
        return self._immediate(what, reorders=True)

    _transaction = _write  # SQLite has one writer: every write is a whole transaction

    def _side_write(self, what: str) -> AbstractContextManager[sqlite3.Connection]:
        # Object-space writes move no session either.
        return self._immediate(what, reorders=False)

    def _counting(self, what: str) -> AbstractContextManager[sqlite3.Connection]:
        # Counting moves no session in the "most recent" order, so the append fast
        # path may keep trusting what it knows (see append()).
        return self._immediate(what, reorders=False)

    @contextmanager
    def _immediate(self, what: str, *, reorders: bool) -> Iterator[sqlite3.Connection]:
        """A write transaction with the store's errors (one generator: it is on every write)."""
        self._check_open()
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    if reorders:  # see append(): this write may change the order
                        self._recency.write_owed(db, now_micros())
                        self._recency.forget()
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                if reorders:
                    self._recency.settle()
            except UnicodeEncodeError as exc:
                raise not_unicode(exc) from exc
            except sqlite3.DatabaseError as exc:
                raise failed(what, exc) from exc
            self._wrote(db.total_changes)

    def _update_tallies(
        self, conn: Connection, keys: list[int], tokens: list[int], running: list[str]
    ) -> int:
        # conn is self._db, under the lock: executemany is sqlite3's own.
        return self._db.executemany(
            "UPDATE records SET tokens = ?, running = ? WHERE key = ? AND running IS NULL",
            zip(tokens, running, keys, strict=True),
        ).rowcount

    def _tally_rows(self, session_id: str, keys: list[int]) -> list[tuple[int, str]]:
        if len(keys) == 1:
            return super()._tally_rows(session_id, keys)
        # Several keys in one statement: one read of the WAL, not one per key.
        out: list[tuple[int, str]] = []
        for i in range(0, len(keys), _KEYS_PER_READ):
            chunk = keys[i : i + _KEYS_PER_READ]
            query = _TALLIES_IN.get(len(chunk))
            if query is None:
                query = _TALLIES_IN[len(chunk)] = (
                    "SELECT key, running FROM records WHERE running IS NOT NULL "
                    f"AND key IN ({', '.join('?' * len(chunk))})"
                )
            out.extend(self._all(query, chunk, "read tallies of", session_id))
        return out

    def _engine_problems(self, conn: Connection) -> list[str]:
        return [
            str(line)
            for (line,) in conn.execute("PRAGMA integrity_check").fetchall()
            if line != "ok"
        ]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self._path}: the store is closed")

    # -- retention (store/sql/_retention.py) --------------------------------------------------

    def _store_bytes(self, conn: Connection) -> tuple[int, int | None]:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        return int(pages) * int(size), int(free) * int(size)

    def reclaim(self, *, full: bool = False) -> str:
        """Give the pages freed by deletions back to the file system (D311).

        A store made by this version keeps ``auto_vacuum = INCREMENTAL``: the free pages
        are moved to the end of the file and cut off, and the write-ahead log is
        checkpointed and truncated so the file shrinks now. An older file
        (``auto_vacuum = NONE``) keeps its free pages for later writes unless ``full``:
        then ``VACUUM`` rewrites it whole, in incremental mode from then on.
        """
        self._check_open()
        with self._lock:
            try:
                mode = int(self._db.execute("PRAGMA auto_vacuum").fetchone()[0])
                if mode == _INCREMENTAL:
                    # A statement step frees one page, and the driver's execute steps once:
                    # a script runs the pragma to its end.
                    self._db.executescript("PRAGMA incremental_vacuum;")
                    done = "incremental vacuum"
                elif full:
                    self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
                    self._db.execute("VACUUM")
                    done = "vacuum"
                else:
                    done = "free pages kept for reuse" if mode == 0 else "auto vacuum"
                if not self._memory:
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.DatabaseError as exc:
                raise failed("give space back", exc) from exc
        return done

    # -- the moves the append fast path owes (D166) ---------------------------------------

    def _arm_owed_timer(self) -> None:
        """Write the queued moves one trust period from now, if this store is idle by then."""
        self._owed_timer.arm()

    def _owed_due(self) -> None:
        with self._lock:
            if not self._closed:
                self._write_owed()

    def _write_owed(self) -> None:
        """Write the queued moves in a transaction of their own (under the lock)."""
        if not self._recency.owed:
            return
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._recency.write_owed(db, now_micros())
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            self._recency.settle()
        except (sqlite3.DatabaseError, StoreError) as exc:
            # Still owed: the next write transaction writes them first.
            _log.warning("%s: could not order recent appends yet: %s", self._path, exc)

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        """Return up to ``limit`` live sessions, most recently written first."""
        with self._lock:
            self._check_open()
            self._write_owed()  # this store's appends are in the order before it is read
        return super().recent(workspace, limit)

    def recent_with_prefix(
        self, workspace: str | None, prefix: str, limit: int
    ) -> list[SessionRow]:
        """Return up to ``limit`` live sessions whose id starts with ``prefix``, newest first."""
        with self._lock:
            self._check_open()
            self._write_owed()  # as recent()
        return super().recent_with_prefix(workspace, prefix, limit)

    # -- checkpoints (D211) ----------------------------------------------------------------

    def _wrote(self, changes: int) -> None:
        """After a commit: checkpoint once enough was written.

        SQLite's own automatic checkpoint runs inside whichever commit finds the log past
        its threshold. Under writers that never pause the log could then never start
        over (a writer was always appending while it was copied), so nearly every commit
        ran one, each syncing both files, and the log and its index kept growing. The
        store checkpoints itself instead, after every ``CHECKPOINT_PAGES`` rows it wrote
        and when it closes, outside any transaction of its own, so the log can start over
        once no reader holds it. ``changes`` is the connection's running count of rows
        changed.
        """
        if changes - self._synced_changes >= self._checkpoint_every:
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Copy the write-ahead log into the database file, as far as readers allow."""
        self._synced_changes = self._db.total_changes
        self._text.bound()
        if self._memory:
            return
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.DatabaseError as exc:  # the next one copies the rest
            _log.warning("%s: could not checkpoint the write-ahead log: %s", self._path, exc)
