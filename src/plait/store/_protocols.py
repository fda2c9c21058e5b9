"""The optional store protocols ``base.py`` has no room for: the fleet, retention, skims.

:class:`RunRegistry` (the replicas serving a store and the runs in progress on it, D256),
:class:`RetentionStore` (what retention counts and gives back beside ``erase``, D310) and
:class:`MessageReader` (a range's records other than events). Each is a part a store may
offer (``plait.store.PARTS``); both SQL stores implement them in ``store/sql/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable

from plait.context import Tally
from plait.records import JSONValue, Record
from plait.store.base import SessionRow

__all__ = [
    "REPLICA_STATES",
    "RUNNING",
    "RUN_STATES",
    "ErasePlan",
    "Footprint",
    "MessageReader",
    "ReplicaRow",
    "ReplicaState",
    "RetentionStore",
    "RunRegistry",
    "RunRow",
    "TallyBatches",
]

RUNNING: Final = "running"
REPLICA_STATES: Final = ("serving", "draining", "gone")
"""A replica's states: taking runs; finishing its runs and taking none; stopped."""
RUN_STATES: Final = (RUNNING, "done", "failed", "cancelled")
"""A run's states: in progress, then how it ended."""

ReplicaState = Literal["serving", "draining", "gone"]


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One replica serving the store, as the registry knows it."""

    replica_id: str
    url: str | None
    """Where other replicas send a session's writes while this one runs it (None: nowhere)."""
    state: str
    """``serving``, ``draining`` or ``gone`` (see :data:`REPLICA_STATES`)."""
    started_at_us: int
    seen_at_us: int
    """Its last heartbeat."""
    age_us: int
    """How long ago that was, by the store's clock when it read the row."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run in the registry."""

    run_id: str
    session_id: str
    replica_id: str
    """The replica driving it now."""
    state: str
    """``running``, ``done``, ``failed`` or ``cancelled``."""
    epoch: int
    """1 when started; one more at each takeover. Writes to the row name the epoch they hold."""
    started_at_us: int
    updated_at_us: int
    options: Mapping[str, JSONValue] = field(default_factory=dict)
    """What a replica taking the run over continues it with (its limits, who it acts for)."""
    replica_url: str | None = None
    """The driving replica's ``url`` (filled by reads that join the replicas)."""
    replica_age_us: int | None = None
    """How long since the driving replica's heartbeat (None: it has no row any more)."""
    replica_state: str | None = None
    """The driving replica's state (None: it has no row any more)."""


@runtime_checkable
class RunRegistry(Protocol):
    """The replicas of a fleet and its runs in progress (optional; both SQL stores have it)."""

    def replica_seen(
        self, replica_id: str, url: str | None, state: ReplicaState, *, started: bool = False
    ) -> None:
        """Write the replica's heartbeat (creating its row the first time) and its state.

        ``started``: the replica's first heartbeat since it started, so its start time is
        now (a replica started again under the same id is not shown as up since its first).
        """
        ...

    def replicas(self) -> list[ReplicaRow]:
        """Every replica with a row, the most recently seen first."""
        ...

    def run_begin(
        self, run_id: str, session_id: str, replica_id: str, options: Mapping[str, JSONValue]
    ) -> RunRow:
        """Register a run in progress on a session (epoch 1).

        Raises:
            SessionBusyError: a run is already registered in progress on the session.
        """
        ...

    def run_end(self, run_id: str, replica_id: str, epoch: int, state: str) -> bool:
        """Mark the run ended, if ``replica_id`` still drives it at ``epoch``; else False."""
        ...

    def run_of(self, session_id: str) -> RunRow | None:
        """The run in progress on the session, with its replica's liveness, or None."""
        ...

    def run_get(self, run_id: str) -> RunRow | None:
        """The run with this id, ended or not, or None."""
        ...

    def runs_orphaned(self, lease_us: int) -> list[RunRow]:
        """Runs in progress whose replica is gone, unknown, or unseen for ``lease_us``."""
        ...

    def run_claim(self, run_id: str, epoch: int, replica_id: str) -> RunRow | None:
        """Take a run over: the replica and epoch + 1, if its epoch is still ``epoch``."""
        ...

    def runs_prune(self, ended_before_us: int) -> int:
        """Delete the rows of runs that ended before this time; return how many."""
        ...

    def runs_driven_by(self, replica_id: str) -> list[RunRow]:
        """The runs in progress registered under a replica (its previous life's, at a start)."""
        ...

    def streams_set(self, replica_id: str, session_id: str, client_id: str, count: int) -> None:
        """Say how many event streams naming a live client the replica has open now."""
        ...

    def streams_elsewhere(
        self, session_id: str, client_id: str, replica_id: str, lease_us: int
    ) -> int:
        """The streams naming the client open on other live replicas (seen within the lease)."""
        ...


@dataclass(frozen=True, slots=True)
class Footprint:
    """How much a store holds, as its engine counts it."""

    records: int
    """Record rows held (every session's, hidden heads' and tombstones' together)."""
    sessions: int
    """Session rows held: live sessions, hidden heads and tombstones still read."""
    objects: int
    """Objects in the store's own object space (PostgreSQL's workspace checkpoints, a
    framework's values); a SQLite file keeps its checkpoints in a folder beside it."""
    bytes: int
    """The size of the store: SQLite's database file (pages times page size);
    PostgreSQL's plait tables with their indexes and TOAST."""
    free_bytes: int | None
    """Of :attr:`bytes`, how much is free inside the store for later writes (SQLite's
    free pages); None where the engine does not say (PostgreSQL)."""


@dataclass(frozen=True, slots=True)
class ErasePlan:
    """What erasing some sessions would remove, read in one snapshot of the store."""

    sessions: tuple[str, ...]
    """The ids of the live sessions that would be erased (those still there)."""
    hidden_heads: int
    """Their hidden heads (what a rewind left), erased with them."""
    records: int
    """Records that would be deleted: theirs that no other live layout reads, and the
    rows of tombstones no live layout would read any more."""
    record_bytes: int
    """The bytes of those records' payloads and metadata (what their text held; the
    engine's own row overhead and indexes come on top)."""


@runtime_checkable
class RetentionStore(Protocol):
    """The optional verbs retention uses beside ``erase``; both SQL stores offer them."""

    def idle_sessions(
        self, before_us: int, workspace: str | None, limit: int
    ) -> list[SessionRow]:
        """Live sessions whose last write is before ``before_us``, least recent first.

        The last write is the later of the row's ``updated_at`` and its newest own
        record's time. Hidden heads are not listed (they go with their session);
        ``workspace=None`` lists every workspace.
        """
        ...

    def erase_plan(self, session_ids: Sequence[str]) -> ErasePlan:
        """What :meth:`~plait.store.base.TranscriptStore.erase` of each id would remove.

        Ids that name no live session are left out. Reads only.
        """
        ...

    def footprint(self) -> Footprint:
        """How much the store holds now."""
        ...

    def reclaim(self, *, full: bool = False) -> str:
        """Give the space freed by deletions back, as far as the engine can.

        Args:
            full: also rewrite the whole store where that is the only way (SQLite
                without incremental vacuum: ``VACUUM``; PostgreSQL: ``VACUUM FULL``,
                which locks each table while it is rewritten).

        Returns:
            What was done, in a word or two (``incremental vacuum``, ``vacuum``, ...).
        """
        ...


@runtime_checkable
class MessageReader(Protocol):
    """A store that reads a range's records other than events (optional).

    For a store without it, :meth:`~plait.store.base.TranscriptStore.read`
    filtered serves the same records.
    """

    def read_messages(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        """Return the records at positions ``[lo, hi)`` that are not events, in order.

        Each keeps its ``seq`` (its position), so a caller knows where it lies.

        Raises:
            StoreCorruptError: a row does not decode (as ``read``).
        """
        ...


@runtime_checkable
class TallyBatches(Protocol):
    """A store that reads many sessions' counted ends and tallies at once (optional).

    A listing's message counts ask both for every session of a page; for a store
    without it, the session layer asks :class:`~plait.store.base.TallyStore` a row at a
    time.
    """

    def counted_ends(self, rows: Sequence[SessionRow]) -> list[int]:
        """For each row, one past its newest counted position (0: none), in order."""
        ...

    def tallies_at(
        self, wanted: Sequence[tuple[SessionRow, Sequence[int]]]
    ) -> list[dict[int, Tally]]:
        """For each ``(row, positions)``, the stored tallies at those positions, in order."""
        ...
