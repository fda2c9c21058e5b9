"""The store protocols and the rows every store keeps.

A store is deliberately small: it keeps session rows and record rows, and
performs a handful of atomic operations on them. Everything about *what* to
write (copy-on-write layouts, views, validation) is decided by the pure core
and the session layer; a store decides only *how* to keep it.

The protocols are narrow, one concern each: :class:`TranscriptStore` (rows and
records, what every backend keeps), :class:`LineageStore`, :class:`WriterLocks`,
:class:`TallyStore`, :class:`BearerStore` and :class:`LiveClientStore`. :class:`Store` is
their composition, the one the session layer takes. :class:`ObjectStore` (workspace
checkpoints in the store's own space) is optional: the session layer uses it
when a store offers it; so is :class:`EventBus` (run events between server processes,
PostgreSQL's), which the server uses when a store offers it, and ``RetentionStore``
(``store/_protocols.py``: what retention counts and gives back beside ``erase``). A
backend is done when the conformance kit in :mod:`plait.testing` passes against each part
it offers; ``plait.store.PARTS`` names the parts (D420).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from plait._checks import MAX_INT
from plait.context import Tally
from plait.layout import Layout
from plait.records import JSONValue, Message, Record

__all__ = [
    "HIDDEN_OPERATOR",
    "BearerRow",
    "BearerStore",
    "BreakableLocks",
    "LineageStore",
    "ListingStore",
    "LiveClientRow",
    "LiveClientStore",
    "ObjectStore",
    "ScratchpadEntry",
    "SessionRow",
    "sessions_with_prefix",
    "Store",
    "TallyStore",
    "TranscriptStore",
    "ViewReader",
    "WriterLocks",
]


HIDDEN_OPERATOR: Final = "Session.rewind"
"""The lineage operator of a hidden head: the row a session's id named before a rewind.

A hidden head is a child of that id in the lineage and is listed by no ``recent``.
"""


@dataclass(slots=True)
class SessionRow:
    """One session as stored: identity, layout, lineage and settings.

    A value: never changed in place (every change makes a new one with
    ``dataclasses.replace`` or :meth:`with_head`). It is not a frozen dataclass
    only because one is built per record appended, and a frozen one costs five
    times more to build.
    """

    id: str
    """The session's id (a UUIDv7 unless the caller chose one)."""
    workspace: str
    """The absolute workspace path the session belongs to."""
    layout: Layout = field(default_factory=Layout)
    """Where its transcript rows live, and what its view shows."""
    pk: int = 0
    """The store's internal key (0 before the row is stored); owner key of its rows."""
    row_version: int = 0
    """Bumped by every change to the session row itself (title, view, status, ...)."""
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

    @property
    def version(self) -> int:
        """The head version: grows with every write (row changes plus records appended)."""
        return self.row_version + self.layout.end_seq

    def with_head(self, layout: Layout, updated_at_us: int) -> SessionRow:
        """Return this row with a new layout and activity time (the append fast path).

        Builds the row directly: ``dataclasses.replace`` costs several times more,
        and this runs once per record appended.
        """
        return SessionRow(
            self.id,
            self.workspace,
            layout,
            self.pk,
            self.row_version,
            self.created_at_us,
            updated_at_us,
            self.title,
            self.parent_ids,
            self.lineage_operator,
            self.branched_at,
            self.status,
            self.scratchpad,
            self.scratchpad_version,
            self.metadata,
        )


@dataclass(frozen=True, slots=True)
class ScratchpadEntry:
    """One version of a session's scratchpad, kept for its history."""

    version: int
    scratchpad: Mapping[str, JSONValue] | None
    source: str | None = None
    reason: str | None = None
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    created_at_us: int = 0


@dataclass(frozen=True, slots=True)
class BearerRow:
    """One durable bearer session as stored: never the token, only its hash."""

    token_hash: str
    """The hex SHA-256 of the bearer token: a database dump holds no credential."""
    principal: str
    """The stable user, tenant, service or client identity the token stands for."""
    scopes: tuple[str, ...] = ()
    """The scopes granted (the root of the actor chains it binds)."""
    attributes: Mapping[str, JSONValue] = field(default_factory=dict)
    """Small caller-owned metadata (role, tenant, client label ...)."""
    created_at_us: int = 0
    """Creation time, microseconds since the epoch (UTC)."""
    last_seen_at_us: int = 0
    """Last successful touch (authentication), microseconds since the epoch (UTC)."""
    expires_at_us: int = 0
    """Absolute expiry, microseconds since the epoch (UTC); ``touch`` never moves it."""


@dataclass(frozen=True, slots=True)
class LiveClientRow:
    """One live client attached to a session."""

    session_id: str
    """The session it is attached to."""
    client_id: str
    """The client's id, chosen by the client."""
    mode: str
    """``observer`` or ``controller`` (at most one controller per session)."""
    attached_at_us: int = 0
    """When it attached, microseconds since the epoch (UTC)."""
    last_seen_at_us: int = 0
    """Its last attach, takeover or heartbeat, microseconds since the epoch (UTC)."""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    """Caller-owned metadata, replaced by a heartbeat or attach that gives some."""


@runtime_checkable
class TranscriptStore(Protocol):
    """Session rows and their records: what every store keeps.

    The transcript is the whole of what a session *is*: its row (identity,
    copy-on-write layout, lineage, settings) and its records, appended at the
    head with a compare-and-set on it, read by position through the layout (a
    fork or merge shares rows with its sources), listed by activity and by
    parent. A third-party backend implements this and may stop there: the
    narrow protocols beside it (:class:`WriterLocks`, :class:`TallyStore`,
    :class:`BearerStore`, :class:`LiveClientStore`, ...) are the parts a backend
    adds when it offers them, and ``open_store`` serves or refuses each it lacks
    (``plait.store.PARTS``, D420). Every method is atomic; none leaves a
    half-written state.
    """

    @property
    def location(self) -> str:
        """Where the store keeps its data (a path, ``:memory:``, or a URL without secrets)."""
        ...

    def get(self, session_id: str) -> SessionRow | None:
        """Return the stored row of a live session, or None."""
        ...

    def create(self, row: SessionRow, records: Sequence[Record] = ()) -> SessionRow:
        """Insert a new session with its first own records and lineage edges.

        ``row.pk`` and ``row.row_version`` are ignored; the stored row (with
        its ``pk``, ``row_version`` 1 and timestamps) is returned.

        Raises:
            SessionExistsError: the id is taken.
        """
        ...

    def append(self, expected: SessionRow, records: Sequence[Record]) -> SessionRow:
        """Append records at the head, if the head is still ``expected``'s.

        The records' positions start at ``expected.layout.end_seq``. This is the
        hot path of every agent step: it changes nothing but the transcript.

        Raises:
            StaleSessionError: another writer appended first (nothing written).
            SessionNotFoundError: the session is gone.
        """
        ...

    def write(
        self,
        expected: SessionRow,
        updated: SessionRow,
        records: Sequence[Record] = (),
        scratchpad: ScratchpadEntry | None = None,
    ) -> SessionRow:
        """Compare-and-set the whole session: row and head must still be ``expected``'s.

        The mutable columns take ``updated``'s values (title, view, status,
        scratchpad, metadata), the records are appended as in :meth:`append`,
        and the scratchpad entry (if any) is added to its history.

        Raises:
            StaleSessionError: the row or the head changed since ``expected`` (nothing written).
            SessionNotFoundError: the session is gone.
        """
        ...

    def move_head(
        self,
        expected: SessionRow,
        head: SessionRow,
        hidden_id: str,
        records: Sequence[Record] = (),
    ) -> SessionRow:
        """Give the session's id to another head; the old one stays as a hidden head.

        In one transaction, if the row and head are still ``expected``'s: the row the id
        named takes the id ``hidden_id``, becomes the id's child with the lineage
        operator ``Session.rewind``, and is listed by no :meth:`recent` (only the lineage
        names it); and the id then names ``head``. ``head`` is either a new row
        (``pk == 0``) whose layout shares the old one's rows (a rewind), with ``records``
        appended at its end, or one of the id's hidden heads (an undo; no records). The
        id keeps its identity: title, status, settings, scratchpad and its history,
        parents, creation time and live clients; its version grows. Costs the same
        whatever the transcript's length and the number of sessions.

        Returns:
            The stored row the id now names.

        Raises:
            StaleSessionError: the row or the head changed since ``expected`` (nothing written).
            SessionNotFoundError: the session is gone.
            InvalidArgumentError: ``head`` is stored but is not one of the id's hidden heads.
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

    def erase(self, session_id: str) -> None:
        """Delete a session and its hidden heads, and remove every record of theirs nobody reads.

        Unlike :meth:`delete`, which keeps a tombstone's rows while any branch shares them,
        this removes at once each record no other live session's layout reads: a fork
        keeps the prefix it shares, nothing more. A backend overwrites what it can (SQLite
        with ``secure_delete`` and a truncated write-ahead log).

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

    def integrity_check(self) -> list[str]:
        """Check that every live session's rows are all there; return the problems found.

        One line per problem (a missing row, rows no session owns, a row that cannot be
        decoded); empty when all is well. Reads only; a backend with a check of its own
        (SQLite's ``PRAGMA integrity_check``) adds its findings.
        """
        ...

    def close(self) -> None:
        """Release the store's connections and the writer locks it holds. Idempotent."""
        ...


@runtime_checkable
class LineageStore(Protocol):
    """Walks of the lineage the store answers itself, in one read however deep the chain."""

    def ancestors(self, session_id: str) -> list[str]:
        """Return the chain of first parents of a live session, nearest first.

        The walk follows each session's first parent while that parent is
        live: a deleted parent ends it, and so does a session met twice (a
        reused id can close a loop). The last id is the session's root; empty
        for a root or an unknown id.
        """
        ...


@runtime_checkable
class ListingStore(Protocol):
    """Listings the store narrows itself, so they cost what they return."""

    def recent_with_prefix(
        self, workspace: str | None, prefix: str, limit: int
    ) -> list[SessionRow]:
        """Return up to ``limit`` live sessions whose id starts with ``prefix``, newest first.

        The same rows, in the same order, as :meth:`TranscriptStore.recent` filtered to
        ids that start with ``prefix`` (compared character by character, case and all;
        ``""`` matches every id), read through an index on the id rather than by reading
        every row. ``workspace=None`` lists every workspace.
        """
        ...


def sessions_with_prefix(
    store: TranscriptStore, workspace: str | None, prefix: str, limit: int
) -> list[SessionRow]:
    """Up to ``limit`` live sessions whose id starts with ``prefix``, newest first.

    Through the store's own listing when it offers one (:class:`ListingStore`), which
    reads only those; else every live row of :meth:`TranscriptStore.recent` is read
    and filtered here.
    """
    if isinstance(store, ListingStore):
        return store.recent_with_prefix(workspace, prefix, limit)
    return [r for r in store.recent(workspace, MAX_INT) if r.id.startswith(prefix)][:limit]


@runtime_checkable
class WriterLocks(Protocol):
    """One writer process per session: a lock that dies with the process that holds it.

    Fencing: two processes never both write a session. A store gives that in one of
    two ways. Either its lock cannot be lost while its process lives (SQLite's kernel
    file lock goes only with the process, and no write of that process can follow), or
    every write of a holder on the session (``append``, ``write``, ``move_head``,
    ``delete``, ``erase``) carries the epoch its lock was taken at and is checked in
    the write's own atomic step, so that once another process has taken the lock (a
    PostgreSQL lock connection cut by a timeout or a failover) the old holder's writes
    raise :class:`~plait.errors.WriterLockLostError` and write nothing. A process that
    holds no lock on a session writes unfenced (D232).
    """

    def lock(self, session_id: str) -> bool:
        """Take the session's writer lock for this process; False if another process has it.

        The lock belongs to the process (every handle and client of this process
        on the same database shares it), is taken again without harm, and dies
        with the process, however it ends (kill -9 included): no stale lock.
        Taken for real (not held by the process yet), it starts a new epoch of the
        session where the store fences writes (see the class).
        """
        ...

    def unlock(self, session_id: str) -> None:
        """Release this store's hold on the session's writer lock (a no-op if not held)."""
        ...

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the session's writer lock (a snapshot)."""
        ...


@runtime_checkable
class BreakableLocks(Protocol):
    """Writer locks another process can take away (optional; PostgreSQL's, D256).

    A lock that lives on a server connection outlives a holder that froze or lost its
    peers but not its connection; a fleet ends that connection once the holder's lease
    ran out, and the fence refuses the old holder's writes from then on (D232).
    """

    def break_lock(self, session_id: str) -> bool:
        """End the hold of the process that has the session's lock; True if one was ended."""
        ...


@runtime_checkable
class TallyStore(Protocol):
    """Token counts and running tallies stored beside the records they count (counted once)."""

    def counted_end(self, row: SessionRow) -> int:
        """Return one past the newest position of the row's layout whose tally is stored.

        Counted positions always form a prefix of a lineage (:meth:`set_tallies` extends
        it at its end), so this is where counting resumes; 0 when nothing is counted.
        """
        ...

    def tallies(self, row: SessionRow, positions: Sequence[int]) -> dict[int, Tally]:
        """Return the stored running tallies at these positions of the row's layout.

        Positions outside the layout or not counted yet are left out.

        Raises:
            StoreCorruptError: a stored tally cannot be decoded.
        """
        ...

    def set_tallies(
        self, row: SessionRow, start: int, counted: Sequence[tuple[int, Tally]]
    ) -> bool:
        """Store ``(tokens, tally)`` for positions ``start, start + 1, ...`` (one transaction).

        A compare-and-set on the counted prefix: if another writer counted any of these
        positions first, nothing is written and the result is False. The rows may belong to
        the sessions the row's layout inherits from (the counts are the same for every
        branch that shares a row). Neither the head nor the version moves.

        Raises:
            StoreError: the positions are not in the layout.
        """
        ...


@runtime_checkable
class BearerStore(Protocol):
    """Durable bearer sessions: a principal, scopes and an expiry under a token's hash."""

    def bearer_insert(self, row: BearerRow) -> bool:
        """Store a new durable session; False (nothing written) if its hash is taken."""
        ...

    def bearer_get(self, token_hash: str) -> BearerRow | None:
        """Return the durable session with this token hash, expired or not, or None."""
        ...

    def bearer_touch(self, token_hash: str, now_us: int) -> BearerRow | None:
        """Move ``last_seen_at`` to ``now_us`` (never back) if unexpired at ``now_us``.

        Atomic: an expired session is never touched, and ``expires_at`` never moves.

        Returns:
            The touched row, or None when unknown or expired.
        """
        ...

    def bearer_expire(self, token_hash: str, now_us: int) -> bool:
        """Set ``expires_at`` to ``now_us`` if the session is still live then; whether it was."""
        ...

    def bearer_purge(self, expired_before_us: int) -> int:
        """Delete durable sessions that expired before this time; return how many."""
        ...


@runtime_checkable
class LiveClientStore(Protocol):
    """The clients attached to a session (observers and at most one controller)."""

    def live_attach(
        self, row: LiveClientRow, *, takeover: bool
    ) -> tuple[LiveClientRow, str | None]:
        """Attach (or re-attach) a live client, atomically across processes.

        A client attached already keeps its ``attached_at``; ``mode``,
        ``last_seen_at`` and ``metadata`` take ``row``'s values.

        Args:
            row: the client, its mode and the time (``last_seen_at_us``).
            takeover: for a controller, demote the current one to observer.

        Returns:
            The stored row and the id of the controller it demoted (or None).

        Raises:
            ControllerConflictError: another client is the controller and
                ``takeover`` is False (nothing written).
            SessionNotFoundError: no live session has this id.
        """
        ...

    def live_heartbeat(
        self,
        session_id: str,
        client_id: str,
        now_us: int,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> LiveClientRow | None:
        """Move an attached client's ``last_seen_at`` (and replace its metadata if given).

        Returns:
            The stored row, or None when the client is not attached.
        """
        ...

    def live_release(self, session_id: str, client_id: str) -> LiveClientRow | None:
        """Detach a client (releasing control if it had it); return its last row or None."""
        ...

    def live_clients(self, session_id: str) -> list[LiveClientRow]:
        """Return the clients attached to a live session, in the order they attached."""
        ...


@runtime_checkable
class ObjectStore(Protocol):
    """Write-once objects named by their SHA-256: where workspace checkpoints live.

    A checkpoint is blobs (file contents) and trees (folder listings), each named by
    the hex SHA-256 of its bytes (:mod:`plait.sandbox.checkpoint`). A store that
    offers this keeps them in its own space, so another machine opening the same
    store can restore a workspace checkpointed here. Objects are never changed;
    pruning (which ids are still referenced is the session layer's to know) deletes
    them. Every method is atomic: an object is whole or absent.
    """

    def object_has(self, digests: Sequence[str]) -> set[str]:
        """Return which of ``digests`` are stored.

        Raises:
            InvalidArgumentError: one is not a 64-character hex digest.
        """
        ...

    def object_put(self, digest: str, parts: Iterable[bytes], now_us: int) -> int:
        """Store an object from its parts (each at most 1 MiB), whole or not at all.

        When the object is stored already, nothing is written, ``parts`` is not
        read, and its use time moves to ``now_us``.

        Returns:
            The bytes written (0 when it was there).

        Raises:
            InvalidArgumentError: a bad digest or a part over 1 MiB (nothing written).
        """
        ...

    def object_part(self, digest: str, part: int) -> bytes | None:
        """Return part ``part`` (0, 1, ... as given to :meth:`object_put`), or None.

        None past the object's last part or when it is not stored; an empty object
        may have no part at all.
        """
        ...

    def object_size(self, digest: str) -> int | None:
        """Return a stored object's size in bytes, or None."""
        ...

    def object_touch(self, digests: Sequence[str], now_us: int) -> None:
        """Move the use time of those of ``digests`` that are stored to ``now_us`` (never back)."""
        ...

    def object_digests(self, used_since_us: int | None = None) -> list[str]:
        """Return every stored digest, or only those used (written or touched) since then."""
        ...

    def object_delete(self, digests: Sequence[str]) -> int:
        """Delete those of ``digests`` that are stored; return how many were."""
        ...


@runtime_checkable
class Store(
    TranscriptStore, LineageStore, WriterLocks, TallyStore, BearerStore, LiveClientStore, Protocol
):
    """Where sessions live: the transcript with every service concern beside it.

    The composition of the narrow protocols, and what the session layer, the
    client and the server take: each of plait's stores (SQLite, in-memory,
    PostgreSQL) is one. ``plait.testing`` checks a backend against each part
    it implements.
    """


@runtime_checkable
class ViewReader(Protocol):
    """A store that reads a view's rows the way a history shows them (optional).

    A history needs a message's role, text, tool fields and position, not its id,
    time, count or meta: a store that can leave those columns unread offers
    :meth:`read_view`; for one that does not, :meth:`TranscriptStore.read` serves.
    """

    def read_view(self, row: SessionRow, lo: int, hi: int) -> list[Message | Record]:
        """Return the records at positions ``[lo, hi)``, in order, the messages as messages.

        A system, user, assistant or tool record is its
        :meth:`Message.from_record <plait.records.Message.from_record>` (equal to it);
        a summary, event or opaque item is its record, as :meth:`TranscriptStore.read`
        returns it.

        Raises:
            StoreCorruptError: a row does not decode (as :meth:`TranscriptStore.read`).
        """
        ...
