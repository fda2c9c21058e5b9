"""The head of one session: its id, the row a handle last read, and compare-and-set writes.

Every part of the session layer (branching, settings, sandbox binding, context,
runs, export) works through a :class:`Head`, never through a whole
:class:`~plait.session.Session`: the head is the one place that reads the row and
writes it with compare-and-set. A head also carries the handle's other owners, so
a part given the head reaches them: its :class:`~plait.session._turns.WriterLock`
(``head.lock``) and its :class:`~plait.session.binding.SandboxBinding`
(``head.binding``); what the host remembers of sessions is the host's
(:class:`~plait.session._memo.Caches`, ``head.host.caches``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from plait.errors import (
    SessionClosedError,
    SessionNotFoundError,
    StaleSessionError,
    WriterLockLostError,
)
from plait.records import (
    EventRecord,
    JSONValue,
    Record,
    record_from_message,
    records_from_messages,
)
from plait.sandbox import Sandbox
from plait.session._memo import Memo
from plait.session._turns import WriterLock
from plait.session._values import SETTINGS, check_count
from plait.session.binding import SandboxBinding
from plait.store import Store
from plait.store.base import ScratchpadEntry, SessionRow

if TYPE_CHECKING:
    from plait.session.host import SessionHost
    from plait.session.session import Session

__all__ = ["Build", "Head", "appended"]

_RETRIES: Final = 64  # each lost race means another writer progressed: lock-free, not a spin

Build = Callable[[SessionRow], tuple[Sequence[Record], SessionRow | None, ScratchpadEntry | None]]
"""Given the head, return (records to append, the new row or None if only appending, pad)."""


class Head:
    """One session's stored row as a handle knows it, and its compare-and-set writes.

    It owns the row last read or written (``row``, ``version``), whether that row is
    known to be what is stored (read or written under the current hold of the writer
    lock), reading it again (:meth:`refresh`, :meth:`fresh`) and writing it
    (:meth:`mutate`, :meth:`append_one`). It owns nothing else: the writer lock is
    ``lock``'s, the sandbox handle ``binding``'s, the caches the host's; the few
    verbs here that name them (:attr:`writer`, :meth:`ensure_writer`,
    :meth:`release`, :attr:`sandbox`, :meth:`memo`) only pass a call on.

    Args:
        owner: the session handle the head belongs to (held weakly).
        host: the host (client) the handle belongs to.
        session_id: the session's id.
        row: the stored row, or None for a session not stored yet.
    """

    __slots__ = ("_owner", "_row", "_seen", "binding", "host", "id", "lock")

    def __init__(
        self, owner: Session, host: SessionHost, session_id: str, row: SessionRow | None
    ) -> None:
        self._owner = weakref.ref(owner)
        self.host = host
        self.id = session_id
        self._row = row
        self._seen = 0  # the hold of the writer lock under which ``row`` was read or written
        self.lock = WriterLock(host.locks, session_id)
        """The handle's hold on the session's writer lock."""
        self.binding = SandboxBinding(self._owner)
        """The sandbox handle the handle holds."""

    def owner(self) -> Session | None:
        """The handle this head belongs to (None once it is gone)."""
        return self._owner()

    @property
    def row(self) -> SessionRow | None:
        """The row last read or written (None for a session not stored, or erased)."""
        return self._row

    @property
    def version(self) -> int:
        """The version of the row held (0 if not stored)."""
        return self._row.version if self._row is not None else 0

    @property
    def trusted(self) -> bool:
        """Whether ``row`` is what is stored: read or written under the lock held now."""
        return self._seen != 0 and self._seen == self.lock.hold

    def _know(self, row: SessionRow | None) -> None:
        self._row = row
        self._seen = self.lock.hold

    def adopt(self, row: SessionRow) -> None:
        """Take ``row`` if it is newer than the one held (another reader saw it first)."""
        if self._row is None or self._row.version < row.version:
            self._know(row)

    def wrote(self, row: SessionRow) -> None:
        """``row`` was written through this head (under its writer lock): hold it."""
        self._know(row)

    @property
    def store(self) -> Store:
        """The store the session lives in."""
        return self.host.store

    # -- reading the row ----------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the stored row (nothing for a session not stored yet).

        Raises:
            SessionNotFoundError: the session was deleted.
        """
        if self._row is not None:
            row = self.store.get(self.id)
            if row is None:
                self._seen = 0
                raise SessionNotFoundError(self.id, "deleted")
            self._know(row)

    def require(self) -> SessionRow:
        """The row this head holds; SessionNotFoundError for a session never stored."""
        if self._row is None:
            raise SessionNotFoundError(self.id, "not stored yet: nothing was written to it")
        return self._row

    def fresh(self) -> SessionRow:
        """The stored row: read now (one point lookup), or the one held during a run.

        While a run of this host drives the session and this head has held the writer
        lock since it last read or wrote the row, no other process can have written
        it, so the row held is what is stored and is not read again.
        """
        row = self._row
        if row is not None and self.trusted and self.host.runs.running(self.id):
            return row
        self.refresh()
        return self.require()

    def memo(self, row: SessionRow) -> Memo | None:
        """The writer's memo for ``row``'s epoch, kept by the host; None when not the writer.

        Kept across the writer lock given up and taken again, and across handles: what it
        holds is true of its epoch whoever wrote meanwhile (see ``session/_memo.py``).
        """
        if not self.lock.held:
            return None
        return self.host.caches.memo(self.id, row)

    def settings(self, row: SessionRow | None = None) -> dict[str, JSONValue]:
        """The settings in ``row`` (default: read now); empty for a session not stored."""
        if row is None:
            if self._row is None:
                return {}
            row = self.fresh()
        found = row.metadata.get(SETTINGS, {})
        return dict(found) if isinstance(found, Mapping) else {}

    # -- the handle's other owners, as the facade names them ----------------------------

    @property
    def writer(self) -> bool:
        """Whether this handle holds the writer lock (``lock.held``)."""
        return self.lock.held

    def ensure_writer(self) -> None:
        """Take the writer lock and keep it (``lock.ensure``).

        Raises:
            SessionLockedError: another process holds it (in ``write`` mode,
                :class:`~plait.errors.SessionLockTimeoutError` once the wait is over).
        """
        self.lock.ensure()

    def release(self) -> None:
        """Give up this process's writer lock (``lock.release``).

        The row held is no longer known to be what is stored (another process may
        write now): the next write or run reads it again.
        """
        self.lock.release()

    def locked_elsewhere(self) -> bool:
        """Whether another process has the session open for writing (False if not stored)."""
        return self._row is not None and self.lock.elsewhere()

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox handle held (``binding.handle``)."""
        return self.binding.handle

    # -- writing --------------------------------------------------------------------------

    def mutate(
        self, build: Build, *, expect_version: int | None = None, allow_closed: bool = False
    ) -> tuple[SessionRow, Sequence[Record]]:
        """Apply ``build`` to the head and store the result with compare-and-set.

        Without ``expect_version`` a lost race is retried on the new head (the
        verbs that use this do not depend on what they read); with it, a stale
        head raises :class:`StaleSessionError` and nothing is written.
        """
        if expect_version is not None:
            check_count(expect_version, "expect_version")
            seen = self.version
            # A writer taking turns checks against the stored head once its turn began
            # (the version may come from another process, ahead of this handle).
            if expect_version != seen and not (self.lock.takes_turns and self._row is not None):
                raise StaleSessionError(self.id, expect_version, seen)
        with self.lock.turn(self._row is not None) as taken:
            if taken or not self.trusted:
                # A turn begins where another process's may have ended, and a lock taken
                # again finds a head another process may have moved meanwhile (a rewind
                # moves it to another row, which no compare-and-set on the row held would
                # catch): read the head once.
                self.refresh()
            row = self._row
            if expect_version is not None and row is not None and expect_version != row.version:
                if not taken:
                    self.refresh()
                    row = self.require()
                if expect_version != row.version:
                    raise StaleSessionError(self.id, expect_version, row.version)
            return self._cas(build, expect_version, allow_closed)

    def _cas(
        self, build: Build, expect_version: int | None, allow_closed: bool
    ) -> tuple[SessionRow, Sequence[Record]]:
        last: StaleSessionError | None = None
        for _ in range(_RETRIES):
            row = self._row
            if row is None:
                return self._create(build)
            if row.status == "closed" and not allow_closed:
                raise SessionClosedError(self.id)
            records, updated, pad = build(row)
            try:
                if updated is None and pad is None:
                    stored = self.store.append(row, records)
                    self.host.caches.appended(self.id, stored, records)
                else:
                    target = updated if updated is not None else appended(row, records)
                    stored = self.store.write(row, target, records, pad)
                self._know(stored)  # written under the lock (mutate's turn holds it)
                return stored, records
            except StaleSessionError as exc:
                if expect_version is not None:
                    raise
                last = exc
                self.refresh()
        assert last is not None
        raise last

    def _create(self, build: Build) -> tuple[SessionRow, Sequence[Record]]:
        blank = SessionRow(id=self.id, workspace=self.host.workspace)
        records, updated, pad = build(blank)
        if updated is None:
            updated = appended(blank, records)
        stored = self.store.create(updated, records)
        self._know(stored)
        owner = self.owner()
        if owner is not None:
            self.host.register(owner)  # stored: it is the host's handle for its id now
        if pad is None and self.lock.takes_turns:
            return stored, records  # the write is done: no turn to take
        with self.lock.turn():  # seed 001: the process that made it writes it
            if pad is not None:
                stored = self.store.write(stored, replace(stored), (), pad)
                self._know(stored)
        return stored, records

    def append_one(self, message: Mapping[str, JSONValue]) -> Record | None:
        """The agent-step fast path: one message appended with one INSERT, or None.

        None when the fast path does not apply (not stored, closed, not the writer)
        or another writer moved the head first (the row is re-read): the caller then
        takes the general path through :meth:`mutate`.

        Raises:
            WriterLockLostError: the lock this head held was lost and taken by another
                writer (nothing written; the hold is given up).
        """
        if self._row is None or not self.lock.held:
            return None
        if not self.trusted:
            # The lock was taken (again) since the row was read: another process may have
            # moved the head meanwhile (a rewind moves it to another row, which no append
            # at the old row's end would collide with). One point read, then trusted.
            self.refresh()
        row = self._row
        if row is None or row.status != "open":
            return None
        lay = row.layout
        record = record_from_message(message, seq=lay.end_seq, default_folds_from=lay.view_start)
        try:
            stored = self.store.append(row, (record,))
        except StaleSessionError:
            self.refresh()
            return None
        except WriterLockLostError:
            self.lock.lost()
            raise
        self._know(stored)
        self.host.caches.appended(self.id, stored, (record,))
        return record

    def messages(self, messages: Sequence[Mapping[str, JSONValue]]) -> Build:
        """A build that appends ``messages`` (each checked before anything is written)."""

        def build(row: SessionRow) -> tuple[Sequence[Record], None, None]:
            lay = row.layout
            records = records_from_messages(
                messages, start=lay.end_seq, default_folds_from=lay.view_start
            )
            return records, None, None

        return build

    def event(
        self,
        name: str,
        data: Mapping[str, JSONValue],
        change: Callable[[SessionRow], SessionRow] | None = None,
        *,
        allow_closed: bool = False,
        expect_version: int | None = None,
    ) -> Record:
        """Append an event, changing the row with ``change`` in the same write."""

        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow | None, None]:
            record = EventRecord(seq=row.layout.end_seq, name=name, data=dict(data))
            if change is None:
                return [record], None, None
            return [record], appended(change(row), [record]), None

        return self.mutate(build, allow_closed=allow_closed, expect_version=expect_version)[1][0]

    def change_row(
        self, change: Callable[[SessionRow], SessionRow], *, allow_closed: bool = True
    ) -> SessionRow:
        """Change the session row alone (no record), with compare-and-set; the new row."""

        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow, None]:
            return (), change(row), None

        return self.mutate(build, allow_closed=allow_closed)[0]


def appended(row: SessionRow, records: Sequence[Record]) -> SessionRow:
    """``row`` with its layout's head moved past ``records``."""
    messages = sum(1 for r in records if r.kind != "event")
    return replace(row, layout=row.layout.appended(len(records), messages))
