"""Writer locks on PostgreSQL: session-level advisory locks, shared by a process's stores.

The writer lock of the store protocols belongs to a process. An advisory lock
belongs to a connection: so every store of this process on the same server,
database and schema shares one connection (never a pooled one) that holds the
locks, and counts which of its stores hold each. A lock is released when the
last of them lets go, and by the server when the connection drops (the process
ended, kill -9 included): no lock outlives its process.

A lock can also be lost while its process lives: the server, an idle timeout, a
proxy or a failover cuts the holding connection, and nothing tells the holder. So
taking a lock bumps the session's *epoch* (``writer_fences``, in the same
statement that takes it), each store remembers the epoch of its hold, and every
write it makes on the session carries that epoch and is refused, in the write's own
statement, once the stored one has moved on (D232). A hold lost with its connection
keeps its epoch until its store lets go: the writes made in its belief are fenced,
never let through unfenced.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from plait.errors import WriterLockLostError

if TYPE_CHECKING:
    import psycopg

    from plait.store.sql._dialect import Connection

__all__ = ["LOCK_WAIT_MS", "AdvisoryLocks", "PgWriterLocks", "lock_key", "locks_name", "signed"]

LOCK_WAIT_MS: Final = 100
"""How long taking (or probing) a writer lock waits for its holder to let go.

A process that dies (kill -9 included) loses its locks when the server notices its
connection closed: a few milliseconds after the process is gone, not at once as with
a file lock. Waiting this long (only when the lock is held) makes a takeover right
after the holder's death succeed instead of finding the lock still held.
"""


_TAKE: Final = (
    "WITH l AS (SELECT pg_advisory_lock(%(key)s::bigint)) "
    "INSERT INTO writer_fences (session_id, epoch) SELECT %(id)s, 1 FROM l "
    "ON CONFLICT (session_id) DO UPDATE SET epoch = writer_fences.epoch + 1 "
    "RETURNING epoch"
)
"""Take a session's lock and bump its epoch: one statement, the lock first.

The bump waits for a write in flight that checked the old epoch (it holds the fence
row ``FOR SHARE``): that write commits before the new holder's first one can start.
"""

_LET_GO: Final = (
    "SELECT pg_advisory_unlock(%(key)s::bigint) FROM pg_locks WHERE locktype = 'advisory' "
    "AND pid = pg_backend_pid() AND classid = %(hi)s::bigint::oid "
    "AND objid = %(lo)s::bigint::oid AND objsubid = 1 AND granted"
)
"""Release the lock if this connection holds it (a warning-free no-op if not)."""

_FENCE_CHECK: Final = (
    "SELECT 1 FROM writer_fences WHERE session_id = %s AND epoch = %s FOR SHARE"
)
"""``_pgsql.FENCE`` as a write transaction's first statement (positional parameters)."""


def locks_name(name: str | None) -> str:
    """The ``application_name`` of the holding connection: the store's, and `` locks``.

    Its own name, so an operator (or a test) tells it from the pooled connections in
    ``pg_stat_activity`` (``plait locks`` by default).

    Args:
        name: the store's connections' name (the URL's, or None for ``plait``).
    """
    return f"{name or 'plait'} locks"


def signed(digest: bytes) -> int:
    """A digest as a signed big-endian integer (advisory-lock keys are signed)."""
    return int.from_bytes(digest, "big", signed=True)


def lock_key(namespace: str, session_id: str) -> int:
    """Return the 64-bit advisory-lock key of a session's writer lock.

    Args:
        namespace: the schema the store keeps its tables in (locks are per
            database already; the schema separates stores sharing one).
        session_id: the session.
    """
    text = f"plait\0{namespace}\0{session_id}".encode()
    return signed(hashlib.blake2b(text, digest_size=8).digest())


class _ProcessLocks:
    """The writer locks this process holds on one database and schema."""

    def __init__(
        self, key: tuple[str, ...], conninfo: str, kwargs: dict[str, Any], name: str
    ) -> None:
        self.key = key
        self.name = name
        self.conninfo = conninfo
        self.kwargs = kwargs
        self.mutex = threading.Lock()
        self.conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self.holders: dict[str, int] = {}  # session id -> stores of this process holding it
        self.epochs: dict[str, int | None] = {}  # session id -> the epoch of the hold
        self.generation = 0  # bumped when the connection (and every hold on it) is lost
        self.stores = 0

    def connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The holding connection, opened on first use (call with ``mutex`` held).

        Its ``lock_timeout`` bounds how long taking or probing a lock waits for a
        holder that is letting go (see :data:`LOCK_WAIT_MS`).
        """
        import psycopg

        if self.conn is not None and (self.conn.broken or self.conn.closed):
            # The server dropped the connection, and the locks with it. The stores that
            # held them keep their epochs: their writes stay fenced (see the module).
            self.holders.clear()
            self.epochs.clear()
            self.generation += 1
            self.conn = None
        if self.conn is None:
            from psycopg import conninfo as pgconninfo

            kwargs = dict(self.kwargs)
            wait = f"-c lock_timeout={LOCK_WAIT_MS}"
            # A keyword replaces the target's own options (a URL's -c search_path=, say),
            # so the wait is added to them, never put in their place.
            given = kwargs.get("options") or pgconninfo.conninfo_to_dict(self.conninfo).get(
                "options"
            )
            kwargs["options"] = f"{given or ''} {wait}".strip()
            kwargs["application_name"] = self.name
            self.conn = psycopg.connect(self.conninfo, **kwargs)
        return self.conn


_PROCESS_LOCKS: dict[tuple[str, ...], _ProcessLocks] = {}
_PROCESS_LOCKS_MUTEX = threading.Lock()

Guard = Callable[[str], AbstractContextManager[None]]
Pooled = Callable[[str], AbstractContextManager["psycopg.Connection[tuple[Any, ...]]"]]


class AdvisoryLocks:
    """One store's hold on its process's writer locks.

    Args:
        key: the server, database and schema (stores on the same one share locks).
        namespace: the schema, part of every lock's key.
        conninfo: how to connect for the holding connection.
        kwargs: its connection options.
        guard: turns driver errors into the store's errors, naming what failed.
        pooled: lends a pooled connection (for reading ``pg_locks``).
        fenced: whether the schema has ``writer_fences`` (a schema opened with fewer
            migrations has none: its locks carry no epoch and its writes no check).
        name: the holding connection's ``application_name`` (see :func:`locks_name`).
    """

    def __init__(
        self,
        key: tuple[str, ...],
        namespace: str,
        conninfo: str,
        kwargs: dict[str, Any],
        guard: Guard,
        pooled: Pooled,
        *,
        fenced: bool = True,
        name: str = "plait locks",
    ) -> None:
        with _PROCESS_LOCKS_MUTEX:
            shared = _PROCESS_LOCKS.get(key)
            if shared is None:
                shared = _PROCESS_LOCKS[key] = _ProcessLocks(key, conninfo, kwargs, name)
            shared.stores += 1
        self._shared = shared
        self._namespace = namespace
        self._guard = guard
        self._pooled = pooled
        self._fenced = fenced
        # The locks this store holds: session id -> (the connection generation it was
        # taken on, its epoch). A hold whose generation is not the current one was lost.
        self._held: dict[str, tuple[int, int | None]] = {}

    def lock(self, session_id: str) -> bool:
        """Take the lock for this process (again: does nothing); False if held elsewhere.

        Taken for real (not held by the process yet), it bumps the session's epoch in
        the same statement, and this store's writes on the session carry it.
        """
        from psycopg import errors as pgerrors

        locks = self._shared
        with locks.mutex, self._guard(f"lock {session_id!r}"):
            conn = locks.connection()
            if session_id in locks.holders:  # this process holds it
                mine = self._held.get(session_id)
                if mine is None or mine[0] != locks.generation:
                    self._held[session_id] = (locks.generation, locks.epochs[session_id])
                    locks.holders[session_id] += 1
                return True
            key = lock_key(self._namespace, session_id)
            try:
                if self._fenced:
                    found = conn.execute(_TAKE, {"key": key, "id": session_id}).fetchone()
                    epoch: int | None = int(found[0]) if found is not None else None
                else:
                    conn.execute("SELECT pg_advisory_lock(%s::bigint)", (key,))
                    epoch = None
            except pgerrors.LockNotAvailable:  # held elsewhere for all of LOCK_WAIT_MS
                if self._fenced:
                    # Or taken, and the epoch's row still locked by a write of the last
                    # holder for all that time: a lock taken in a statement that failed
                    # stays taken, so let go of it (this turn is lost; the next one asks
                    # again).
                    hi, lo = (key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF
                    conn.execute(_LET_GO, {"key": key, "hi": hi, "lo": lo})
                return False
            # A hold this store lost with the connection is replaced: its writes were
            # fenced with the old epoch until now.
            locks.holders[session_id] = 1
            locks.epochs[session_id] = epoch
            self._held[session_id] = (locks.generation, epoch)
            return True

    def unlock(self, session_id: str) -> None:
        """Let go of this store's hold (the lock goes when no store of the process holds it).

        A hold lost with its connection has nothing to let go of on the server: it is
        forgotten, and this store's writes on the session are no longer fenced.
        """
        import psycopg

        locks = self._shared
        with locks.mutex:
            mine = self._held.pop(session_id, None)
            if mine is None or mine[0] != locks.generation:
                return
            left = locks.holders.get(session_id, 0) - 1
            if left > 0:
                locks.holders[session_id] = left
                return
            locks.holders.pop(session_id, None)
            locks.epochs.pop(session_id, None)
            conn = locks.conn
            if conn is None or conn.closed or conn.broken:
                return
            key = lock_key(self._namespace, session_id)
            try:
                conn.execute("SELECT pg_advisory_unlock(%s::bigint)", (key,))
            except psycopg.Error as exc:
                if conn.broken:  # cut meanwhile: the lock went with it, nothing to let go
                    return
                with self._guard(f"unlock {session_id!r}"):
                    raise exc from None

    def epoch(self, session_id: str) -> int | None:
        """The epoch this store's writes on the session carry; None: it holds no lock there.

        A hold lost with its connection keeps its epoch until :meth:`unlock`: writes made
        while this store believed it held the lock are fenced with it. Read without the
        mutex (one dictionary read, on every write).
        """
        mine = self._held.get(session_id)
        return None if mine is None else mine[1]

    def break_held(self, session_id: str) -> bool:
        """End the connection of another process that holds the session's lock.

        What a fleet does to a replica whose lease ran out while it still holds the
        lock (frozen, or cut off from its peers but not from PostgreSQL): the server
        drops that connection's locks, the next taker bumps the epoch, and every
        later write of the old holder is refused (D232, D256). Returns whether a
        connection was ended; never this process's own.
        """
        locks = self._shared
        with locks.mutex:
            if session_id in locks.holders:
                return False
        key = lock_key(self._namespace, session_id)
        with self._pooled(f"break the lock on {session_id!r}") as conn:
            found = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1 "
                "AND granted AND pid <> pg_backend_pid()",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
            ).fetchall()
        return any(bool(row[0]) for row in found)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the lock (a snapshot; this process's own is not).

        Reads ``pg_locks``; when that shows the lock held, waits up to
        :data:`LOCK_WAIT_MS` for a shared hold on it, so a holder that just died
        (its connection not yet dropped by the server) does not count.
        """
        from psycopg import errors as pgerrors

        locks = self._shared
        with locks.mutex:
            if session_id in locks.holders:
                return False
        key = lock_key(self._namespace, session_id)
        what = f"check the lock on {session_id!r}"
        with self._pooled(what) as conn:
            found = conn.execute(
                "SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1 "
                "AND granted)",
                ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
            ).fetchone()
        if not (found and found[0]):
            return False
        with locks.mutex, self._guard(what):
            if session_id in locks.holders:
                return False
            conn = locks.connection()
            try:
                conn.execute("SELECT pg_advisory_lock_shared(%s::bigint)", (key,))
            except pgerrors.LockNotAvailable:
                return True
            conn.execute("SELECT pg_advisory_unlock_shared(%s::bigint)", (key,))
            return False

    def close(self, suppress: type[BaseException]) -> None:
        """Let go of every lock this store holds; the last store closes the holding connection.

        Args:
            suppress: the errors to swallow at each step, so every step runs even
                when the server went away.
        """
        import psycopg

        for session_id in list(self._held):
            with contextlib.suppress(suppress):
                self.unlock(session_id)
        locks = self._shared
        with _PROCESS_LOCKS_MUTEX, locks.mutex:
            locks.stores -= 1
            if locks.stores == 0:  # the last store of this process on this schema
                _PROCESS_LOCKS.pop(locks.key, None)
                if locks.conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        locks.conn.close()  # the server drops whatever it still held
                locks.conn = None
                locks.holders.clear()


class PgWriterLocks:
    """The PostgreSQL store's writer locks, over its :class:`AdvisoryLocks` (a part it holds).

    :class:`~plait.store.postgres.PostgresStore` holds one and passes its
    :class:`~plait.store.base.WriterLocks` and ``BreakableLocks`` verbs to it; the fenced
    statements of its hot paths are in ``postgres/_sql.py``.

    Args:
        locks: the advisory locks the stores of this process on the schema share.
        check_open: the store's own check that it is still open.
    """

    def __init__(self, locks: AdvisoryLocks, check_open: Callable[[], None]) -> None:
        self._locks = locks
        self._check_open = check_open

    def fence(self, conn: Connection, session_id: str) -> None:
        """First in a write transaction: refuse a writer whose lock was lost (D232).

        A no-op where this store holds no lock on the session. Holds the fence row
        ``FOR SHARE`` until the transaction ends, so a writer taking the lock waits.

        Raises:
            WriterLockLostError: the session's epoch is no longer this store's hold's.
        """
        epoch = self._locks.epoch(session_id)
        if epoch is None:
            return
        if conn.execute(_FENCE_CHECK, (session_id, epoch)).fetchone() is None:
            raise WriterLockLostError(session_id, epoch)

    def lock(self, session_id: str) -> bool:
        """Take the session's writer lock for this process; False if another process has it.

        A PostgreSQL session-level advisory lock on the 64-bit hash of the schema
        and the id (see :func:`lock_key`), held on one connection that every
        store of this process on the same database and schema shares (never a
        pooled one). It is released when every store of the process that took it
        has let go (:meth:`unlock`, :meth:`close`), and by the server when the
        connection drops: the process died, kill -9 included. Taking it again
        does nothing.

        Taken for real, it bumps the session's epoch (in the statement that takes
        it), and this store's writes on the session carry that epoch until it lets
        go: if the holding connection is cut while the process lives and another
        writer takes the lock, they raise :class:`~plait.errors.WriterLockLostError` and write
        nothing (D232). The holding connection's ``application_name`` is the
        store's with `` locks`` added (``plait locks``).

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

    def break_lock(self, session_id: str) -> bool:
        """End the database connection through which another process holds the lock.

        For a fleet fencing a replica whose lease ran out (D256): that process's writes
        on the session are refused from then on. Needs the right to end that backend
        (the same role, or ``pg_signal_backend``). Returns whether one was ended.

        Raises:
            StoreError: the store is closed or the server cannot be reached.
        """
        self._check_open()
        return self._locks.break_held(session_id)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the session's writer lock (a snapshot).

        False while this process holds it, through this store or another one on
        the same database and schema. A holder that just died (its connection not
        yet dropped by the server) does not count.
        """
        self._check_open()
        return self._locks.locked_elsewhere(session_id)
