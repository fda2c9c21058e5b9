"""The store conformance suite: every store plait ships must pass all of it.

It talks to the Store protocol directly, below the Session API, so a new store
is done when this file passes against it (add it to ``STORE_KINDS`` in conftest).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from plait.errors import SessionExistsError, SessionNotFoundError, StaleSessionError
from plait.layout import branch
from plait.records import EventRecord, Record, UserRecord
from plait.store import SessionRow, Store
from plait.store.base import ScratchpadEntry


def users(start: int, n: int, tag: str = "m") -> list[Record]:
    return [UserRecord(seq=start + i, content=f"{tag}{start + i}") for i in range(n)]


def appended(row: SessionRow, records: list[Record]) -> SessionRow:
    msgs = sum(1 for r in records if r.kind != "event")
    return replace(row, layout=row.layout.appended(len(records), msgs))


def new_row(sid: str, ws: str = "/ws", **kw: object) -> SessionRow:
    return SessionRow(id=sid, workspace=ws, **kw)  # type: ignore[arg-type]


def test_store_satisfies_the_protocol(store: Store) -> None:
    assert isinstance(store, Store)
    assert isinstance(store.location, str)


def test_create_and_get_round_trip(store: Store) -> None:
    recs = users(0, 3)
    row = appended(new_row("s1", title="t", metadata={"settings": {"a": 1}},
                           scratchpad={"k": [1]}, scratchpad_version=1), recs)
    stored = store.create(row, recs)
    assert stored.pk > 0 and stored.version == 1
    assert stored.created_at_us > 0 and stored.updated_at_us == stored.created_at_us
    got = store.get("s1")
    assert got == stored
    assert (got.title, got.workspace, got.metadata, got.scratchpad) == (
        "t", "/ws", {"settings": {"a": 1}}, {"k": [1]})
    assert got.layout.end_seq == 3 and got.layout.length == 3
    assert store.read(got, 0, 3) == recs
    assert store.get("nope") is None


def test_create_refuses_a_taken_id_and_writes_nothing(store: Store) -> None:
    store.create(new_row("s1"))
    recs = users(0, 2)
    with pytest.raises(SessionExistsError):
        store.create(appended(new_row("s1"), recs), recs)
    row = store.get("s1")
    assert row is not None and row.layout.end_seq == 0


def test_write_appends_and_bumps_version(store: Store) -> None:
    row = store.create(new_row("s"))
    recs = users(0, 2)
    row2 = store.write(row, appended(row, recs), recs)
    assert row2.version == row.version + 1
    assert row2.updated_at_us > row.updated_at_us
    ev: list[Record] = [EventRecord(seq=2, name="e", data={"x": 1})]
    row3 = store.write(row2, appended(row2, ev), ev)
    assert store.get("s") == row3
    assert [r.kind for r in store.read(row3, 0, 3)] == ["user", "user", "event"]
    assert row3.layout.end_msgs == 2


def test_write_is_compare_and_set(store: Store) -> None:
    row = store.create(new_row("s"))
    recs = users(0, 1)
    store.write(row, appended(row, recs), recs)
    with pytest.raises(StaleSessionError) as info:
        store.write(row, appended(row, users(0, 1, "x")), users(0, 1, "x"))
    assert info.value.expected == 1 and info.value.actual == 2
    fresh = store.get("s")
    assert fresh is not None
    assert [r.text for r in store.read(fresh, 0, fresh.layout.end_seq)] == ["m0"]


def test_write_to_a_deleted_session(store: Store) -> None:
    row = store.create(new_row("s"))
    store.delete("s")
    with pytest.raises(SessionNotFoundError):
        store.write(row, replace(row, title="x"))


def test_read_spans_inherited_segments(store: Store) -> None:
    base = store.create(appended(new_row("a"), users(0, 5)), users(0, 5))
    child_layout = branch(base.layout, base.pk, 3, 3)
    child = store.create(new_row("b", layout=child_layout, parent_ids=("a",)))
    own = users(3, 2, "b")
    child = store.write(child, appended(child, own), own)
    assert [r.text for r in store.read(child, 0, 5)] == ["m0", "m1", "m2", "b3", "b4"]
    assert [r.text for r in store.read(child, 2, 4)] == ["m2", "b3"]
    assert store.read(child, 5, 9) == []
    # The base continues independently.
    more = users(5, 1)
    base = store.write(base, appended(base, more), more)
    assert [r.text for r in store.read(base, 3, 6)] == ["m3", "m4", "m5"]
    # Shared rows are the same rows.
    assert store.read(child, 0, 3) == store.read(base, 0, 3)


def test_probe_reports_message_counts(store: Store) -> None:
    recs: list[Record] = [UserRecord(seq=0, content="a"), EventRecord(seq=1, name="e"),
                          UserRecord(seq=2, content="b")]
    row = store.create(appended(new_row("s"), recs), recs)
    assert [store.probe(row, i) for i in range(3)] == [(0, True), (1, False), (1, True)]


def test_recent_orders_filters_and_limits(store: Store) -> None:
    rows = [store.create(new_row(f"s{i}", ws="/a" if i % 2 else "/b")) for i in range(5)]
    touched = store.write(rows[0], replace(rows[0], title="now"))
    assert store.recent(None, 10)[0].id == touched.id
    assert [r.id for r in store.recent("/a", 10)] == ["s3", "s1"]
    assert len(store.recent(None, 2)) == 2
    store.delete("s3")
    assert [r.id for r in store.recent("/a", 10)] == ["s1"]


def test_children_are_live_sessions_naming_the_parent(store: Store) -> None:
    store.create(new_row("p"))
    store.create(new_row("q"))
    store.create(new_row("c1", parent_ids=("p",)))
    store.create(new_row("m", parent_ids=("p", "q")))
    assert store.children("p") == ["c1", "m"]
    assert store.children("q") == ["m"]
    store.delete("c1")
    assert store.children("p") == ["m"]
    assert store.children("nobody") == []


def test_delete_keeps_rows_other_layouts_read(store: Store) -> None:
    base = store.create(appended(new_row("a"), users(0, 4)), users(0, 4))
    child = store.create(new_row("b", layout=branch(base.layout, base.pk, 4, 4)))
    store.delete("a")
    assert store.get("a") is None
    assert [r.text for r in store.read(child, 0, 4)] == ["m0", "m1", "m2", "m3"]
    # The id is free again, and a new session under it has its own rows.
    again = store.create(appended(new_row("a"), users(0, 1, "new")), users(0, 1, "new"))
    assert [r.text for r in store.read(again, 0, 1)] == ["new0"]
    assert [r.text for r in store.read(child, 0, 4)] == ["m0", "m1", "m2", "m3"]
    with pytest.raises(SessionNotFoundError):
        store.delete("missing")


def test_stamp_moves_with_every_write_only(store: Store) -> None:
    row = store.create(new_row("s"))
    first = store.stamp("s")
    assert first is not None and store.stamp("s") == first
    store.read(row, 0, 0)
    assert store.stamp("s") == first
    store.write(row, replace(row, title="x"))
    assert store.stamp("s") != first
    assert store.stamp("missing") is None


def test_scratchpad_history(store: Store) -> None:
    row = store.create(new_row("s"))
    e1 = ScratchpadEntry(1, {"a": 1}, "agent", "why", {"m": True})
    row = store.write(row, replace(row, scratchpad={"a": 1}, scratchpad_version=1), (), e1)
    e2 = ScratchpadEntry(2, None)
    store.write(row, replace(row, scratchpad=None, scratchpad_version=2), (), e2)
    hist = store.scratchpad_history("s")
    assert [(h.version, h.scratchpad, h.source, h.reason, h.metadata) for h in hist] == [
        (1, {"a": 1}, "agent", "why", {"m": True}), (2, None, None, None, {})]
    assert all(h.created_at_us > 0 for h in hist)
    assert store.scratchpad_history("missing") == []


def test_unicode_and_large_payloads_round_trip(store: Store) -> None:
    text = "héllo ✓ 𝄞 \x01 " + "x" * 200_000
    recs: list[Record] = [UserRecord(seq=0, content=text, meta={"k": "✓", "n": [1, None]})]
    row = store.create(appended(new_row("s"), recs), recs)
    back = store.read(row, 0, 1)[0]
    assert back == recs[0] and back.meta == {"k": "✓", "n": [1, None]}


def test_close_is_idempotent(store: Store) -> None:
    store.close()
    store.close()
