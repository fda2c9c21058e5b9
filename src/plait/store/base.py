"""The Store protocol and the session row every store keeps.

A store is deliberately small: it keeps session rows and record rows, and
performs a handful of atomic operations on them. Everything about *what* to
write (copy-on-write layouts, views, validation) is decided by the pure core
and the session layer; a store decides only *how* to keep it. Every store
passes the one conformance suite in ``tests/store/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from plait.layout import Layout
from plait.records import JSONValue, Record

__all__ = ["ScratchpadEntry", "SessionRow", "Store"]


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session as stored: identity, layout, lineage and settings."""

    id: str
    """The session's id (a UUIDv7 unless the caller chose one)."""
    workspace: str
    """The absolute workspace path the session belongs to."""
    layout: Layout = field(default_factory=Layout)
    """Where its transcript rows live, and what its view shows."""
    pk: int = 0
    """The store's internal key (0 before the row is stored); owner key of its rows."""
    version: int = 0
    """The head version: bumped by every write; compare-and-set guards it."""
    created_at_us: int = 0
    """Creation time, microseconds since the epoch (UTC)."""
    updated_at_us: int = 0
    """Last write, microseconds since the epoch (UTC)."""
    title: str | None = None
    """A human title, or None."""
    parent_ids: tuple[str, ...] = ()
    """Lineage parents (several for a merge; none for a root or a detach)."""
    lineage_operator: str | None = None
    """How it was made: ``Session.fork``, ``Session.fork_at``, ``Session.detach``, ..."""
    branched_at: int | None = None
    """For ``fork_at``: how many messages of the parent it kept."""
    status: str = "open"
    """``open`` or ``closed``."""
    scratchpad: Mapping[str, JSONValue] | None = None
    """The session-local scratchpad, or None."""
    scratchpad_version: int = 0
    """Bumped by every scratchpad change."""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    """Settings and provenance: workspace anchor and policy, close status, ..."""


@dataclass(frozen=True, slots=True)
class ScratchpadEntry:
    """One version of a session's scratchpad, kept for its history."""

    version: int
    scratchpad: Mapping[str, JSONValue] | None
    source: str | None = None
    reason: str | None = None
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    created_at_us: int = 0


@runtime_checkable
class Store(Protocol):
    """Where sessions live. Every method is atomic; none leaves a half-written state."""

    @property
    def location(self) -> str:
        """Where the store keeps its data (a path, ``:memory:``, or a URL without secrets)."""
        ...

    def get(self, session_id: str) -> SessionRow | None:
        """Return the stored row of a live session, or None."""
        ...

    def create(self, row: SessionRow, records: Sequence[Record] = ()) -> SessionRow:
        """Insert a new session with its first own records and lineage edges.

        ``row.pk`` and ``row.version`` are ignored; the stored row (with its
        ``pk``, version 1 and timestamps) is returned.

        Raises:
            SessionExistsError: the id is taken.
        """
        ...

    def write(
        self,
        expected: SessionRow,
        updated: SessionRow,
        records: Sequence[Record] = (),
        scratchpad: ScratchpadEntry | None = None,
    ) -> SessionRow:
        """Compare-and-set: if the stored version is ``expected.version``, append and update.

        The records (positions from ``expected.layout.end_seq`` on) are stored as
        rows owned by the session, the mutable columns take ``updated``'s values,
        the version is bumped, ``updated_at`` set to now.

        Raises:
            StaleSessionError: the stored version differs (nothing written).
            SessionNotFoundError: the session is gone.
        """
        ...

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at positions ``[lo, hi)`` of the row's layout, in order."""
        ...

    def probe(self, row: SessionRow, seq: int) -> tuple[int, bool]:
        """Return ``(messages before seq, whether seq is a message)`` for one position."""
        ...

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        """Return up to ``limit`` live sessions, most recently written first.

        ``workspace=None`` lists every workspace.
        """
        ...

    def children(self, session_id: str) -> list[str]:
        """Return the ids of live sessions that name ``session_id`` as a parent, oldest first."""
        ...

    def delete(self, session_id: str) -> None:
        """Delete a session; rows other branches still share stay until none needs them.

        Raises:
            SessionNotFoundError: no live session has this id.
        """
        ...

    def stamp(self, session_id: str) -> str | None:
        """Return a value that changes exactly when the session changes (one cheap read)."""
        ...

    def scratchpad_history(self, session_id: str) -> list[ScratchpadEntry]:
        """Return every stored scratchpad version of a session, oldest first."""
        ...

    def close(self) -> None:
        """Release the store's connections. Idempotent."""
        ...
