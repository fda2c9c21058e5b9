"""A thread that sends what a PostgreSQL store's callers queue, batched, on a connection of its own.

The change feed's announcements (:class:`~plait.store.postgres._feed.Notifier`) and the event
bus's batches (:class:`~plait.store.postgres._bus.BusPublisher`) are both sent this way: the
caller queues and returns at once; the thread, started on first use, waits a moment
once woken so that what is queued close together goes in one transaction, then keeps
sending a batch every ``busy_linger`` while callers keep queuing, and goes idle after
a whole linger with nothing queued. While it lingers or sends, a caller need not wake
it (a wake-up per queued item would cost a context switch, on a busy machine as dear
as the batch). Someone waiting in :meth:`Sender.flush` cuts the linger short.

A connection the server dropped is replaced once per batch; what cannot be sent then
is logged and dropped (both kinds of message have a fallback: listeners re-read the
store on their keep-alive tick, relays read it after a silence). The connection waits
for no flush (``synchronous_commit = off``): neither kind needs durability.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import threading
import weakref
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

if TYPE_CHECKING:
    import psycopg

__all__ = ["FLUSH_WAIT", "Sender"]

FLUSH_WAIT: Final = 5.0
"""Seconds :meth:`Sender.close` waits for what is still queued."""

Batch = TypeVar("Batch")


class Sender(abc.ABC, Generic[Batch]):
    """The thread, its connection and its queue's bookkeeping; subclasses say what is queued.

    A subclass queues under ``self._mutex`` and then calls :meth:`_queued`; it says
    whether anything is queued (:meth:`_has_pending`), takes it all as one batch
    (:meth:`_take`), sends a batch on a connection (:meth:`_send_on`) and reports one
    that could not be sent (:meth:`_lost`).

    Args:
        conninfo: how to connect (a connection of its own, never a pooled one).
        kwargs: the connection options.
        name: the thread's name.
        linger: seconds the thread waits, once woken, for more to send together.
        busy_linger: seconds between two batches while callers keep queuing.
    """

    def __init__(
        self, conninfo: str, kwargs: dict[str, Any], *, name: str, linger: float, busy_linger: float
    ) -> None:
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._name = name
        self._linger = linger
        self._busy_linger = busy_linger
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._sending = False
        self._active = False  # lingering or sending: a caller need not wake the thread
        self._hurry = 0  # callers of flush() waiting: no lingering
        self._closed = False
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None

    # -- what a subclass says ------------------------------------------------------------

    @abc.abstractmethod
    def _has_pending(self) -> bool:
        """Whether anything is queued (called with ``self._mutex`` held)."""

    @abc.abstractmethod
    def _take(self) -> Batch:
        """Take everything queued, as one batch (called with ``self._mutex`` held)."""

    @abc.abstractmethod
    def _send_on(self, conn: psycopg.Connection[tuple[Any, ...]], batch: Batch) -> None:
        """Send ``batch`` on ``conn``; a driver error has the batch sent again, once."""

    @abc.abstractmethod
    def _lost(self, batch: Batch, exc: Exception) -> None:
        """``batch`` could not be sent, on a new connection either."""

    # -- the verbs -------------------------------------------------------------------------

    def _queued(self) -> None:
        """Start or wake the thread for what the caller just queued (``self._mutex`` held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
            _running.add(self)
        if not self._active:
            self._active = True
            self._cond.notify()

    def flush(self, timeout: float = FLUSH_WAIT) -> bool:
        """Wait until everything queued so far is sent; False if ``timeout`` passed first."""
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(
                    lambda: self._thread is None or not (self._has_pending() or self._sending),
                    timeout,
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
            thread.join(FLUSH_WAIT)
        _running.discard(self)

    # -- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._has_pending() or self._closed)
                if not self._has_pending():
                    break
            linger = self._linger
            while self._send_lingered(linger):
                linger = self._busy_linger
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _send_lingered(self, linger: float) -> bool:
        """Linger, then send what is queued; False (and idle) if nothing was."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._hurry > 0, linger)
            if not self._has_pending():
                self._active = False
                return False
            batch = self._take()
            self._sending = True
        try:
            self._send(batch)
        finally:
            with self._cond:
                self._sending = False
                self._cond.notify_all()
        return True

    def _send(self, batch: Batch) -> None:
        import psycopg

        for attempt in (1, 2):  # a connection the server dropped is replaced once
            try:
                conn = self._conn
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self._conninfo, **self._kwargs)
                    conn.execute("SET synchronous_commit = off")
                    self._conn = conn
                self._send_on(conn, batch)
                return
            except (psycopg.Error, UnicodeEncodeError) as exc:
                # Sent again on a new connection: a batch whose commit the broken one
                # never confirmed may arrive twice (its receivers skip what they had).
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        self._conn.close()
                self._conn = None
                if attempt == 2:
                    self._lost(batch, exc)


_running: weakref.WeakSet[Sender[Any]] = weakref.WeakSet()


@atexit.register
def _flush_all() -> None:
    """At exit, send what stores left unclosed still have queued (briefly)."""
    for sender in list(_running):
        sender.flush(1.0)
