"""``session.live``: the session in the running processes, now.

:class:`SessionLive` tells whether a run is in progress here, subscribes to the
runs' events (:class:`~plait.session.runs.RunBoard`), takes and gives up the writer
lock, and tells the stored version and stamp, through the session's
:class:`~plait.session._head.Head`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from plait.errors import InvalidArgumentError
from plait.run import EventHook
from plait.session._part import Part

if TYPE_CHECKING:
    from plait.session.session import Session

__all__ = ["SessionLive"]


class SessionLive(Part):
    """Runs in progress, subscribers, the writer lock, the version and stamp.

    Reached as ``session.live``; made on each access, it holds only the handle.
    """

    __slots__ = ()

    @property
    def running(self) -> bool:
        """Whether a run is in progress on this session in this process."""
        return self._head.host.runs.running(self._head.id)

    def subscribe(self, callback: EventHook) -> Callable[[], None]:
        """Call ``callback`` with every event of every run on this session (seed 003).

        Subscribers live in this process, on this client; a fork does not copy them.
        A failing callback is logged and the run goes on.

        Args:
            callback: called with each :class:`~plait.run.RunEvent`.

        Returns:
            A function that removes the subscription.

        Raises:
            InvalidArgumentError: ``callback`` is not callable.
        """
        if not callable(callback):
            raise InvalidArgumentError("a subscriber must be callable")
        return self._head.host.runs.subscribe(self._head.id, callback)

    def acquire(self) -> None:
        """Take the session's writer lock for this process now, and keep it until :meth:`release`.

        A write takes it on demand; with ``writer_lock="write"`` a write gives it back
        after, unless it was taken here.

        Raises:
            SessionLockedError: another process holds it (``writer_lock="write"``:
                SessionLockTimeoutError once ``lock_timeout`` passed).
        """
        self._head.ensure_writer()

    def release(self) -> None:
        """Give up this process's writer lock, so another process may write the session.

        The next write through this handle takes it again (or raises
        :class:`~plait.errors.SessionLockedError` if another process took it meanwhile).
        """
        self._head.release()

    @property
    def holds_lock(self) -> bool:
        """Whether this handle holds the session's writer lock (see ``Session.locked``).

        As far as this process knows: a PostgreSQL lock whose connection was cut is
        found lost at the next write, which raises
        :class:`~plait.errors.WriterLockLostError` if another process took it (D232).
        """
        return self._head.writer

    @property
    def version(self) -> int:
        """The head version this handle last saw (0 if not stored)."""
        return self._head.row.version if self._head.row is not None else 0

    def stamp(self) -> str | None:
        """A value that changes exactly when the stored session changes.

        Returns:
            The stamp, or None for a session not stored.
        """
        return self._head.store.stamp(self._head.id)

    def refresh(self) -> Session:
        """Re-read the stored row (a no-op for a session not stored yet).

        Returns:
            The session.

        Raises:
            SessionNotFoundError: the session was deleted.
        """
        self._head.refresh()
        return self._session
