"""Conformance of the transcript store: rows, records, layouts, listing, deletion, lineage."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from plait.context import Tally
from plait.errors import (
    InvalidMessageError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
)
from plait.layout import Layout, branch
from plait.records import (
    AssistantRecord,
    EventRecord,
    Message,
    OpaqueRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)
from plait.store.base import (
    LineageStore,
    ScratchpadEntry,
    SessionRow,
    Store,
    TranscriptStore,
    ViewReader,
)
from plait.testing._factory import ConformanceBase

__all__ = [
    "LineageConformance",
    "TranscriptConformance",
    "appended",
    "new_row",
    "tallied",
    "users",
]


def users(start: int, n: int, tag: str = "m") -> list[Record]:
    """``n`` user records from position ``start`` on, with texts ``tag<seq>``."""
    return [UserRecord(seq=start + i, content=f"{tag}{start + i}") for i in range(n)]


def appended(row: SessionRow, records: list[Record]) -> SessionRow:
    """The row with these records appended to its layout (what a caller plans)."""
    msgs = sum(1 for r in records if r.kind != "event")
    return replace(row, layout=row.layout.appended(len(records), msgs))


def new_row(sid: str, ws: str = "/ws", **kw: object) -> SessionRow:
    """A new session row to create."""
    return SessionRow(id=sid, workspace=ws, **kw)  # type: ignore[arg-type]


def tallied(start: int, n: int) -> list[tuple[int, Tally]]:
    """Counts and running tallies for ``n`` one-token user records from ``start`` on."""
    return [
        (1, Tally(tokens=(start + i + 1, 0, 0, 0), items=(start + i + 1, 0, 0, 0)))
        for i in range(n)
    ]


class TranscriptConformance(ConformanceBase):
    """The :class:`~plait.store.base.TranscriptStore` protocol: what every store keeps."""

    def test_store_satisfies_the_protocol(self, store: Store) -> None:
        """The store is a TranscriptStore and names where it keeps its data."""
        assert isinstance(store, TranscriptStore)
        assert isinstance(store.location, str)

    def test_create_and_get_round_trip(self, store: Store) -> None:
        """Create and get round trip."""
        recs = users(0, 3)
        row = appended(
            new_row(
                "s1",
                title="t",
                metadata={"settings": {"a": 1}},
                scratchpad={"k": [1]},
                scratchpad_version=1,
            ),
            recs,
        )
        stored = store.create(row, recs)
        assert stored.pk > 0 and stored.row_version == 1 and stored.version == 1 + 3
        assert stored.created_at_us > 0 and stored.updated_at_us == stored.created_at_us
        got = store.get("s1")
        assert got == stored
        assert (got.title, got.workspace, got.metadata, got.scratchpad) == (
            "t",
            "/ws",
            {"settings": {"a": 1}},
            {"k": [1]},
        )
        assert got.layout.end_seq == 3 and got.layout.length == 3
        assert store.read(got, 0, 3) == recs
        assert store.get("nope") is None

    def test_create_refuses_a_taken_id_and_writes_nothing(self, store: Store) -> None:
        """Create refuses a taken id and writes nothing."""
        store.create(new_row("s1"))
        recs = users(0, 2)
        with pytest.raises(SessionExistsError):
            store.create(appended(new_row("s1"), recs), recs)
        row = store.get("s1")
        assert row is not None and row.layout.end_seq == 0

    def test_append_grows_the_head_and_the_version(self, store: Store) -> None:
        """Append grows the head and the version."""
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

    def test_append_is_compare_and_set_on_the_head(self, store: Store) -> None:
        """Append is compare and set on the head."""
        row = store.create(new_row("s"))
        store.append(row, users(0, 1))
        with pytest.raises(StaleSessionError) as info:
            store.append(row, users(0, 1, "x"))
        assert info.value.expected == row.version and info.value.actual == row.version + 1
        fresh = store.get("s")
        assert fresh is not None
        assert [r.text for r in store.read(fresh, 0, fresh.layout.end_seq)] == ["m0"]

    def test_append_must_start_at_the_head(self, store: Store) -> None:
        """Append must start at the head."""
        row = store.create(new_row("s"))
        with pytest.raises(StoreError):
            store.append(row, users(3, 1))

    def test_write_updates_the_row_and_appends(self, store: Store) -> None:
        """Write updates the row and appends."""
        row = store.create(new_row("s"))
        row = store.append(row, users(0, 2))
        ev: list[Record] = [EventRecord(seq=2, name="trimmed")]
        hidden = replace(
            appended(row, ev),
            title="t",
            status="closed",
            layout=replace(appended(row, ev).layout, view_start=1, view_msgs=1),
        )
        row2 = store.write(row, hidden, ev)
        assert row2.version > row.version
        got = store.get("s")
        assert got == row2
        assert (got.title, got.status, got.layout.view_start, got.layout.length) == (
            "t",
            "closed",
            1,
            1,
        )

    def test_write_is_compare_and_set_on_row_and_head(self, store: Store) -> None:
        """Write is compare and set on row and head."""
        row = store.create(new_row("s"))
        store.write(row, replace(row, title="first"))
        with pytest.raises(StaleSessionError):
            store.write(row, replace(row, title="second"))
        fresh = store.get("s")
        assert fresh is not None and fresh.title == "first"
        store.append(fresh, users(0, 1))  # the head moved: a row write based on it is stale
        with pytest.raises(StaleSessionError):
            store.write(fresh, replace(fresh, title="third"))
        got = store.get("s")
        assert got is not None and got.title == "first" and got.layout.end_seq == 1

    def test_writes_to_a_deleted_session(self, store: Store) -> None:
        """Writes to a deleted session."""
        row = store.create(new_row("s"))
        store.delete("s")
        with pytest.raises(SessionNotFoundError):
            store.write(row, replace(row, title="x"))
        with pytest.raises(SessionNotFoundError):
            store.append(row, users(0, 1))

    def test_read_spans_inherited_segments(self, store: Store) -> None:
        """Read spans inherited segments."""
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

    def test_a_view_read_is_the_read_with_messages_for_records(self, store: Store) -> None:
        """``read_view`` (if offered): each message the message of its record, the rest records.

        Over inherited segments, and past a few thousand rows, so that a store
        reading in batches meets summaries and events in more than one.
        """
        if not isinstance(store, ViewReader):
            pytest.skip("the store offers no view read (read serves)")

        def record(seq: int) -> Record:
            match seq % 9:
                case 0:
                    return SystemRecord(seq=seq, content=f"sys{seq}")
                case 1:
                    return UserRecord(seq=seq, content=f'u{seq} \u00e9"\\', meta={"m": seq})
                case 2:
                    call = ToolCall(f"c{seq}", "look", {"a": [seq, None]})
                    return AssistantRecord(seq=seq, content="", tool_calls=(call,), images=1)
                case 3:
                    return ToolRecord(seq=seq, content="out", tool_call_id=f"c{seq - 1}", ok=False)
                case 4:
                    return EventRecord(seq=seq, name="tick", data={"i": seq})
                case 5:
                    return OpaqueRecord(seq=seq, format="x", item={"k": seq})
                case 6:
                    return SummaryRecord(seq=seq, content=f"s{seq}", folds_from=0, folds_to=seq)
                case 7:
                    return UserRecord(seq=seq, content=f"plain {seq}", images=2)
                case _:
                    return AssistantRecord(seq=seq, content=f"plain {seq}")

        n = 5000
        base = store.create(appended(new_row("a"), []))
        for lo in range(0, n, 1000):
            base = store.append(base, [record(i) for i in range(lo, min(n, lo + 1000))])
        lay = branch(base.layout, base.pk, 4500, base.layout.end_msgs)
        child = store.create(new_row("b", layout=lay, parent_ids=("a",)))
        child = store.append(child, [record(i) for i in range(4500, 4600)])

        def as_view(r: Record) -> Message | Record:
            return r if r.kind in ("summary", "event", "opaque") else Message.from_record(r)

        reads = ((base, 0, n), (base, 4090, 4100), (child, 0, 4600), (child, 4495, 4505))
        for row, lo, hi in reads:
            got = store.read_view(row, lo, hi)
            assert got == [as_view(r) for r in store.read(row, lo, hi)]
            assert [type(x) for x in got] == [type(as_view(r)) for r in store.read(row, lo, hi)]
        assert store.read_view(child, 4600, 4700) == []

    def test_probe_reports_message_counts(self, store: Store) -> None:
        """Probe reports message counts."""
        recs: list[Record] = [
            UserRecord(seq=0, content="a"),
            EventRecord(seq=1, name="e"),
            UserRecord(seq=2, content="b"),
        ]
        row = store.create(appended(new_row("s"), recs), recs)
        assert [store.probe(row, i) for i in range(3)] == [(0, True), (1, False), (1, True)]

    def test_recent_orders_filters_and_limits(self, store: Store) -> None:
        """Recent orders filters and limits."""
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
            (r.updated_at_us for r in listed), reverse=True
        )
        assert [r.id for r in store.recent("/a", 10)] == ["s1", "s3"]
        assert len(store.recent(None, 2)) == 2
        store.delete("s3")
        assert [r.id for r in store.recent("/a", 10)] == ["s1"]

    def test_children_are_live_sessions_naming_the_parent(self, store: Store) -> None:
        """Children are live sessions naming the parent."""
        store.create(new_row("p"))
        store.create(new_row("q"))
        store.create(new_row("c1", parent_ids=("p",)))
        store.create(new_row("m", parent_ids=("p", "q")))
        assert store.children("p") == ["c1", "m"]
        assert store.children("q") == ["m"]
        store.delete("c1")
        assert store.children("p") == ["m"]
        assert store.children("nobody") == []

    def test_delete_keeps_rows_other_layouts_read(self, store: Store) -> None:
        """Delete keeps rows other layouts read."""
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

    def test_stamp_moves_with_every_write_only(self, store: Store) -> None:
        """Stamp moves with every write only."""
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

    def test_scratchpad_history(self, store: Store) -> None:
        """Scratchpad history."""
        row = store.create(new_row("s"))
        e1 = ScratchpadEntry(1, {"a": 1}, "agent", "why", {"m": True})
        row = store.write(row, replace(row, scratchpad={"a": 1}, scratchpad_version=1), (), e1)
        e2 = ScratchpadEntry(2, None)
        store.write(row, replace(row, scratchpad=None, scratchpad_version=2), (), e2)
        assert store.get("s").scratchpad_version == 2  # type: ignore[union-attr]
        hist = store.scratchpad_history("s")
        assert [(h.version, h.scratchpad, h.source, h.reason, h.metadata) for h in hist] == [
            (1, {"a": 1}, "agent", "why", {"m": True}),
            (2, None, None, None, {}),
        ]
        assert all(h.created_at_us > 0 for h in hist)
        assert store.scratchpad_history("missing") == []

    def test_unicode_and_large_payloads_round_trip(self, store: Store) -> None:
        """Unicode and large payloads round trip."""
        text = "héllo ✓ 𝄞 \x01 " + "x" * 200_000
        recs: list[Record] = [UserRecord(seq=0, content=text, meta={"k": "✓", "n": [1, None]})]
        row = store.create(appended(new_row("s"), recs), recs)
        back = store.read(row, 0, 1)[0]
        assert back == recs[0] and back.meta == {"k": "✓", "n": [1, None]}

    def test_close_is_idempotent(self, store: Store) -> None:
        """Close is idempotent."""
        store.close()
        store.close()

    def test_text_that_is_not_unicode_is_bad_input_and_writes_nothing(self, store: Store) -> None:
        """Text that is not unicode is bad input and writes nothing."""
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

    def test_a_branch_of_a_collected_session_is_refused(self, store: Store) -> None:
        """A branch of a collected session is refused."""
        base = store.create(appended(new_row("a"), users(0, 3)), users(0, 3))
        planned = new_row("b", layout=branch(base.layout, base.pk, 3, 3), parent_ids=("a",))
        store.delete("a")  # nobody shares its rows: they are collected at once
        with pytest.raises(SessionNotFoundError):
            store.create(planned)
        assert store.get("b") is None

    def test_a_branch_reading_any_collected_owner_is_refused(self, store: Store) -> None:
        """A layout whose newest owner is there but an older one was collected is refused."""
        gone = store.create(appended(new_row("x"), users(0, 2)), users(0, 2))
        here = store.create(appended(new_row("y"), users(0, 2)), users(0, 2))
        store.delete("x")  # collected: no layout reads it
        lay = Layout(((gone.pk, 2), (here.pk, 4)), 4, 4)
        with pytest.raises(SessionNotFoundError):
            store.create(new_row("z", layout=lay, parent_ids=("y",)))
        assert store.get("z") is None

    def test_delete_keeps_what_a_layout_of_any_shape_reads(self, store: Store) -> None:
        """A layout that is not a plain branch (segments of two roots) keeps both readable."""
        a = store.create(appended(new_row("a"), users(0, 3)), users(0, 3))
        b = store.create(appended(new_row("b"), users(0, 5, "b")), users(0, 5, "b"))
        mixed = store.create(new_row("c", layout=Layout(((a.pk, 3), (b.pk, 5)), 5, 5)))
        store.delete("a")
        store.delete("b")
        assert [r.text for r in store.read(mixed, 0, 5)] == ["m0", "m1", "m2", "b3", "b4"]
        # A plain chain beside it still collects as it goes.
        d = store.create(appended(new_row("d"), users(0, 2)), users(0, 2))
        e = store.create(new_row("e", layout=branch(d.layout, d.pk, 2, 2), parent_ids=("d",)))
        store.delete("d")
        assert [r.text for r in store.read(e, 0, 2)] == ["m0", "m1"]
        store.delete("e")
        store.delete("c")
        assert store.integrity_check() == []

    def test_a_deep_chain_of_branches_reads_whole(self, store: Store) -> None:
        """A chain of branches, one record each, reads whole, by tail, and after a delete."""
        row = store.create(appended(new_row("c00"), users(0, 3)), users(0, 3))
        chain = [row]
        for i in range(1, 41):
            lay = branch(row.layout, row.pk, row.layout.end_seq, row.layout.end_msgs)
            child = store.create(new_row(f"c{i:02d}", layout=lay, parent_ids=(row.id,)))
            end = child.layout.end_seq
            row = store.append(child, users(end, 1, f"c{i:02d}-"))
            chain.append(row)
        texts = ["m0", "m1", "m2"] + [f"c{i:02d}-{i + 2}" for i in range(1, 41)]
        assert [r.text for r in store.read(row, 0, row.layout.end_seq)] == texts
        assert [r.text for r in store.read(row, 30, 43)] == texts[30:]
        assert [r.seq for r in store.read(row, 30, 43)] == list(range(30, 43))
        # A branch of the deepest one, with the middle of the chain deleted meanwhile.
        store.delete("c20")
        got = store.get(row.id)
        assert got == row
        lay = branch(got.layout, got.pk, 25, 25)
        fork = store.create(new_row("f", layout=lay, parent_ids=(row.id,)))
        assert [r.text for r in store.read(fork, 0, 25)] == texts[:25]
        assert store.integrity_check() == []

    def test_integrity_check_finds_nothing_wrong_in_a_healthy_store(self, store: Store) -> None:
        """A store written only through the protocol checks clean, forks and deletes included."""
        base = store.create(appended(new_row("a"), users(0, 4)), users(0, 4))
        child = store.create(
            new_row("b", layout=branch(base.layout, base.pk, 2, 2), parent_ids=("a",))
        )
        store.append(child, users(2, 1, "b"))
        store.delete("a")
        assert store.integrity_check() == []

    def test_a_second_open_of_the_target_sees_the_same_sessions(
        self, store: Store, store_target: str
    ) -> None:
        """Two opens of one target are one store: each sees the other's writes at once."""
        if not self.factory.shared:
            pytest.skip("the store is private to its process (StoreFactory.shared is False)")
        recs = users(0, 2)
        row = store.create(appended(new_row("s"), recs), recs)
        other = self.factory.open(store_target)
        try:
            seen = other.get("s")
            assert seen is not None and other.read(seen, 0, 2) == recs
            other.append(seen, users(2, 1, "o"))
            with pytest.raises(StaleSessionError):
                store.append(row, users(2, 1, "x"))
            got = store.get("s")
            assert got is not None and [r.text for r in store.read(got, 0, 3)][-1] == "o2"
        finally:
            other.close()


class LineageConformance(ConformanceBase):
    """The :class:`~plait.store.base.LineageStore` protocol: the chain of first parents."""

    def test_ancestors_follow_first_parents_to_the_root(self, store: Store) -> None:
        """Ancestors follow first parents to the root, nearest first."""
        self.needs(store, LineageStore, "lineage walks")
        store.create(new_row("a"))
        store.create(new_row("q"))
        store.create(new_row("b", parent_ids=("a",)))
        store.create(new_row("c", parent_ids=("b", "q")))  # a merge: its first parent counts
        assert store.ancestors("c") == ["b", "a"]
        assert store.ancestors("b") == ["a"]
        assert store.ancestors("a") == []
        assert store.ancestors("missing") == []

    def test_a_deleted_parent_ends_the_walk(self, store: Store) -> None:
        """A deleted parent ends the walk; a deleted session has no ancestors."""
        self.needs(store, LineageStore, "lineage walks")
        store.create(new_row("a"))
        store.create(new_row("b", parent_ids=("a",)))
        store.create(new_row("c", parent_ids=("b",)))
        store.delete("b")
        assert store.ancestors("c") == []
        assert store.ancestors("b") == []

    def test_a_loop_through_a_reused_id_is_cut(self, store: Store) -> None:
        """A loop (a parent's id reused by its own descendant) ends where a session repeats."""
        self.needs(store, LineageStore, "lineage walks")
        store.create(new_row("a"))
        store.create(new_row("b", parent_ids=("a",)))
        store.delete("a")
        store.create(new_row("a", parent_ids=("b",)))
        assert store.ancestors("b") == ["a"]
        assert store.ancestors("a") == ["b"]

    def test_a_long_chain_is_walked_whole(self, store: Store) -> None:
        """A chain longer than one read of the walk is followed to its end."""
        self.needs(store, LineageStore, "lineage walks")
        depth = 5000
        ids = [f"s{i:05d}" for i in range(depth + 1)]
        store.create(new_row(ids[0]))
        for parent, child in pairwise(ids):
            store.create(new_row(child, parent_ids=(parent,)))
        assert store.ancestors(ids[-1]) == ids[-2::-1]
