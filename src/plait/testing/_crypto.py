"""Conformance of an encrypted store: its key is checked, its keys follow its sessions.

The cases run on a factory whose opener opens an encrypted store
(:func:`open_encrypted_store`, with the kit's own key :data:`KIT_KEY`); the whole kit
runs on such a factory too, so an encrypted store keeps every promise a plain one does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, ClassVar, cast

import pytest

from plait.errors import (
    EncryptionKeyError,
    EncryptionKeyMismatchError,
    EncryptionKeyMissingError,
    InvalidArgumentError,
)
from plait.layout import branch
from plait.records import UserRecord
from plait.store import Store, new_encryption_key, open_store
from plait.store.base import ObjectStore, ScratchpadEntry
from plait.store.search import MARK_END, MARK_START, SearchStore
from plait.testing._factory import ConformanceBase, StoreFactory
from plait.testing._transcript import appended, new_row, users

__all__ = ["KIT_KEY", "EncryptionConformance", "open_encrypted_store"]

KIT_KEY = "a2l0LWtleS1mb3ItcGxhaXQtY29uZm9ybWFuY2Utb2s="
"""The master key the kit's encrypted stores are opened with (a test key, public)."""


def open_encrypted_store(target: str) -> Store:
    """Open ``target`` as plait's ``open_store`` does, encrypted with :data:`KIT_KEY`.

    The opener of an encrypted :class:`~plait.testing.StoreFactory` (named by import
    path, so that the kit's other processes open the store with the same key).
    """
    return open_store(target, encryption_key=KIT_KEY)


class EncryptionConformance(ConformanceBase):
    """An encrypted store: a missing or wrong key refused, rotation, keys kept for forks, search.

    Runs where the factory opens an encrypted store (``encrypted = True`` on it, and
    :meth:`open_with` opening its target with another key or none); skips otherwise.
    """

    factory: ClassVar[StoreFactory]

    @pytest.fixture
    def shared_store(self, store: Store) -> Iterator[Store]:
        """The test's encrypted store, where a second open of its target sees it."""
        if not getattr(self.factory, "encrypted", False):
            pytest.skip("the factory opens no encrypted store")
        if not self.factory.shared:
            pytest.skip("the store is private to its open: it cannot be opened again")
        yield store

    def open_with(self, target: str, key: str | None) -> Any:
        """Open ``target`` with ``key`` (None: no key at all)."""
        return open_store(target, encryption_key=key)

    def test_a_store_opened_without_its_key_or_with_another_is_refused(
        self, shared_store: Store, store_target: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No key: EncryptionKeyMissingError; another key: EncryptionKeyMismatchError."""
        monkeypatch.delenv("PLAIT_ENCRYPTION_KEY", raising=False)
        row = shared_store.create(appended(new_row("a"), users(0, 2)), users(0, 2))
        with pytest.raises(EncryptionKeyMissingError):
            self.open_with(store_target, None)
        with pytest.raises(EncryptionKeyMismatchError):
            self.open_with(store_target, new_encryption_key())
        with pytest.raises(InvalidArgumentError):
            self.open_with(store_target, "not a key")
        # Nothing was written by the refused opens: the session reads as it was.
        again = self.open_with(store_target, KIT_KEY)
        try:
            got = again.get("a")
            assert got is not None and got.version == row.version
            assert [r.text for r in again.read(got, 0, 2)] == ["m0", "m1"]
        finally:
            again.close()

    def test_everything_a_session_holds_reads_back_after_reopening(
        self, shared_store: Store, store_target: str
    ) -> None:
        """Records, meta, title, settings and scratchpad history read back through the key."""
        row = shared_store.create(new_row("a"))
        record = UserRecord(seq=0, content="secret text", meta={"k": "secret meta"})
        updated = appended(
            replace(row, title="secret title", metadata={"s": "secret setting"}),
            [record],
        )
        entry = ScratchpadEntry(1, {"note": "secret pad"}, "agent", "secret reason", {}, 0)
        shared_store.write(
            row,
            replace(updated, scratchpad={"note": "secret pad"}, scratchpad_version=1),
            [record],
            entry,
        )
        again = self.open_with(store_target, KIT_KEY)
        try:
            got = again.get("a")
            assert got is not None
            assert got.title == "secret title" and got.metadata == {"s": "secret setting"}
            assert got.scratchpad == {"note": "secret pad"}
            [read] = again.read(got, 0, 1)
            assert read.text == "secret text" and dict(read.meta) == {"k": "secret meta"}
            [version] = again.scratchpad_history("a")
            assert version.reason == "secret reason"
            assert version.scratchpad == {"note": "secret pad"}
        finally:
            again.close()

    def test_a_fork_reads_what_it_shares_after_its_source_is_erased(self, store: Store) -> None:
        """The key of rows a live fork shares is kept through the erase of their writer."""
        if not getattr(self.factory, "encrypted", False):
            pytest.skip("the factory opens no encrypted store")
        base = store.create(appended(new_row("a"), users(0, 4)), users(0, 4))
        child = store.create(
            new_row("b", layout=branch(base.layout, base.pk, 2, 2), parent_ids=("a",))
        )
        child = store.append(child, users(2, 1, "own"))
        store.erase("a")
        assert store.get("a") is None
        assert [r.text for r in store.read(child, 0, 3)] == ["m0", "m1", "own2"]
        store.delete("b")
        assert store.get("b") is None

    def test_rotating_the_master_key_keeps_every_session_readable(
        self, shared_store: Store, store_target: str
    ) -> None:
        """After a rotation the store opens with the new key only, and reads the same."""
        rotate = getattr(shared_store, "rotate_key", None)
        if rotate is None:
            pytest.skip(f"{type(shared_store).__name__} offers no rotate_key")
        a = shared_store.create(appended(new_row("a"), users(0, 3)), users(0, 3))
        shared_store.create(new_row("b", layout=branch(a.layout, a.pk, 2, 2), parent_ids=("a",)))
        new = new_encryption_key()
        assert rotate(new) == 2
        with pytest.raises(EncryptionKeyMismatchError):
            self.open_with(store_target, KIT_KEY)
        again = self.open_with(store_target, new)
        try:
            got = again.get("b")
            assert got is not None
            assert [r.text for r in again.read(got, 0, 2)] == ["m0", "m1"]
            again.create(appended(new_row("c"), users(0, 1, "after")), users(0, 1, "after"))
        finally:
            again.close()
        # The store kept the keys it held: it still reads and writes.
        assert [r.text for r in shared_store.read(a, 0, 3)] == ["m0", "m1", "m2"]

    def test_search_finds_through_the_key_after_an_erase_a_rotation_and_a_reopening(
        self, shared_store: Store, store_target: str
    ) -> None:
        """The index of hashed terms stays true to the transcripts it is read with.

        An erased session's words find nothing; after a rotation (its search key
        re-wrapped, not replaced) another open of the store finds what was indexed
        before, and each open finds what the other wrote since.
        """
        self.needs(shared_store, SearchStore, "full-text search")

        def said(store: Store, sid: str, text: str) -> None:
            record = UserRecord(seq=0, content=text)
            store.create(appended(new_row(sid), [record]), [record])

        def found(store: Store, query: str) -> set[str]:
            return {h.session_id for h in cast(SearchStore, store).search(query)}

        said(shared_store, "gone", "a wombat secretword")
        said(shared_store, "kept", "a wombat burrow")
        assert found(shared_store, "wombat") == {"gone", "kept"}
        shared_store.erase("gone")
        assert found(shared_store, "wombat") == {"kept"}
        assert found(shared_store, "secretword") == set()
        key = KIT_KEY
        rotate = getattr(shared_store, "rotate_key", None)
        if rotate is not None:
            key = new_encryption_key()
            rotate(key)
        again = self.open_with(store_target, key)
        try:
            assert found(again, '"wombat burrow"') == {"kept"}
            said(again, "after", "a wombat later")
            [hit] = cast(SearchStore, again).search("later")
            assert hit.session_id == "after" and f"{MARK_START}later{MARK_END}" in hit.snippet
        finally:
            again.close()
        said(shared_store, "last", "the last wombat")
        assert found(shared_store, "wombat") == {"kept", "after", "last"}

    def test_checkpoint_objects_round_trip_sealed(self, store: Store) -> None:
        """An encrypted store's object parts read back byte for byte."""
        if not getattr(self.factory, "encrypted", False):
            pytest.skip("the factory opens no encrypted store")
        self.needs(store, ObjectStore, "object space")
        objects: ObjectStore = store  # type: ignore[assignment]
        import hashlib

        data = b"secret object " * 1000
        digest = hashlib.sha256(data).hexdigest()
        objects.object_put(digest, [data[:7000], data[7000:]], 1)
        assert objects.object_part(digest, 0) == data[:7000]
        assert objects.object_part(digest, 1) == data[7000:]

    def test_a_store_with_plain_sessions_takes_no_key(
        self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A key given to a store that already holds plain sessions is refused."""
        if not getattr(self.factory, "encrypted", False) or not self.factory.shared:
            pytest.skip("the factory opens no shared encrypted store")
        monkeypatch.delenv("PLAIT_ENCRYPTION_KEY", raising=False)
        target = self.factory.new_target(tmp_path / "plain")
        try:
            plain = self.open_with(target, None)
            try:
                plain.create(new_row("p"))
            finally:
                plain.close()
            with pytest.raises(EncryptionKeyError):
                self.open_with(target, KIT_KEY)
        finally:
            self.factory.dispose(target)
