"""Where workspace checkpoints keep their objects: the ``Objects`` space, and a folder of them.

A blob or tree is named by its SHA-256 and written once (``checkpoint.py`` says what
they hold). :class:`FolderObjects` keeps them as files ``objects/ab/cdef...``; a store's
object table is the other space (``plait.session``'s ``StoreObjects``, D147).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final, Protocol

from plait.errors import InvalidArgumentError

__all__ = [
    "DIGEST_CHARS",
    "FolderObjects",
    "Objects",
    "SourceChangedError",
    "copy_stream",
    "hash_stream",
    "snapshot",
    "verified_parts",
]

_CHUNK: Final = 1 << 20
DIGEST_CHARS: Final = frozenset("0123456789abcdef")
"""The characters of an object's name (a hex SHA-256)."""


class Objects(Protocol):
    """Where checkpoint objects live: ``digest -> bytes``, written once, never changed."""

    def has(self, digest: str) -> bool:
        """Whether the object is stored."""
        ...

    def missing(self, digests: Collection[str]) -> set[str]:
        """Which of ``digests`` are not stored (one question for many: a database's is a query)."""
        ...

    def put(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest`` (its SHA-256) if it is not there yet."""
        ...

    def put_file(self, digest: str, source: BinaryIO) -> int:
        """Store an open file, read from where it is to its end (already hashed to ``digest``).

        It takes a file the caller opened, never a path: a workspace's file is opened
        relative to its folder's descriptor without following a symlink, and what is
        stored is what was hashed, whatever the name points to by now. Nothing is read
        when the object is already stored. What is read is hashed as it is copied
        (:func:`verified_parts`): a file written to since it was hashed raises
        :class:`SourceChangedError` with nothing stored, never an object whose bytes
        are not its name's.

        Returns:
            The bytes written (0 when the object was there).
        """
        ...

    def get(self, digest: str) -> bytes:
        """The object's bytes.

        Raises:
            InvalidArgumentError: no object has that digest.
        """
        ...

    def open(self, digest: str) -> Any:
        """A binary file object reading the object (for large blobs)."""
        ...

    def digests(self) -> Iterator[str]:
        """Every stored digest."""
        ...

    def touch(self, digest: str) -> None:
        """Mark a stored object as used now (pruning spares what was used recently)."""
        ...

    def written_since(self, cutoff: float) -> set[str]:
        """The digests written or touched at or after ``cutoff`` (seconds since the epoch)."""
        ...

    def delete(self, digest: str) -> None:
        """Remove one object (pruning)."""
        ...


class FolderObjects:
    """:class:`Objects` in a folder: ``objects/ab/cdef...``, each written by an atomic rename."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        """The folder holding ``objects/``."""
        self._objects = os.path.join(self.folder, "objects")

    def _path(self, digest: str) -> Path:
        return Path(self._name(digest))

    def _name(self, digest: str) -> str:
        # Plain strings: this runs once per file of every checkpoint.
        if len(digest) != 64 or not DIGEST_CHARS.issuperset(digest):
            raise InvalidArgumentError(f"{digest!r} is not a checkpoint digest")
        return os.path.join(self._objects, digest[:2], digest[2:])

    def has(self, digest: str) -> bool:
        """Whether the object is stored."""
        return os.path.exists(self._name(digest))

    def missing(self, digests: Collection[str]) -> set[str]:
        """Which of ``digests`` are not stored."""
        return {d for d in digests if not os.path.exists(self._name(d))}

    def _publish(self, digest: str, write: Any) -> int:
        target = self._path(digest)
        if target.exists():
            return 0
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                size = int(write(out))
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return size

    def put(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest`` if it is not there yet."""
        self._publish(digest, lambda out: out.write(data))

    def put_file(self, digest: str, source: BinaryIO) -> int:
        """Copy the open file ``source`` in as ``digest``; returns bytes written (0 if present).

        Raises:
            SourceChangedError: what was read does not hash to ``digest`` (nothing stored).
        """

        def copy(out: Any) -> int:
            size = 0
            for part in verified_parts(source, digest, _CHUNK):
                out.write(part)
                size += len(part)
            return size

        return self._publish(digest, copy)

    def get(self, digest: str) -> bytes:
        """The object's bytes.

        Raises:
            InvalidArgumentError: no object has that digest.
        """
        try:
            return self._path(digest).read_bytes()
        except FileNotFoundError:
            raise InvalidArgumentError(f"no checkpoint object {digest}") from None

    def open(self, digest: str) -> Any:
        """A binary file reading the object.

        Raises:
            InvalidArgumentError: no object has that digest.
        """
        try:
            return open(self._path(digest), "rb")
        except FileNotFoundError:
            raise InvalidArgumentError(f"no checkpoint object {digest}") from None

    def digests(self) -> Iterator[str]:
        """Every stored digest."""
        root = self.folder / "objects"
        if not root.is_dir():
            return
        for sub in root.iterdir():
            for entry in sub.iterdir():
                if not entry.name.startswith("."):
                    yield sub.name + entry.name

    def touch(self, digest: str) -> None:
        """Mark the object as used now: its file's modification time."""
        with contextlib.suppress(FileNotFoundError):
            os.utime(self._name(digest))

    def written_since(self, cutoff: float) -> set[str]:
        """The digests whose files were written or touched at or after ``cutoff``."""
        found: set[str] = set()
        for digest in self.digests():
            with contextlib.suppress(FileNotFoundError):
                if os.stat(self._name(digest)).st_mtime >= cutoff:
                    found.add(digest)
        return found

    def delete(self, digest: str) -> None:
        """Remove one object."""
        with contextlib.suppress(FileNotFoundError):
            self._path(digest).unlink()


class SourceChangedError(Exception):
    """A file being stored did not hash to its digest as it was copied: it was written to.

    Raised by :meth:`Objects.put_file` with nothing stored; the checkpoint walk then
    stores one snapshot of the file instead, so it never reaches a caller.
    """


def verified_parts(source: BinaryIO, digest: str, size: int) -> Iterator[bytes]:
    """The open file's bytes in parts of ``size``, checked against ``digest`` at the end.

    Raises:
        SourceChangedError: once the last part is read, if the bytes hash otherwise
            (the consumer, which stores the parts, then stores nothing).
    """
    h = hashlib.sha256()
    while chunk := source.read(size):
        h.update(chunk)
        yield chunk
    if h.hexdigest() != digest:
        raise SourceChangedError(f"the file changed while it was stored as {digest}")


def snapshot(source: BinaryIO, spool: BinaryIO) -> str:
    """Copy the open file ``source`` into ``spool`` in one read; return the copy's SHA-256."""
    h = hashlib.sha256()
    while chunk := source.read(_CHUNK):
        h.update(chunk)
        spool.write(chunk)
    spool.seek(0)
    return h.hexdigest()


def copy_stream(src: Any, out: Any) -> int:
    """Copy one open file to another in parts of 1 MiB; return the bytes copied."""
    size = 0
    while chunk := src.read(_CHUNK):
        out.write(chunk)
        size += len(chunk)
    return size


def hash_stream(src: BinaryIO) -> str:
    """The SHA-256 of an open file from where it is to its end, read in parts of 1 MiB."""
    h = hashlib.sha256()
    while chunk := src.read(_CHUNK):
        h.update(chunk)
    return h.hexdigest()
