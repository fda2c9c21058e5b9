"""What a store offers beyond its transcript: the parts, how each is found, and the fallbacks.

Every store keeps a transcript (:class:`~plait.store.base.TranscriptStore`); that is all a
third-party backend has to implement. Everything else is a *part* it may offer, each one
protocol, found with ``isinstance`` (:data:`PARTS`). :func:`plait.store.open_store` takes a
transcript store alone and gives the session layer a :class:`PartialStore`: the parts the
backend offers are its own, a part with a fallback (:attr:`Part.fallback`) is served by
plait, and a verb that needs a part with none raises
:class:`~plait.errors.StorePartMissingError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from plait.context import Tally
from plait.errors import StorePartMissingError
from plait.records import JSONValue, Record
from plait.store._bus import EventBus
from plait.store._protocols import MessageReader, RetentionStore, RunRegistry, TallyBatches
from plait.store.base import (
    BearerRow,
    BearerStore,
    BreakableLocks,
    LineageStore,
    ListingStore,
    LiveClientRow,
    LiveClientStore,
    ObjectStore,
    ScratchpadEntry,
    SessionRow,
    TallyStore,
    TranscriptStore,
    ViewReader,
    WriterLocks,
)
from plait.store.search import SearchStore

__all__ = ["PARTS", "TRANSCRIPT_MEMBERS", "Part", "PartialStore", "missing_members", "parts_of"]


@dataclass(frozen=True, slots=True)
class Part:
    """One optional part of a store: its protocol, and what plait does without it."""

    name: str
    """Its key in :data:`PARTS` (what :class:`~plait.errors.StorePartMissingError` names)."""
    protocol: type
    """The protocol a store implements to offer it."""
    what: str
    """What it is, in words."""
    fallback: str | None
    """How plait serves it for a store without it; None: the verbs that need it raise."""


def _parts(*parts: Part) -> Mapping[str, Part]:
    return MappingProxyType({p.name: p for p in parts})


PARTS: Final[Mapping[str, Part]] = _parts(
    Part(
        "lineage", LineageStore, "lineage walks",
        "walked by the session layer: one get() per first parent",
    ),
    Part(
        "listing", ListingStore, "listing by id prefix",
        "recent() read whole and filtered by the prefix",
    ),
    Part(
        "writer_locks", WriterLocks, "writer locks",
        "in-process: the lock is always this process's (as a store's own is shared by the "
        "writers of its process); another process is neither kept out nor seen (its racing "
        "write is refused by the transcript's compare-and-set, StaleSessionError), so "
        "Session.locked and sessions.open_elsewhere raise",
    ),
    Part(
        "breakable_locks", BreakableLocks, "writer locks another process can break",
        "a replica waits for a frozen holder's lock to go with its process",
    ),
    Part(
        "tallies", TallyStore, "token tallies",
        "counted in memory by the process that asks, never stored: a new process counts "
        "the transcript again",
    ),
    Part(
        "tally_batches", TallyBatches, "many sessions' tallies in one read",
        "asked a session at a time",
    ),
    Part("view_reads", ViewReader, "view reads", "read() serves"),
    Part("message_reads", MessageReader, "message reads", "read() serves"),
    Part("bearer_sessions", BearerStore, "durable bearer sessions", None),
    Part(
        "live_clients", LiveClientStore, "live clients",
        "none: each session lists no client, and attaching one raises",
    ),
    Part(
        "objects", ObjectStore, "object space",
        "workspace checkpoints in a folder of this machine, which another machine cannot read",
    ),
    Part("search", SearchStore, "full-text search", None),
    Part(
        "retention", RetentionStore, "retention verbs",
        "idle sessions found in recent(); no footprint is measured and no space given back",
    ),
    Part("run_registry", RunRegistry, "run registry", "runs known to this process only"),
    Part("event_bus", EventBus, "event bus", "run events reach this process's observers only"),
)
"""Every optional part, by name, in the order the docs list them."""

TRANSCRIPT_MEMBERS: Final = tuple(n for n in vars(TranscriptStore) if not n.startswith("_"))
"""What every store has: the members of :class:`~plait.store.base.TranscriptStore`."""


def parts_of(store: object) -> frozenset[str]:
    """The names of the optional parts ``store`` offers itself (fallbacks left out).

    Args:
        store: any object; a :class:`PartialStore` answers for the store it wraps.

    Returns:
        The keys of :data:`PARTS` whose protocol ``store`` implements.
    """
    if isinstance(store, PartialStore):
        return store.parts
    return frozenset(name for name, part in PARTS.items() if isinstance(store, part.protocol))


def missing_members(store: object) -> list[str]:
    """The members of :class:`~plait.store.base.TranscriptStore` that ``store`` lacks, sorted."""
    return sorted(n for n in TRANSCRIPT_MEMBERS if not hasattr(store, n))


def _missing(part: str, verb: str) -> StorePartMissingError:
    return StorePartMissingError(part, PARTS[part].protocol.__name__, verb)


class PartialStore:
    """A transcript store that lacks some of :class:`~plait.store.base.Store`'s parts, made whole.

    What the session layer takes: the transcript is the wrapped store's; each part of
    ``Store`` it offers is its own, each it lacks is served by a fallback (see
    :data:`PARTS`) or raises :class:`~plait.errors.StorePartMissingError`. Any other
    part it offers (search, objects, ...) is reached through this object, so
    ``isinstance`` against that part's protocol answers as for the wrapped store.

    Args:
        inner: the store (every member of ``TranscriptStore``).
    """

    def __init__(self, inner: TranscriptStore) -> None:
        self.inner = inner
        self.parts = parts_of(inner)
        self._lineage = inner if isinstance(inner, LineageStore) else None
        self._locks = inner if isinstance(inner, WriterLocks) else None
        self._tallies = inner if isinstance(inner, TallyStore) else None
        self._bearers = inner if isinstance(inner, BearerStore) else None
        self._live = inner if isinstance(inner, LiveClientStore) else None

    def __getattr__(self, name: str) -> Any:
        # Only names this class does not define: the wrapped store's optional parts.
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"<PartialStore of {self.inner!r}>"

    # -- the transcript: the wrapped store's own ----------------------------------------

    @property
    def location(self) -> str:
        """The wrapped store's location."""
        return self.inner.location

    def get(self, session_id: str) -> SessionRow | None:
        """See :meth:`TranscriptStore.get`."""
        return self.inner.get(session_id)

    def create(self, row: SessionRow, records: Sequence[Record] = ()) -> SessionRow:
        """See :meth:`TranscriptStore.create`."""
        return self.inner.create(row, records)

    def append(self, expected: SessionRow, records: Sequence[Record]) -> SessionRow:
        """See :meth:`TranscriptStore.append`."""
        return self.inner.append(expected, records)

    def write(
        self,
        expected: SessionRow,
        updated: SessionRow,
        records: Sequence[Record] = (),
        scratchpad: ScratchpadEntry | None = None,
    ) -> SessionRow:
        """See :meth:`TranscriptStore.write`."""
        return self.inner.write(expected, updated, records, scratchpad)

    def move_head(
        self, expected: SessionRow, head: SessionRow, hidden_id: str, records: Sequence[Record] = ()
    ) -> SessionRow:
        """See :meth:`TranscriptStore.move_head`."""
        return self.inner.move_head(expected, head, hidden_id, records)

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """See :meth:`TranscriptStore.read`."""
        return self.inner.read(row, lo, hi)

    def probe(self, row: SessionRow, seq: int) -> tuple[int, bool]:
        """See :meth:`TranscriptStore.probe`."""
        return self.inner.probe(row, seq)

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        """See :meth:`TranscriptStore.recent`."""
        return self.inner.recent(workspace, limit)

    def children(self, session_id: str) -> list[str]:
        """See :meth:`TranscriptStore.children`."""
        return self.inner.children(session_id)

    def delete(self, session_id: str) -> None:
        """See :meth:`TranscriptStore.delete`."""
        self.inner.delete(session_id)

    def erase(self, session_id: str) -> None:
        """See :meth:`TranscriptStore.erase`."""
        self.inner.erase(session_id)

    def stamp(self, session_id: str) -> str | None:
        """See :meth:`TranscriptStore.stamp`."""
        return self.inner.stamp(session_id)

    def scratchpad_history(self, session_id: str) -> list[ScratchpadEntry]:
        """See :meth:`TranscriptStore.scratchpad_history`."""
        return self.inner.scratchpad_history(session_id)

    def integrity_check(self) -> list[str]:
        """See :meth:`TranscriptStore.integrity_check`."""
        return self.inner.integrity_check()

    def close(self) -> None:
        """Close the wrapped store."""
        self.inner.close()

    # -- lineage: a walk of first parents here ------------------------------------------

    def ancestors(self, session_id: str) -> list[str]:
        """See :meth:`LineageStore.ancestors`; without the part, one ``get`` per link."""
        if self._lineage is not None:
            return self._lineage.ancestors(session_id)
        chain: list[str] = []
        seen = {session_id}
        row = self.inner.get(session_id)
        while row is not None and row.parent_ids and row.parent_ids[0] not in seen:
            row = self.inner.get(row.parent_ids[0])
            if row is None:
                break  # a deleted parent ends the walk
            chain.append(row.id)
            seen.add(row.id)
        return chain

    # -- writer locks: this process's, without the part ---------------------------------

    def lock(self, session_id: str) -> bool:
        """See :meth:`WriterLocks.lock`; without the part, always this process's."""
        return self._locks.lock(session_id) if self._locks is not None else True

    def unlock(self, session_id: str) -> None:
        """See :meth:`WriterLocks.unlock` (nothing to do without the part)."""
        if self._locks is not None:
            self._locks.unlock(session_id)

    def locked_elsewhere(self, session_id: str) -> bool:
        """See :meth:`WriterLocks.locked_elsewhere`.

        Raises:
            StorePartMissingError: the store has no writer locks: another process cannot be seen.
        """
        if self._locks is None:
            raise _missing("writer_locks", "knowing whether another process writes a session")
        return self._locks.locked_elsewhere(session_id)

    # -- tallies: counted, never stored, without the part -------------------------------

    def counted_end(self, row: SessionRow) -> int:
        """See :meth:`TallyStore.counted_end`; 0 without the part (nothing is stored)."""
        return self._tallies.counted_end(row) if self._tallies is not None else 0

    def tallies(self, row: SessionRow, positions: Sequence[int]) -> dict[int, Tally]:
        """See :meth:`TallyStore.tallies`; none without the part."""
        return self._tallies.tallies(row, positions) if self._tallies is not None else {}

    def set_tallies(
        self, row: SessionRow, start: int, counted: Sequence[tuple[int, Tally]]
    ) -> bool:
        """See :meth:`TallyStore.set_tallies`; False (nothing stored) without the part."""
        if self._tallies is None:
            return False
        return self._tallies.set_tallies(row, start, counted)

    # -- durable bearer sessions: no fallback --------------------------------------------

    def _bearer(self) -> BearerStore:
        if self._bearers is None:
            raise _missing("bearer_sessions", "a durable bearer session")
        return self._bearers

    def bearer_insert(self, row: BearerRow) -> bool:
        """See :meth:`BearerStore.bearer_insert`.

        Raises:
            StorePartMissingError: the store keeps no bearer sessions.
        """
        return self._bearer().bearer_insert(row)

    def bearer_get(self, token_hash: str) -> BearerRow | None:
        """See :meth:`BearerStore.bearer_get`.

        Raises:
            StorePartMissingError: the store keeps no bearer sessions.
        """
        return self._bearer().bearer_get(token_hash)

    def bearer_touch(self, token_hash: str, now_us: int) -> BearerRow | None:
        """See :meth:`BearerStore.bearer_touch`.

        Raises:
            StorePartMissingError: the store keeps no bearer sessions.
        """
        return self._bearer().bearer_touch(token_hash, now_us)

    def bearer_expire(self, token_hash: str, now_us: int) -> bool:
        """See :meth:`BearerStore.bearer_expire`.

        Raises:
            StorePartMissingError: the store keeps no bearer sessions.
        """
        return self._bearer().bearer_expire(token_hash, now_us)

    def bearer_purge(self, expired_before_us: int) -> int:
        """See :meth:`BearerStore.bearer_purge`.

        Raises:
            StorePartMissingError: the store keeps no bearer sessions.
        """
        return self._bearer().bearer_purge(expired_before_us)

    # -- live clients: none can attach without the part ----------------------------------

    def live_attach(
        self, row: LiveClientRow, *, takeover: bool
    ) -> tuple[LiveClientRow, str | None]:
        """See :meth:`LiveClientStore.live_attach`.

        Raises:
            StorePartMissingError: the store keeps no live clients.
        """
        if self._live is None:
            raise _missing("live_clients", "attaching a live client")
        return self._live.live_attach(row, takeover=takeover)

    def live_heartbeat(
        self,
        session_id: str,
        client_id: str,
        now_us: int,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> LiveClientRow | None:
        """See :meth:`LiveClientStore.live_heartbeat`; None without the part (none attached)."""
        if self._live is None:
            return None
        return self._live.live_heartbeat(session_id, client_id, now_us, metadata)

    def live_release(self, session_id: str, client_id: str) -> LiveClientRow | None:
        """See :meth:`LiveClientStore.live_release`; None without the part (none attached)."""
        return self._live.live_release(session_id, client_id) if self._live is not None else None

    def live_clients(self, session_id: str) -> list[LiveClientRow]:
        """See :meth:`LiveClientStore.live_clients`; none without the part."""
        return self._live.live_clients(session_id) if self._live is not None else []
