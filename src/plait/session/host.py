"""SessionHost: a store plus the one live handle per session id, and what serves them.

The host owns the handles (one per id) and the current session; what its handles
share is each in an owner of its own, reached as an attribute: the run board
(``runs``), the store worker (``store_calls``), the writer locks its handles hold
(``locks``, :class:`~plait.session._turns.HostLocks`) and what it remembers of
stored sessions (``caches``, :class:`~plait.session._memo.Caches`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from plait._checks import check_list, check_name
from plait._ids import is_session_id, new_id
from plait.errors import (
    InvalidArgumentError,
    SessionNotFoundError,
    StoreCorruptError,
    shown,
)
from plait.layout import Layout
from plait.records import JSONLike, JSONValue, records_from_messages
from plait.run.worker import StoreWorker
from plait.session._memo import Caches
from plait.session._part import head_of
from plait.session._turns import HostLocks, WriterLockMode
from plait.session._values import clean_title, json_object
from plait.session.runs import RunBoard
from plait.store import Store
from plait.store.base import SessionRow

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from plait.session.session import Session

__all__ = ["HostOwner", "SessionHost", "ephemeral_host", "host_for"]


class HostOwner(Protocol):
    """What owns a :class:`SessionHost` and lends it out (a :class:`plait.Client`)."""

    @property
    def host(self) -> SessionHost:
        """The host whose sessions this object hands out."""
        ...


def host_for(owner: SessionHost | HostOwner | None) -> SessionHost:
    """The host behind ``owner``: itself, the one a client owns, or the in-memory default.

    Args:
        owner: a host, an object that owns one (a client), or None.

    Returns:
        The host new sessions are made on.

    Raises:
        InvalidArgumentError: ``owner`` is neither.
    """
    if owner is None:
        return ephemeral_host()
    if isinstance(owner, SessionHost):
        return owner
    host = getattr(owner, "host", None)
    if not isinstance(host, SessionHost):
        raise InvalidArgumentError(f"not a client or a session host: {shown(owner)}")
    return host


class SessionHost:
    """Owns a store and the live handles on its sessions (one handle per id).

    A :class:`plait.Client` owns one (``client.host``): servers and framework
    adapters reach the handles, locks and run board through it. A bare host serves
    the seed-000 constructors (``Session.from_user_message``) with an in-memory
    store when no client is given.

    Args:
        store: the store to keep sessions in.
        workspace: the absolute workspace path new sessions belong to.
    """

    def __init__(self, store: Store, workspace: str) -> None:
        self.store: Store = store
        self.workspace: str = workspace
        self.runs: RunBoard = RunBoard()
        """The runs in progress on this host's sessions, and their subscribers."""
        self.store_calls: StoreWorker = StoreWorker()
        """Where code on an event loop (a run, the server) makes this host's store calls."""
        self.caches: Caches = Caches()
        """What this host remembers of stored sessions (memos, usage sums, hidden prompts)."""
        self.locks: HostLocks = HostLocks(store)
        """The writer locks this host's handles hold, and how they take them."""
        self._handles: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._current: Session | None = None
        self._handles_lock = threading.Lock()

    @property
    def writer_lock(self) -> WriterLockMode:
        """How this host's handles take writer locks: ``process`` or ``write``.

        ``process``: a handle keeps the writer lock once it wrote (seed 001); ``write``:
        it takes the lock for one write or one run, waiting up to :attr:`lock_timeout`.
        """
        return self.locks.mode

    @property
    def lock_timeout(self) -> float:
        """Seconds a ``write``-mode writer waits for its turn before SessionLockTimeoutError."""
        return self.locks.timeout

    @property
    def exclusive_runs(self) -> bool:
        """True: one run at a time on this host (a :class:`plait.Client`, seed 001)."""
        return self.runs.exclusive

    @exclusive_runs.setter
    def exclusive_runs(self, value: bool) -> None:
        self.runs.exclusive = bool(value)

    # -- handles ----------------------------------------------------------------------------

    def handle(self, row: SessionRow) -> Session:
        """Return the one live handle for a stored row, creating it if needed.

        Raises:
            InvalidArgumentError: ``row`` is not a :class:`SessionRow`.
        """
        from plait.session.session import Session

        if not isinstance(row, SessionRow):
            raise InvalidArgumentError(f"not a stored session row: {type(row).__name__}")

        with self._handles_lock:
            handle = self._handles.get(row.id)
            if handle is None:
                handle = Session(self, row.id, row)
                self._handles[row.id] = handle
            else:
                head_of(handle).adopt(row)
            return handle

    def new_session(self, session_id: str | None = None) -> Session:
        """Return a handle on a new session, stored only when first written."""
        from plait.session.session import Session

        return Session(self, session_id or new_id(), None)

    def register(self, handle: Session) -> None:
        """A handle from :meth:`new_session` was stored: it becomes the handle for its id.

        Raises:
            InvalidArgumentError: ``handle`` is not a session of this host.
        """
        from plait.session.session import Session

        if not isinstance(handle, Session) or head_of(handle).host is not self:
            raise InvalidArgumentError(f"not a session of this client: {shown(handle)}")
        with self._handles_lock:
            self._handles[handle.id] = handle

    def lookup(self, session_id: object) -> SessionRow:
        """Return the stored row of a live session (one point read).

        Raises:
            SessionNotFoundError: unknown, unreadable, or not a valid session id.
        """
        if not is_session_id(session_id):
            raise SessionNotFoundError(session_id, "not a valid session id")
        assert isinstance(session_id, str)
        try:
            row = self.store.get(session_id)
        except StoreCorruptError as exc:
            raise SessionNotFoundError(session_id, f"cannot be read: {exc}") from exc
        if row is None:
            raise SessionNotFoundError(session_id)
        return row

    def get(self, session_id: str) -> Session:
        """Return the handle on a stored session (one handle per id), without making it current.

        Raises:
            SessionNotFoundError: unknown, unreadable, or an id that would leave the store.
        """
        return self.handle(self.lookup(session_id))

    def create_session(
        self,
        messages: Iterable[Mapping[str, JSONValue]],
        *,
        session_id: str | None = None,
        title: str | None = None,
        operator: str | None = None,
        metadata: Mapping[str, JSONLike] | None = None,
    ) -> Session:
        """Create a stored session holding ``messages``, all or nothing (one transaction).

        Raises:
            InvalidMessageError: a message is malformed (nothing is stored).
            InvalidArgumentError: a bad id, title or metadata.
            SessionExistsError: ``session_id`` is taken.
        """
        if session_id is not None and not is_session_id(session_id):
            raise InvalidArgumentError(f"{shown(session_id)} is not a valid session id")
        if operator is not None:
            operator = check_name(operator, "lineage_operator")
        records = records_from_messages(check_list(messages, "messages"), start=0)
        meta = json_object(metadata or {}, "metadata")
        title_ = clean_title(title) if title is not None else None
        msgs = sum(1 for r in records if r.kind != "event")
        row = SessionRow(
            id=session_id or new_id(),
            workspace=self.workspace,
            layout=Layout((), len(records), msgs, 0, 0),
            title=title_,
            lineage_operator=operator,
            metadata=meta,
        )
        return self.handle(self.store.create(row, records))

    # -- the current session ----------------------------------------------------------------

    @property
    def current(self) -> Session | None:
        """The host's current session (seed 001: the one a client continues), or None."""
        return self._current

    def make_current(self, handle: Session) -> Session:
        """Make ``handle`` the current session; returns it.

        Raises:
            InvalidArgumentError: ``handle`` is not a session of this host.
        """
        from plait.session.session import Session

        if not isinstance(handle, Session) or head_of(handle).host is not self:
            raise InvalidArgumentError(f"not a session of this client: {shown(handle)}")
        self._current = handle
        return handle

    # -- writer locks -----------------------------------------------------------------------

    def set_writer_lock(self, mode: object, lock_timeout: object) -> None:
        """Choose how this host's handles take writer locks (see :class:`plait.Client`).

        Raises:
            InvalidArgumentError: ``mode`` is not ``process`` or ``write``, or
                ``lock_timeout`` is not a finite number of seconds >= 0.
        """
        self.locks.configure(mode, lock_timeout)

    def locked(self, session_id: str) -> AbstractContextManager[None]:
        """Hold the session's writer lock for one operation on the store (a delete).

        Shared with this process's other holders, so it never takes the lock from a
        handle that writes; in ``write`` mode it waits up to :attr:`lock_timeout`.

        Raises:
            SessionLockedError: another process holds it (SessionLockTimeoutError in
                ``write`` mode, after the wait).
        """
        return self.locks.locked(session_id)

    def holds_lock(self, session_id: str) -> bool:
        """Whether a handle of this host holds the session's writer lock (False for a non-id)."""
        return isinstance(session_id, str) and self.locks.holds(session_id)

    @property
    def idle_locks(self) -> bool:
        """Whether :meth:`release_idle` has a lock to give up (a cheap check, no store call)."""
        return any(not self.runs.running(i) for i in self.locks.held())

    def release_idle(self) -> int:
        """Give up the writer locks of this host's sessions that have no run in progress.

        A server calls it after each write it serves, so a session is locked by a
        process only while that process runs it (D94).

        Returns:
            How many locks were given up.
        """
        ids = [i for i in self.locks.held() if not self.runs.running(i)]
        for session_id in ids:
            self.locks.give_up(session_id)  # its handle, if any, holds it no longer
        return len(ids)

    def close_sandboxes(self) -> None:
        """Give back the sandbox handles this host's sessions hold.

        A sandbox closes when no session holds it: a temporary folder plait made for a
        session without a target (``plait-sandbox-*``) is deleted then, not when the
        process exits; a folder a target names is never deleted.
        """
        with self._handles_lock:
            handles = [h for h in self._handles.values() if h is not None]
        current = self._current
        if current is not None and all(h is not current for h in handles):
            handles.append(current)
        for handle in handles:
            handle.close_sandbox()

    def forget(self, session_id: str) -> None:
        """The session was deleted: its handle holds no lock and it is no longer current.

        Raises:
            InvalidArgumentError: ``session_id`` is not a string.
        """
        if not isinstance(session_id, str):
            raise InvalidArgumentError(f"a session id is a string, not {type(session_id).__name__}")
        self.locks.give_up(session_id)
        if self._current is not None and self._current.id == session_id:
            self._current = None


_default_lock = threading.Lock()
_default_host: SessionHost | None = None


def ephemeral_host() -> SessionHost:
    """The process-wide in-memory host behind ``Session.from_*`` without a client."""
    global _default_host
    with _default_lock:
        if _default_host is None:
            from plait.store import MemoryStore

            _default_host = SessionHost(MemoryStore(), "")
        return _default_host
