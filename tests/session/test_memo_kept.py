"""A host keeps what its writers know of a transcript across the lock and across handles.

A server gives a session's writer lock up after every run and may make a new handle for
the next one: the next request must not read and decode the whole transcript again, and
must still see every record written meanwhile by anyone (D229).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.store import SQLiteStore


def _texts(messages: list[Any]) -> list[str]:
    return [m.text for m in messages]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The ranges every SQLiteStore reads records in, as (lo, hi)."""
    got: list[tuple[int, int]] = []
    real = SQLiteStore.read

    def counted(self: SQLiteStore, row: Any, lo: int, hi: int) -> Any:
        got.append((lo, hi))
        return real(self, row, lo, hi)

    monkeypatch.setattr(SQLiteStore, "read", counted)
    return got


def test_a_request_after_the_lock_went_and_came_back_reads_nothing_again(
    tmp_path: Path, reads: list[tuple[int, int]]
) -> None:
    with Client(tmp_path, store=tmp_path / "s.db", writer_lock="process") as client:
        s = client.sessions.create([{"role": "user", "content": f"m{i}"} for i in range(50)])
        s.inject({"role": "assistant", "content": "a"})
        first = s.transcript.request_messages()
        assert len(first) == 51
        for turn in range(3):  # the lock given up after each turn, as a server does (D94)
            s.live.release()
            s.inject({"role": "user", "content": f"u{turn}"})  # takes it again
            del reads[:]
            now = s.transcript.request_messages()
            assert _texts(now) == [*_texts(first), *(f"u{t}" for t in range(turn + 1))]
            assert all(hi - lo <= 1 for lo, hi in reads), reads  # no transcript read again
            del reads[:]
            assert s.resumable() is not None  # a user message last: its reply is owed
            assert reads == []  # the tail a run's start looks at is held too


def test_a_new_handle_uses_what_the_host_knows(
    tmp_path: Path, reads: list[tuple[int, int]]
) -> None:
    with Client(tmp_path, store=tmp_path / "s.db", writer_lock="process") as client:
        s = client.sessions.create([{"role": "user", "content": f"m{i}"} for i in range(50)])
        s.inject({"role": "assistant", "content": "a"})
        want = _texts(s.transcript.request_messages())
        sid = s.id
        s.live.release()
        del s
        gc.collect()
        again = client.open(sid)
        again.inject({"role": "user", "content": "next"})
        del reads[:]
        assert _texts(again.transcript.request_messages()) == [*want, "next"]
        assert all(hi - lo <= 1 for lo, hi in reads), reads


def test_records_another_client_wrote_meanwhile_are_read_and_only_they(
    tmp_path: Path, reads: list[tuple[int, int]]
) -> None:
    path = tmp_path / "s.db"
    with Client(tmp_path, store=path, writer_lock="process") as mine:
        s = mine.sessions.create([{"role": "user", "content": f"m{i}"} for i in range(50)])
        s.inject({"role": "assistant", "content": "a"})
        want = _texts(s.transcript.request_messages())
        s.live.release()
        with Client(tmp_path, store=path, writer_lock="process") as other:
            theirs = other.open(s.id)
            theirs.inject({"role": "user", "content": "from the other"})
            theirs.inject({"role": "assistant", "content": "and its reply"})
        s.inject({"role": "user", "content": "mine again"})
        del reads[:]
        got = _texts(s.transcript.request_messages())
        assert got == [*want, "from the other", "and its reply", "mine again"]
        assert max(hi - lo for lo, hi in reads) <= 3, reads  # what was missing, not all 54


def test_a_rewind_elsewhere_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Client(tmp_path, store=path, writer_lock="process") as mine:
        s = mine.sessions.create([{"role": "user", "content": f"m{i}"} for i in range(10)])
        s.inject({"role": "assistant", "content": "a"})
        s.transcript.request_messages()
        s.live.release()
        with Client(tmp_path, store=path, writer_lock="process") as other:
            theirs = other.open(s.id)
            theirs.transcript.rewind(3)
            theirs.inject({"role": "assistant", "content": "after the rewind"})
        s.inject({"role": "user", "content": "mine"})  # the lock taken again
        assert _texts(s.transcript.request_messages()) == [
            "m0",
            "m1",
            "m2",
            "after the rewind",
            "mine",
        ]
