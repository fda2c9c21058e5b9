"""The SQLite store's "most recently active" order, kept without leaving the append fast path.

``sessions.updated_at`` orders ``recent()``. Moving it on every append would write
the session row (and its two indexes) on every agent step; so an append that finds
its session already the most recent moves nothing (its true last activity is read
from its newest record). A process writing several sessions in turn would make
every append move its session, though: a server running many sessions, or a bulk
import. :class:`Recency` lets those appends stay single INSERTs too: a session
known live (read in a full transaction less than ``ttl`` seconds ago, with no
other write by this store since) is appended to directly, and the move it owes is
queued; queued moves are written in append order, in one statement each inside
one transaction, before anything that reads or changes the order, and at the
latest ``ttl`` seconds after the first of them (the store's kept thread, ``_due.DueCall``). Another
process's activity can thus take up to ``ttl`` to be ordered against this one's,
as before.
"""

from __future__ import annotations

from time import monotonic
from typing import Any, Protocol

__all__ = ["Recency"]


class _Db(Protocol):
    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


class Recency:
    """What one SQLite store knows of the order, and the moves it owes (see the module).

    Not thread-safe by itself: the store calls it under its lock.

    Args:
        ttl: seconds a session read live in a full transaction is trusted to be.
    """

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._live: dict[int, float] = {}  # pk -> until when it is trusted live
        self._top: int | None = None  # the most recent session, once the moves are written
        self._owed: dict[int, int] = {}  # pk -> its newest record's time, in append order

    @property
    def ttl(self) -> float:
        """Seconds a check of the order is trusted (and the longest a move stays owed)."""
        return self._ttl

    @property
    def owed(self) -> bool:
        """Whether moves are queued."""
        return bool(self._owed)

    def trusted(self, pk: int) -> bool:
        """Whether an append to ``pk`` may be a bare INSERT (the session is known live)."""
        until = self._live.get(pk)
        if until is None:
            return False
        if monotonic() >= until:
            del self._live[pk]
            return False
        return True

    def appended(self, pk: int, created_us: int) -> bool:
        """Note a bare INSERT to ``pk``; True if it queued the first owed move."""
        if self._top == pk:
            return False  # already the most recent: nothing to move
        first = not self._owed
        self._owed.pop(pk, None)  # re-queued last: the order is the order of appends
        self._owed[pk] = created_us
        self._top = pk
        return first

    def confirmed(self, pk: int) -> None:
        """Note a full-transaction append: ``pk`` is live and now the most recent."""
        self._live[pk] = monotonic() + self._ttl
        self._top = pk
        if len(self._live) > 4096:  # bounded: the oldest trust goes first
            del self._live[next(iter(self._live))]

    def forget(self) -> None:
        """Trust nothing (another write may have changed liveness or the order)."""
        self._live.clear()
        self._top = None

    def write_owed(self, db: _Db, now_us: int) -> None:
        """Write the queued moves, in order, inside the caller's write transaction.

        They stay queued until :meth:`settle` (the caller's commit went through):
        a transaction rolled back writes them again next time.
        """
        if not self._owed:
            return
        top = db.execute("SELECT MAX(updated_at) FROM sessions WHERE deleted = 0").fetchone()[0]
        at = top or 0
        for pk, created in self._owed.items():
            at = max(now_us, created, at + 1)
            db.execute("UPDATE sessions SET updated_at = ? WHERE pk = ?", (at, pk))

    def settle(self) -> None:
        """The transaction that wrote the queued moves committed: they are owed no more."""
        self._owed.clear()
