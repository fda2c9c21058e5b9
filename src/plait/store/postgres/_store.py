"""The PostgreSQL store itself: rows and records; it holds its writer locks and notifications."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Final

from plait._time import now_micros
from plait.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StoreError,
    WriterLockLostError,
)
from plait.layout import Segment, segments
from plait.records import MESSAGE_KINDS, Message, Record, dumps, encode_payload
from plait.store._bus import BusMessage
from plait.store.base import ScratchpadEntry, SessionRow
from plait.store.postgres._bus import BusListener, BusPublisher, new_origin
from plait.store.postgres._conn import PgConnection, cursor_of
from plait.store.postgres._feed import ChangeFeed, Notifier
from plait.store.postgres._gc import collect, collect_all
from plait.store.postgres._locks import AdvisoryLocks, PgWriterLocks, locks_name
from plait.store.postgres._notify import PgNotifications
from plait.store.postgres._open import (
    PG_DDL,
    current_version,
    location_of,
    open_schema,
    parse_target,
)
from plait.store.postgres._prep import run_prepared
from plait.store.postgres._read import scan_records, scan_view
from plait.store.postgres._recency import OWED_FOR, OwedMoves
from plait.store.postgres._sql import (
    APPEND,
    APPEND_FENCED,
    APPEND_ONE_FENCED_PREPARED,
    APPEND_ONE_PREPARED,
    CREATE,
    CREATE_UNLINKED,
    DIALECT,
    HEAD,
    WRITE,
    WRITE_FENCED,
    WRITE_UNLINKED,
    WRITE_UNLINKED_FENCED,
    record_arrays,
)
from plait.store.sql._moves import erase_sessions, hidden_heads
from plait.store.sql._rows import (
    ROW_COLUMNS,
    SEQ_MAX,
    kept_as,
    prefix_text,
    row_values,
    scratchpad_values,
)
from plait.store.sql._schema import Migration, checked_migrations, migrations
from plait.store.sql._store import (
    Connection,
    check_start,
    created_row,
    first_mpos,
    written_row,
)

if TYPE_CHECKING:
    import psycopg

    from plait.store.sql._sealing import DataKey, Sealer

__all__ = ["MIGRATIONS", "PostgresStore"]

MIGRATIONS: Final[tuple[Migration, ...]] = migrations(PG_DDL)
"""The schema, numbered and ordered (written once for both SQL stores, in ``_schema.py``).

Applied each in one transaction under an advisory lock.
"""


_SEQ_MAX: Final = SEQ_MAX
_CHANNEL: Final = "plait_session"
_BUS: Final = "plait_bus"
_LINKS_VERSION: Final = 6  # the schema version that added sessions.base_owner
_FENCES_VERSION: Final = 9  # the schema version that added writer_fences
_SP_PARAMS: Final = ("sp_version", "sp", "sp_source", "sp_reason", "sp_metadata")
_NO_SP: Final = (0, None, None, None, "{}")  # the scratchpad insert's values when it does not run


class PostgresStore(PgConnection):
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
        encryption_key: the master key that seals what sessions hold (D320); None for
            ``$PLAIT_ENCRYPTION_KEY``'s, if set.

    Raises:
        MissingDependencyError: psycopg is not installed (``plait[postgres]``).
        InvalidArgumentError: the schema name is not a plain identifier.
        StoreError: the URL is invalid or the server cannot be reached.
        SchemaTooNewError: the schema was written by a newer plait.
        SchemaOutdatedError: the schema is older and ``auto_migrate`` is False.
        EncryptionKeyError: an encrypted store without its key, or with another.
    """

    dialect = DIALECT

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        auto_migrate: bool = False,
        migrations: Sequence[Migration] = MIGRATIONS,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
        encryption_key: str | bytes | None = None,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool
            from psycopg import errors, pq  # submodules by import (see _pgprep._load)
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
        self._driver_errors = (psycopg.Error, UnicodeEncodeError)
        self._conflict = errors.UniqueViolation
        self._idle_status = pq.TransactionStatus.IDLE
        self._spare = None
        self._spare_mutex = threading.Lock()
        self._waiting = 0
        self._feed = ChangeFeed(conninfo, kwargs, self._channel, self._guard)
        self._notifier = Notifier(conninfo, kwargs, self._channel)
        bus = _BUS if schema is None else f"{_BUS}.{schema}"
        origin = new_origin()
        self._bus_out = BusPublisher(conninfo, kwargs, bus, origin)
        self._bus_in = BusListener(conninfo, kwargs, (self._channel, bus), origin, self._guard)
        self._notes = PgNotifications(
            self._feed,
            self._notifier,
            self._bus_out,
            self._bus_in,
            self._check_open,
            lambda: self._sealer,
        )
        self._owed = OwedMoves(self._move_owed, OWED_FOR)
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
                    setup, self._schema, self._location, self._migrations, auto=auto_migrate,
                    refuse=lambda c: self._refuse_another_key(encryption_key, c, self._location),
                )  # fmt: skip
                # A schema opened with fewer migrations (tests make old ones so) has no
                # base-owner links: writes leave them out and deletes read every layout.
                version = current_version(setup)
                self._links = version >= _LINKS_VERSION
                fenced = version >= _FENCES_VERSION
        except psycopg.Error as exc:
            raise StoreError(f"{self._location}: cannot open as a plait store: {exc}") from exc
        # Stores of this process on the same server, database and schema share writer locks.
        self._locks = AdvisoryLocks(
            (*server, self._namespace),
            self._namespace,
            conninfo,
            kwargs,
            self._guard,
            self._conn,
            fenced=fenced,
            name=locks_name(params.get("application_name")),
        )
        self._writer = PgWriterLocks(self._locks, self._check_open)
        self._pool = psycopg_pool.ConnectionPool(
            conninfo,
            kwargs=kwargs,
            min_size=1,
            max_size=pool_size,
            open=True,
            name=f"plait {self._location}",
            timeout=max(connect_timeout, 1.0) * 3,
        )
        try:
            self._start_sealing(encryption_key, self._location)
        except BaseException:
            self.close()
            raise

    # -- sessions ---------------------------------------------------------------------

    def create(self, row: SessionRow, records: Sequence[Record] = ()) -> SessionRow:
        """Insert a new session, its first own records and its lineage edges (one statement).

        Raises:
            SessionExistsError: the id is taken.
            SessionNotFoundError: a session it shares rows with was deleted meanwhile.
        """
        from psycopg import errors as pgerrors

        mpos = first_mpos(row, records)
        bases = row.layout.bases
        now = now_micros()
        sealer = self._sealer
        seal = None if sealer is None else (sealer, sealer.new_key())
        key = None if seal is None else seal[1]
        values = dict(zip(ROW_COLUMNS, row_values(row, sealer, key), strict=True))
        params: dict[str, Any] = {
            "id": row.id,
            "workspace": row.workspace,
            "now": now,
            "parent_ids": dumps(list(row.parent_ids)),
            "lineage_operator": row.lineage_operator,
            "branched_at": row.branched_at,
            **values,
            "parents": list(dict.fromkeys(row.parent_ids)),
            "last_owner": bases[-1][0] if bases else None,
            "prefix": prefix_text(bases, values["bases"]) if bases else "[]",
            **record_arrays(records, mpos, seal),
        }
        self._owed.flush()  # the moves owed first: the new session is the most recent
        with self._conn(f"create {row.id!r}") as conn, self._keyed(conn):
            try:
                found = conn.execute(CREATE if self._links else CREATE_UNLINKED, params).fetchone()
                if found is not None and found[0] is not None:
                    self._bind_key(conn, key, int(found[0]))
            except pgerrors.UniqueViolation as exc:
                if exc.diag.constraint_name == "sessions_id_key":
                    raise SessionExistsError(row.id) from None
                raise
            except pgerrors.SequenceGeneratorLimitExceeded as exc:
                raise StoreError(f"{self._location}: session key space exhausted") from exc
        if found is None or found[0] is None:
            source = row.parent_ids[0] if row.parent_ids else row.id
            raise SessionNotFoundError(source, "deleted while a branch of it was created")
        self._notifier.changed(row.id)
        kept_as(int(found[0]), values["bases"], bases)
        return created_row(row, int(found[0]), now)

    def append(self, expected: SessionRow, records: Sequence[Record]) -> SessionRow:
        """Append records at the head: one statement, compare-and-set by primary key.

        A record's key is ``owner << 32 | seq``, so a second writer appending at
        the same head collides on the key: the insert is the compare-and-set and
        the session row is not written. In the same statement (one round trip,
        one transaction): the session must be live (its row is locked ``FOR KEY
        SHARE``, which only a delete conflicts with); its ``updated_at`` moves
        only when another session is ahead of it in "most recently active"
        order, and for one record that move is queued and written soon after
        (store/postgres/_recency.py). Once it has committed, ``plait_session`` is notified.

        A writer holding the session's lock sends its epoch, checked in the same
        statement (D232).

        Raises:
            StaleSessionError: another writer appended first (nothing written).
            SessionNotFoundError: the session is gone.
            WriterLockLostError: this store's lock on the session was lost and taken
                by another writer (nothing written).
        """
        if not records:
            self._check_open()
            return expected
        lay = expected.layout
        check_start("append", expected, records)
        messages = sum(1 for r in records if r.kind != "event")
        created = records[-1].created_at_us
        one = len(records) == 1
        epoch = self._locks.epoch(expected.id)
        if one:
            record = records[0]
            if record.seq > _SEQ_MAX:
                raise StoreError(f"position {record.seq} exceeds the store's limit {_SEQ_MAX}")
            # In APPEND_ONE_PREPARED.keys' order; through libpq, not a cursor (_pgprep.py).
            payload = encode_payload(record)
            meta = dumps(dict(record.meta)) if record.meta else None
            if self._sealer is not None:
                payload, meta = self._sealer.seal_record(
                    self._sealer.owner_key(expected.pk), record.seq, record.id, record.kind,
                    payload, meta,
                )  # fmt: skip
            values: tuple[Any, ...] = (
                expected.pk, record.seq, lay.end_msgs, record.id, record.kind,
                payload, meta, record.created_at_us, record.tokens,
            )  # fmt: skip
            if epoch is not None:  # APPEND_ONE_FENCED_PREPARED.keys: the fence's first
                values = (expected.id, epoch, *values)
        else:
            params: dict[str, Any] = {
                "pk": expected.pk,
                "id": expected.id,
                "now": max(now_micros(), created),
                "epoch": epoch,
                **record_arrays(records, lay.end_msgs, self._seal(expected.pk)),
            }
            self._owed.flush()  # this one moves itself: the moves owed before it go first
        # The connection and the error guard spelled out, not context managers: this is
        # the call of every agent step.
        self._check_open()
        fenced = True
        try:
            conn = self._take()
            try:
                if one and epoch is None:
                    result = run_prepared(conn, APPEND_ONE_PREPARED, values)
                    live, found = result.get_value(0, 0) == b"t", result.get_value(0, 1)
                elif one:
                    result = run_prepared(conn, APPEND_ONE_FENCED_PREPARED, values)
                    live, found = result.get_value(0, 0) == b"t", result.get_value(0, 1)
                    fenced = result.get_value(0, 2) == b"t"
                elif epoch is None:
                    got = cursor_of(conn).execute(APPEND, params).fetchone()
                    live, found = got if got is not None else (False, None)
                else:
                    got = cursor_of(conn).execute(APPEND_FENCED, params).fetchone()
                    live, found, fenced = got if got is not None else (False, None, False)
            except self._conflict:  # the compare-and-set: another writer was first
                stale = self._stale(conn, expected)
                if stale.actual is None:
                    raise SessionNotFoundError(expected.id) from None
                raise stale from None
            finally:
                self._give(conn)
        except self._driver_errors as exc:
            raise self._wrapped(f"append {expected.id!r}", exc) from exc
        if not fenced:
            assert epoch is not None
            raise WriterLockLostError(expected.id, epoch)
        if not live:
            raise SessionNotFoundError(expected.id)
        self._notifier.changed(expected.id)
        if one:  # found: the most recent session, whose place this one owes
            self._owed.appended(expected.pk, created, None if found is None else int(found))
        elif found is not None:  # found: where this one moved to
            created = int(found)
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

        A writer holding the session's lock sends its epoch, checked in the same
        statement (D232).

        Raises:
            StaleSessionError: the row or the head changed since ``expected`` (nothing written).
            SessionNotFoundError: the session is gone.
            WriterLockLostError: this store's lock on the session was lost and taken
                by another writer (nothing written).
        """
        from psycopg import errors as pgerrors

        check_start("write", expected, records)
        epoch = self._locks.epoch(expected.id)
        sp = scratchpad
        params: dict[str, Any] = {
            "pk": expected.pk,
            "id": expected.id,
            "row_version": expected.row_version,
            "head": expected.layout.end_seq,
            "now": now_micros(),
            "epoch": epoch,
            **dict(zip(ROW_COLUMNS, row_values(updated, self._sealer), strict=True)),
            "has_sp": sp is not None,
            **dict(
                zip(
                    _SP_PARAMS,
                    _NO_SP if sp is None else scratchpad_values(sp, self._sealer, expected.pk),
                    strict=True,
                )
            ),
            **record_arrays(records, expected.layout.end_msgs, self._seal(expected.pk)),
        }
        self._owed.flush()  # the moves owed first: this write moves its session to the top
        if epoch is None:
            statement = WRITE if self._links else WRITE_UNLINKED
        else:
            statement = WRITE_FENCED if self._links else WRITE_UNLINKED_FENCED
        with self._conn(f"write {expected.id!r}") as conn:
            try:
                found = conn.execute(statement, params).fetchone()
            except pgerrors.UniqueViolation:  # a record collided: another writer appended
                found = None
            if epoch is not None and found is not None and not found[1]:
                raise WriterLockLostError(expected.id, epoch)
            if found is None or found[0] is None:
                stale = self._stale(conn, expected)
                if stale.actual is None:
                    raise SessionNotFoundError(expected.id)
                raise stale
        self._notifier.changed(expected.id)
        return written_row(expected, updated, int(found[0]))

    # -- records ----------------------------------------------------------------------

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at positions ``[lo, hi)``: one range scan per segment.

        All segments are read by one statement, so from one snapshot.
        """
        parts = self._parts(row, lo, hi)
        if not parts:
            return []
        with self._conn(f"read {row.id!r}") as conn:
            return scan_records(conn, row, parts, self._sealer)

    def read_view(self, row: SessionRow, lo: int, hi: int) -> list[Message | Record]:
        """Return the records at ``[lo, hi)``, each message as its :class:`Message`.

        One statement, as :meth:`read`; a message's id, meta, time and count are
        not sent (the statement sends them only with summaries, events and opaque items).
        """
        parts = self._parts(row, lo, hi)
        if not parts:
            return []
        with self._conn(f"read {row.id!r}") as conn:
            if self._sealer is not None:  # the records opened, then made messages
                found = scan_records(conn, row, parts, self._sealer)
                return [Message.from_record(r) if r.kind in MESSAGE_KINDS else r for r in found]
            return scan_view(conn, row, parts)

    def _parts(self, row: SessionRow, lo: int, hi: int) -> list[Segment]:
        """The segments a read of ``[lo, hi)`` scans (none: the store is only checked open)."""
        parts = segments(row.layout, row.pk, max(lo, 0), min(hi, row.layout.end_seq))
        if not parts:
            self._check_open()
        return parts

    # -- collections ------------------------------------------------------------------

    def delete(self, session_id: str) -> None:
        """Delete a session; its rows stay while another session's layout reads them.

        Raises:
            SessionNotFoundError: no live session has this id.
            WriterLockLostError: this store's lock on the session was lost and taken
                by another writer (nothing written).
        """
        with self._conn(f"delete {session_id!r}") as conn, conn.transaction():
            self._fence(conn, session_id)
            # Its hidden heads (what it named before a rewind) go with it, first.
            doomed: list[tuple[str, int]] = []
            found = None
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
                    "SELECT pk FROM t",
                    {"id": sid},
                ).fetchone()
                if found is not None:
                    doomed.append((sid, int(found[0])))
            if found is None:
                raise SessionNotFoundError(session_id)
            if self._links:
                collect(conn, [pk for _, pk in doomed])
            else:
                collect_all(conn)
        for sid, _ in doomed:
            self._notifier.changed(sid)

    def erase(self, session_id: str) -> None:
        """Delete a session and its hidden heads, and every record of theirs nobody reads.

        The rows go in this transaction; PostgreSQL reclaims their space (and overwrites
        it) at its next ``VACUUM`` of the tables, which autovacuum runs by itself.

        Raises:
            SessionNotFoundError: no live session has this id.
            WriterLockLostError: this store's lock on the session was lost and taken
                by another writer (nothing written).
        """
        with self._conn(f"erase {session_id!r}") as conn, conn.transaction():
            self._fence(conn, session_id)
            erased = erase_sessions(conn, self.dialect, session_id, self._sealer)
            collect_all(conn)  # erasing reads every layout anyway
        if self._sealer is not None:
            self._sealer.forget(erased)
        self._changed(session_id)

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

    def _seal(self, pk: int) -> tuple[Sealer, DataKey] | None:
        """The sealer and ``pk``'s data key in an encrypted store, else None."""
        sealer = self._sealer
        return None if sealer is None else (sealer, sealer.owner_key(pk))

    def _keyed(self, conn: psycopg.Connection[Any]) -> AbstractContextManager[Any]:
        """A transaction in an encrypted store, where a create also stores its data key."""
        return conn.transaction() if self._sealer is not None else nullcontext()

    # -- the parts it holds: writer locks, the change feed and the event bus ------------

    def _fence(self, conn: Connection, session_id: str) -> None:
        self._writer.fence(conn, session_id)

    def lock(self, session_id: str) -> bool:
        """Take the session's writer lock for this process (:meth:`PgWriterLocks.lock`)."""
        return self._writer.lock(session_id)

    def unlock(self, session_id: str) -> None:
        """Release this store's hold on the session's writer lock (a no-op if not held)."""
        self._writer.unlock(session_id)

    def break_lock(self, session_id: str) -> bool:
        """End another process's hold on the session's lock (:meth:`PgWriterLocks.break_lock`)."""
        return self._writer.break_lock(session_id)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the session's writer lock (a snapshot)."""
        return self._writer.locked_elsewhere(session_id)

    def changes(self, timeout: float | None = None) -> Iterator[str]:
        """Listen for committed writes from every process (:meth:`PgNotifications.changes`)."""
        return self._notes.changes(timeout)

    def flush_changes(self, timeout: float = 5.0) -> bool:
        """Wait until this store's committed writes so far are announced; False on timeout."""
        return self._notes.flush_changes(timeout)

    def publish_events(self, session_id: str, events: Sequence[str]) -> None:
        """Queue a session's events for the other processes' :meth:`events`."""
        self._notes.publish_events(session_id, events)

    def flush_events(self, timeout: float = 5.0) -> bool:
        """Wait until the events queued so far are sent; False if ``timeout`` passed first."""
        return self._notes.flush_events(timeout)

    def events(
        self, timeout: float | None = None, wanted: Callable[[str], bool] | None = None
    ) -> Iterator[BusMessage]:
        """:meth:`changes` and other stores' event batches, in commit order."""
        return self._notes.events(timeout, wanted)

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
        # Every step runs even if one fails (a server that went away): what this store
        # holds is let go whatever happens.
        self._owed.close()  # this store's appends are in the order before it lets go
        self._closed = True
        with contextlib.suppress(psycopg.Error):
            self._close_pool()
        self._notifier.close()  # what this store wrote is announced before it lets go
        self._bus_out.close()
        self._locks.close(StoreError)
        self._feed.close()
        self._bus_in.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._location!r})"
