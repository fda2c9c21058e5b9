"""A third-party store that keeps only the transcript is a store: the rest is served or refused."""

from __future__ import annotations

import pickle
from datetime import timedelta
from pathlib import Path

import pytest

import plait
from plait.auth import DurableSessions
from plait.errors import InvalidArgumentError, StoreError, StorePartMissingError
from plait.providers import ScriptedProvider
from plait.records import Record
from plait.session._part import head_of
from plait.store import PARTS, MemoryStore, PartialStore, Store, open_store, parts_of
from plait.store.base import SessionRow
from plait.testing._factory import ConformanceBase


class TranscriptOnly:
    """The TranscriptStore protocol and nothing else: every call goes to a list of rows.

    Backed by a MemoryStore for brevity, but only its transcript members are reachable,
    as in a backend written from the protocol alone.
    """

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.closed = False

    @property
    def location(self) -> str:
        return "transcript-only://test"

    def get(self, session_id: str) -> SessionRow | None:
        return self._inner.get(session_id)

    def create(self, row: SessionRow, records: object = ()) -> SessionRow:
        return self._inner.create(row, records)  # type: ignore[arg-type]

    def append(self, expected: SessionRow, records: list[Record]) -> SessionRow:
        return self._inner.append(expected, records)

    def write(self, expected, updated, records=(), scratchpad=None):  # type: ignore[no-untyped-def]
        return self._inner.write(expected, updated, records, scratchpad)

    def move_head(self, expected, head, hidden_id, records=()):  # type: ignore[no-untyped-def]
        return self._inner.move_head(expected, head, hidden_id, records)

    def read(self, row: SessionRow, lo: int, hi: int) -> list[Record]:
        return self._inner.read(row, lo, hi)

    def probe(self, row: SessionRow, seq: int) -> tuple[int, bool]:
        return self._inner.probe(row, seq)

    def recent(self, workspace: str | None, limit: int) -> list[SessionRow]:
        return self._inner.recent(workspace, limit)

    def children(self, session_id: str) -> list[str]:
        return self._inner.children(session_id)

    def delete(self, session_id: str) -> None:
        self._inner.delete(session_id)

    def erase(self, session_id: str) -> None:
        self._inner.erase(session_id)

    def stamp(self, session_id: str) -> str | None:
        return self._inner.stamp(session_id)

    def scratchpad_history(self, session_id: str):  # type: ignore[no-untyped-def]
        return self._inner.scratchpad_history(session_id)

    def integrity_check(self) -> list[str]:
        return self._inner.integrity_check()

    def close(self) -> None:
        self.closed = True
        self._inner.close()


def test_a_transcript_only_store_offers_no_part_and_is_opened_whole() -> None:
    store = TranscriptOnly()
    assert parts_of(store) == frozenset()
    opened = open_store(store)
    assert isinstance(opened, PartialStore) and isinstance(opened, Store)
    assert opened.inner is store and parts_of(opened) == frozenset()
    assert not isinstance(opened, plait.store.SearchStore)
    assert parts_of(MemoryStore()) >= {"writer_locks", "tallies", "search", "objects"}


def test_the_client_appends_reads_and_forks_on_a_transcript_only_store(tmp_path: Path) -> None:
    store = TranscriptOnly()
    with plait.Client(tmp_path, store=store) as client:
        session = client.sessions.new()
        session.inject({"role": "user", "content": "hello"})
        session.inject({"role": "assistant", "content": "hi there"})
        assert [m.text for m in session.history()] == ["hello", "hi there"]
        fork = session.fork()
        fork.inject({"role": "user", "content": "only in the fork"})
        assert len(fork.history()) == 3 and len(session.live.refresh().history()) == 2
        # the lineage walked without its part
        assert fork.transcript.ancestry().root_id == session.id
        again = client.open(session.id)
        assert [m.text for m in again.history()] == ["hello", "hi there"]
        snapshot = again.transcript.snapshot()
        assert snapshot is not None and snapshot.live_clients == ()
    assert not store.closed  # a store passed in stays open


def test_a_run_and_its_context_report_need_no_other_part(tmp_path: Path) -> None:
    with plait.Client(tmp_path, store=TranscriptOnly()) as client:
        session = client.sessions.new()
        result = session.run("hi", provider=ScriptedProvider(["hello"]))
        assert result.text == "hello"
        report = session.context("gpt-4o")  # tallies counted in memory, never stored
        assert report is not None and report.used > 0
        assert client.store.counted_end(head_of(session.live.refresh()).row) == 0  # type: ignore[union-attr,arg-type]


def test_a_verb_that_needs_a_missing_part_names_it(tmp_path: Path) -> None:
    # writer_lock="write": the lock goes back after each write, so the handle asks the store.
    with plait.Client(tmp_path, store=TranscriptOnly(), writer_lock="write") as client:
        session = client.sessions.new()
        session.inject({"role": "user", "content": "find me"})
        with pytest.raises(StorePartMissingError) as found:
            client.sessions.search("find")
        assert found.value.part == "search" and found.value.protocol == "SearchStore"
        assert isinstance(found.value, StoreError)
        with pytest.raises(StorePartMissingError) as locked:
            session.locked  # noqa: B018 - the property asks the store about other processes
        assert locked.value.part == "writer_locks"
        with pytest.raises(StorePartMissingError, match="writer_locks"):
            client.sessions.open_elsewhere(session.id)
        session.live.acquire()  # the in-process fallback: this process holds it
        assert session.live.holds_lock
        session.live.release()


def test_the_error_pickles_with_its_part() -> None:
    error = StorePartMissingError("search", "SearchStore", "searching sessions")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is StorePartMissingError
    assert (back.part, back.protocol, str(back)) == ("search", "SearchStore", str(error))


def test_an_object_without_every_transcript_member_is_refused_by_name() -> None:
    class Half:
        def get(self, session_id: str) -> None:
            return None

    with pytest.raises(InvalidArgumentError, match="lacks the transcript members append"):
        open_store(Half())  # type: ignore[arg-type]


def test_every_part_says_what_plait_does_without_it() -> None:
    assert {"search", "bearer_sessions"} <= {n for n, p in PARTS.items() if p.fallback is None}
    assert PARTS["writer_locks"].fallback is not None
    assert all(p.name == n and p.what for n, p in PARTS.items())


def test_the_kit_skips_a_missing_part_naming_it() -> None:
    with pytest.raises(pytest.skip.Exception, match="part 'tallies'"):
        ConformanceBase.needs(TranscriptOnly(), plait.store.TallyStore, "token tallies")


class WithSearchAndLocks(TranscriptOnly):
    """A transcript store that also offers search and writer locks, and nothing else."""

    def search(self, query, limit, workspace=None):  # type: ignore[no-untyped-def]
        return self._inner.search(query, limit, workspace)

    def reindex(self) -> None:
        self._inner.reindex()

    def lock(self, session_id: str) -> bool:
        return self._inner.lock(session_id)

    def unlock(self, session_id: str) -> None:
        self._inner.unlock(session_id)

    def locked_elsewhere(self, session_id: str) -> bool:
        return self._inner.locked_elsewhere(session_id)


def test_the_parts_a_store_offers_are_its_own(tmp_path: Path) -> None:
    store = WithSearchAndLocks()
    assert parts_of(store) == {"search", "writer_locks"}
    with plait.Client(tmp_path, store=store, writer_lock="write") as client:
        assert parts_of(client.store) == {"search", "writer_locks"}
        assert isinstance(client.store, plait.store.SearchStore)
        session = client.sessions.new()
        session.inject({"role": "user", "content": "a findable word"})
        assert [h.session_id for h in client.sessions.search("findable")] == [session.id]
        assert session.locked is False  # the store's own locks answer
        with pytest.raises(StorePartMissingError, match="bearer_sessions"):
            DurableSessions(client.store).create("someone", ttl=timedelta(hours=1))
