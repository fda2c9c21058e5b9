"""Conformance of session ids: any id :func:`plait._ids.is_session_id` accepts is a key.

A store keeps an id as an opaque string: compared exactly (no case folding, no
Unicode normalization, no trimming), never split on ``/`` or ``:``, never read as
a path, and of any length up to 200 characters. The writer locks of such ids are
checked with the other lock tests (:class:`~plait.testing.WriterLockConformance`).
"""

from __future__ import annotations

from typing import Final

from plait._ids import is_session_id
from plait.store.base import Store
from plait.testing._factory import ConformanceBase
from plait.testing._transcript import appended, new_row, users

__all__ = ["KEY_IDS", "SessionIdConformance"]

KEY_IDS: Final = (
    "user/123",
    "user",
    "tenant:acme:chat-9",
    "../../etc/passwd",
    "a/b/../c",
    "a\\b",
    "User/123",
    "caf\u00e9",
    "cafe\u0301",
    "über/日本 ✓",
    "100% sure?#frag",
    "x" * 200,
    "\U0001f600" * 200,
)
"""Ids every store keeps apart: slashes, dots, case and Unicode forms that differ."""


class SessionIdConformance(ConformanceBase):
    """Session ids are keys: any valid id round-trips, exactly, through every verb."""

    def test_every_valid_id_is_a_key(self, store: Store) -> None:
        """Each id creates, reads, appends, lists, parents and deletes its own session."""
        assert all(is_session_id(sid) for sid in KEY_IDS)
        for i, sid in enumerate(KEY_IDS):
            recs = users(0, 1, tag=f"{i}:")
            store.create(appended(new_row(sid), recs), recs)
        for i, sid in enumerate(KEY_IDS):
            row = store.get(sid)
            assert row is not None and row.id == sid, sid
            assert store.read(row, 0, 1)[0].content == f"{i}:0"  # type: ignore[attr-defined]
            row = store.append(row, users(1, 1, tag=sid))
            assert store.stamp(sid) is not None
        assert {r.id for r in store.recent("/ws", len(KEY_IDS) + 1)} == set(KEY_IDS)
        child = new_row("child", parent_ids=("user/123", "../../etc/passwd"))
        store.create(child)
        assert store.children("user/123") == ["child"]
        assert store.children("user") == [] and store.children("../../etc/passwd") == ["child"]
        store.delete("user/123")
        assert store.get("user/123") is None
        assert store.get("user") is not None and store.get("User/123") is not None

    def test_ids_are_compared_exactly(self, store: Store) -> None:
        """No trimming, case folding or normalization: near-equal ids are other sessions."""
        store.create(new_row("caf\u00e9"))
        for other in ("cafe\u0301", "CAF\u00c9", "caf\u00e9/", "caf"):
            assert store.get(other) is None, other
            assert store.stamp(other) is None, other
        store.create(new_row("a/b"))
        for other in ("a", "b", "a%2Fb", "a/b/"):
            assert store.get(other) is None, other

    def test_an_id_never_meets_a_deleted_session(self, store: Store) -> None:
        """A deleted session gives up its id for good: no valid id names what it left.

        Stores that keep a deleted row (for the branches still reading its records)
        must rename it to something no session id can be (``/7`` and ``..7`` can).
        """
        gone = store.create(new_row("gone"))
        store.create(new_row("child", parent_ids=("gone",)))
        store.delete("gone")
        for sid in (f"/{gone.pk}", f"\\{gone.pk}", str(gone.pk), f"..{gone.pk}", "gone"):
            store.create(new_row(sid))
            assert store.get(sid) is not None
        # ...and an id chosen first never stops a later delete.
        later = store.create(new_row("later"))
        for sid in (f"/{later.pk}", f"\\{later.pk}", f"..{later.pk}"):
            store.create(new_row(sid))
        store.delete("later")
        assert store.get("later") is None and store.get(f"/{later.pk}") is not None
