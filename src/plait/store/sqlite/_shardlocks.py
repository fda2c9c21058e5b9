"""Writer locks as bytes of a few shard files, for stores that live in a file (SQLite on Linux).

A session's writer lock is an exclusive open file description lock (``F_OFD_SETLK``) on
one byte of one of :data:`SHARDS` files beside the database,
``<db>-locks/writers-XX.lock``: a hash of the session id names both the file and the
byte (an offset below 2**62; a lock needs no byte to exist, so the files stay empty).
The kernel keeps a file's record locks in one list that every lock and unlock walks,
so a single file for all sessions would make each cost grow with every lock held on it;
spread over the shards, a list holds 1/SHARDS of them (a cost still grows, SHARDS times
slower). A process keeps one descriptor per shard in which it holds a lock, opened on
the first and closed with the last, so it keeps at most SHARDS open for them however
many sessions it writes.

Open file description locks belong to the description, not the process: closing some
other descriptor of the file (a probe's) leaves them in place, and the kernel drops them
when the last reference to the description goes, which a process's end of any kind
(kill -9 included) does, so a lock can never outlive its holder. A forked child shares
its parent's descriptions: it closes the descriptors it inherited without unlocking
(which leaves the parent's locks in place) and starts with no locks of its own.

Within one process every store on the same database shares each shard's descriptor and
counts its holds per session, so two clients of one program never lock each other out.

Before this layout a session's lock was a ``flock`` on a file of its own in the same
folder (``<sha256(id)[:32]>.lock``, :class:`plait.store.sqlite._flock.FlockLocks`), and a plait
process of that time may still run beside this one. So a lock is not taken, and
``locked_elsewhere`` says True, while another process holds the session's old file; the
old file is only probed, never kept, since keeping it would cost a descriptor per session.
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
import weakref
from pathlib import Path

__all__ = ["AVAILABLE", "SHARDS", "ShardLocks", "place"]

SHARDS = 128
"""How many shard files a store's locks are spread over: the most descriptors a process
keeps for them, and what divides the locks each list walk passes over. Every process on
one database must agree on it: changing it is a change of the lock files' layout."""

# The kernel's struct flock, spelled out for fcntl: its layout is known on 64-bit Linux
# (short type, short whence, off_t start, off_t len, pid_t pid, padding).
_FLOCK = struct.Struct("hhqqi4x")

AVAILABLE = sys.platform == "linux" and struct.calcsize("P") == 8 and hasattr(fcntl, "F_OFD_SETLK")
"""Whether open file description locks can be used here (64-bit Linux)."""

_BUSY = (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK)


def place(session_id: str) -> tuple[int, int]:
    """The shard and the byte that are a session's lock: from one hash of its id.

    The offset takes 62 bits of the hash, so two ids of one shard share a byte with a
    chance of one in 2**62; the shard takes the next 32 bits of the same hash.
    """
    return _place(hashlib.sha256(session_id.encode("utf-8")).digest())


def _place(digest: bytes) -> tuple[int, int]:
    return int.from_bytes(digest[8:12], "big") % SHARDS, int.from_bytes(digest[:8], "big") >> 2


def _old_file_taken(folder: str, digest: bytes) -> bool:
    """Whether another process holds the session's lock file of the layout before shards."""
    try:  # a path of strings: a Path here would cost as much as the lock itself
        fd = os.open(folder + digest.hex()[:32] + ".lock", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # no plait process of that layout ever locked the session
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _BUSY:
            return True
        raise
    finally:
        os.close(fd)  # also drops the probe's shared lock
    return False


class _Shard:
    """The one descriptor of a shard file in this process, and its holds on the file's bytes."""

    __slots__ = ("fd", "holds")

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.holds: dict[int, int] = {}  # offset -> holders in this process


_registry_lock = threading.Lock()
_shards: dict[str, _Shard] = {}  # shard file path -> this process's descriptor of it
_instances: weakref.WeakSet[ShardLocks] = weakref.WeakSet()


def _forget_after_fork() -> None:
    # Only closing: an F_UNLCK through the shared description would free the parent's lock.
    global _registry_lock
    for shard in _shards.values():
        with contextlib.suppress(OSError):
            os.close(shard.fd)
    _shards.clear()
    _registry_lock = threading.Lock()
    for instance in list(_instances):
        instance._mine.clear()
        instance._mine_lock = threading.Lock()


if AVAILABLE:
    os.register_at_fork(after_in_child=_forget_after_fork)


def _set(fd: int, kind: int, offset: int) -> None:
    """Take (``F_WRLCK``) or drop (``F_UNLCK``) the lock on one byte, without waiting."""
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, offset, 1, 0))


def _taken_elsewhere(fd: int, offset: int) -> bool:
    """Whether another description holds the byte; the kernel reports none of ``fd``'s own."""
    got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, offset, 1, 0))
    return bool(_FLOCK.unpack(got)[0] != fcntl.F_UNLCK)


class ShardLocks:
    """The writer locks of one store: bytes of the shard files in a folder beside the database.

    ``lock`` is refused at once when another process holds the byte: nothing takes a
    lock for a moment here (a probe asks the kernel with ``F_OFD_GETLK``, which takes
    none), so a wait would only delay the answer.

    Args:
        folder: where the shard files live (created on first use).
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._paths = [str(folder / f"writers-{k:02x}.lock") for k in range(SHARDS)]
        self._old = str(folder) + os.sep  # where the old layout's files are
        self._mine: set[str] = set()
        self._mine_lock = threading.Lock()
        _instances.add(self)

    def lock(self, session_id: str) -> bool:
        """Take the lock for this process; False if another process holds it."""
        digest = hashlib.sha256(session_id.encode("utf-8")).digest()
        k, offset = _place(digest)
        path = self._paths[k]
        with self._mine_lock:
            if session_id in self._mine:
                return True
            with _registry_lock:
                shard = _shards.get(path)
                if shard is not None and offset in shard.holds:
                    shard.holds[offset] += 1
                    self._mine.add(session_id)
                    return True
                if shard is None:
                    try:
                        shard = _Shard(path)
                    except FileNotFoundError:  # the folder's first lock: made only then
                        self._folder.mkdir(parents=True, exist_ok=True)
                        shard = _Shard(path)
                    _shards[path] = shard
                try:
                    # A process of the old layout that takes the old file after this probe
                    # is not seen: it never looks at the shards either.
                    if _old_file_taken(self._old, digest):
                        return False
                    _set(shard.fd, fcntl.F_WRLCK, offset)
                except OSError as exc:
                    if exc.errno not in _BUSY:
                        raise
                    return False
                else:
                    shard.holds[offset] = 1
                finally:
                    _close_if_unused(path, shard)
                self._mine.add(session_id)
                return True

    def unlock(self, session_id: str) -> None:
        """Drop this store's hold; the lock is released when no store of the process holds it."""
        k, offset = place(session_id)
        path = self._paths[k]
        with self._mine_lock:
            if session_id not in self._mine:
                return
            self._mine.discard(session_id)
            with _registry_lock:
                shard = _shards.get(path)
                if shard is None or offset not in shard.holds:
                    return
                shard.holds[offset] -= 1
                if shard.holds[offset] > 0:
                    return
                del shard.holds[offset]
                try:
                    # Explicitly: a child forked a moment ago and not yet exec'd shares the
                    # description, so closing it alone would not free the byte until then.
                    _set(shard.fd, fcntl.F_UNLCK, offset)
                finally:
                    _close_if_unused(path, shard)

    def locked_elsewhere(self, session_id: str) -> bool:
        """Whether another process holds the lock (this process's own hold is not "elsewhere")."""
        digest = hashlib.sha256(session_id.encode("utf-8")).digest()
        k, offset = _place(digest)
        path = self._paths[k]
        # Under the registry lock, so that no thread of this process takes the byte while
        # a probe through a description of its own would see that lock as another's.
        with _registry_lock:
            shard = _shards.get(path)
            if shard is not None:
                if offset in shard.holds:
                    return False
                taken = _taken_elsewhere(shard.fd, offset)
            else:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                except FileNotFoundError:  # no process ever locked a session of this shard
                    taken = False
                else:
                    try:
                        taken = _taken_elsewhere(fd, offset)
                    finally:
                        os.close(fd)  # a description with no locks: closing it frees nothing
            return taken or _old_file_taken(self._old, digest)

    def release_all(self) -> None:
        """Drop every hold of this store."""
        for session_id in list(self._mine):
            self.unlock(session_id)


def _close_if_unused(path: str, shard: _Shard) -> None:
    # Under the registry lock. No hold left in the shard: its descriptor goes.
    if not shard.holds and _shards.get(path) is shard:
        del _shards[path]
        with contextlib.suppress(OSError):
            os.close(shard.fd)
