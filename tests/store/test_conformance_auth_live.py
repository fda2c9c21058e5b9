"""Store conformance for issue 7: durable bearer sessions and live clients.

Talks to the Store protocol directly, like ``test_conformance.py``, so every store
(sqlite, memory, postgres) keeps the same semantics.
"""

from __future__ import annotations

import pytest

from plait.errors import ControllerConflictError, SessionNotFoundError
from plait.store import SessionRow, Store
from plait.store.base import BearerRow, LiveClientRow


def bearer(h: str = "a" * 64, **kw: object) -> BearerRow:
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


def test_bearer_insert_get_round_trip_and_refuse_a_taken_hash(store: Store) -> None:
    row = bearer()
    assert store.bearer_insert(row) is True
    assert store.bearer_get(row.token_hash) == row
    assert store.bearer_insert(bearer(principal="someone else")) is False
    assert store.bearer_get(row.token_hash) == row
    assert store.bearer_get("b" * 64) is None


def test_bearer_touch_moves_last_seen_never_expiry_and_not_when_expired(store: Store) -> None:
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


def test_bearer_expire_and_purge(store: Store) -> None:
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


def live(sid: str, cid: str, mode: str = "observer", t: int = 1, **meta: object) -> LiveClientRow:
    return LiveClientRow(sid, cid, mode, t, t, dict(meta))  # type: ignore[arg-type]


def test_live_attach_list_heartbeat_release(store: Store) -> None:
    store.create(SessionRow(id="s", workspace="/ws"))
    row, demoted = store.live_attach(live("s", "portal", t=10, ui="web"), takeover=False)
    assert demoted is None
    assert (row.session_id, row.client_id, row.mode, row.attached_at_us) == (
        "s", "portal", "observer", 10)
    assert row.metadata == {"ui": "web"}
    store.live_attach(live("s", "tui", "controller", t=20), takeover=False)
    assert [(c.client_id, c.mode) for c in store.live_clients("s")] == [
        ("portal", "observer"), ("tui", "controller")]
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


def test_one_controller_and_takeover_demotes(store: Store) -> None:
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


def test_live_state_is_per_session_and_needs_a_live_session(store: Store) -> None:
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


def _live_rows(store: Store) -> int:
    if hasattr(store, "_db"):
        return int(store._db.execute("SELECT count(*) FROM live_clients").fetchone()[0])
    with store._conn("count") as conn:  # type: ignore[attr-defined]
        return int(conn.execute("SELECT count(*) FROM live_clients").fetchone()[0])


def test_deleting_a_session_drops_its_live_clients(store: Store) -> None:
    store.create(SessionRow(id="a", workspace="/ws"))
    store.create(SessionRow(id="b", workspace="/ws"))
    store.live_attach(live("a", "x", "controller"), takeover=False)
    store.live_attach(live("a", "y"), takeover=False)
    store.live_attach(live("b", "x"), takeover=False)
    assert _live_rows(store) == 3
    store.delete("a")
    assert _live_rows(store) == 1
