"""Conformance of the object space: write-once objects named by their SHA-256."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest

from plait.errors import InvalidArgumentError
from plait.store.base import ObjectStore, Store
from plait.testing._factory import ConformanceBase

__all__ = ["ObjectConformance"]

_MIB = 1 << 20


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _parts(data: bytes, size: int = _MIB) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def _read(store: ObjectStore, digest: str) -> bytes:
    out = b""
    part = 0
    while (found := store.object_part(digest, part)) is not None:
        out += found
        part += 1
    return out


class ObjectConformance(ConformanceBase):
    """The :class:`~plait.store.base.ObjectStore` protocol: workspace checkpoint objects."""

    def test_objects_round_trip_in_parts(self, store: Store) -> None:
        """An object of several parts reads back byte for byte, part by part."""
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        data = bytes(range(256)) * (_MIB // 128) + b"tail"  # two full parts and a bit
        d = _digest(data)
        assert objects.object_has([d]) == set()
        assert objects.object_size(d) is None and objects.object_part(d, 0) is None
        assert objects.object_put(d, _parts(data), 1_000) == len(data)
        assert objects.object_has([d, "0" * 64]) == {d}
        assert objects.object_size(d) == len(data)
        assert _read(objects, d) == data
        assert objects.object_part(d, 3) is None
        empty = _digest(b"")
        assert objects.object_put(empty, [], 1_000) == 0
        assert objects.object_has([empty]) == {empty} and objects.object_size(empty) == 0
        assert _read(objects, empty) == b""

    def test_a_stored_object_is_not_written_or_read_again(self, store: Store) -> None:
        """A second put writes nothing and never reads its parts; it marks the object used."""
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        d = _digest(b"once")
        objects.object_put(d, [b"once"], 1_000)

        def never() -> Iterator[bytes]:
            raise AssertionError("the parts of a stored object were read")
            yield b""  # pragma: no cover

        assert objects.object_put(d, never(), 5_000) == 0
        assert _read(objects, d) == b"once"
        assert objects.object_digests(used_since_us=5_000) == [d]

    def test_use_times_select_recent_objects_and_never_move_back(self, store: Store) -> None:
        """Touch moves the use time forward only; listing by use time sees it."""
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        old, new = _digest(b"old"), _digest(b"new")
        objects.object_put(old, [b"old"], 1_000)
        objects.object_put(new, [b"new"], 9_000)
        assert sorted(objects.object_digests()) == sorted([old, new])
        assert objects.object_digests(used_since_us=5_000) == [new]
        objects.object_touch([old, "f" * 64], 6_000)  # an absent digest is ignored
        assert sorted(objects.object_digests(used_since_us=5_000)) == sorted([old, new])
        objects.object_touch([new], 2_000)
        assert objects.object_digests(used_since_us=8_000) == [new]

    def test_delete_removes_the_object_and_all_its_parts(self, store: Store) -> None:
        """Delete counts what it removed; the digest can then be stored anew."""
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        data = b"x" * (_MIB + 1)
        d, keep = _digest(data), _digest(b"keep")
        objects.object_put(d, _parts(data), 1)
        objects.object_put(keep, [b"keep"], 1)
        assert objects.object_delete([d, "e" * 64]) == 1
        assert objects.object_has([d, keep]) == {keep}
        assert objects.object_part(d, 0) is None and objects.object_part(d, 1) is None
        assert objects.object_put(d, _parts(data), 2) == len(data)
        assert _read(objects, d) == data

    def test_many_digests_are_answered_at_once(self, store: Store) -> None:
        """Questions about more digests than one statement takes are still answered whole."""
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        stored = [_digest(str(i).encode()) for i in range(1_200)]
        for i, d in enumerate(stored[::3]):
            objects.object_put(d, [str(i * 3).encode()], 1)
        asked = [*stored, "a" * 64]
        assert objects.object_has(asked) == set(stored[::3])
        assert objects.object_delete(stored) == len(stored[::3])
        assert objects.object_digests() == []

    def test_bad_input_is_refused_with_nothing_written(self, store: Store) -> None:
        """A malformed digest or an oversized part is a typed error, and leaves no object."""
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        for bad in ("../../etc/passwd", "A" * 64, "ab", ""):
            with pytest.raises(InvalidArgumentError):
                objects.object_has([bad])
            with pytest.raises(InvalidArgumentError):
                objects.object_put(bad, [b"x"], 1)
        d = _digest(b"big")
        with pytest.raises(InvalidArgumentError):
            objects.object_put(d, [b"ok", b"y" * (_MIB + 1)], 1)
        assert objects.object_has([d]) == set() and objects.object_part(d, 0) is None
