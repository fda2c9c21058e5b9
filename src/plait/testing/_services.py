"""Conformance of the service stores: token tallies, durable bearer sessions, live clients."""

from __future__ import annotations

import pytest

from plait.errors import ControllerConflictError, SessionNotFoundError, StoreError
from plait.layout import branch
from plait.records import JSONValue
from plait.store import TallyBatches
from plait.store.base import (
    BearerRow,
    BearerStore,
    LiveClientRow,
    LiveClientStore,
    SessionRow,
    Store,
    TallyStore,
)
from plait.testing._factory import ConformanceBase
from plait.testing._transcript import appended, new_row, tallied, users

__all__ = ["BearerConformance", "LiveClientConformance", "TallyConformance"]


def bearer(h: str = "a" * 64, **kw: object) -> BearerRow:
    """A durable bearer session row (hash ``h``), with fields overridden by ``kw``."""
    base: dict[str, object] = {
        "token_hash": h,
        "principal": "user_123",
        "scopes": ("read", "write"),
        "attributes": {"role": "operator", "tenant": "acme"},
        "created_at_us": 1_000,
        "last_seen_at_us": 1_000,
        "expires_at_us": 10_000,
    }
    base.update(kw)
    return BearerRow(**base)  # type: ignore[arg-type]


def live(
    sid: str, cid: str, mode: str = "observer", t: int = 1, **meta: JSONValue
) -> LiveClientRow:
    """A live client row attaching at time ``t``."""
    return LiveClientRow(sid, cid, mode, t, t, dict(meta))


class TallyConformance(ConformanceBase):
    """The :class:`~plait.store.base.TallyStore` protocol: counted once, stored beside rows."""

    def test_counts_and_tallies_round_trip(self, store: Store) -> None:
        """Counts and tallies round trip."""
        self.needs(store, TallyStore, "token tallies")
        row = store.create(appended(new_row("a"), users(0, 4)), users(0, 4))
        assert store.counted_end(row) == 0
        assert store.tallies(row, [0, 3]) == {}
        assert store.set_tallies(row, 0, tallied(0, 3))
        assert store.counted_end(row) == 3
        assert [r.tokens for r in store.read(row, 0, 4)] == [1, 1, 1, None]
        assert store.tallies(row, [2, 3, 9, -1]) == {2: tallied(0, 3)[2][1]}
        # Counting resumes at the end of the counted prefix; the head and version do not move.
        before = store.get("a")
        assert store.set_tallies(row, 3, tallied(3, 1))
        assert store.counted_end(row) == 4
        after = store.get("a")
        assert before is not None and after is not None and after.version == before.version
        assert store.set_tallies(row, 4, [])

    def test_counting_is_compare_and_set_on_the_counted_prefix(self, store: Store) -> None:
        """Counting is compare and set on the counted prefix."""
        self.needs(store, TallyStore, "token tallies")
        row = store.create(appended(new_row("a"), users(0, 4)), users(0, 4))
        assert store.set_tallies(row, 0, tallied(0, 2))
        # Another writer counted [1, 2) first: the whole batch is refused, nothing written.
        assert not store.set_tallies(row, 1, tallied(1, 3))
        assert store.counted_end(row) == 2
        assert [r.tokens for r in store.read(row, 0, 4)] == [1, 1, None, None]
        with pytest.raises(StoreError):
            store.set_tallies(row, 3, tallied(3, 2))  # position 4 is not in the layout

    def test_tallies_of_shared_rows_serve_every_branch(self, store: Store) -> None:
        """Tallies of shared rows serve every branch."""
        self.needs(store, TallyStore, "token tallies")
        base = store.create(appended(new_row("a"), users(0, 5)), users(0, 5))
        child = store.create(
            new_row("b", layout=branch(base.layout, base.pk, 3, 3), parent_ids=("a",))
        )
        child = store.append(child, users(3, 2, "b"))
        # The branch counts the rows it inherits and its own in one batch.
        assert store.set_tallies(child, 0, tallied(0, 5))
        assert store.counted_end(child) == 5
        # The shared rows are counted for the base too; its own rows 3 and 4 are not.
        assert store.counted_end(base) == 3
        assert store.tallies(base, [2]) == store.tallies(child, [2])
        assert store.tallies(base, [3]) == {}
        assert store.set_tallies(base, 3, tallied(3, 2))
        assert [r.tokens for r in store.read(base, 0, 5)] == [1] * 5

    def test_batched_ends_and_tallies_are_the_rows_own(self, store: Store) -> None:
        """A page's counted ends and tallies, asked at once, are what each row answers."""
        self.needs(store, TallyBatches, "batched tally reads")
        assert isinstance(store, TallyBatches)  # for the type checker: needs() skipped otherwise
        batches: TallyBatches = store
        base = store.create(appended(new_row("a"), users(0, 5)), users(0, 5))
        child = store.create(
            new_row("b", layout=branch(base.layout, base.pk, 3, 3), parent_ids=("a",))
        )
        child = store.append(child, users(3, 2, "b"))
        empty = store.create(new_row("c"))
        never = store.create(appended(new_row("d"), users(0, 2)), users(0, 2))
        assert store.set_tallies(child, 0, tallied(0, 4))  # shared rows and one of its own
        rows = [r for r in (store.get(i) for i in ("a", "b", "c", "d")) if r is not None]
        assert batches.counted_ends(rows) == [store.counted_end(r) for r in rows] == [3, 4, 0, 0]
        wanted = [(r, [0, 2, 3, -1, 99]) for r in rows]
        assert batches.tallies_at(wanted) == [store.tallies(r, p) for r, p in wanted]
        assert batches.counted_ends([]) == [] and batches.tallies_at([]) == []
        assert empty.layout.length == 0 and never.layout.length == 2


class BearerConformance(ConformanceBase):
    """The :class:`~plait.store.base.BearerStore` protocol: durable bearer sessions."""

    def test_bearer_insert_get_round_trip_and_refuse_a_taken_hash(self, store: Store) -> None:
        """Bearer insert get round trip and refuse a taken hash."""
        self.needs(store, BearerStore, "durable bearer sessions")
        row = bearer()
        assert store.bearer_insert(row) is True
        assert store.bearer_get(row.token_hash) == row
        assert store.bearer_insert(bearer(principal="someone else")) is False
        assert store.bearer_get(row.token_hash) == row
        assert store.bearer_get("b" * 64) is None

    def test_bearer_touch_moves_last_seen_never_expiry_and_not_when_expired(
        self, store: Store
    ) -> None:
        """Bearer touch moves last seen never expiry and not when expired."""
        self.needs(store, BearerStore, "durable bearer sessions")
        store.bearer_insert(bearer())
        touched = store.bearer_touch("a" * 64, 5_000)
        assert touched is not None
        assert (touched.last_seen_at_us, touched.expires_at_us) == (5_000, 10_000)
        # Never backwards.
        again = store.bearer_touch("a" * 64, 4_000)
        assert again is not None and again.last_seen_at_us == 5_000
        # At or after expiry: not touched, not extended.
        assert store.bearer_touch("a" * 64, 10_000) is None
        assert store.bearer_touch("a" * 64, 20_000) is None
        got = store.bearer_get("a" * 64)
        assert got is not None and (got.last_seen_at_us, got.expires_at_us) == (5_000, 10_000)
        assert store.bearer_touch("c" * 64, 5_000) is None

    def test_bearer_expire_and_purge(self, store: Store) -> None:
        """Bearer expire and purge."""
        self.needs(store, BearerStore, "durable bearer sessions")
        store.bearer_insert(bearer())
        store.bearer_insert(bearer("b" * 64, expires_at_us=50_000))
        assert store.bearer_expire("a" * 64, 2_000) is True
        assert store.bearer_expire("a" * 64, 3_000) is False  # already expired
        assert store.bearer_expire("z" * 64, 3_000) is False  # unknown
        got = store.bearer_get("a" * 64)
        assert got is not None and got.expires_at_us == 2_000
        assert store.bearer_touch("a" * 64, 2_500) is None
        assert store.bearer_purge(2_001) == 1
        assert store.bearer_get("a" * 64) is None
        assert store.bearer_get("b" * 64) is not None


class LiveClientConformance(ConformanceBase):
    """The :class:`~plait.store.base.LiveClientStore` protocol: observers, one controller."""

    def test_live_attach_list_heartbeat_release(self, store: Store) -> None:
        """Live attach list heartbeat release."""
        self.needs(store, LiveClientStore, "live clients")
        store.create(SessionRow(id="s", workspace="/ws"))
        row, demoted = store.live_attach(live("s", "portal", t=10, ui="web"), takeover=False)
        assert demoted is None
        assert (row.session_id, row.client_id, row.mode, row.attached_at_us) == (
            "s",
            "portal",
            "observer",
            10,
        )
        assert row.metadata == {"ui": "web"}
        store.live_attach(live("s", "tui", "controller", t=20), takeover=False)
        assert [(c.client_id, c.mode) for c in store.live_clients("s")] == [
            ("portal", "observer"),
            ("tui", "controller"),
        ]
        beat = store.live_heartbeat("s", "portal", 30)
        assert beat is not None and beat.last_seen_at_us == 30 and beat.attached_at_us == 10
        assert beat.metadata == {"ui": "web"}  # kept when none is given
        beat = store.live_heartbeat("s", "portal", 25, {"ui": "web2"})
        assert beat is not None and beat.last_seen_at_us == 30 and beat.metadata == {"ui": "web2"}
        assert store.live_heartbeat("s", "ghost", 30) is None
        gone = store.live_release("s", "tui")
        assert gone is not None and gone.mode == "controller"
        assert store.live_release("s", "tui") is None
        assert [c.client_id for c in store.live_clients("s")] == ["portal"]
        # Re-attaching keeps attached_at and takes the new mode and metadata.
        again, _ = store.live_attach(live("s", "portal", "controller", t=40), takeover=False)
        assert (again.attached_at_us, again.last_seen_at_us, again.mode) == (10, 40, "controller")
        assert again.metadata == {}

    def test_one_controller_and_takeover_demotes(self, store: Store) -> None:
        """One controller and takeover demotes."""
        self.needs(store, LiveClientStore, "live clients")
        store.create(SessionRow(id="s", workspace="/ws"))
        store.live_attach(live("s", "tui", "controller"), takeover=False)
        with pytest.raises(ControllerConflictError) as info:
            store.live_attach(live("s", "mobile", "controller", t=2), takeover=False)
        assert info.value.controller_id == "tui"
        assert [c.client_id for c in store.live_clients("s")] == ["tui"]  # nothing written
        row, demoted = store.live_attach(live("s", "mobile", "controller", t=3), takeover=True)
        assert demoted == "tui" and row.mode == "controller"
        modes = {c.client_id: c.mode for c in store.live_clients("s")}
        assert modes == {"tui": "observer", "mobile": "controller"}
        # The controller re-attaching as controller is no conflict; takeover of nobody demotes none.
        assert store.live_attach(live("s", "mobile", "controller", t=4), takeover=False)[1] is None

    def test_live_state_is_per_session_and_needs_a_live_session(self, store: Store) -> None:
        """Live state is per session and needs a live session."""
        self.needs(store, LiveClientStore, "live clients")
        store.create(SessionRow(id="a", workspace="/ws"))
        store.create(SessionRow(id="b", workspace="/ws"))
        store.live_attach(live("a", "x", "controller"), takeover=False)
        store.live_attach(live("b", "x", "controller"), takeover=False)
        assert len(store.live_clients("a")) == len(store.live_clients("b")) == 1
        with pytest.raises(SessionNotFoundError):
            store.live_attach(live("nope", "x"), takeover=False)
        with pytest.raises(SessionNotFoundError):
            store.live_heartbeat("nope", "x", 1)
        assert store.live_clients("nope") == []
        # A deleted and re-created id starts with no clients (keyed by the row, not the id).
        store.delete("a")
        assert store.live_clients("a") == []
        store.create(SessionRow(id="a", workspace="/ws"))
        assert store.live_clients("a") == []

    def test_deleting_a_session_detaches_its_clients(self, store: Store) -> None:
        """A deleted session's clients are gone with it, and no other session's are."""
        self.needs(store, LiveClientStore, "live clients")
        store.create(SessionRow(id="a", workspace="/ws"))
        store.create(SessionRow(id="b", workspace="/ws"))
        store.live_attach(live("a", "x", "controller"), takeover=False)
        store.live_attach(live("a", "y"), takeover=False)
        store.live_attach(live("b", "x"), takeover=False)
        store.delete("a")
        assert store.live_clients("a") == []
        assert [c.client_id for c in store.live_clients("b")] == ["x"]
        with pytest.raises(SessionNotFoundError):
            store.live_release("a", "x")
