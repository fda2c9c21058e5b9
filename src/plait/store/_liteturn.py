"""Writers of one SQLite file take turns on a kernel lock instead of SQLite's busy sleeps.

SQLite lets one connection write at a time. A connection that finds the write lock
taken sleeps in SQLite's busy handler, whose shortest pause is a whole millisecond (then
2, 5, 10 ms...): a hundred times an append's own work, so writers of several processes
spent more time asleep than writing. So while writers contend (a write of this process
waited while another connection committed, in the last second) a store takes an
exclusive ``flock`` on ``<db>-turn`` before each write transaction: a writer that finds
it taken sleeps in the kernel, which wakes it the moment the holder lets go, and
SQLite's write lock is then free. A writer alone takes no turns (two system calls per
append, ~8% of one). Only plait's stores take turns: any other writer of the file (the
``sqlite3`` shell, an older plait) is still waited for by SQLite's busy timeout, so the
turn decides how a writer waits, never whether a write is safe. The kernel drops the
lock of a process that dies, kill -9 included.

Within a process every store of one file shares one descriptor, with a thread lock in
front of it (a ``flock`` does not keep apart two threads using one descriptor). A thread
already holding the turn passes through: a write inside another store's write on the
same file then meets SQLite's busy timeout (an error), as without turns, instead of
waiting on itself forever. A forked child starts with no turn and its own descriptor.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from time import monotonic
from typing import Final

__all__ = ["SLOW", "Turn", "turn_for"]

SLOW: Final = 0.0005
"""Seconds a write statement may take before it counts as having waited for the lock:
SQLite's busy handler sleeps 1 ms at least, and an uncontended append takes ~20 µs."""
_QUIET: Final = 1.0
"""Seconds without contention after which a process stops taking turns."""

_registry_lock = threading.Lock()
_turns: dict[str, Turn] = {}


class Turn:
    """The turn of one database file in this process (see the module).

    ``take`` and ``give`` pair up; the same thread may nest them. Turns are taken only
    while writers contend: a store reports a write that waited for another (:meth:`waited`), and
    turns are then taken until none has been found taken for ``_QUIET`` seconds. A
    writer alone on its file thus pays nothing for them.
    """

    __slots__ = ("_depth", "_fd", "_held", "_mutex", "_path", "_until")

    def __init__(self, path: str) -> None:
        self._path = path
        self._fd = -1  # opened on first use
        self._mutex = threading.RLock()
        self._depth = 0
        self._held = False
        self._until = 0.0  # turns are taken until then

    def take(self) -> None:
        """Wait for this process's turn to write the file, while writers contend.

        Raises:
            OSError: the turn file cannot be opened or locked.
        """
        self._mutex.acquire()
        if self._depth == 0 and self._until and monotonic() < self._until:
            try:
                if self._fd < 0:
                    self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self._until = monotonic() + _QUIET  # still contended
                    fcntl.flock(self._fd, fcntl.LOCK_EX)
                self._held = True
            except BaseException:
                self._mutex.release()
                raise
        self._depth += 1

    def give(self) -> None:
        """Let the next writer have the file (the outermost ``give`` of a thread)."""
        self._depth -= 1
        try:
            if self._depth == 0 and self._held:
                self._held = False
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def waited(self) -> None:
        """A write found SQLite's lock taken (it slept): take turns from now on."""
        self._until = monotonic() + _QUIET

    def __enter__(self) -> None:
        self.take()

    def __exit__(self, *_: object) -> None:
        self.give()

    def _reset(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd = -1
        self._mutex = threading.RLock()
        self._depth = 0
        self._held = False
        self._until = 0.0


def turn_for(database: str) -> Turn:
    """The turn of the database file at ``database`` (an absolute path), shared in the process."""
    with _registry_lock:
        found = _turns.get(database)
        if found is None:
            found = _turns[database] = Turn(database + "-turn")
        return found


def _forget_after_fork() -> None:
    global _registry_lock
    # The child's copies share the parent's open file descriptions: closing them leaves
    # the parent's turn as it is, and the child opens descriptions of its own.
    for turn in _turns.values():
        turn._reset()
    _registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
