"""The SQLite store: plait's embedded default (one file, WAL), and the in-memory store.

Tables (see ``MIGRATIONS``, written once for both SQL stores in ``_schema.py``, for the
exact schema and why each column is there):

* ``sessions``: one row per session, with its copy-on-write layout.
* ``records``: one row per record, keyed by ``owner << 32 | seq`` so a session's
  rows are one contiguous range of the table's own B-tree: appending is one
  insert at the end of that range and reading any slice is one range scan, with
  no second index to maintain.
* ``lineage``: parent -> child edges, so children are found without a scan.
* ``scratchpads``: every version of every scratchpad.
* ``plait_schema``: the migrations applied.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from time import monotonic
from typing import Any, Final, Literal

from plait._files import usable_path
from plait._time import now_micros
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
    StoreCorruptError,
    StoreError,
    shown,
)
from plait.layout import Layout, segments
from plait.records import Record, decode_record, dumps
from plait.store._flock import FileLocks
from plait.store._litesql import (
    APPEND_STATE,
    INSERT_RECORD,
    INSERT_SESSION,
    SELECT_ROW,
    SQLITE_DDL,
    UPDATE_SESSION,
    record_params,
)
from plait.store._moves import erase_sessions, hidden_heads
from plait.store._rows import SEQ_BITS, SEQ_MAX, row_from_columns, row_values, scratchpad_values
from plait.store._schema import (
    Migration,
    apply_migrations,
    check_schema,
    checked_migrations,
    migrations,
    schema_table,
)
from plait.store._sql import (
    Connection,
    Dialect,
    SQLStore,
    check_start,
    created_row,
    describe,
    first_mpos,
    written_row,
)
from plait.store.base import ScratchpadEntry, SessionRow

__all__ = ["MIGRATIONS", "MemoryStore", "SQLiteStore", "default_path"]

MIGRATIONS: Final[tuple[Migration, ...]] = migrations(SQLITE_DDL)
"""The schema, numbered and ordered (written once for both SQL stores, in ``_schema.py``)."""

_CHECKPOINT_PAGES: Final = 8192
"""WAL pages between automatic checkpoints (SQLite's default is 1000)."""

_KEYS_PER_READ: Final = 500
"""Keys one ``IN (...)`` read asks for (well under SQLite's limit on parameters)."""
_TALLIES_IN: dict[int, str] = {}  # the tallies read for n keys, built once per n

_TOP_TTL: Final = 0.1
"""Seconds an append trusts that its session is still the most recently active."""

_SHIFT: Final = SEQ_BITS
_SEQ_MAX: Final = SEQ_MAX

Durability = Literal["normal", "full"]


_DAMAGED: Final = frozenset({11, 26})
"""SQLite's primary result codes for a damaged file: ``SQLITE_CORRUPT`` and ``SQLITE_NOTADB``."""


def _failed(what: str, exc: sqlite3.DatabaseError) -> StoreError:
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


def _not_unicode(exc: UnicodeEncodeError) -> InvalidMessageError:
    """Text with a lone surrogate cannot be stored as UTF-8: bad input, nothing written."""
    return InvalidMessageError(f"text is not valid Unicode ({exc.reason} at {exc.start})")


def _path_argument(path: object) -> str:
    """The database file a path argument names (a usable path: see :func:`usable_path`)."""
    try:
        raw = os.fspath(path)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgumentError(f"a store path is a str or a path, not {shown(path)}") from None
    return usable_path(raw, path)


def _rollback(db: sqlite3.Connection) -> None:
    """End the open transaction, if any, keeping the error that ended it."""
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")


def default_path() -> Path:
    """Return the default database path.

    ``$PLAIT_HOME/plait.db`` when ``PLAIT_HOME`` is set, else
    ``$XDG_DATA_HOME/plait/plait.db``, else ``~/.local/share/plait/plait.db``.
    """
    home = os.environ.get("PLAIT_HOME")
    if home:
        return Path(home).expanduser() / "plait.db"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data).expanduser() / "plait" / "plait.db"


_row_from_db = row_from_columns  # shared with the other SQL store (store/_rows.py)


class SQLiteStore(SQLStore):
    """Sessions in one SQLite file, in WAL mode.

    Args:
        path: the database file (created with its folder if missing); ``None``
            for :func:`default_path`; ``":memory:"`` for a private in-memory
            database.
        durability: ``"normal"`` (``synchronous=NORMAL``: a committed record
            survives a crash of the process; the last transactions may be lost
            to a power cut) or ``"full"`` (``synchronous=FULL``: survives a
            power cut too, at several times the cost per commit).
        auto_migrate: upgrade an older schema when opening (the default for
            this embedded store); if False, an older schema raises
            :class:`SchemaOutdatedError` naming ``plait db migrate``.
        migrations: the migrations to apply (tests pass extra ones).

    Raises:
        InvalidArgumentError: a path the file system cannot name, or a bad option.
        SchemaTooNewError: the file was written by a newer plait.
        SchemaOutdatedError: the file is older and ``auto_migrate`` is False.
        StoreError: the file cannot be opened as a database.
    """

    dialect = Dialect(
        param="?",
        greatest="MAX",
        least="MIN",
        live="deleted = 0",
        live_s="s.deleted = 0",
        select_row=SELECT_ROW,
        key_share="",
        tombstone="deleted = 1, id = char(0) || pk",
    )

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "normal",
        auto_migrate: bool = True,
        migrations: Sequence[Migration] = MIGRATIONS,
    ) -> None:
        if not isinstance(durability, str) or durability not in ("normal", "full"):
            raise InvalidArgumentError(
                f"durability must be 'normal' or 'full', not {shown(durability)}"
            )
        self._memory = path == ":memory:"
        if self._memory:
            target = ":memory:"
        else:
            resolved = default_path() if path is None else Path(_path_argument(path)).expanduser()
            try:
                resolved.parent.mkdir(parents=True, exist_ok=True)
                target = str(resolved.resolve())
            except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of symlinks
                raise StoreError(f"{resolved}: cannot create its folder: {exc}") from exc
        self._path = target
        # Writer locks: flock files beside the database; in memory nobody else can see
        # the sessions, so the locks are this process's alone.
        self._locks: FileLocks | None = None if self._memory else FileLocks(Path(target + "-locks"))
        self._memory_locks: set[str] = set()
        self._migrations = checked_migrations(migrations)
        self._lock = threading.RLock()
        self._closed = False
        self._known_top: int | None = None
        self._top_until = 0.0
        try:
            self._db = sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            self._db.execute("PRAGMA busy_timeout = 30000")
            if not self._memory:
                mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{target}: could not switch to WAL (got {mode})")
            self._db.execute(f"PRAGMA synchronous = {durability.upper()}")
            # Checkpoint every 8192 WAL pages (32 MiB) instead of SQLite's 1000: each
            # checkpoint syncs the files, and an agent appends a page per step, so this
            # takes most syncs off the append path (decisions D27).
            self._db.execute(f"PRAGMA wal_autocheckpoint = {_CHECKPOINT_PAGES}")
            self._migrate(auto_migrate)
        except sqlite3.DatabaseError as exc:
            raise _failed(f"{target}: cannot open as a plait store", exc) from exc

    # -- plumbing ---------------------------------------------------------------------

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

    def _migrate(self, auto: bool) -> None:
        with self._lock:
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
            self._known_top = None  # see append(): any other write may change the order
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    _rollback(db)
                    raise
                db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                _rollback(db)
                raise _failed(what, exc) from exc

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
                    _rollback(db)
            except sqlite3.DatabaseError as exc:
                raise _failed(describe(what, subject), exc) from exc

    # -- the connection hooks of the shared statements (store/_sql.py) -------------------

    # Reads are the commonest calls: plain methods under the lock, with the error's
    # text built only when there is an error.

    def _one(self, query: str, params: Sequence[Any], what: str, subject: object = None) -> Any:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self._path}: the store is closed")
            try:
                return self._db.execute(query, params).fetchone()
            except sqlite3.DatabaseError as exc:
                raise _failed(describe(what, subject), exc) from exc

    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]:
        with self._lock:
            if self._closed:
                raise StoreError(f"{self._path}: the store is closed")
            try:
                return self._db.execute(query, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise _failed(describe(what, subject), exc) from exc

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
            if reorders:
                self._known_top = None  # see append(): this write may change the order
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    yield db
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
            except UnicodeEncodeError as exc:
                raise _not_unicode(exc) from exc
            except sqlite3.DatabaseError as exc:
                raise _failed(what, exc) from exc

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

    # -- sessions ---------------------------------------------------------------------

    def create(self, row: SessionRow, records: Sequence[Record] = ()) -> SessionRow:
        """Insert a new session, its first own records and its lineage edges (atomic)."""
        self._check_open()
        now = now_micros()
        mpos = first_mpos(row, records)
        try:
            with self._tx() as db:
                if db.execute("SELECT 1 FROM sessions WHERE id = ?", (row.id,)).fetchone():
                    raise SessionExistsError(row.id)
                # A branch reads its bases' rows: they must still be there. (A delete in
                # another process may have collected them since the branch was planned;
                # once this row is in, no collection can take them.)
                for owner, _ in row.layout.bases:
                    if not db.execute("SELECT 1 FROM sessions WHERE pk = ?", (owner,)).fetchone():
                        raise SessionNotFoundError(
                            row.parent_ids[0] if row.parent_ids else row.id,
                            "the session it branches from was deleted",
                        )
                cur = db.execute(
                    INSERT_SESSION,
                    (
                        row.id,
                        row.workspace,
                        now,
                        now,
                        dumps(list(row.parent_ids)),
                        row.lineage_operator,
                        row.branched_at,
                        *row_values(row),
                    ),
                )
                pk = int(cur.lastrowid or 0)
                if pk >= 1 << 31:
                    raise StoreError("session key space exhausted")
                if records:
                    db.executemany(INSERT_RECORD, record_params(pk, records, mpos))
                db.executemany(
                    "INSERT INTO lineage (parent_id, child_id, ord) VALUES (?, ?, ?)",
                    [(p, row.id, i) for i, p in enumerate(dict.fromkeys(row.parent_ids))],
                )
        except UnicodeEncodeError as exc:
            raise _not_unicode(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise _failed(f"create {row.id!r}", exc) from exc
        return created_row(row, pk, now)

    def append(self, expected: SessionRow, records: Sequence[Record]) -> SessionRow:
        """Append records at the head: one INSERT, compare-and-set by primary key.

        A record's key is ``owner << 32 | seq``, so a second writer appending at
        the same head collides on the key: the insert itself is the
        compare-and-set, and the session row is not written. The row's
        ``updated_at`` (which orders ``recent``) is moved only when another
        session is ahead of this one in that order; when this session is
        already the most recent, its true last activity is read from its
        newest record. An agent appending to one session thus writes one page
        per step, as a bare INSERT does.
        """
        lay = expected.layout
        if len(records) == 1 and records[0].seq == lay.end_seq:
            done = self._append_one(expected, records[0])
            if done is not None:
                return done
        self._check_open()
        if not records:
            return expected
        check_start("append", expected, records)
        params = record_params(expected.pk, records, lay.end_msgs)
        messages = sum(1 for r in records if r.kind != "event")
        created = records[-1].created_at_us
        # The key is the compare-and-set. Whether the session is live and already the most
        # recently active one is read in a full transaction, then trusted for _TOP_TTL
        # seconds as long as this store writes nothing else (every other write, a delete
        # included, forgets it). While trusted, a one-record append is a single
        # self-committing INSERT: the same work as a bare INSERT in its own transaction.
        # Another process's activity can thus take up to _TOP_TTL to be ordered against
        # this session's. (A session deleted by *another process* in that window would take
        # appends into rows no session reads; the writer locks of issue 5 forbid deleting
        # a session another process is writing, which closes that window.)
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    state = db.execute(APPEND_STATE, (expected.pk,)).fetchone()
                    if state is None or state[0] is None:
                        raise SessionNotFoundError(expected.id)
                    move_to: int | None = None
                    if state[1] != expected.pk:
                        move_to = max(now_micros(), created, state[2] + 1)
                    try:
                        if len(params) == 1:
                            db.execute(INSERT_RECORD, params[0])
                        else:
                            db.executemany(INSERT_RECORD, params)
                    except sqlite3.IntegrityError:
                        raise self._stale(db, expected) from None
                    if move_to is not None:
                        db.execute(
                            "UPDATE sessions SET updated_at = ? WHERE pk = ?",
                            (move_to, expected.pk),
                        )
                        created = move_to
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                self._known_top, self._top_until = expected.pk, monotonic() + _TOP_TTL
            except UnicodeEncodeError as exc:
                raise _not_unicode(exc) from exc
            except sqlite3.DatabaseError as exc:
                self._known_top = None
                raise _failed(f"append {expected.id!r}", exc) from exc
        return expected.with_head(
            Layout(
                lay.bases,
                lay.end_seq + len(records),
                lay.end_msgs + messages,
                lay.view_start,
                lay.view_msgs,
            ),
            max(created, expected.updated_at_us),
        )

    def _append_one(self, expected: SessionRow, record: Record) -> SessionRow | None:
        """Append one record while this session is known live and most recent (see append).

        One self-committing INSERT whose key is the compare-and-set. This is every
        agent step's write, so it is kept free of anything else. Returns None when
        the session is not known live and most recent; append() then takes the
        full path.
        """
        lay = expected.layout
        is_message = record.kind != "event"
        with self._lock:
            # Checked under the lock: a delete in another thread forgets what we know.
            if self._known_top != expected.pk or monotonic() >= self._top_until:
                return None
            if self._closed:
                raise StoreError(f"{self._path}: the store is closed")
            try:
                self._db.execute(
                    INSERT_RECORD, record_params(expected.pk, (record,), lay.end_msgs)[0]
                )
            except sqlite3.IntegrityError:
                raise self._stale(self._db, expected) from None
            except UnicodeEncodeError as exc:
                raise _not_unicode(exc) from exc
            except sqlite3.DatabaseError as exc:
                self._known_top = None
                raise _failed(f"append {expected.id!r}", exc) from exc
        return SessionRow(
            expected.id,
            expected.workspace,
            Layout(
                lay.bases, lay.end_seq + 1, lay.end_msgs + is_message, lay.view_start, lay.view_msgs
            ),
            expected.pk,
            expected.row_version,
            expected.created_at_us,
            max(record.created_at_us, expected.updated_at_us),
            expected.title,
            expected.parent_ids,
            expected.lineage_operator,
            expected.branched_at,
            expected.status,
            expected.scratchpad,
            expected.scratchpad_version,
            expected.metadata,
        )

    def write(
        self,
        expected: SessionRow,
        updated: SessionRow,
        records: Sequence[Record] = (),
        scratchpad: ScratchpadEntry | None = None,
    ) -> SessionRow:
        """Compare-and-set the session row and head, then update it and append."""
        self._check_open()
        check_start("write", expected, records)
        try:
            with self._tx() as db:
                r = db.execute(
                    SELECT_ROW + " WHERE s.pk = ? AND s.deleted = 0", (expected.pk,)
                ).fetchone()
                if r is None:
                    raise SessionNotFoundError(expected.id)
                current = _row_from_db(r)
                if (current.row_version, current.layout.end_seq) != (
                    expected.row_version,
                    expected.layout.end_seq,
                ):
                    raise StaleSessionError(expected.id, expected.version, current.version)
                top = db.execute(
                    "SELECT MAX(updated_at) FROM sessions WHERE deleted = 0"
                ).fetchone()[0]
                now = max(now_micros(), current.updated_at_us + 1, (top or 0) + 1)
                db.execute(
                    UPDATE_SESSION,
                    (expected.row_version + 1, now, *row_values(updated), expected.pk),
                )
                if records:
                    db.executemany(
                        INSERT_RECORD,
                        record_params(expected.pk, records, expected.layout.end_msgs),
                    )
                if scratchpad is not None:
                    db.execute(
                        "INSERT INTO scratchpads VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (expected.pk, *scratchpad_values(scratchpad), now),
                    )
        except UnicodeEncodeError as exc:
            raise _not_unicode(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise _failed(f"write {expected.id!r}", exc) from exc
        return written_row(expected, updated, now)

    # -- records ----------------------------------------------------------------------

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at positions ``[lo, hi)``, reading each segment's range."""
        self._check_open()
        out: list[Record] = []
        parts = segments(row.layout, row.pk, max(lo, 0), min(hi, row.layout.end_seq))
        if not parts:
            return out
        with self._snapshot("read", row.id) as db:
            for owner, a, b in parts:
                base = owner << _SHIFT
                # LIMIT: the scan stops at its last row instead of stepping to the
                # next page, so a damaged page just past the range does not fail it.
                rows = db.execute(
                    "SELECT key, id, kind, payload, meta, created_at, tokens FROM records "
                    "WHERE key >= ? AND key < ? ORDER BY key LIMIT ?",
                    (base | a, base | b, b - a),
                ).fetchall()
                if len(rows) != b - a:
                    raise StoreCorruptError(
                        f"session {row.id!r}: expected {b - a} rows at [{a}, {b}) "
                        f"of owner {owner}, found {len(rows)}"
                    )
                for key, rid, kind, payload, meta, created, tokens in rows:
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
        return out

    # -- collections ------------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Delete a session; its rows stay while another session's layout reads them."""
        self._check_open()
        with self._tx(f"delete {session_id!r}") as db:
            found = db.execute(
                "SELECT pk FROM sessions WHERE id = ? AND deleted = 0", (session_id,)
            ).fetchone()
            if found is None:
                raise SessionNotFoundError(session_id)
            # Its hidden heads (what it named before a rewind) go with it.
            doomed = [(session_id, int(found[0]))]
            for hidden in hidden_heads(db, self.dialect, session_id):
                row = db.execute("SELECT pk FROM sessions WHERE id = ?", (hidden,)).fetchone()
                doomed.append((hidden, int(row[0])))
            for sid, pk in doomed:
                # The tombstone gives up its id (NUL can never start a real id) so the
                # id may be reused, and keeps its rows for the branches that share them.
                db.execute(
                    "UPDATE sessions SET deleted = 1, id = char(0) || pk WHERE pk = ?", (pk,)
                )
                db.execute("DELETE FROM lineage WHERE child_id = ?", (sid,))
                db.execute("DELETE FROM scratchpads WHERE session_pk = ?", (pk,))
                db.execute("DELETE FROM live_clients WHERE session_pk = ?", (pk,))
            self._collect(db)

    def erase(self, session_id: str) -> None:
        """Delete a session and its hidden heads, and every record of theirs nobody reads.

        What is deleted is overwritten in the file (``secure_delete``), and the write-ahead
        log is checkpointed and truncated after, so no copy of an erased page is left in
        either file (unless another connection is reading at that moment, which keeps the
        log until it ends).

        Raises:
            SessionNotFoundError: no live session has this id.
        """
        self._check_open()
        with self._lock:
            self._db.execute("PRAGMA secure_delete = ON")
            try:
                with self._tx() as db:
                    erase_sessions(db, self.dialect, session_id)
                    self._collect(db)
            finally:
                self._db.execute("PRAGMA secure_delete = OFF")
            if self._path != ":memory:":
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _collect(self, db: sqlite3.Connection) -> None:
        """Drop the tombstones no live layout reads any more, with their rows.

        Deletion is rare and this is one pass over the sessions table.
        """
        referenced: set[int] = set()
        for (bases,) in db.execute("SELECT bases FROM sessions WHERE deleted = 0"):
            referenced.update(int(owner) for owner, _ in json.loads(bases))
        tombstones = [int(r[0]) for r in db.execute("SELECT pk FROM sessions WHERE deleted = 1")]
        # A tombstone read only by other tombstones is garbage too: iterate to a fixed point
        # by counting only references from live sessions (above), which is already that.
        for pk in tombstones:
            if pk in referenced:
                continue
            db.execute(
                "DELETE FROM records WHERE key >= ? AND key < ?",
                (pk << _SHIFT, (pk + 1) << _SHIFT),
            )
            db.execute("DELETE FROM sessions WHERE pk = ?", (pk,))

    def stamp(self, session_id: str) -> str | None:
        """Return ``<created>.<version>`` of a live session, or None."""
        self._check_open()
        query = (
            "SELECT s.created_at, s.version, s.end_seq, ("
            "SELECT key FROM records WHERE key >= (s.pk << 32) AND key < ((s.pk + 1) << 32) "
            "ORDER BY key DESC LIMIT 1) FROM sessions s WHERE s.id = ? AND s.deleted = 0"
        )
        found = self._one(query, (session_id,), "stamp", session_id)
        if found is None:
            return None
        end = max(found[2], (found[3] & _SEQ_MAX) + 1 if found[3] is not None else 0)
        return f"{found[0]:x}.{found[1]}.{end}"

    # -- writer locks ------------------------------------------------------------------

    def lock(self, session_id: str) -> bool:
        """Take the session's writer lock for this process; False if another process has it."""
        self._check_open()
        if self._locks is None:
            self._memory_locks.add(session_id)
            return True
        try:
            return self._locks.lock(session_id)
        except OSError as exc:
            raise StoreError(f"{self._path}: cannot take the writer lock: {exc}") from exc

    def unlock(self, session_id: str) -> None:
        """Release this store's hold on the session's writer lock."""
        if self._locks is None:
            self._memory_locks.discard(session_id)
        else:
            self._locks.unlock(session_id)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the session's writer lock (a snapshot)."""
        if self._locks is None:
            return False
        try:
            return self._locks.locked_elsewhere(session_id)
        except OSError as exc:
            raise StoreError(f"{self._path}: cannot read the writer lock: {exc}") from exc

    def close(self) -> None:
        """Close the connection and release the writer locks. Idempotent."""
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._locks is not None:
                    self._locks.release_all()
                self._memory_locks.clear()
                self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"


class MemoryStore(SQLiteStore):
    """An in-memory SQLite store for ephemeral sessions: same code, nothing on disk."""

    def __init__(self) -> None:
        super().__init__(":memory:")

    def __repr__(self) -> str:
        return "MemoryStore()"
