"""The store conformance suite: every store plait ships must pass all of it.

It talks to the Store protocol directly, below the Session API, so a new store
is done when this file passes against it (add it to ``STORE_KINDS`` in conftest).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from plait.context import Tally
from plait.errors import (
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
)
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
    assert stored.pk > 0 and stored.row_version == 1 and stored.version == 1 + 3
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


def test_append_grows_the_head_and_the_version(store: Store) -> None:
    row = store.create(new_row("s"))
    recs = users(0, 2)
    row2 = store.append(row, recs)
    assert row2.version > row.version
    assert row2.layout.end_seq == 2 and row2.layout.end_msgs == 2
    ev: list[Record] = [EventRecord(seq=2, name="e", data={"x": 1})]
    row3 = store.append(row2, ev)
    got = store.get("s")
    assert got is not None
    assert (got.version, got.layout) == (row3.version, row3.layout)
    assert got.updated_at_us >= row.updated_at_us
    assert [r.kind for r in store.read(got, 0, 3)] == ["user", "user", "event"]
    assert got.layout.end_msgs == 2
    assert store.append(got, []) == got


def test_append_is_compare_and_set_on_the_head(store: Store) -> None:
    row = store.create(new_row("s"))
    store.append(row, users(0, 1))
    with pytest.raises(StaleSessionError) as info:
        store.append(row, users(0, 1, "x"))
    assert info.value.expected == row.version and info.value.actual == row.version + 1
    fresh = store.get("s")
    assert fresh is not None
    assert [r.text for r in store.read(fresh, 0, fresh.layout.end_seq)] == ["m0"]


def test_append_must_start_at_the_head(store: Store) -> None:
    from plait.errors import StoreError

    row = store.create(new_row("s"))
    with pytest.raises(StoreError):
        store.append(row, users(3, 1))


def test_write_updates_the_row_and_appends(store: Store) -> None:
    row = store.create(new_row("s"))
    row = store.append(row, users(0, 2))
    ev: list[Record] = [EventRecord(seq=2, name="trimmed")]
    hidden = replace(appended(row, ev), title="t", status="closed",
                     layout=replace(appended(row, ev).layout, view_start=1, view_msgs=1))
    row2 = store.write(row, hidden, ev)
    assert row2.version > row.version
    got = store.get("s")
    assert got == row2
    assert (got.title, got.status, got.layout.view_start, got.layout.length) == (
        "t", "closed", 1, 1)


def test_write_is_compare_and_set_on_row_and_head(store: Store) -> None:
    row = store.create(new_row("s"))
    store.write(row, replace(row, title="first"))
    with pytest.raises(StaleSessionError):
        store.write(row, replace(row, title="second"))
    row = store.get("s")
    assert row is not None and row.title == "first"
    store.append(row, users(0, 1))  # the head moved: a row write based on `row` is stale
    with pytest.raises(StaleSessionError):
        store.write(row, replace(row, title="third"))
    got = store.get("s")
    assert got is not None and got.title == "first" and got.layout.end_seq == 1


def test_writes_to_a_deleted_session(store: Store) -> None:
    row = store.create(new_row("s"))
    store.delete("s")
    with pytest.raises(SessionNotFoundError):
        store.write(row, replace(row, title="x"))
    with pytest.raises(SessionNotFoundError):
        store.append(row, users(0, 1))


def test_read_spans_inherited_segments(store: Store) -> None:
    base = store.create(appended(new_row("a"), users(0, 5)), users(0, 5))
    child_layout = branch(base.layout, base.pk, 3, 3)
    child = store.create(new_row("b", layout=child_layout, parent_ids=("a",)))
    child = store.append(child, users(3, 2, "b"))
    assert [r.text for r in store.read(child, 0, 5)] == ["m0", "m1", "m2", "b3", "b4"]
    assert [r.text for r in store.read(child, 2, 4)] == ["m2", "b3"]
    assert store.read(child, 5, 9) == []
    # The base continues independently.
    base = store.append(base, users(5, 1))
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
    store.append(rows[1], users(0, 1))
    assert [r.id for r in store.recent(None, 3)] == ["s1", "s0", "s4"]
    s1 = store.get("s1")
    assert s1 is not None
    store.append(s1, users(1, 1))  # already the most recent: still first, newer activity
    listed = store.recent(None, 10)
    assert listed[0].id == "s1" and listed[0].updated_at_us >= s1.updated_at_us
    assert [r.updated_at_us for r in listed] == sorted(
        (r.updated_at_us for r in listed), reverse=True)
    assert [r.id for r in store.recent("/a", 10)] == ["s1", "s3"]
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
    row = store.write(row, replace(row, title="x"))
    second = store.stamp("s")
    assert second != first
    store.append(row, users(0, 1))
    assert store.stamp("s") not in {first, second}
    assert store.stamp("missing") is None


def test_scratchpad_history(store: Store) -> None:
    row = store.create(new_row("s"))
    e1 = ScratchpadEntry(1, {"a": 1}, "agent", "why", {"m": True})
    row = store.write(row, replace(row, scratchpad={"a": 1}, scratchpad_version=1), (), e1)
    e2 = ScratchpadEntry(2, None)
    store.write(row, replace(row, scratchpad=None, scratchpad_version=2), (), e2)
    assert store.get("s").scratchpad_version == 2  # type: ignore[union-attr]
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


def test_text_that_is_not_unicode_is_bad_input_and_writes_nothing(store: Store) -> None:
    from plait.errors import InvalidMessageError

    row = store.create(new_row("s"))
    bad: list[Record] = [UserRecord(seq=0, content="lone \ud800 surrogate")]
    with pytest.raises(InvalidMessageError):
        store.append(row, bad)
    with pytest.raises(InvalidMessageError):
        store.create(appended(new_row("t"), bad), bad)
    with pytest.raises(InvalidMessageError):
        store.write(row, replace(row, title="bad \udfff"))
    got = store.get("s")
    assert got is not None and got.layout.end_seq == 0 and got.title is None
    assert store.get("t") is None
    store.append(got, users(0, 1))  # and the store carries on


def test_a_branch_of_a_collected_session_is_refused(store: Store) -> None:
    base = store.create(appended(new_row("a"), users(0, 3)), users(0, 3))
    planned = new_row("b", layout=branch(base.layout, base.pk, 3, 3), parent_ids=("a",))
    store.delete("a")  # nobody shares its rows: they are collected at once
    with pytest.raises(SessionNotFoundError):
        store.create(planned)
    assert store.get("b") is None


# -- counted once (issue 4): token counts and running tallies ---------------------------


def tallied(start: int, n: int) -> list[tuple[int, Tally]]:
    """Counts and running tallies for ``n`` one-token user records from ``start`` on."""
    return [
        (1, Tally(tokens=(start + i + 1, 0, 0), items=(start + i + 1, 0, 0))) for i in range(n)
    ]


def test_counts_and_tallies_round_trip(store: Store) -> None:
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


def test_counting_is_compare_and_set_on_the_counted_prefix(store: Store) -> None:
    row = store.create(appended(new_row("a"), users(0, 4)), users(0, 4))
    assert store.set_tallies(row, 0, tallied(0, 2))
    # Another writer counted [1, 2) first: the whole batch is refused, nothing written.
    assert not store.set_tallies(row, 1, tallied(1, 3))
    assert store.counted_end(row) == 2
    assert [r.tokens for r in store.read(row, 0, 4)] == [1, 1, None, None]
    with pytest.raises(StoreError):
        store.set_tallies(row, 3, tallied(3, 2))  # position 4 is not in the layout


def test_tallies_of_shared_rows_serve_every_branch(store: Store) -> None:
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
