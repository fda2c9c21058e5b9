"""The PostgreSQL store's "most recently active" order, kept without an update per append.

``sessions.updated_at`` orders ``recent()``. An append whose session is not already the
most recent used to move it in the append's own statement: an update of the session row
(and of its indexes) on every step of every agent but the last to write, so writers of
several sessions did about twice the work of one. An append of one record now only
reads which session is the most recent; when another is, the move it owes is queued
(:class:`OwedMoves`) and written soon after, with every move owed by then, in one
statement: before anything of this store that reads or changes the order, and at the
latest ``ttl`` seconds after the first of them (a thread of the store's, started on first
use and kept: a timer thread started per move would make the appending thread wait for
it to start, ten times a second). Another process's activity can thus take up to ``ttl``
to be ordered against this one's, as on SQLite (D166, D212).
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Callable

from plait.errors import StoreError
from plait.store._pgprep import prepare

__all__ = ["MOVE_OWED", "OWED_FOR", "OwedMoves"]

_log = logging.getLogger("plait.store")

OWED_FOR = 0.1
"""The longest, in seconds, a move stays owed (as SQLite's trust in a live session)."""

Writer = Callable[[list[int], list[int]], None]

_IDLE_FOR = 5.0
"""Seconds without a move owed after which the thread ends (the next one starts another)."""

MOVE_OWED = prepare(
    "move_owed",
    "UPDATE sessions s SET updated_at = GREATEST(s.updated_at, u.at, m.top + u.n) "
    "FROM unnest(%(pks)s::bigint[], %(times)s::bigint[]) WITH ORDINALITY AS u(pk, at, n), "
    "(SELECT COALESCE(max(updated_at), 0) AS top FROM sessions WHERE NOT deleted) AS m "
    "WHERE s.pk = u.pk AND NOT s.deleted",
)
"""The owed moves, in append order, each above the most recent session and the one before."""


class OwedMoves:
    """The moves one store's appends owe, queued in append order (see the module).

    Thread-safe.

    Args:
        write: runs ``MOVE_OWED`` with the sessions' keys and their times, in order.
        ttl: the longest a move stays owed, in seconds (unless the write fails).
    """

    def __init__(self, write: Writer, ttl: float) -> None:
        # Held weakly (a store's method holds the store), and strongly only while moves
        # are owed: the kept thread would otherwise keep a store dropped unclosed alive.
        self._write_ref: Callable[[], Writer | None] = (
            weakref.WeakMethod(write) if inspect.ismethod(write) else lambda: write
        )
        self._keep: Writer | None = None  # the write, while the thread has moves to write
        self._ttl = ttl
        self._mutex = threading.Lock()
        self._due = threading.Condition(self._mutex)  # the thread waits on it
        self._flushing = threading.Lock()  # one flush at a time, so moves land in order
        self._owed: dict[int, int] = {}  # pk -> its newest record's time, in append order
        self._armed = False  # the thread writes the owed moves within ttl
        self._thread: threading.Thread | None = None
        self._closed = False

    def appended(self, pk: int, created_us: int, top: int | None) -> None:
        """Note an append to ``pk`` that found ``top`` the most recent session."""
        with self._mutex:
            if top == pk and (not self._owed or next(reversed(self._owed)) == pk):
                return  # the most recent already, and nothing queued would pass it
            self._owed.pop(pk, None)  # queued last: the order is the order of appends
            self._owed[pk] = created_us
            if not self._armed and not self._closed:
                self._arm()

    def _arm(self) -> None:
        """Have the thread write what is owed within ttl (under the mutex)."""
        self._armed = True
        self._keep = self._write_ref()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="plait-pg-recency", daemon=True)
            self._thread.start()
        else:
            self._due.notify()

    def flush(self) -> None:
        """Write every move owed so far, in order (a no-op when none is owed).

        Raises:
            StoreError: the write failed (the moves stay owed).
        """
        if not self._owed:  # read without the mutex: an append racing this one flushes later
            return
        with self._flushing:
            with self._mutex:
                batch = dict(self._owed)
            if not batch:
                return
            at, times = 0, []
            for created in batch.values():  # strictly increasing, as the order they make
                at = max(created, at + 1)
                times.append(at)
            write = self._write_ref() or self._keep
            if write is None:
                return  # the store is gone
            write(list(batch), times)
            with self._mutex:
                for pk, created in batch.items():
                    if self._owed.get(pk) == created:  # not queued again meanwhile
                        del self._owed[pk]

    def close(self) -> None:
        """Write what is owed (a failure is logged: the store is closing) and stop the thread."""
        with self._mutex:
            self._closed = True
            self._due.notify()
        try:
            self.flush()
        except StoreError as exc:
            _log.warning("could not order recent appends: %s", exc)
        self._keep = None

    def _run(self) -> None:
        due = self._due
        while True:
            with self._mutex:
                due.wait_for(lambda: self._armed or self._closed, _IDLE_FOR)
                if self._closed or not self._armed:
                    # Idle: the thread ends; the next move owed starts another.
                    self._thread = None
                    return
                # ttl after the move that armed it (close() cuts the wait short).
                due.wait_for(lambda: self._closed, self._ttl)
                if self._closed:
                    return  # close() writes what is owed
                self._armed = False  # an append from here on arms it again
            try:
                self.flush()
            except StoreError as exc:  # still owed: the next write or flush tries again
                _log.warning("could not order recent appends yet: %s", exc)
            with self._mutex:
                if self._owed and not self._armed and not self._closed:
                    self._arm()  # failed, or raced: written within ttl from now
                elif not self._armed:
                    self._keep = None
