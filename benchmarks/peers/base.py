"""What every peer adapter is: a small class with the same verbs over one stored transcript.

An adapter instance holds one session (thread, conversation) of one store. The runner
builds it with :meth:`Adapter.append_batch`, then times the verbs the peer has. A verb
a peer does not offer is left out of :attr:`Adapter.ops` and shows as "n/a" in the
table. Items are given to the verbs already in the peer's shape (:meth:`Adapter.native`),
so converting them is never timed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from transcript import Step

__all__ = ["Adapter", "AsyncAdapter", "Place"]

T = TypeVar("T")


@dataclass(frozen=True)
class Place:
    """Where one adapter instance keeps its data: a fresh folder, and on PostgreSQL a schema."""

    dir: Path
    """A folder of its own (SQLite files go here)."""
    key: str
    """A short name unique in the run (``1k``, ``10k``, ``list``): the session id's suffix."""
    pg_url: str | None = None
    """libpq URL of the run's fresh database (PostgreSQL adapters only)."""
    schema: str | None = None
    """A fresh schema in that database, made for this instance alone."""


class Adapter:
    """One peer's store, driven through the benchmark's verbs.

    Subclasses set :attr:`name`, :attr:`engine`, :attr:`ops` and :attr:`load_names`,
    and implement the verbs in :attr:`ops`.
    """

    name: ClassVar[str] = "?"
    """The column heading: the peer and its store."""
    engine: ClassVar[str] = "sqlite"
    """``sqlite``, ``postgres`` or ``memory``: plait on the same engine is its partner."""
    ops: ClassVar[frozenset[str]] = frozenset()
    """Verbs offered: ``append_one``, ``append_batch``, ``load``, ``tail``, ``fork``, ``list``."""
    load_names: ClassVar[tuple[str, ...]] = ("load",)
    """What a full load calls, one name per variant (plait has three)."""
    requires: ClassVar[tuple[str, ...]] = ()
    """Modules the adapter needs; without one, the runner skips it and says which."""
    build_chunk: ClassVar[int] = 1000
    """Items per ``append_batch`` call while building a transcript."""
    notes: ClassVar[str] = ""
    """How the verbs map onto the peer's API (printed with the table)."""

    def __init__(self, place: Place) -> None:
        self.place = place
        self.length = 0
        """Items stored in the session so far (the next item's number)."""

    # -- verbs --------------------------------------------------------------------------------

    def native(self, s: Step) -> Any:
        """Return item ``s`` in this peer's shape."""
        raise NotImplementedError

    def append_one(self, item: Any) -> None:
        """Store one item with one call."""
        raise NotImplementedError

    def append_batch(self, items: list[Any]) -> None:
        """Store several items with one call (or the peer's cheapest way)."""
        raise NotImplementedError

    def load(self, variant: str) -> int:
        """Read the whole transcript in the peer's usual form; return how many items."""
        raise NotImplementedError

    def tail(self, n: int) -> int:
        """Read the newest ``n`` items; return how many."""
        raise NotImplementedError

    def fork(self) -> None:
        """Branch the transcript at its middle (the peer's own branch or fork)."""
        raise NotImplementedError

    def fill_sessions(self, count: int) -> None:
        """Create ``count`` sessions of one turn each (for :meth:`list_sessions`)."""
        raise NotImplementedError

    def list_sessions(self, n: int) -> int:
        """List the newest ``n`` sessions (or what the peer lists); return how many."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections and files."""

    # -- helpers ------------------------------------------------------------------------------

    def items(self, start: int, n: int) -> list[Any]:
        """Return items ``start .. start + n`` in this peer's shape."""
        from transcript import step

        return [self.native(step(i)) for i in range(start, start + n)]

    def build(self, size: int) -> None:
        """Grow the session to ``size`` items with :meth:`append_batch`."""
        while self.length < size:
            n = min(self.build_chunk, size - self.length)
            self.append_batch(self.items(self.length, n))
            self.length += n


class AsyncAdapter(Adapter):
    """An adapter over an async API: one event loop per instance, each verb run to completion.

    That is how a synchronous caller uses these stores; the loop's overhead per call is
    part of what the peer costs.
    """

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self._runner = asyncio.Runner()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this instance's loop."""
        return self._runner.run(coro)

    def close(self) -> None:
        """Close the loop (subclasses close their store first)."""
        self._runner.close()
