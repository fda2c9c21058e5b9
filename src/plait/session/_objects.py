"""A store's object space seen as the sandbox's :class:`~plait.sandbox.Objects`.

:class:`StoreObjects` turns the :class:`~plait.store.ObjectStore` verbs (batched,
in parts, timed by the caller) into the interface a
:class:`~plait.sandbox.CheckpointStore` writes and reads, so that a session on a
PostgreSQL store checkpoints its workspace into the database (D147).
"""

from __future__ import annotations

import io
import time
from collections.abc import Collection, Iterator
from typing import Any, BinaryIO

from plait.errors import InvalidArgumentError
from plait.sandbox import verified_parts
from plait.store import ObjectStore

__all__ = ["StoreObjects"]

_PART = 1 << 20  # the store keeps parts of at most 1 MiB


def _now_us() -> int:
    return time.time_ns() // 1000


class _PartReader(io.RawIOBase):
    """Reads an object part by part: one part in memory at a time."""

    def __init__(self, store: ObjectStore, digest: str) -> None:
        super().__init__()
        self._store = store
        self._digest = digest
        self._next = 0
        self._buffer = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, out: Any) -> int:
        while not self._buffer and not self._done:
            part = self._store.object_part(self._digest, self._next)
            if part is None:
                self._done = True
            else:
                self._buffer = part
                self._next += 1
        n = min(len(out), len(self._buffer))
        out[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


class StoreObjects:
    """:class:`~plait.sandbox.Objects` kept in a store's object space."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        """The store holding the objects."""

    def has(self, digest: str) -> bool:
        """Whether the object is stored."""
        return bool(self.store.object_has([digest]))

    def missing(self, digests: Collection[str]) -> set[str]:
        """Which of ``digests`` are not stored (one query per few hundred)."""
        wanted = list(digests)
        return set(wanted) - self.store.object_has(wanted)

    def put(self, digest: str, data: bytes) -> None:
        """Store ``data`` under ``digest`` if it is not there yet."""
        parts = (data[i : i + _PART] for i in range(0, len(data), _PART))
        self.store.object_put(digest, parts, _now_us())

    def put_file(self, digest: str, source: BinaryIO) -> int:
        """Store the open file ``source`` from where it is (hashed to ``digest``); returns bytes.

        Raises:
            SourceChangedError: what was read does not hash to ``digest``; the store's
                write is undone, so nothing is stored.
        """
        return self.store.object_put(digest, verified_parts(source, digest, _PART), _now_us())

    def get(self, digest: str) -> bytes:
        """The object's bytes.

        Raises:
            InvalidArgumentError: no object has that digest.
        """
        with self.open(digest) as src:
            return bytes(src.read())

    def open(self, digest: str) -> Any:
        """A binary file reading the object part by part.

        Raises:
            InvalidArgumentError: no object has that digest.
        """
        if self.store.object_size(digest) is None:
            raise InvalidArgumentError(f"no checkpoint object {digest}")
        return io.BufferedReader(_PartReader(self.store, digest), buffer_size=_PART)

    def digests(self) -> Iterator[str]:
        """Every stored digest."""
        return iter(self.store.object_digests())

    def touch(self, digest: str) -> None:
        """Mark the object as used now."""
        self.store.object_touch([digest], _now_us())

    def written_since(self, cutoff: float) -> set[str]:
        """The digests written or touched at or after ``cutoff`` (seconds since the epoch)."""
        return set(self.store.object_digests(int(cutoff * 1_000_000)))

    def delete(self, digest: str) -> None:
        """Remove one object."""
        self.store.object_delete([digest])
