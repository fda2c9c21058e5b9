"""The PostgreSQL change feed: every committed write is announced, and heard by LISTEN.

A write's announcement is not sent inside the write's transaction: PostgreSQL
serialises the commits of every transaction that sent a ``NOTIFY`` (a lock on the
database's notification queue, held until the commit is flushed), so writers on
different sessions would take turns. A :class:`Notifier` sends them after the
commit instead, from one thread per store that folds what piled up meanwhile into
one short transaction, which waits for no flush (``synchronous_commit = off``:
an announcement needs no durability).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from plait.errors import StoreError
from plait.store._pgprep import prepare, run_prepared, text_array

if TYPE_CHECKING:
    import psycopg

__all__ = ["ChangeFeed", "Notifier"]

_log = logging.getLogger("plait.store")
_NOTIFY = prepare(
    "notify", "SELECT pg_notify(%(channel)s, t.id) FROM unnest(%(ids)s::text[]) AS t(id)"
)
_LINGER = 0.01
"""Seconds the notifier waits, once woken, for more writes to announce together (D212)."""
_BUSY_LINGER = 0.05
"""Seconds it waits for the next batch while writes keep coming (D225)."""
_FLUSH_WAIT = 5.0
"""Seconds close() waits for the announcements still queued."""


class ChangeFeed:
    """One store's listening connection, opened on first use and kept for the next.

    Args:
        conninfo: how to connect (never through the pool: a listening connection
            stays with its listener).
        kwargs: the connection options.
        channel: the channel to LISTEN on.
        guard: turns driver errors into the store's errors, naming what failed.
    """

    def __init__(
        self,
        conninfo: str,
        kwargs: dict[str, Any],
        channel: str,
        guard: Callable[[str], AbstractContextManager[None]],
    ) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._channel = channel
        self._guard = guard
        self._mutex = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._closed = False

    def listen(self, timeout: float | None = None) -> Iterator[str]:
        """Start listening now (see ``PostgresStore.changes``) and iterate what arrives."""
        with self._mutex, self._guard("listen"):
            conn = self._conn
            if conn is None or conn.broken:
                import psycopg
                from psycopg import sql

                conn = psycopg.connect(self._conninfo, **self._kwargs)
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self._conn = conn
        return self._iterate(conn, timeout)

    def _iterate(
        self, conn: psycopg.Connection[tuple[Any, ...]], timeout: float | None
    ) -> Iterator[str]:
        while True:
            with self._mutex:
                if self._closed or conn.closed:
                    return
                try:
                    with self._guard("listen"):
                        got = [n.payload for n in conn.notifies(timeout=timeout, stop_after=1)]
                except StoreError:
                    if self._closed:  # closed from another thread while waiting
                        return
                    raise
            if not got:
                return
            yield from got

    def close(self) -> None:
        """Close the listening connection; an iteration in progress ends."""
        import psycopg

        self._closed = True
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()


class Notifier:
    """Announce committed writes on the channel, after their commit, batched.

    :meth:`changed` queues a session id and returns at once; a thread started on
    first use sends what is queued, in order with repeats folded, one transaction per
    batch on a connection of its own: the first write after a pause 10 ms after it
    woke, then a batch every 50 ms while writes keep coming (D225). An announcement
    reaches listeners up to that long after the commit instead of with it; a process
    that dies in that window loses it (listeners also re-read on their keep-alive
    tick).

    Args:
        conninfo: how to connect.
        kwargs: the connection options.
        channel: the channel to notify.
    """

    def __init__(self, conninfo: str, kwargs: dict[str, Any], channel: str) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._channel = channel
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._pending: dict[str, None] = {}
        self._sending = False
        self._active = False  # the thread is lingering or sending: writes need not wake it
        self._hurry = 0  # callers of flush() waiting: no lingering
        self._closed = False
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    def changed(self, session_id: str) -> None:
        """Queue the announcement that a session changed (its write has committed)."""
        with self._mutex:  # the condition's own lock, without its Python-level wrapper
            if self._closed:
                return
            self._pending[session_id] = None
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="plait-pg-notify", daemon=True
                )
                self._thread.start()
                _running.add(self)
            # Only a thread waiting for work needs waking: one lingering over a batch
            # sends this write with it, and would wake on every write just to go back to
            # sleep, taking the writer's interpreter lock each time.
            if not self._active:
                self._active = True
                self._cond.notify()

    def flush(self, timeout: float = _FLUSH_WAIT) -> bool:
        """Wait until everything queued so far is sent; False if ``timeout`` passed first."""
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(
                    lambda: self._thread is None or not (self._pending or self._sending), timeout
                )
            finally:
                self._hurry -= 1

    def close(self) -> None:
        """Send what is queued (waiting briefly), then stop the thread and close its connection."""
        self.flush()
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(_FLUSH_WAIT)
        _running.discard(self)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    break
            # Active: a batch every linger while writes keep coming, and no write wakes
            # the thread (a wake-up per batch is a context switch, on a busy machine as
            # dear as the batch); a whole linger without one makes it idle again. The
            # first batch after a pause goes soon; while a process keeps writing, its
            # batches go less often: each costs the process and the server a
            # transaction, however few writes it carries (D225).
            linger = _LINGER
            while self._send_lingered(linger):
                linger = _BUSY_LINGER
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _send_lingered(self, linger: float) -> bool:
        """Linger, then send what is queued; False (and idle) if nothing was."""
        with self._cond:
            # Linger a moment so that writes committing close together go in one
            # transaction (a writer appending a record per millisecond would otherwise
            # double the server's transactions), unless someone waits for them.
            self._cond.wait_for(lambda: self._closed or self._hurry > 0, linger)
            if not self._pending:
                self._active = False
                return False
            batch = list(self._pending)
            self._pending.clear()
            self._sending = True
        try:
            self._send(batch)
        finally:
            with self._cond:
                self._sending = False
                self._cond.notify_all()
        return True

    def _send(self, batch: list[str]) -> None:
        import psycopg

        for attempt in (1, 2):  # a connection the server dropped is replaced once
            try:
                conn = self._conn
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self._conninfo, **self._kwargs)
                    conn.execute("SET synchronous_commit = off")
                    self._conn = conn
                run_prepared(conn, _NOTIFY, (self._channel, text_array(batch)))
                return
            except (psycopg.Error, UnicodeEncodeError) as exc:
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        self._conn.close()
                self._conn = None
                if attempt == 2:
                    _log.warning("could not announce %d changed sessions: %s", len(batch), exc)


_running: weakref.WeakSet[Notifier] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    """At exit, send what stores left unclosed still have queued (briefly)."""
    for notifier in list(_running):
        notifier.flush(1.0)
