"""The listing conformance tests: sessions listed by id prefix.

:class:`ListingConformance` checks :class:`~plait.store.base.ListingStore` on the
store itself: the rows ``recent`` lists, narrowed to ids that start with a prefix,
in the same order, whatever the ids hold (``/``, ``%``, case, characters outside
ASCII) and however they sort next to their neighbours.
"""

from __future__ import annotations

from dataclasses import replace

from plait.layout import branch
from plait.store.base import ListingStore, SessionRow, Store
from plait.testing._factory import ConformanceBase
from plait.testing._transcript import appended, new_row, users

__all__ = ["ListingConformance"]

# Neighbours of "user/" in code point order on both sides, a prefix of the prefix,
# case, escapes and characters past ASCII: none may leak into or drop out of a listing.
_IDS = (
    "user",
    "user.",
    "user/",
    "user/1",
    "user/10",
    "user/1/a",
    "user/%2F",
    "user0",
    "users/1",
    "User/1",
    "usér/1",
    "usēr/1",
    "日本/1",
    "日本/2",
    "日本語",
)


def _listed(store: ListingStore, workspace: str | None, prefix: str, limit: int) -> list[str]:
    return [r.id for r in store.recent_with_prefix(workspace, prefix, limit)]


def _expected(store: Store, workspace: str | None, prefix: str, limit: int) -> list[str]:
    every = store.recent(workspace, 1000)
    return [r.id for r in every if r.id.startswith(prefix)][:limit]


class ListingConformance(ConformanceBase):
    """The :class:`~plait.store.base.ListingStore` protocol: listings by id prefix."""

    def _made(self, store: Store) -> list[SessionRow]:
        return [
            store.create(new_row(sid, ws="/a" if i % 3 else "/b")) for i, sid in enumerate(_IDS)
        ]

    def test_a_prefix_lists_what_recent_lists_with_that_prefix(self, store: Store) -> None:
        """Exactly the ids that start with the prefix, newest first, as ``recent`` orders them."""
        self.needs(store, ListingStore, "listing by id prefix")
        listing: ListingStore = store  # type: ignore[assignment]
        rows = self._made(store)
        store.append(rows[3], users(0, 1))  # "user/1" is now the most recent
        for prefix in ("user/", "user", "user/1", "User", "us", "usé", "日本", "日本/", "u", "x"):
            for workspace in (None, "/a", "/b"):
                assert _listed(listing, workspace, prefix, 100) == _expected(
                    store, workspace, prefix, 100
                ), (prefix, workspace)
        assert _listed(listing, None, "user/", 100)[0] == "user/1"
        assert set(_listed(listing, None, "user/", 100)) == {
            "user/", "user/1", "user/10", "user/1/a", "user/%2F"
        }
        assert _listed(listing, None, "", 100) == _expected(store, None, "", 100)
        assert _listed(listing, None, "nobody", 100) == []

    def test_the_limit_keeps_the_newest(self, store: Store) -> None:
        """``limit`` keeps the most recent matches."""
        self.needs(store, ListingStore, "listing by id prefix")
        listing: ListingStore = store  # type: ignore[assignment]
        self._made(store)
        assert _listed(listing, None, "user/", 2) == _expected(store, None, "user/", 2)
        assert len(_listed(listing, None, "user/", 2)) == 2
        assert _listed(listing, None, "", 3) == _expected(store, None, "", 3)

    def test_deleted_sessions_and_hidden_heads_are_not_listed(self, store: Store) -> None:
        """A deleted id, re-created, is listed once; a hidden head not at all."""
        self.needs(store, ListingStore, "listing by id prefix")
        listing: ListingStore = store  # type: ignore[assignment]
        recs = users(0, 4)
        s = store.create(appended(new_row("k/s"), recs), recs)
        store.create(new_row("k/gone"))
        store.delete("k/gone")
        assert _listed(listing, None, "k/", 10) == ["k/s"]
        store.create(new_row("k/gone"))
        assert sorted(_listed(listing, None, "k/", 10)) == ["k/gone", "k/s"]
        head = replace(s, pk=0, layout=branch(s.layout, s.pk, 2, 2))
        store.move_head(s, head, "k/hidden")  # a rewind: the old head is hidden
        assert sorted(_listed(listing, None, "k/", 10)) == ["k/gone", "k/s"]
        assert store.get("k/hidden") is not None
