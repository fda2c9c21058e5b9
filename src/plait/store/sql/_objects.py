"""The object space of the SQL stores: write-once objects named by their SHA-256.

Workspace checkpoints (:mod:`plait.sandbox.checkpoint`) are blobs and trees named
by their digests. A store that keeps them in its own database lets a session on
PostgreSQL checkpoint its workspace on one machine and restore it on another.
The statements are the same on both engines but for placeholders, so they are
written once here and mixed into :class:`~plait.store.sql._store.SQLStore`; the tables
are migration 4 of ``_schema.py``. An encrypted store seals each part (D320).

An object is a row of ``checkpoint_objects`` (its size and when it was last used)
and its bytes in ``checkpoint_parts``, at most :data:`PART` bytes a part, so that a
100 MB file never sits in memory whole on either side.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final

from plait.errors import InvalidArgumentError

if TYPE_CHECKING:
    from plait.store.sql._store import Connection, Dialect

__all__ = ["PART", "SQLObjects", "check_digest"]

PART: Final = 1 << 20
"""The largest part of an object kept in one row (1 MiB)."""
_BATCH: Final = 500  # digests per IN (...) list: far below either engine's limit
_HEX: Final = frozenset("0123456789abcdef")


def check_digest(digest: object) -> str:
    """Return ``digest`` if it is a lowercase hex SHA-256.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(digest, str) or len(digest) != 64 or not _HEX.issuperset(digest):
        raise InvalidArgumentError(f"{digest!r} is not an object digest (64 hex characters)")
    return digest


def _batches(digests: Iterable[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for digest in digests:
        batch.append(check_digest(digest))
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class SQLObjects:
    """The :class:`~plait.store.base.ObjectStore` verbs over an engine's connections."""

    __slots__ = ()

    if TYPE_CHECKING:
        dialect: Dialect

        def _one(
            self, query: str, params: Sequence[Any], what: str, subject: object = None
        ) -> Any: ...

        def _all(
            self, query: str, params: Sequence[Any], what: str, subject: object = None
        ) -> list[Any]: ...

        def _side_write(self, what: str) -> AbstractContextManager[Connection]: ...

        def _seal_part(self, digest: str, index: int, data: bytes) -> bytes: ...

        def _open_part(self, digest: str, index: int, data: bytes) -> bytes: ...

    def _in(self, template: str, n: int) -> str:
        marks = ", ".join("?" * n)
        return self.dialect.sql(template.replace("(...)", f"({marks})"))

    def object_has(self, digests: Sequence[str]) -> set[str]:
        """Return which of ``digests`` are stored (whole: an object is never half there)."""
        found: set[str] = set()
        for batch in _batches(digests):
            query = self._in(
                "SELECT digest FROM checkpoint_objects WHERE digest IN (...)", len(batch)
            )
            found.update(r[0] for r in self._all(query, batch, "objects present"))
        return found

    def object_put(self, digest: str, parts: Iterable[bytes], now_us: int) -> int:
        """Store an object from its parts, whole or not at all; return the bytes written.

        Nothing is written, and ``parts`` is not read, when the object is stored
        already (its use time moves to ``now_us``). Each part must be at most
        :data:`PART` bytes; the caller vouches that ``digest`` names the bytes.

        Raises:
            InvalidArgumentError: a bad digest or a part too large (nothing written).
        """
        check_digest(digest)
        d = self.dialect
        # The row is made with size -1 and the size set last, in one transaction: an
        # object already there returns its own size (>= 0) and is only marked as used.
        insert = d.sql(
            "INSERT INTO checkpoint_objects (digest, size, used_at) VALUES (?, -1, ?) "
            "ON CONFLICT (digest) DO UPDATE SET used_at = "
            "{greatest}(checkpoint_objects.used_at, excluded.used_at) RETURNING size"
        )
        with self._side_write(f"store object {digest}") as conn:
            fresh = conn.execute(insert, (digest, now_us)).fetchone()
            if fresh is None or int(fresh[0]) != -1:
                return 0
            size = 0
            add = d.sql("INSERT INTO checkpoint_parts (digest, part, data) VALUES (?, ?, ?)")
            for index, data in enumerate(parts):
                if len(data) > PART:
                    raise InvalidArgumentError(f"an object part is at most {PART} bytes")
                conn.execute(add, (digest, index, self._seal_part(digest, index, bytes(data))))
                size += len(data)
            conn.execute(
                d.sql("UPDATE checkpoint_objects SET size = ? WHERE digest = ?"), (size, digest)
            )
        return size

    def object_part(self, digest: str, part: int) -> bytes | None:
        """Return part ``part`` (0, 1, ...) of a stored object; None past its end or if absent."""
        check_digest(digest)
        row = self._one(
            self.dialect.sql("SELECT data FROM checkpoint_parts WHERE digest = ? AND part = ?"),
            (digest, part),
            "read object",
            digest,
        )
        return self._open_part(digest, part, bytes(row[0])) if row is not None else None

    def object_size(self, digest: str) -> int | None:
        """Return a stored object's size in bytes, or None if it is not stored."""
        check_digest(digest)
        row = self._one(
            self.dialect.sql("SELECT size FROM checkpoint_objects WHERE digest = ?"),
            (digest,),
            "object size",
            digest,
        )
        return int(row[0]) if row is not None else None

    def object_touch(self, digests: Sequence[str], now_us: int) -> None:
        """Move the use time of the stored objects among ``digests`` to ``now_us`` (never back)."""
        for batch in _batches(digests):
            query = self._in(
                "UPDATE checkpoint_objects SET used_at = {greatest}(used_at, ?) "
                "WHERE digest IN (...)",
                len(batch),
            )
            with self._side_write("touch objects") as conn:
                conn.execute(query, [now_us, *batch])

    def object_digests(self, used_since_us: int | None = None) -> list[str]:
        """Return every stored digest, or those used at or after ``used_since_us``."""
        if used_since_us is None:
            return [r[0] for r in self._all("SELECT digest FROM checkpoint_objects", (), "objects")]
        query = self.dialect.sql("SELECT digest FROM checkpoint_objects WHERE used_at >= ?")
        return [r[0] for r in self._all(query, (used_since_us,), "objects used since")]

    def object_delete(self, digests: Sequence[str]) -> int:
        """Delete the stored objects among ``digests``; return how many were."""
        gone = 0
        for batch in _batches(digests):
            with self._side_write("delete objects") as conn:
                conn.execute(
                    self._in("DELETE FROM checkpoint_parts WHERE digest IN (...)", len(batch)),
                    batch,
                )
                gone += conn.execute(
                    self._in("DELETE FROM checkpoint_objects WHERE digest IN (...)", len(batch)),
                    batch,
                ).rowcount
        return gone
