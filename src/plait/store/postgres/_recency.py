"""The PostgreSQL store's "most recently active" order, kept without an update per append.

``sessions.updated_at`` orders ``recent()``. An append whose session is not already the
most recent used to move it in the append's own statement: an update of the session row
(and of its indexes) on every step of every agent but the last to write, so writers of
several sessions did about twice the work of one. An append of one record now only
reads which session is the most recent; when another is, the move it owes is queued
(:class:`OwedMoves`) and written soon after, with every move owed by then, in one
statement: before anything of this store that reads or changes the order, and at the
latest ``ttl`` seconds after the first of them (the store's kept thread, ``_due.DueCall``,
as SQLite's: a timer thread started per move made the appending thread wait for it to
start, ten times a second at 8 writers). Another process's activity can thus take up to
``ttl`` to be ordered against this one's, as on SQLite (D166, D212).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from plait.errors import StoreError
from plait.store.postgres._prep import prepare
from plait.store.sql._due import DueCall

__all__ = ["MOVE_OWED", "OWED_FOR", "OwedMoves"]

_log = logging.getLogger("plait.store")

OWED_FOR = 0.1
"""The longest, in seconds, a move stays owed (as SQLite's trust in a live session)."""

Writer = Callable[[list[int], list[int]], None]

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
        self._write = write
        self._mutex = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time, so moves land in order
        self._owed: dict[int, int] = {}  # pk -> its newest record's time, in append order
        self._due = DueCall(self._write_due, ttl, name="plait-pg-owed-moves")

    def appended(self, pk: int, created_us: int, top: int | None) -> None:
        """Note an append to ``pk`` that found ``top`` the most recent session."""
        with self._mutex:
            if top == pk and (not self._owed or next(reversed(self._owed)) == pk):
                return  # the most recent already, and nothing queued would pass it
            self._owed.pop(pk, None)  # queued last: the order is the order of appends
            self._owed[pk] = created_us
        self._due.arm()  # within ttl of the first move still owed (a no-op while pending)

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
            self._write(list(batch), times)
            with self._mutex:
                for pk, created in batch.items():
                    if self._owed.get(pk) == created:  # not queued again meanwhile
                        del self._owed[pk]

    def close(self) -> None:
        """Write what is owed (a failure is logged: the store is closing) and stop the thread."""
        self._due.close()
        try:
            self.flush()
        except StoreError as exc:
            _log.warning("could not order recent appends: %s", exc)

    def _write_due(self) -> None:
        try:
            self.flush()
        except StoreError as exc:  # still owed: tried again within ttl, or by the next write
            _log.warning("could not order recent appends yet: %s", exc)
            if self._owed:
                self._due.arm()
