"""The head of one session: its id, the row a handle last read, and compare-and-set writes.

Every part of the session layer (branching, settings, sandbox binding, context,
runs, export) works through a :class:`Head`, never through a whole
:class:`~plait.session.Session`: the head is the one place that reads the row,
takes the writer lock and writes with compare-and-set.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from plait.errors import (
    SessionClosedError,
    SessionLockedError,
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
from plait.session import _turns
from plait.session._memo import Memo
from plait.session._values import SETTINGS, check_count
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
    """One session's id, its last-read row, its writer-lock state and its sandbox handle.

    Args:
        host: the host (client) the handle belongs to.
        session_id: the session's id.
        row: the stored row, or None for a session not stored yet.
    """

    __slots__ = (
        "_owner",
        "host",
        "id",
        "row",
        "sandbox",
        "sandbox_release",
        "trusted",
        "writer",
    )

    def __init__(
        self, owner: Session, host: SessionHost, session_id: str, row: SessionRow | None
    ) -> None:
        self._owner = weakref.ref(owner)
        self.host = host
        self.id = session_id
        self.row = row
        self.writer = False
        self.trusted = False
        """True while ``row`` is what is stored: read or written under the writer lock since."""
        self.sandbox: Sandbox | None = None
        self.sandbox_release: weakref.finalize[Any, Any] | None = None
        """Releases ``sandbox`` once: on ``close_sandbox``, or when the handle or process goes."""

    def owner(self) -> Session | None:
        """The handle this head belongs to (None once it is gone)."""
        return self._owner()

    def adopt(self, row: SessionRow) -> None:
        """Take ``row`` if it is newer than the one held (another reader saw it first)."""
        if self.row is None or self.row.version < row.version:
            self.row = row
            self.trusted = self.writer

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
        if self.row is not None:
            row = self.store.get(self.id)
            if row is None:
                self.trusted = False
                raise SessionNotFoundError(self.id, "deleted")
            self.row = row
            self.trusted = self.writer

    def require(self) -> SessionRow:
        """The row this head holds; SessionNotFoundError for a session never stored."""
        if self.row is None:
            raise SessionNotFoundError(self.id, "not stored yet: nothing was written to it")
        return self.row

    def fresh(self) -> SessionRow:
        """The stored row: read now (one point lookup), or the one held during a run.

        While a run of this host drives the session and this head has held the writer
        lock since it last read or wrote the row, no other process can have written
        it, so the row held is what is stored and is not read again.
        """
        trusted = self.trusted and self.writer and self.row is not None
        if trusted and self.host.runs.running(self.id):
            assert self.row is not None
            return self.row
        self.refresh()
        return self.require()

    def memo(self, row: SessionRow) -> Memo | None:
        """The writer's memo for ``row``'s epoch, kept by the host (a new one for a new epoch).

        Kept across the writer lock given up and taken again, and across handles: what it
        holds is true of its epoch whoever wrote meanwhile (see ``session/_memo.py``).
        """
        if not self.writer:
            return None
        return self.host.memos.for_row(self.id, row)

    def settings(self, row: SessionRow | None = None) -> dict[str, JSONValue]:
        """The settings in ``row`` (default: read now); empty for a session not stored."""
        if row is None:
            if self.row is None:
                return {}
            row = self.fresh()
        found = row.metadata.get(SETTINGS, {})
        return dict(found) if isinstance(found, Mapping) else {}

    # -- the writer lock ------------------------------------------------------------------

    @property
    def takes_turns(self) -> bool:
        """Whether the host takes the lock for one write or run (``writer_lock="write"``)."""
        return self.host.writer_lock == "write"

    def ensure_writer(self) -> None:
        """Take the session's writer lock and keep it until :meth:`release`.

        In ``writer_lock="write"`` mode it waits for the lock up to the host's
        ``lock_timeout``.

        Raises:
            SessionLockedError: another process holds it (in ``write`` mode,
                :class:`~plait.errors.SessionLockTimeoutError` once the wait is over).
        """
        if not self.writer:
            if self.host.holds_lock(self.id):
                pass  # a handle of this host that is gone took it: this one inherits it
            elif self.takes_turns:
                _turns.wait_take(self.store, self.id, self.host.lock_timeout)
            elif not _turns.take(self.store, self.id):
                raise SessionLockedError(self.id)
            self._taken()

    def _taken(self) -> None:
        self.writer = True
        self.trusted = False  # another process may have written while it was not held
        self.host._locked.add(self.id)

    def release(self) -> None:
        """Give up this process's writer lock (a no-op if this head does not hold it).

        What the head knew of the row is no longer known to be what is stored (another
        process may write now): the next write or run reads it again.
        """
        if self.writer:
            self.writer = self.trusted = False
            if self.host.holds_lock(self.id):
                self.host._locked.discard(self.id)
                _turns.give(self.store, self.id)

    def lost(self) -> None:
        """The store refused a write: the lock this head held was lost and taken by another.

        Gives up what is left of the hold (the store forgets its epoch once every
        holder of this process has let go), so the error is raised once per loss: the
        next write takes the lock again, if it is free, and reads the head first.
        """
        self.release()

    @contextmanager
    def turn(self, needed: bool = True) -> Iterator[bool]:
        """Hold the writer lock for one write; yields whether this turn took it.

        In ``process`` mode the lock is taken (if not held) and kept. In ``write``
        mode a lock not held already is taken (waiting up to ``lock_timeout``) and
        released when the block ends; a lock held already (by a run, or
        :meth:`ensure_writer`) stays as it is. A write in the block that finds the
        lock lost (:class:`~plait.errors.WriterLockLostError`) gives it up
        (:meth:`lost`) and the error goes on.

        Args:
            needed: False: hold nothing (a write that needs no lock, such as a create).
        """
        if not needed or self.writer:
            try:
                yield False
            except WriterLockLostError:
                self.lost()
                raise
            return
        self.ensure_writer()
        try:
            yield self.takes_turns
        except WriterLockLostError:
            self.lost()
            raise
        finally:
            if self.takes_turns:
                self.release()

    async def take_turn(self) -> bool:
        """:meth:`turn` for a whole run: take the lock, waiting without blocking the loop.

        Returns:
            Whether it was taken here (pass it to :meth:`end_turn` when the run ends).

        Raises:
            SessionLockedError: in ``process`` mode, another process holds it.
            SessionLockTimeoutError: in ``write`` mode, it stayed taken for all of
                ``lock_timeout``.
        """
        if self.writer or self.row is None:
            return False
        calls = self.host.store_calls  # each try is a store call: off the loop (D202)
        if not self.takes_turns or self.host.holds_lock(self.id):
            await calls.run(self.ensure_writer)
            return False

        def attempt() -> bool:
            if not _turns.take(self.store, self.id):
                return False
            self._taken()
            return True

        await _turns.wait_take_async(
            lambda: calls.run(attempt), self.id, self.host.lock_timeout
        )
        return True

    def end_turn(self, taken: bool) -> None:
        """End what :meth:`take_turn` began: release the lock if that turn took it."""
        if taken:
            self.release()

    def locked_elsewhere(self) -> bool:
        """Whether another process has the session open for writing."""
        if self.row is None or self.writer:
            return False
        return self.store.locked_elsewhere(self.id)

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
            seen = self.row.version if self.row is not None else 0
            # A writer taking turns checks against the stored head once its turn began
            # (the version may come from another process, ahead of this handle).
            if expect_version != seen and not (self.takes_turns and self.row is not None):
                raise StaleSessionError(self.id, expect_version, seen)
        with self.turn(self.row is not None) as taken:
            if taken or not self.trusted:
                # A turn begins where another process's may have ended, and a lock taken
                # again finds a head another process may have moved meanwhile (a rewind
                # moves it to another row, which no compare-and-set on the row held would
                # catch): read the head once.
                self.refresh()
            row = self.row
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
            row = self.row
            if row is None:
                return self._create(build)
            if row.status == "closed" and not allow_closed:
                raise SessionClosedError(self.id)
            records, updated, pad = build(row)
            try:
                if updated is None and pad is None:
                    self.row = self.store.append(row, records)
                    self._appended(records)
                else:
                    target = updated if updated is not None else appended(row, records)
                    self.row = self.store.write(row, target, records, pad)
                self.trusted = True
                return self.row, records
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
        self.row = stored
        self.host._adopt_head(self)
        if pad is None and self.takes_turns:
            return stored, records  # the write is done: no turn to take
        with self.turn():  # seed 001: the process that made it writes it
            if pad is not None:
                stored = self.row = self.store.write(stored, replace(stored), (), pad)
        return stored, records

    def append_one(self, message: Mapping[str, JSONValue]) -> Record | None:
        """The agent-step fast path: one message appended with one INSERT, or None.

        None when the fast path does not apply (not stored, closed, not the writer)
        or another writer moved the head first (the row is re-read): the caller then
        takes the general path through :meth:`mutate`.

        Raises:
            WriterLockLostError: the lock this head held was lost and taken by another
                writer (nothing written; the hold is given up, see :meth:`lost`).
        """
        if self.row is None or not self.writer:
            return None
        if not self.trusted:
            # The lock was taken (again) since the row was read: another process may have
            # moved the head meanwhile (a rewind moves it to another row, which no append
            # at the old row's end would collide with). One point read, then trusted.
            self.refresh()
        row = self.row
        if row is None or row.status != "open":
            return None
        lay = row.layout
        record = record_from_message(message, seq=lay.end_seq, default_folds_from=lay.view_start)
        try:
            self.row = self.store.append(row, (record,))
        except StaleSessionError:
            self.refresh()
            return None
        except WriterLockLostError:
            self.lost()
            raise
        self._appended((record,))
        self.trusted = True
        return record

    def _appended(self, records: Sequence[Record]) -> None:
        memo = self.host.memos.kept(self.id)
        if memo is not None and self.row is not None and memo.valid_for(self.row):
            memo.extend(records)

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
