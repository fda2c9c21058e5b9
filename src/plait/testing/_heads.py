"""Conformance of moving heads and erasing, and of the session verbs built on them.

:class:`HeadConformance` checks ``move_head`` and ``erase`` on the store itself;
:class:`SessionVerbConformance` drives the same store through plait's public API
(``rewind``, ``undo_rewind``, opaque items, ``tail`` counting messages, ``erase``,
the streamed reads ``iter_history`` / ``iter_records``),
so a third-party backend learns that what users call works on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from plait.client import Client
from plait.errors import InvalidArgumentError, SessionNotFoundError, StaleSessionError
from plait.layout import branch
from plait.records import EventRecord, JSONValue, Message, OpaqueRecord, hidden_summaries
from plait.session import Session
from plait.store.base import HIDDEN_OPERATOR, ScratchpadEntry, Store
from plait.testing._factory import ConformanceBase
from plait.testing._transcript import appended, new_row, users

__all__ = ["HeadConformance", "SessionVerbConformance"]


class HeadConformance(ConformanceBase):
    """``TranscriptStore.move_head`` and ``TranscriptStore.erase``."""

    def test_move_head_keeps_the_id_and_hides_the_old_head(self, store: Store) -> None:
        """The id names the new head; the old one is a hidden child listed nowhere else."""
        recs = users(0, 6)
        pad = ScratchpadEntry(version=1, scratchpad={"k": 1})
        s = store.create(appended(new_row("s", title="t", metadata={"m": 1}), recs), recs)
        s = store.write(s, replace(s, scratchpad={"k": 1}, scratchpad_version=1), (), pad)
        head = replace(s, pk=0, layout=branch(s.layout, s.pk, 2, 2))
        moved = store.move_head(s, head, "hidden-1")
        assert moved.id == "s" and moved.pk not in (0, s.pk)
        assert moved.version > s.version
        assert (moved.title, moved.metadata, moved.scratchpad) == ("t", {"m": 1}, {"k": 1})
        assert moved.created_at_us == s.created_at_us
        assert [r.text for r in store.read(moved, 0, 2)] == ["m0", "m1"]
        assert [e.scratchpad for e in store.scratchpad_history("s")] == [{"k": 1}]
        hidden = store.get("hidden-1")
        assert hidden is not None and hidden.pk == s.pk
        assert (hidden.lineage_operator, hidden.parent_ids) == (HIDDEN_OPERATOR, ("s",))
        assert len(store.read(hidden, 0, 6)) == 6
        assert [r.id for r in store.recent(None, 10)] == ["s"]
        assert store.children("s") == ["hidden-1"]
        tail = users(2, 1, "new")
        after = store.append(moved, tail)
        assert [r.text for r in store.read(after, 0, 3)] == ["m0", "m1", "new2"]
        assert [r.text for r in store.read(store.get("hidden-1") or hidden, 2, 3)] == ["m2"]

    def test_move_head_back_to_a_hidden_head(self, store: Store) -> None:
        """A hidden head can take the id back; the head it replaces is hidden in turn."""
        recs = users(0, 4)
        s = store.create(appended(new_row("s"), recs), recs)
        moved = store.move_head(s, replace(s, pk=0, layout=branch(s.layout, s.pk, 1, 1)), "h1")
        hidden = store.get("h1")
        assert hidden is not None
        back = store.move_head(moved, hidden, "h2")
        assert back.id == "s" and back.pk == s.pk and back.layout.end_seq == 4
        assert back.version > moved.version
        assert store.get("h1") is None
        h2 = store.get("h2")
        assert h2 is not None and h2.pk == moved.pk and h2.parent_ids == ("s",)
        assert store.children("s") == ["h2"]

    def test_move_head_is_compare_and_set(self, store: Store) -> None:
        """A head that moved since ``expected`` refuses the move and writes nothing."""
        recs = users(0, 3)
        s = store.create(appended(new_row("s"), recs), recs)
        later = store.append(s, users(3, 1))
        head = replace(s, pk=0, layout=branch(s.layout, s.pk, 1, 1))
        with pytest.raises(StaleSessionError):
            store.move_head(s, head, "h")
        assert store.get("h") is None and store.get("s") == later

    def test_move_head_refuses_a_row_that_is_not_a_hidden_head(self, store: Store) -> None:
        """Only one of the id's own hidden heads can take the id back."""
        a = store.create(appended(new_row("a"), users(0, 2)), users(0, 2))
        b = store.create(appended(new_row("b"), users(0, 2)), users(0, 2))
        with pytest.raises(InvalidArgumentError):
            store.move_head(a, b, "h")
        assert store.get("a") == a and store.get("b") == b

    def test_move_head_appends_the_records_it_is_given(self, store: Store) -> None:
        """Records given with a new head are stored at its end, in the same transaction."""
        recs = users(0, 4)
        s = store.create(appended(new_row("s"), recs), recs)
        event = EventRecord(seq=2, name="compaction_undone", data={"summary_seq": 1})
        layout = branch(s.layout, s.pk, 2, 2).appended(1, 0)
        moved = store.move_head(s, replace(s, pk=0, layout=layout), "h", [event])
        got = store.read(moved, 0, 3)
        assert [r.kind for r in got] == ["user", "user", "event"]
        assert moved.layout.end_seq == 3 and moved.layout.end_msgs == 2

    def test_erase_removes_what_no_branch_reads(self, store: Store) -> None:
        """Erase keeps a fork's shared prefix and nothing more; hidden heads go too."""
        recs = users(0, 6)
        s = store.create(appended(new_row("s"), recs), recs)
        fork = store.create(
            replace(new_row("f", parent_ids=("s",)), layout=branch(s.layout, s.pk, 2, 2))
        )
        store.move_head(s, replace(s, pk=0, layout=branch(s.layout, s.pk, 4, 4)), "h")
        store.erase("s")
        assert store.get("s") is None and store.get("h") is None
        assert [r.text for r in store.read(fork, 0, 2)] == ["m0", "m1"]
        assert store.integrity_check() == []
        with pytest.raises(SessionNotFoundError):
            store.erase("s")


class SessionVerbConformance(ConformanceBase):
    """Rewind, opaque items, ``tail`` and erase through the public API, on this store."""

    @pytest.fixture
    def client(self, store: Store, tmp_path: Path) -> Iterator[Client]:
        """A client on the store under test: any transcript store (the rest is served, D420)."""
        with Client(tmp_path, store=store) as c:
            yield c

    def test_rewind_keeps_the_id_and_can_be_undone(self, client: Client) -> None:
        """``rewind(n)`` keeps n messages in place; ``undo_rewind`` brings the rest back."""
        s = client.open("conv")
        for i in range(3):
            s.inject({"role": "user", "content": f"q{i}"})
            s.inject({"role": "assistant", "content": f"a{i}"})
        version = s.live.version
        hidden = s.transcript.rewind(3)
        assert s.id == "conv" and s.transcript.length == 3 and s.live.version > version
        assert [m.text for m in client.open("conv").history()] == ["q0", "a0", "q1"]
        assert s.transcript.hidden_heads() == [hidden]
        assert [i.id for i in client.sessions.list()] == ["conv"]
        s.inject({"role": "user", "content": "again"})
        s.transcript.undo_rewind()
        assert [m.text for m in s.history()][-2:] == ["q2", "a2"] and s.transcript.length == 6
        assert len(s.transcript.hidden_heads()) == 1

    def test_rewind_keeps_a_compaction_undone(self, client: Client) -> None:
        """A summary the rewind keeps stays undone when its undo lay past the cut."""
        s = client.open("compacted")
        for i in range(4):
            s.inject({"role": "user", "content": f"q{i}"})
            s.inject({"role": "assistant", "content": f"a{i}"})
        s.inject({"role": "summary", "content": "so far", "folds": [0, 6]})
        s.inject({"role": "user", "content": "after"})
        s.transcript.uncompact()
        s.inject({"role": "user", "content": "later"})
        s.transcript.rewind(10)  # the 8 messages, the summary and "after"
        assert s.history()[0].text == "q0"
        assert "so far" not in [m.text for m in s.history()]

    def test_an_opaque_item_is_one_message_and_is_kept_verbatim(self, client: Client) -> None:
        """An opaque item round-trips, counts as a message, and is left out of history."""
        s = client.open("items")
        item: JSONValue = {"type": "reasoning", "id": "rs_1", "summary": [], "n": [1, 2.5, None]}
        s.inject({"role": "user", "content": "hi"})
        s.inject({"role": "opaque", "format": "openai-agents", "item": item})
        again = client.open("items")
        stored = [r for r in again.transcript.records if isinstance(r, OpaqueRecord)]
        assert [(r.format, r.item) for r in stored] == [("openai-agents", item)]
        assert again.transcript.length == 2 and [m.role for m in again.history()] == ["user"]
        s.transcript.rewind(1)
        assert s.transcript.length == 1 and [r.kind for r in s.transcript.records] == ["user"]

    def test_tail_counts_messages_not_events(self, client: Client) -> None:
        """``tail(n)`` returns the last n messages' records, events among them uncounted."""
        s = client.open("tail")
        s.inject({"role": "user", "content": "one"})
        for i in range(30):
            s.transcript.log_event("tick", {"i": i})
        s.inject({"role": "assistant", "content": "two"})
        s.transcript.log_event("tock")
        got = s.transcript.tail(2)
        assert [r.kind for r in got if r.kind != "event"] == ["user", "assistant"]
        assert got[0].kind == "user" and got[-1].kind == "event"
        assert [r.kind for r in s.transcript.tail(1)] == ["assistant", "event"]
        assert s.transcript.tail(0) == [] and len(s.transcript.tail(99)) == 33

    def test_erase_through_the_client(self, client: Client) -> None:
        """``sessions.erase`` removes the session; a fork keeps what it shares."""
        s = client.open("secret")
        for i in range(4):
            s.inject({"role": "user", "content": f"private {i}"})
        fork = s.fork_at(1)
        client.sessions.erase("secret")
        assert not client.exists("secret")
        assert [m.text for m in client.open(fork.id).history()] == ["private 0"]
        assert client.store.integrity_check() == []

    def _mixed(self, client: Client, sid: str) -> Session:
        """A session of every kind: tool calls, meta, events, an opaque item, two compactions."""
        s = client.open(sid)
        s.inject({"role": "system", "content": "Be brief."})
        for i in range(5):
            s.inject({"role": "user", "content": f"q{i}", "meta": {"n": i}})
            s.inject({
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"c{i}", "name": "look", "arguments": {"i": i}}],
            })
            s.inject({"role": "tool", "content": f"r{i}", "tool_call_id": f"c{i}", "ok": i != 2})
            s.transcript.log_event("tick", {"i": i})
            s.inject({"role": "assistant", "content": f"a{i}", "images": 1})
        s.inject({"role": "opaque", "format": "x", "item": {"k": [1, None]}})
        s.inject({"role": "summary", "content": "first", "folds": [1, 11]})
        s.inject({"role": "user", "content": "after one"})
        s.inject({"role": "summary", "content": "second", "folds": [1, 21]})
        return s

    def test_streamed_reads_are_the_reads(self, client: Client) -> None:
        """``iter_history`` / ``iter_records`` yield what ``history`` / ``records`` return."""
        s = self._mixed(client, "streamed")

        def same(s: Session) -> None:
            again = client.open(s.id)  # a reader: no writer's memo
            for handle in (s, again):
                for batch in (1, 3, 4096):
                    transcript = handle.transcript
                    assert list(transcript.iter_records(batch=batch)) == transcript.records
                    for full in (False, True):
                        got = list(handle.transcript.iter_history(full, batch=batch))
                        assert got == handle.history(full)
            # The messages a view read makes are the messages of the records.
            records = again.transcript.records
            hidden = hidden_summaries(records)
            shown = [
                r
                for r in records
                if r.kind not in ("event", "system", "opaque") and r.seq not in hidden
            ]
            assert again.history(full=True) == [Message.from_record(r) for r in shown]

        same(s)
        assert [m.text for m in s.history()] == ["second", "q4", "", "r4", "a4", "after one"]
        fork = s.fork()
        fork.inject({"role": "user", "content": "in the fork"})
        same(fork)  # the base's rows, then the fork's
        assert [m.text for m in fork.history()][::6] == ["second", "in the fork"]
        s.transcript.uncompact()  # "first" is shown again, where it ran
        same(s)
        assert s.history()[0].text == "first"
        s.transcript.uncompact()
        same(s)
        with pytest.raises(InvalidArgumentError):
            s.transcript.iter_history(batch=0)
