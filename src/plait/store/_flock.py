"""Process-wide writer locks in one file, for stores that live in a file (SQLite).

A session's writer lock is an exclusive lock on one byte of ``<db>-locks/writers.lock``,
at an offset named by a hash of the session id, so a process holds one descriptor
whatever the number of sessions it writes (one descriptor per session ran a long-lived
server or a bulk import out of files). On 64-bit Linux the locks are open file
description locks (``F_OFD_SETLK``): like ``flock`` they belong to the descriptor, so
closing some other descriptor of the file leaves them in place, and the kernel drops
them when the process ends in any way (kill -9 included), so a lock can never outlive
its process. Elsewhere they are POSIX record locks, which belong to the process: the
module then never opens a second descriptor of the file, since closing any would drop
every lock of the process. Within one process every store on the same database shares
the descriptor and counts its holds per session, so two clients of one program never
lock each other out; the descriptor is closed when the last hold on the file goes. A
forked child starts with no locks: it closes the descriptor it inherited (which leaves
the parent's locks in place) and opens its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
import sys
import threading
import time
import weakref
from pathlib import Path

__all__ = ["FileLocks"]

LOCK_FILE = "writers.lock"
"""The file, in a store's lock folder, whose bytes are its sessions' locks."""

# Open file description locks need the kernel's struct flock spelled out; its layout is
# known on 64-bit Linux (short type, short whence, off_t start, off_t len, pid_t pid).
_OFD = sys.platform == "linux" and struct.calcsize("P") == 8 and hasattr(fcntl, "F_OFD_SETLK")
_FLOCK = struct.Struct("hhqqi4x")
_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)

# How long lock() keeps trying when it finds the lock busy: a probe by
# locked_elsewhere() in another process may hold a shared lock for microseconds.
_RETRY_FOR = 0.02


class _File:
    """The one descriptor of a lock file in this process, and the holds on its bytes."""

    __slots__ = ("fd", "holds")

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.holds: dict[int, int] = {}  # offset -> holders in this process


_registry_lock = threading.Lock()
_files: dict[str, _File] = {}
_instances: weakref.WeakSet[FileLocks] = weakref.WeakSet()


def _forget_after_fork() -> None:
    global _registry_lock
    for file in _files.values():
        with contextlib.suppress(OSError):
            os.close(file.fd)
    _files.clear()
    _registry_lock = threading.Lock()
    for instance in list(_instances):
        instance._mine.clear()
        instance._mine_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def _offset(session_id: str) -> int:
    """The byte that is the session's lock: 63 bits of a hash, so ids never collide in practice."""
    digest = hashlib.sha256(session_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _set(fd: int, kind: int, offset: int) -> None:
    """Take (``F_WRLCK``, ``F_RDLCK``) or drop (``F_UNLCK``) one byte's lock, without waiting."""
    if _OFD:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, offset, 1, 0))
    else:
        how = {
            fcntl.F_WRLCK: fcntl.LOCK_EX | fcntl.LOCK_NB,
            fcntl.F_RDLCK: fcntl.LOCK_SH | fcntl.LOCK_NB,
        }.get(kind, fcntl.LOCK_UN)
        fcntl.lockf(fd, how, 1, offset, os.SEEK_SET)


def _taken_elsewhere(fd: int, offset: int) -> bool:
    """Whether another owner holds a lock on the byte (this descriptor's own never count)."""
    if _OFD:
        got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, 0, offset, 1, 0))
        return bool(_FLOCK.unpack(got)[0] != fcntl.F_UNLCK)
    try:  # a shared lock for a moment: it fails while another process holds the byte
        _set(fd, fcntl.F_RDLCK, offset)
    except OSError as exc:
        if exc.errno in _BUSY:
            return True
        raise
    _set(fd, fcntl.F_UNLCK, offset)
    return False


class FileLocks:
    """The writer locks of one store: bytes of one lock file in a folder beside the database.

    Args:
        folder: where the lock file lives (created on first use).
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._file = str(folder / LOCK_FILE)
        self._mine: set[str] = set()
        self._mine_lock = threading.Lock()
        _instances.add(self)

    def lock(self, session_id: str) -> bool:
        """Take the lock for this process; False if another process holds it."""
        offset = _offset(session_id)
        with self._mine_lock:
            if session_id in self._mine:
                return True
            with _registry_lock:
                file = _files.get(self._file)
                if file is not None and offset in file.holds:
                    file.holds[offset] += 1
                    self._mine.add(session_id)
                    return True
                if file is None:
                    self._folder.mkdir(parents=True, exist_ok=True)
                    file = _files[self._file] = _File(self._file)
                deadline = time.monotonic() + _RETRY_FOR
                try:
                    while True:
                        try:
                            _set(file.fd, fcntl.F_WRLCK, offset)
                            break
                        except OSError as exc:
                            if exc.errno not in _BUSY:
                                raise
                            if time.monotonic() >= deadline:
                                return False
                        time.sleep(0.001)
                    file.holds[offset] = 1
                finally:
                    self._close_if_unused(file)
                self._mine.add(session_id)
                return True

    def unlock(self, session_id: str) -> None:
        """Drop this store's hold; the lock is released when no store of the process holds it."""
        offset = _offset(session_id)
        with self._mine_lock:
            if session_id not in self._mine:
                return
            self._mine.discard(session_id)
            with _registry_lock:
                file = _files.get(self._file)
                if file is None or offset not in file.holds:
                    return
                file.holds[offset] -= 1
                if file.holds[offset] > 0:
                    return
                del file.holds[offset]
                try:
                    _set(file.fd, fcntl.F_UNLCK, offset)
                finally:
                    self._close_if_unused(file)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the lock (this process's own hold is not "elsewhere")."""
        offset = _offset(session_id)
        with _registry_lock:
            file = _files.get(self._file)
            if file is not None:
                return offset not in file.holds and _taken_elsewhere(file.fd, offset)
            if not os.path.exists(self._file):
                return False
            # POSIX record locks forbid a second descriptor: the probe opens the one.
            try:
                file = _files[self._file] = _File(self._file)
            except FileNotFoundError:  # the folder went meanwhile
                return False
            try:
                return _taken_elsewhere(file.fd, offset)
            finally:
                self._close_if_unused(file)

    def release_all(self) -> None:
        """Drop every hold of this store."""
        for session_id in list(self._mine):
            self.unlock(session_id)

    def _close_if_unused(self, file: _File) -> None:
        # Under the registry lock. No hold left: the descriptor goes, and with it nothing.
        if not file.holds and _files.get(self._file) is file:
            del _files[self._file]
            with contextlib.suppress(OSError):
                os.close(file.fd)
