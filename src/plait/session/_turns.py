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
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Final, Literal

from plait.errors import InvalidArgumentError, SessionLockTimeoutError
from plait.store.base import WriterLocks

__all__ = [
    "DEFAULT_LOCK_TIMEOUT",
    "WRITER_LOCK_MODES",
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
