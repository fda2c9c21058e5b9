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

import logging
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Literal

from plait._time import now_micros
from plait.errors import (
    EncryptionKeyError,
    InvalidArgumentError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
    shown,
)
from plait.layout import Layout, segments
from plait.records import (
    MESSAGE_KINDS,
    Message,
    Record,
    dumps,
)
from plait.store.base import ScratchpadEntry, SessionRow
from plait.store.sql._due import DueCall
from plait.store.sql._moves import erase_sessions, hidden_heads
from plait.store.sql._rows import (
    SEQ_MAX,
    bases_text,
    kept_as,
    row_from_columns,
    row_values,
    scratchpad_values,
)
from plait.store.sql._schema import (
    Migration,
    checked_migrations,
    migrations,
)
from plait.store.sql._store import (
    check_start,
    created_row,
    first_mpos,
    written_row,
)
from plait.store.sqlite._conn import (
    CHECKPOINT_PAGES,
    LiteConnection,
    failed,
    not_unicode,
    path_argument,
)
from plait.store.sqlite._conn import (
    TOP_TTL as _TOP_TTL,
)
from plait.store.sqlite._flock import FileLocks, file_locks
from plait.store.sqlite._gc import collect, collect_all, owners_found
from plait.store.sqlite._read import is_small, read_records, read_sealed, read_small, read_view
from plait.store.sqlite._recency import Recency
from plait.store.sqlite._sql import (
    APPEND_STATE,
    DIALECT,
    INSERT_SESSION,
    INSERT_SESSION_UNLINKED,
    SELECT_ROW,
    SQLITE_DDL,
    UPDATE_SESSION,
    UPDATE_SESSION_UNLINKED,
    insert_records,
    record_params,
)
from plait.store.sqlite._text import TextFeed, forget_erased

__all__ = ["MIGRATIONS", "MemoryStore", "SQLiteStore", "default_path"]

MIGRATIONS: Final[tuple[Migration, ...]] = migrations(SQLITE_DDL)
"""The schema, numbered and ordered (written once for both SQL stores, in ``_schema.py``)."""

_log = logging.getLogger("plait.store")


_LINKS_VERSION: Final = 6
"""The schema version that added ``sessions.base_owner``."""

_SEQ_MAX: Final = SEQ_MAX

Durability = Literal["normal", "full"]


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


_row_from_db = row_from_columns  # shared with the other SQL store (store/sql/_rows.py)


class SQLiteStore(LiteConnection):
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
        encryption_key: the master key (``plait db keygen``) that seals what sessions
            hold (D320); None for ``$PLAIT_ENCRYPTION_KEY``'s, if set. A store is
            encrypted from its first opening with a key while empty.

    Raises:
        InvalidArgumentError: a path the file system cannot name, a bad option or key.
        EncryptionKeyError: an encrypted store without its key, or with another.
        SchemaTooNewError: the file was written by a newer plait.
        SchemaOutdatedError: the file is older and ``auto_migrate`` is False.
        StoreError: the file cannot be opened as a database.
    """

    dialect = DIALECT

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "normal",
        auto_migrate: bool = True,
        migrations: Sequence[Migration] = MIGRATIONS,
        encryption_key: str | bytes | None = None,
    ) -> None:
        if not isinstance(durability, str) or durability not in ("normal", "full"):
            raise InvalidArgumentError(
                f"durability must be 'normal' or 'full', not {shown(durability)}"
            )
        self._memory = path == ":memory:"
        if self._memory:
            target = ":memory:"
        else:
            resolved = default_path() if path is None else Path(path_argument(path)).expanduser()
            try:
                resolved.parent.mkdir(parents=True, exist_ok=True)
                target = str(resolved.resolve())
            except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of symlinks
                raise StoreError(f"{resolved}: cannot create its folder: {exc}") from exc
        self._path = target
        # Writer locks: lock files beside the database; in memory nobody else can see
        # the sessions, so the locks are this process's alone.
        folder = Path(target + "-locks")
        self._locks: FileLocks | None = None if self._memory else file_locks(folder)
        self._memory_locks: set[str] = set()
        self._migrations = checked_migrations(migrations)
        self._lock = threading.RLock()
        self._closed = False
        self._recency = Recency(_TOP_TTL)
        self._owed_timer = DueCall(self._owed_due, self._recency.ttl, name="plait-owed-moves")
        self._synced_changes = 0
        self._checkpoint_every = CHECKPOINT_PAGES
        self._text = TextFeed()
        try:
            self._db = sqlite3.connect(
                target, isolation_level=None, check_same_thread=False, timeout=30.0
            )
            self._db.execute("PRAGMA busy_timeout = 30000")
            # A new store's freed pages can be given back without rewriting the file
            # (D311). Set only on a file with no table yet, where alone it takes effect
            # (on any other it still writes the header: a reader would change the file).
            if self._db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is None:
                self._db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            if not self._memory:
                mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{target}: could not switch to WAL (got {mode})")
            self._db.execute(f"PRAGMA synchronous = {durability.upper()}")
            # The store checkpoints the log itself, every CHECKPOINT_PAGES rows it writes
            # after its commit, rather than inside whichever commit crosses
            # SQLite's threshold (see LiteConnection._wrote; D211).
            self._db.execute("PRAGMA wal_autocheckpoint = 0")
            # Space freed in a page being written anyway is zeroed (a root page that
            # splits, a cell deleted): otherwise copies of moved cells stay in pages the
            # b-tree keeps, where an erase (which zeroes what it frees) never looks.
            self._db.execute("PRAGMA secure_delete = FAST")
            self._migrate(auto_migrate, encryption_key)
            # A store opened with fewer migrations (tests make old files so) has no base
            # owner links: it writes without them and collects by reading every layout.
            self._links = self._current_version() >= _LINKS_VERSION
            self._start_sealing(encryption_key, target)
            self._synced_changes = self._db.total_changes  # opening wrote nothing to copy
        except sqlite3.DatabaseError as exc:
            raise failed(f"{target}: cannot open as a plait store", exc) from exc
        except EncryptionKeyError:
            self._db.close()  # refused: nothing was written, and nothing is kept open
            raise

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
                key = self._sealer.new_key() if self._sealer is not None else None
                values = row_values(row, self._sealer, key)
                found = owners_found(db, row.layout.bases, values[1])
                if found is None:
                    raise SessionNotFoundError(
                        row.parent_ids[0] if row.parent_ids else row.id,
                        "the session it branches from was deleted",
                    )
                lineage = (
                    row.id,
                    row.workspace,
                    now,
                    now,
                    dumps(list(row.parent_ids)),
                    row.lineage_operator,
                    row.branched_at,
                )
                if self._links:
                    cur = db.execute(INSERT_SESSION, (*lineage, found or None, *values))
                else:
                    cur = db.execute(INSERT_SESSION_UNLINKED, (*lineage, *values))
                pk = int(cur.lastrowid or 0)
                if pk >= 1 << 31:
                    raise StoreError("session key space exhausted")
                self._bind_key(db, key, pk)
                if records:
                    insert_records(db, record_params(pk, records, mpos, self._sealer))
                    self._text.dirty.add(pk)
                db.executemany(
                    "INSERT INTO lineage (parent_id, child_id, ord) VALUES (?, ?, ?)",
                    [(p, row.id, i) for i, p in enumerate(dict.fromkeys(row.parent_ids))],
                )
        except UnicodeEncodeError as exc:
            raise not_unicode(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise failed(f"create {row.id!r}", exc) from exc
        kept_as(pk, values[1], row.layout.bases)
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
        params = record_params(expected.pk, records, lay.end_msgs, self._sealer)
        messages = sum(1 for r in records if r.kind != "event")
        created = records[-1].created_at_us
        # The key is the compare-and-set. Whether the session is live is read in a full
        # transaction, then trusted for _TOP_TTL seconds as long as this store writes
        # nothing else (every other write, a delete included, forgets it). While trusted, a
        # one-record append is a single self-committing INSERT: the same work as a bare
        # INSERT in its own transaction; the move in the order it owes, if another session
        # was ahead, is queued and written soon after (store/sqlite/_recency.py). Another process's
        # activity can thus take up to _TOP_TTL to be ordered against this session's. (A
        # session deleted by *another process* in that window would take appends into rows
        # no session reads; the writer locks forbid deleting a session another process is
        # writing, which closes that window.)
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    self._recency.write_owed(db, now_micros())
                    state = db.execute(APPEND_STATE, (expected.pk,)).fetchone()
                    if state is None or state[0] is None:
                        raise SessionNotFoundError(expected.id)
                    move_to: int | None = None
                    if state[1] != expected.pk:
                        move_to = max(now_micros(), created, state[2] + 1)
                    try:
                        insert_records(db, params)
                    except sqlite3.IntegrityError:
                        raise self._stale(db, expected) from None
                    self._text.dirty.add(expected.pk)
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
                self._recency.settle()
                self._recency.confirmed(expected.pk)
            except UnicodeEncodeError as exc:
                raise not_unicode(exc) from exc
            except sqlite3.DatabaseError as exc:
                self._recency.forget()
                raise failed(f"append {expected.id!r}", exc) from exc
            self._wrote(db.total_changes)
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
        """Append one record while this session is known live (see append).

        One self-committing INSERT whose key is the compare-and-set. This is every
        agent step's write, so it is kept free of anything else: a move in the
        order it owes is queued. Returns None when the session is not known live;
        append() then takes the full path.
        """
        lay = expected.layout
        is_message = record.kind != "event"
        with self._lock:
            # Checked under the lock: a delete in another thread forgets what we know.
            if not self._recency.trusted(expected.pk):
                return None
            if self._closed:
                raise StoreError(f"{self._path}: the store is closed")
            db = self._db
            try:
                rows = record_params(expected.pk, (record,), lay.end_msgs, self._sealer)
                insert_records(db, rows)
                # The full-text index's whole cost on this path (see store/sqlite/_text.py).
                self._text.dirty.add(expected.pk)
            except sqlite3.IntegrityError:
                raise self._stale(db, expected) from None
            except UnicodeEncodeError as exc:
                raise not_unicode(exc) from exc
            except sqlite3.DatabaseError as exc:
                self._recency.forget()
                raise failed(f"append {expected.id!r}", exc) from exc
            if self._recency.appended(expected.pk, record.created_at_us):
                self._arm_owed_timer()
            if db.total_changes - self._synced_changes >= self._checkpoint_every:
                self._checkpoint()
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
                current = _row_from_db(r, None, self._sealer)
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
                    UPDATE_SESSION if self._links else UPDATE_SESSION_UNLINKED,
                    (
                        expected.row_version + 1,
                        now,
                        bases_text(updated.layout.bases),
                        *row_values(updated, self._sealer),
                        expected.pk,
                    ),
                )
                if records:
                    insert_records(
                        db,
                        record_params(expected.pk, records, expected.layout.end_msgs, self._sealer),
                    )
                    self._text.dirty.add(expected.pk)
                if scratchpad is not None:
                    sp = scratchpad_values(scratchpad, self._sealer, expected.pk)
                    db.execute(
                        "INSERT INTO scratchpads VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (expected.pk, *sp, now),
                    )
        except UnicodeEncodeError as exc:
            raise not_unicode(exc) from exc
        except sqlite3.DatabaseError as exc:
            raise failed(f"write {expected.id!r}", exc) from exc
        return written_row(expected, updated, now)

    # -- records ----------------------------------------------------------------------

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at positions ``[lo, hi)``, reading each segment's range."""
        self._check_open()
        parts = segments(row.layout, row.pk, max(lo, 0), min(hi, row.layout.end_seq))
        if not parts:
            return []
        with self._snapshot("read", row.id) as db:
            if self._sealer is not None:
                return read_sealed(db, row, parts, self._sealer)
            if is_small(parts):
                return read_small(db, row, parts)
            return read_records(db, row, parts)

    def read_view(self, row: SessionRow, lo: int, hi: int) -> list[Message | Record]:
        """Return the records at ``[lo, hi)``, each message as its :class:`Message`.

        A message's row is read for its kind and payload only; the few others
        (summaries, events, opaque items) are read whole (``_literead``).
        """
        self._check_open()
        parts = segments(row.layout, row.pk, max(lo, 0), min(hi, row.layout.end_seq))
        if not parts:
            return []
        with self._snapshot("read", row.id) as db:
            if is_small(parts) or self._sealer is not None:
                small = (
                    read_small(db, row, parts)
                    if self._sealer is None
                    else read_sealed(db, row, parts, self._sealer)
                )
                return [Message.from_record(r) if r.kind in MESSAGE_KINDS else r for r in small]
            return read_view(db, row, parts)

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
            collect(db, [pk for _, pk in doomed], links=self._links)

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
            # Taken before the erase's transaction, which cannot store a first search key.
            terms = self._search_terms() if self.code_version >= 12 else None
            self._db.execute("PRAGMA secure_delete = ON")
            try:
                with self._tx() as db:
                    erased = erase_sessions(db, self.dialect, session_id, self._sealer)
                    collect_all(db)  # erasing reads every layout anyway
                    if self.code_version >= 12:  # the text index's copies of the terms too
                        forget_erased(db, terms)
                if self._sealer is not None:
                    self._sealer.forget(erased)
            finally:
                self._db.execute("PRAGMA secure_delete = FAST")
            if self._path != ":memory:":
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

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
                self._write_owed()
                self._owed_timer.close()
                if self._db.total_changes > self._synced_changes:
                    self._checkpoint()  # what this store wrote is not left to others to copy
                self._closed = True
                if self._locks is not None:
                    self._locks.release_all()
                self._memory_locks.clear()
                self._db.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"


class MemoryStore(SQLiteStore):
    """An in-memory SQLite store for ephemeral sessions: same code, nothing on disk.

    ``encryption_key`` seals what sessions hold, as in :class:`SQLiteStore` (D320).
    """

    def __init__(self, *, encryption_key: str | bytes | None = None) -> None:
        super().__init__(":memory:", encryption_key=encryption_key)

    def __repr__(self) -> str:
        return "MemoryStore()"
