"""The search conformance tests: full-text search across every session.

:class:`SearchConformance` checks :class:`~plait.store.search.SearchStore` on the
store itself: a message's words are found in the session that holds it, and in
every live fork that shares it; a deleted session, a hidden head and a position
its view hides are not reported; a workspace narrows the search; a rebuild of the
index finds the same; a query the engine cannot parse is a typed error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import cast

import pytest

from plait.errors import InvalidArgumentError
from plait.layout import branch
from plait.records import (
    AssistantRecord,
    EventRecord,
    Record,
    SummaryRecord,
    ToolRecord,
    UserRecord,
)
from plait.store.base import SessionRow, Store
from plait.store.search import MARK_END, MARK_START, SearchHit, SearchStore
from plait.testing._factory import ConformanceBase, Peer
from plait.testing._transcript import appended, new_row

__all__ = ["SearchConformance"]


def _said(start: int, *texts: str) -> list[Record]:
    return [UserRecord(seq=start + i, content=t) for i, t in enumerate(texts)]


def _where(hits: list[SearchHit]) -> set[tuple[str, int]]:
    return {(h.session_id, h.position) for h in hits}


class SearchConformance(ConformanceBase):
    """The :class:`~plait.store.search.SearchStore` protocol: full-text search."""

    def _searcher(self, store: Store) -> SearchStore:
        self.needs(store, SearchStore, "full-text search")
        return cast(SearchStore, store)

    def _session(self, store: Store, sid: str, *texts: str, ws: str = "/ws") -> SessionRow:
        recs = _said(0, *texts)
        return store.create(appended(new_row(sid, ws=ws), recs), recs)

    def test_a_word_is_found_with_its_role_position_and_snippet(self, store: Store) -> None:
        """Every message role is searched; events are not; a snippet marks the term."""
        search = self._searcher(store)
        recs: list[Record] = [
            UserRecord(seq=0, content="the quokka smiles"),
            AssistantRecord(seq=1, content="a quokka is a marsupial"),
            ToolRecord(seq=2, content="quokka found", tool_call_id="c1"),
            SummaryRecord(seq=3, content="they spoke of a quokka", folds_from=0, folds_to=3),
            EventRecord(seq=4, name="quokka", data={"quokka": "quokka"}),
            UserRecord(seq=5, content="nothing here"),
        ]
        store.create(appended(new_row("s"), recs), recs)
        hits = search.search("quokka", 20, None)
        assert sorted((h.position, h.role) for h in hits) == [
            (0, "user"), (1, "assistant"), (2, "tool"), (3, "summary")
        ]
        assert sorted(h.message for h in hits) == [0, 1, 2, 3]
        assert all(h.session_id == "s" for h in hits)
        first = next(h for h in hits if h.position == 0)
        assert f"{MARK_START}quokka{MARK_END}" in first.snippet
        assert search.search("absent", 20, None) == []

    def test_hits_are_newest_first_and_limited(self, store: Store) -> None:
        """The newest messages come first; ``limit`` keeps the newest."""
        search = self._searcher(store)
        self._session(store, "old", "wombat one")
        self._session(store, "new", "wombat two", "wombat three")
        hits = search.search("wombat", 20, None)
        assert [(h.session_id, h.position) for h in hits] == [("new", 1), ("new", 0), ("old", 0)]
        assert [(h.session_id, h.position) for h in search.search("wombat", 2, None)] == [
            ("new", 1), ("new", 0)
        ]

    def test_a_message_forks_share_is_found_in_each_live_fork(self, store: Store) -> None:
        """A shared row is a hit in every session that shows it.

        The fork's own rows are hits only in the fork (and its forks); a deleted fork
        reports none, while its fork still reports the rows it reads from it.
        """
        search = self._searcher(store)
        base = self._session(store, "a", "numbat zero", "numbat one", "numbat two", "numbat three")
        recs = _said(2, "numbat fork")
        lay = branch(base.layout, base.pk, 2, 2)
        fork = store.create(appended(new_row("b", layout=lay, parent_ids=("a",)), recs), recs)
        assert _where(search.search("numbat", 20, None)) == {
            ("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1), ("b", 2)
        }
        lay2 = branch(fork.layout, fork.pk, fork.layout.end_seq, fork.layout.end_msgs)
        store.create(new_row("c", layout=lay2, parent_ids=("b",)))  # a fork of the fork
        assert {p for s, p in _where(search.search("numbat", 20, None)) if s == "c"} == {0, 1, 2}
        store.delete("b")  # "c" still reads b's rows; "b" reports none
        found = _where(search.search("numbat", 20, None))
        assert not any(s == "b" for s, _ in found)
        assert {p for s, p in found if s == "c"} == {0, 1, 2}
        assert _where(search.search("fork", 20, None)) == {("c", 2)}

    def test_a_deleted_session_reports_nothing(self, store: Store) -> None:
        """Deleted: no hit, even before its rows are collected."""
        search = self._searcher(store)
        self._session(store, "gone", "platypus")
        store.delete("gone")
        assert search.search("platypus", 20, None) == []

    def test_a_hidden_head_and_hidden_positions_report_nothing(self, store: Store) -> None:
        """A rewind hides the old head; a trim hides the positions before its view."""
        search = self._searcher(store)
        s = self._session(store, "s", "echidna a", "echidna b", "echidna c")
        head = replace(s, pk=0, layout=branch(s.layout, s.pk, 1, 1))
        store.move_head(s, head, "s-hidden")  # a rewind to one message
        assert _where(search.search("echidna", 20, None)) == {("s", 0)}
        t = self._session(store, "t", "bilby a", "bilby b")
        store.write(t, replace(t, layout=replace(t.layout, view_start=1, view_msgs=1)))  # a trim
        assert _where(search.search("bilby", 20, None)) == {("t", 1)}
        # The view numbers its messages from its first shown one; events are not counted.
        assert [h.message for h in search.search("bilby", 20, None)] == [0]
        u = store.get("t")
        assert u is not None
        recs: list[Record] = [EventRecord(seq=2, name="note"), UserRecord(seq=3, content="bilby c")]
        store.append(u, recs)
        assert [(h.position, h.message) for h in search.search('"bilby c"', 20, None)] == [(3, 1)]

    def test_a_workspace_narrows_the_search(self, store: Store) -> None:
        """``workspace`` keeps that workspace's sessions; None searches them all."""
        search = self._searcher(store)
        self._session(store, "x", "dingo", ws="/one")
        self._session(store, "y", "dingo", ws="/two")
        assert {h.session_id for h in search.search("dingo", 20, "/one")} == {"x"}
        assert {h.session_id for h in search.search("dingo", 20, None)} == {"x", "y"}

    def test_a_phrase_and_several_words(self, store: Store) -> None:
        """Words all match, in any order; a quoted phrase matches in order."""
        search = self._searcher(store)
        self._session(store, "p", "red kangaroo jumps", "kangaroo is red")
        assert _where(search.search("red kangaroo", 20, None)) == {("p", 0), ("p", 1)}
        assert _where(search.search('"red kangaroo"', 20, None)) == {("p", 0)}

    def test_a_rebuilt_index_finds_the_same(self, store: Store) -> None:
        """``reindex`` rebuilds from the records: the hits are the same."""
        search = self._searcher(store)
        self._session(store, "r", "possum one", "possum two")
        before = search.search("possum", 20, None)
        search.reindex()
        assert search.search("possum", 20, None) == before

    def test_what_is_written_after_a_search_is_found_by_the_next(self, store: Store) -> None:
        """Appends, a new session and a fork written after a search are all found."""
        search = self._searcher(store)
        s = self._session(store, "s", "wallaby one")
        assert _where(search.search("wallaby", 20, None)) == {("s", 0)}
        s = store.append(s, _said(1, "wallaby two"))
        self._session(store, "t", "wallaby three")
        fork = store.create(
            new_row("f", layout=branch(s.layout, s.pk, 2, 2), parent_ids=("s",)), []
        )
        store.append(fork, _said(2, "wallaby four"))
        assert _where(search.search("wallaby", 20, None)) == {
            ("s", 0), ("s", 1), ("t", 0), ("f", 0), ("f", 1), ("f", 2)
        }

    def test_what_a_killed_writer_committed_is_found(
        self, store: Store, store_target: str, peers: Callable[[], Peer]
    ) -> None:
        """What a writer process killed mid-write committed is found, and nothing else.

        Another process appends, one record per commit, and is SIGKILLed: every record it
        committed is found (by this store, which searched before, and by one opened
        after), none it did not, and a fork made after finds its share.
        """
        search = self._searcher(store)
        self._session(store, "w", "quoll zero")
        assert len(search.search("quoll", 20, None)) == 1
        peer = peers()
        peer.send("append w 1000000")
        deadline = time.monotonic() + 60
        while True:
            row = store.get("w")
            assert row is not None
            if row.layout.end_seq > 30 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        peer.kill()  # SIGKILL, in the middle of its appends
        # A server may still commit the statement a killed client sent last: wait until
        # the transcript stops growing.
        row, end = None, -1
        while row is None or row.layout.end_seq != end:
            end = row.layout.end_seq if row is not None else -1
            time.sleep(0.3)
            row = store.get("w")
            assert row is not None
        end = row.layout.end_seq
        assert end > 30
        found = search.search("peer", end + 10, None)
        assert sorted(h.position for h in found) == list(range(1, end))
        again = cast(SearchStore, self.factory.open(store_target))
        try:
            assert len(again.search("peer", end + 10, None)) == end - 1
        finally:
            cast(Store, again).close()
        store.create(new_row("f", layout=branch(row.layout, row.pk, 5, 5), parent_ids=("w",)), [])
        assert _where(search.search("peer", end + 10, "/ws")) >= {("f", p) for p in range(1, 5)}

    def test_bad_input_is_a_typed_error(self, store: Store) -> None:
        """An empty query or a bad limit is InvalidArgumentError, never a crash."""
        search = self._searcher(store)
        for query, limit in (("", 20), ("  ", 20), ("x", 0), ("x", -1)):
            with pytest.raises(InvalidArgumentError):
                search.search(query, limit, None)
