"""Writer locks on PostgreSQL: session-level advisory locks, shared by a process's stores.

The writer lock of the store protocols belongs to a process. An advisory lock
belongs to a connection: so every store of this process on the same server,
database and schema shares one connection (never a pooled one) that holds the
locks, and counts which of its stores hold each. A lock is released when the
last of them lets go, and by the server when the connection drops (the process
ended, kill -9 included): no lock outlives its process.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import psycopg

__all__ = ["LOCK_WAIT_MS", "AdvisoryLocks", "lock_key", "signed"]

LOCK_WAIT_MS: Final = 100
"""How long taking (or probing) a writer lock waits for its holder to let go.

A process that dies (kill -9 included) loses its locks when the server notices its
connection closed: a few milliseconds after the process is gone, not at once as with
a file lock. Waiting this long (only when the lock is held) makes a takeover right
after the holder's death succeed instead of finding the lock still held.
"""


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

    def __init__(self, key: tuple[str, ...], conninfo: str, kwargs: dict[str, Any]) -> None:
        self.key = key
        self.conninfo = conninfo
        self.kwargs = kwargs
        self.mutex = threading.Lock()
        self.conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self.holders: dict[str, int] = {}  # session id -> stores of this process holding it
        self.stores = 0

    def connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The holding connection, opened on first use (call with ``mutex`` held).

        Its ``lock_timeout`` bounds how long taking or probing a lock waits for a
        holder that is letting go (see :data:`LOCK_WAIT_MS`).
        """
        import psycopg

        if self.conn is not None and (self.conn.broken or self.conn.closed):
            self.holders.clear()  # the server dropped the connection, and the locks with it
            self.conn = None
        if self.conn is None:
            kwargs = dict(self.kwargs)
            wait = f"-c lock_timeout={LOCK_WAIT_MS}"
            kwargs["options"] = f"{kwargs.get('options') or ''} {wait}".strip()
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
    """

    def __init__(
        self,
        key: tuple[str, ...],
        namespace: str,
        conninfo: str,
        kwargs: dict[str, Any],
        guard: Guard,
        pooled: Pooled,
    ) -> None:
        with _PROCESS_LOCKS_MUTEX:
            shared = _PROCESS_LOCKS.get(key)
            if shared is None:
                shared = _PROCESS_LOCKS[key] = _ProcessLocks(key, conninfo, kwargs)
            shared.stores += 1
        self._shared = shared
        self._namespace = namespace
        self._guard = guard
        self._pooled = pooled
        self._held: set[str] = set()  # the locks this store holds

    def lock(self, session_id: str) -> bool:
        """Take the lock for this process (again: does nothing); False if held elsewhere."""
        from psycopg import errors as pgerrors

        locks = self._shared
        with locks.mutex, self._guard(f"lock {session_id!r}"):
            conn = locks.connection()
            if session_id in locks.holders:  # this process holds it
                if session_id not in self._held:
                    self._held.add(session_id)
                    locks.holders[session_id] += 1
                return True
            self._held.discard(session_id)  # lost with a dropped connection, if it was held
            try:
                conn.execute(
                    "SELECT pg_advisory_lock(%s::bigint)", (lock_key(self._namespace, session_id),)
                )
            except pgerrors.LockNotAvailable:  # held elsewhere for all of LOCK_WAIT_MS
                return False
            locks.holders[session_id] = 1
            self._held.add(session_id)
            return True

    def unlock(self, session_id: str) -> None:
        """Let go of this store's hold (the lock goes when no store of the process holds it)."""
        locks = self._shared
        with locks.mutex:
            if session_id not in self._held:
                return
            self._held.discard(session_id)
            left = locks.holders.get(session_id, 0) - 1
            if left > 0:
                locks.holders[session_id] = left
                return
            locks.holders.pop(session_id, None)
            conn = locks.conn
            if conn is None or conn.closed or conn.broken:
                return
            with self._guard(f"unlock {session_id!r}"):
                key = lock_key(self._namespace, session_id)
                conn.execute("SELECT pg_advisory_unlock(%s::bigint)", (key,))

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
