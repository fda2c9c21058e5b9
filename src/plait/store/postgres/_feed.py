"""The PostgreSQL change feed: every committed write is announced, and heard by LISTEN.

A write's announcement is not sent inside the write's transaction: PostgreSQL
serialises the commits of every transaction that sent a ``NOTIFY`` (a lock on the
database's notification queue, held until the commit is flushed), so writers on
different sessions would take turns. A :class:`Notifier` sends them after the
commit instead, from one thread per store (a :class:`~plait.store.postgres._sender.Sender`)
that folds what piled up meanwhile into one short transaction.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from plait.errors import StoreError
from plait.store.postgres._prep import prepare, run_prepared, text_array
from plait.store.postgres._sender import Sender

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


class Notifier(Sender[list[str]]):
    """Announce committed writes on the channel, after their commit, batched.

    :meth:`changed` queues a session id and returns at once; the sending thread
    (:class:`~plait.store.postgres._sender.Sender`) sends what is queued, in order with
    repeats folded, one transaction per batch: the first write after a pause 10 ms
    after it woke, then a batch every 50 ms while writes keep coming (D225). An
    announcement reaches listeners up to that long after the commit instead of with
    it; a process that dies in that window loses it (listeners also re-read on their
    keep-alive tick).

    Args:
        conninfo: how to connect.
        kwargs: the connection options.
        channel: the channel to notify.
    """

    def __init__(self, conninfo: str, kwargs: dict[str, Any], channel: str) -> None:
        # The first batch after a pause goes soon; while a process keeps writing, its
        # batches go less often: each costs the process and the server a transaction,
        # however few writes it carries (D212, D225).
        super().__init__(
            conninfo, kwargs, name="plait-pg-notify", linger=_LINGER, busy_linger=_BUSY_LINGER
        )
        self._channel = channel
        self._pending: dict[str, None] = {}

    def changed(self, session_id: str) -> None:
        """Queue the announcement that a session changed (its write has committed)."""
        with self._mutex:  # the condition's own lock, without its Python-level wrapper
            if self._closed:
                return
            self._pending[session_id] = None
            self._queued()

    def _has_pending(self) -> bool:
        return bool(self._pending)

    def _take(self) -> list[str]:
        batch = list(self._pending)
        self._pending.clear()
        return batch

    def _send_on(self, conn: psycopg.Connection[tuple[Any, ...]], batch: list[str]) -> None:
        run_prepared(conn, _NOTIFY, (self._channel, text_array(batch)))

    def _lost(self, batch: list[str], exc: Exception) -> None:
        _log.warning("could not announce %d changed sessions: %s", len(batch), exc)
