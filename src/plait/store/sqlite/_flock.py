"""Process-wide writer locks on files, for stores that live in a file (SQLite).

:func:`file_locks` picks the mechanism. On 64-bit Linux it is :class:`ShardLocks`
(bytes of a few shard files, :mod:`plait.store.sqlite._shardlocks`): a process keeps a bounded
number of descriptors whatever the number of sessions it writes. Where open file
description locks are missing it is :class:`FlockLocks`, below.

In :class:`FlockLocks` a session's writer lock is an exclusive ``flock`` on a small file
of its own beside the database (``<db>-locks/<sha256(id)[:32]>.lock``, the holder's pid
inside for people), so a process keeps one descriptor per session it holds. ``flock``
locks belong to an open file description, which the kernel drops when the process ends
in any way (kill -9 included), so a lock can never outlive its process. Within one
process every store on the same database shares one descriptor per session, counted, so
two clients of one program never lock each other out. A forked child starts with no
locks: it closes the descriptors it inherited (which leaves the parent's locks in place).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
import time
import weakref
from pathlib import Path
from typing import TypeAlias

from plait.store.sqlite._shardlocks import AVAILABLE, ShardLocks

__all__ = ["FileLocks", "FlockLocks", "ShardLocks", "file_locks"]

_registry_lock = threading.Lock()
# lock file path -> [fd, holders]
_held: dict[str, list[int]] = {}
_instances: weakref.WeakSet[FlockLocks] = weakref.WeakSet()


def _forget_after_fork() -> None:
    global _registry_lock
    for fd, _ in _held.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _held.clear()
    _registry_lock = threading.Lock()
    for instance in list(_instances):
        instance._mine.clear()
        instance._mine_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)

# How long lock() keeps trying when it finds the lock busy: a probe by
# locked_elsewhere() in another process holds a shared lock for microseconds.
_RETRY_FOR = 0.02


class FlockLocks:
    """The writer locks of one store: a folder of lock files, one per session.

    Args:
        folder: where the lock files live (created on first use).
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._mine: set[str] = set()
        self._mine_lock = threading.Lock()
        _instances.add(self)

    def _path(self, session_id: str) -> str:
        name = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:32]
        return str(self._folder / f"{name}.lock")

    def lock(self, session_id: str) -> bool:
        """Take the lock for this process; False if another process holds it."""
        path = self._path(session_id)
        with self._mine_lock:
            if session_id in self._mine:
                return True
            with _registry_lock:
                entry = _held.get(path)
                if entry is not None:
                    entry[1] += 1
                    self._mine.add(session_id)
                    return True
                self._folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                deadline = time.monotonic() + _RETRY_FOR
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as exc:
                        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                            os.close(fd)
                            raise
                        if time.monotonic() >= deadline:
                            os.close(fd)
                            return False
                        time.sleep(0.001)
                # The pid is only a hint for people (the lock is what counts): fixed width,
                # written in place, since truncating first costs more than the lock itself
                # on some file systems.
                with contextlib.suppress(OSError):
                    os.pwrite(fd, f"{os.getpid():<20}\n".encode(), 0)
                _held[path] = [fd, 1]
                self._mine.add(session_id)
                return True

    def unlock(self, session_id: str) -> None:
        """Drop this store's hold; the lock is released when no store of the process holds it."""
        path = self._path(session_id)
        with self._mine_lock:
            if session_id not in self._mine:
                return
            self._mine.discard(session_id)
            with _registry_lock:
                entry = _held.get(path)
                if entry is None:
                    return
                entry[1] -= 1
                if entry[1] <= 0:
                    del _held[path]
                    os.close(entry[0])  # closing the description releases the flock

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the lock (this process's own hold is not "elsewhere")."""
        path = self._path(session_id)
        with _registry_lock:
            if path in _held:
                return False
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return True
            raise
        finally:
            os.close(fd)  # also drops the probe's shared lock
        return False

    def release_all(self) -> None:
        """Drop every hold of this store."""
        for session_id in list(self._mine):
            self.unlock(session_id)


FileLocks: TypeAlias = ShardLocks | FlockLocks
"""The writer locks of a store that lives in a file, whichever mechanism this system has."""


def file_locks(folder: Path) -> FileLocks:
    """The writer locks of a store whose lock files live in ``folder``.

    The mechanism is a property of the system, not of the store, so every process of one
    program on one machine picks the same one.
    """
    return ShardLocks(folder) if AVAILABLE else FlockLocks(folder)
