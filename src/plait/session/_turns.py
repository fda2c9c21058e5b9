"""The writer lock as the session layer takes it: counted per store, waited for in turns.

A store's writer lock (:class:`plait.store.base.WriterLocks`) belongs to the process,
and taking it again is harmless, but one ``unlock`` lets it go for every holder of
that store. The session layer has several holders on one store (two clients given
the same store object, a delete while a handle writes): it counts them here, so the
store's lock goes only when the last lets go.

A client in ``writer_lock="write"`` mode takes the lock for one write or one run and
gives it back after, so the writers of several processes take turns. A turn that
finds the lock taken waits for it, asking again with a growing, jittered pause
(capped), for at most the client's ``lock_timeout``; then it is
:class:`~plait.errors.SessionLockTimeoutError`.

Three owners, one per reach: this module's functions count the process's holders
of each store's locks; a host's :class:`HostLocks` keeps its mode, its wait and
which of its sessions a handle of it holds; a handle's :class:`WriterLock` takes,
holds and gives back its session's lock through its host's.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, Literal

from plait.errors import (
    InvalidArgumentError,
    SessionLockedError,
    SessionLockTimeoutError,
    WriterLockLostError,
)
from plait.store.base import WriterLocks

if TYPE_CHECKING:
    from plait.run.worker import StoreWorker

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "WRITER_LOCK_MODES",
    "HostLocks",
    "WriterLock",
    "WriterLockMode",
    "check_lock_timeout",
    "check_writer_lock",
    "give",
    "held",
    "take",
    "wait_take",
    "wait_take_async",
]

WriterLockMode = Literal["process", "write"]
"""``process``: a writer keeps the lock for the life of the process (seed 001).
``write``: it takes the lock for one write or one run and gives it back after."""

WRITER_LOCK_MODES: Final = ("process", "write")
"""The modes :class:`plait.Client` takes as ``writer_lock``."""

DEFAULT_LOCK_TIMEOUT: Final = 10.0
"""How long a ``write``-mode writer waits for its turn, in seconds."""

_FIRST_PAUSE: Final = 0.002
_LONGEST_PAUSE: Final = 0.1


class _Hold:
    """One session's holders on one store, and the mutex that orders them."""

    __slots__ = ("count", "mutex")

    def __init__(self) -> None:
        self.count = 0
        self.mutex = threading.Lock()


_mutex = threading.Lock()
_holds: weakref.WeakKeyDictionary[WriterLocks, dict[str, _Hold]] = weakref.WeakKeyDictionary()


def _forget_after_fork() -> None:
    # A forked child holds none of its parent's locks (the stores let go of them too).
    global _mutex
    _holds.clear()
    _mutex = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def check_writer_lock(mode: object) -> WriterLockMode:
    """``mode`` if it is one of :data:`WRITER_LOCK_MODES`, else InvalidArgumentError."""
    if mode == "process":
        return "process"
    if mode == "write":
        return "write"
    raise InvalidArgumentError(f"writer_lock must be 'process' or 'write', not {mode!r}")


def check_lock_timeout(seconds: object) -> float:
    """``seconds`` as a float if it is a finite number >= 0, else InvalidArgumentError."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise InvalidArgumentError(f"lock_timeout must be a number of seconds, not {seconds!r}")
    value = float(seconds)
    if not 0 <= value < float("inf"):
        raise InvalidArgumentError(f"lock_timeout must be a finite number >= 0, not {seconds!r}")
    return value


def held(store: WriterLocks, session_id: str) -> int:
    """How many holders of this process hold the session's lock through ``store``."""
    with _mutex:
        found = _holds.get(store, {}).get(session_id)
        return found.count if found is not None else 0


def take(store: WriterLocks, session_id: str) -> bool:
    """Add a holder of the session's lock on ``store``; False if another process has it.

    Taking a free lock may wait a moment inside the store (a holder letting go); only
    this session's holders wait with it, not every session of the process.
    """
    while True:
        with _mutex:
            hold = _holds.setdefault(store, {}).setdefault(session_id, _Hold())
        with hold.mutex:
            with _mutex:
                if _holds.get(store, {}).get(session_id) is not hold:
                    continue  # the last holder let go and dropped it meanwhile: start again
            if hold.count > 0:
                hold.count += 1
                return True
            try:
                taken = store.lock(session_id)
            except BaseException:
                _drop(store, session_id, hold)
                raise
            if not taken:  # keep no entry for a session this process does not hold
                _drop(store, session_id, hold)
                return False
            hold.count = 1
            return True


def give(store: WriterLocks, session_id: str) -> None:
    """Remove a holder; the store's lock goes with the last one (a no-op if none holds it)."""
    with _mutex:
        hold = _holds.get(store, {}).get(session_id)
    if hold is None:
        return
    with hold.mutex:
        if hold.count <= 0:
            return
        hold.count -= 1
        if hold.count > 0:
            return
        try:
            store.unlock(session_id)
        finally:
            _drop(store, session_id, hold)


def _drop(store: WriterLocks, session_id: str, hold: _Hold) -> None:
    with _mutex:
        counts = _holds.get(store)
        if counts is not None and counts.get(session_id) is hold:
            del counts[session_id]


class _Backoff:
    """The pauses between tries: doubling from 2 ms to 100 ms, jittered, within a deadline."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.pause = _FIRST_PAUSE

    def next(self) -> float | None:
        """The next pause, or None when the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        # Jitter, so two waiting processes do not ask at the same moments again and again.
        pause = min(self.pause * (0.5 + random.random()), left)
        self.pause = min(self.pause * 2, _LONGEST_PAUSE)
        return pause


def wait_take(store: WriterLocks, session_id: str, timeout: float) -> None:
    """:func:`take`, asking again until the lock is free, for at most ``timeout`` seconds.

    Raises:
        SessionLockTimeoutError: another process kept it for all of ``timeout``.
    """
    backoff = _Backoff(timeout)
    while not take(store, session_id):
        pause = backoff.next()
        if pause is None:
            raise SessionLockTimeoutError(session_id, timeout)
        time.sleep(pause)


async def wait_take_async(
    attempt: Callable[[], Awaitable[bool]], session_id: str, timeout: float
) -> None:
    """:func:`wait_take` that lets the event loop run while it waits.

    Args:
        attempt: one try at the lock (:func:`take`, made off the loop); True when taken.
        session_id: the session, for the error.
        timeout: seconds to keep trying.

    Raises:
        SessionLockTimeoutError: another process kept it for all of ``timeout``.
    """
    backoff = _Backoff(timeout)
    while not await attempt():
        pause = backoff.next()
        if pause is None:
            raise SessionLockTimeoutError(session_id, timeout)
        await asyncio.sleep(pause)


class HostLocks:
    """A host's share of its store's writer locks: the mode, the wait, and who holds what.

    Which of the host's sessions a handle of it holds, and which handle (a
    :class:`WriterLock`): at most one per session, and each hold numbered, so a
    handle can tell one hold from the next. A hold outlives the handle that took it:
    the next handle on the id inherits it (:meth:`acquire`), or :meth:`give_up`
    gives it back.

    Args:
        store: the store whose locks the host takes.
    """

    def __init__(self, store: WriterLocks) -> None:
        self._store = store
        self._mode: WriterLockMode = "process"
        self._timeout: float = DEFAULT_LOCK_TIMEOUT
        self._holders: dict[str, tuple[weakref.ref[WriterLock], int]] = {}
        self._mutex = threading.Lock()
        self._numbers = itertools.count(1)

    @property
    def mode(self) -> WriterLockMode:
        """How the host's handles take the lock: ``process`` or ``write``.

        ``process``: a handle keeps the lock once it wrote (seed 001); ``write``: it
        takes the lock for one write or one run, waiting up to :attr:`timeout`.
        """
        return self._mode

    @property
    def timeout(self) -> float:
        """Seconds a ``write``-mode writer waits for its turn before SessionLockTimeoutError."""
        return self._timeout

    @property
    def takes_turns(self) -> bool:
        """Whether a handle takes the lock for one write or run (``writer_lock="write"``)."""
        return self._mode == "write"

    def configure(self, mode: object, timeout: object) -> None:
        """Choose the mode and the wait (both checked before either is changed).

        Raises:
            InvalidArgumentError: ``mode`` is not ``process`` or ``write``, or
                ``timeout`` is not a finite number of seconds >= 0.
        """
        checked = check_writer_lock(mode), check_lock_timeout(timeout)
        self._mode, self._timeout = checked

    def holds(self, session_id: str) -> bool:
        """Whether a handle of this host (alive or gone) holds the session's lock."""
        return session_id in self._holders

    def held(self) -> list[str]:
        """The sessions whose lock a handle of this host holds."""
        with self._mutex:
            return list(self._holders)

    def hold_of(self, lock: WriterLock) -> int:
        """The number of the hold ``lock`` has now (a new one each time it is taken); 0: none."""
        entry = self._holders.get(lock.id)
        return entry[1] if entry is not None and entry[0]() is lock else 0

    def acquire(self, lock: WriterLock) -> None:
        """Give ``lock`` its session's lock: inherited if this host holds it, else taken.

        Raises:
            SessionLockedError: in ``process`` mode, another process holds it.
            SessionLockTimeoutError: in ``write`` mode, it stayed taken for :attr:`timeout`.
        """
        if self.holds(lock.id):
            self._record(lock, taken=False)  # a handle that is gone took it: this one inherits
            return
        if self.takes_turns:
            wait_take(self._store, lock.id, self._timeout)
        elif not take(self._store, lock.id):
            raise SessionLockedError(lock.id)
        self._record(lock, taken=True)

    def try_acquire(self, lock: WriterLock) -> bool:
        """One try at the lock for ``lock`` (no wait); False if another process has it."""
        if not take(self._store, lock.id):
            return False
        self._record(lock, taken=True)
        return True

    def _record(self, lock: WriterLock, *, taken: bool) -> None:
        with self._mutex:
            twice = taken and lock.id in self._holders  # another thread took it meanwhile
            self._holders[lock.id] = (weakref.ref(lock), next(self._numbers))
        if twice:
            give(self._store, lock.id)  # one count per session for this host

    def let_go(self, lock: WriterLock) -> None:
        """``lock`` gives its hold back (nothing if it holds none)."""
        with self._mutex:
            entry = self._holders.get(lock.id)
            if entry is None or entry[0]() is not lock:
                return
            del self._holders[lock.id]
        give(self._store, lock.id)

    def give_up(self, session_id: str) -> bool:
        """Give back this host's hold on the session, whichever handle has it; False if none."""
        with self._mutex:
            if self._holders.pop(session_id, None) is None:
                return False
        give(self._store, session_id)
        return True

    def elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the session's lock (asks the store)."""
        return self._store.locked_elsewhere(session_id)

    @contextmanager
    def locked(self, session_id: str) -> Iterator[None]:
        """Hold the session's lock for one operation on the store (a delete).

        Shared with this process's other holders, so it never takes the lock from a
        handle that writes; in ``write`` mode it waits up to :attr:`timeout`.

        Raises:
            SessionLockedError: another process holds it (SessionLockTimeoutError in
                ``write`` mode, after the wait).
        """
        if self.takes_turns:
            wait_take(self._store, session_id, self._timeout)
        elif not take(self._store, session_id):
            raise SessionLockedError(session_id)
        try:
            yield
        finally:
            give(self._store, session_id)


class WriterLock:
    """One handle's hold on its session's writer lock: taking, holding, giving it back.

    What it holds is its host's :class:`HostLocks` to say; this is the handle's
    side of it, with the turns a write or a run takes in ``write`` mode.

    Args:
        locks: the host's locks.
        session_id: the session.
    """

    __slots__ = ("__weakref__", "_locks", "id")

    def __init__(self, locks: HostLocks, session_id: str) -> None:
        self._locks = locks
        self.id = session_id

    @property
    def held(self) -> bool:
        """Whether this handle holds the lock (as far as this process knows, D232)."""
        return self._locks.hold_of(self) != 0

    @property
    def hold(self) -> int:
        """Which hold this is: a number new each time the lock is taken; 0 when not held.

        What was read under one hold is known to be what is stored until it ends.
        """
        return self._locks.hold_of(self)

    @property
    def takes_turns(self) -> bool:
        """Whether the host takes the lock for one write or run (``writer_lock="write"``)."""
        return self._locks.takes_turns

    def ensure(self) -> None:
        """Take the lock and keep it until :meth:`release`.

        In ``writer_lock="write"`` mode it waits for the lock up to the host's
        ``lock_timeout``.

        Raises:
            SessionLockedError: another process holds it (in ``write`` mode,
                :class:`~plait.errors.SessionLockTimeoutError` once the wait is over).
        """
        if not self.held:
            self._locks.acquire(self)

    def release(self) -> None:
        """Give up this process's hold (a no-op if this handle holds none)."""
        self._locks.let_go(self)

    def lost(self) -> None:
        """The store refused a write: the lock was lost and taken by another writer.

        Gives up what is left of the hold (the store forgets its epoch once every
        holder of this process has let go), so the error is raised once per loss: the
        next write takes the lock again, if it is free.
        """
        self.release()

    def elsewhere(self) -> bool:
        """Whether another process has the session open for writing (False while held here)."""
        return not self.held and self._locks.elsewhere(self.id)

    @contextmanager
    def turn(self, needed: bool = True) -> Iterator[bool]:
        """Hold the lock for one write; yields whether this turn took it.

        In ``process`` mode the lock is taken (if not held) and kept. In ``write``
        mode a lock not held already is taken (waiting up to ``lock_timeout``) and
        released when the block ends; a lock held already (by a run, or
        :meth:`ensure`) stays as it is. A write in the block that finds the lock lost
        (:class:`~plait.errors.WriterLockLostError`) gives it up (:meth:`lost`) and
        the error goes on.

        Args:
            needed: False: hold nothing (a write that needs no lock, such as a create).
        """
        if not needed or self.held:
            try:
                yield False
            except WriterLockLostError:
                self.lost()
                raise
            return
        self.ensure()
        turns = self.takes_turns
        try:
            yield turns
        except WriterLockLostError:
            self.lost()
            raise
        finally:
            if turns:
                self.release()

    async def take_turn(self, calls: StoreWorker) -> bool:
        """:meth:`turn` for a whole run: take the lock, waiting without blocking the loop.

        Args:
            calls: where the store calls are made, off the event loop (D202).

        Returns:
            Whether it was taken here (pass it to :meth:`end_turn` when the run ends).

        Raises:
            SessionLockedError: in ``process`` mode, another process holds it.
            SessionLockTimeoutError: in ``write`` mode, it stayed taken for all of
                ``lock_timeout``.
        """
        if self.held:
            return False
        if not self.takes_turns or self._locks.holds(self.id):
            await calls.run(self.ensure)
            return False
        await wait_take_async(
            lambda: calls.run(lambda: self._locks.try_acquire(self)),
            self.id,
            self._locks.timeout,
        )
        return True

    def end_turn(self, taken: bool) -> None:
        """End what :meth:`take_turn` began: release the lock if that turn took it."""
        if taken:
            self.release()
