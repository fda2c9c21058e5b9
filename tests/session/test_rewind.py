"""Rewind in place, its undo and erase: what a user of the session sees."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import (
    InvalidArgumentError,
    NothingToDoError,
    SessionClosedError,
    StaleSessionError,
)
from plait.store import SQLiteStore


def _talk(s: Any, turns: int, tag: str = "") -> None:
    for i in range(turns):
        s.inject({"role": "user", "content": f"{tag}q{i}"})
        s.inject({"role": "assistant", "content": f"{tag}a{i}"})


class _Reads:
    """Counts the records a store hands out."""

    def __init__(self, store: Any) -> None:
        self.rows = 0
        self._read = store.read
        store.read = self

    def __call__(self, row: Any, lo: int, hi: int) -> Any:
        got = self._read(row, lo, hi)
        self.rows += len(got)
        return got


@pytest.mark.parametrize("turns", [5, 500])
def test_a_pop_reads_what_it_drops_only(client: Client, turns: int) -> None:
    s = client.open(f"long-{turns}")
    _talk(s, turns)
    reads = _Reads(client.store)
    s.transcript.rewind(s.transcript.length - 1)
    assert reads.rows <= 1  # the one record it drops, whatever the length
    assert s.transcript.length == 2 * turns - 1


def test_rewind_keeps_identity_settings_and_title(client: Client) -> None:
    s = client.open("keep")
    s.rename("my chat")
    s.settings.set_metadata("tenant", "acme")
    s.scratchpad.set({"plan": [1, 2]})
    _talk(s, 3)
    created = s.transcript.created_at
    s.transcript.rewind(2)
    again = client.open("keep")
    assert (again.title, again.settings.metadata.get("tenant"), again.scratchpad()) == (
        "my chat", "acme", {"plan": [1, 2]})
    assert again.transcript.created_at == created and again.transcript.length == 2
    assert [i.id for i in client.sessions.list()] == ["keep"]


def test_rewind_refuses_bad_counts_stale_versions_and_closed_sessions(client: Client) -> None:
    s = client.open("refuse")
    _talk(s, 2)
    with pytest.raises(InvalidArgumentError):
        s.transcript.rewind(5)
    with pytest.raises(InvalidArgumentError):
        s.transcript.rewind(-1)
    with pytest.raises(NothingToDoError):
        s.transcript.rewind(4)
    with pytest.raises(StaleSessionError):
        s.transcript.rewind(1, expect_version=s.live.version - 1)
    with pytest.raises(NothingToDoError):
        s.transcript.undo_rewind()
    with pytest.raises(InvalidArgumentError):
        s.transcript.undo_rewind("not-a-hidden-head")
    s.close()
    with pytest.raises(SessionClosedError):
        s.transcript.rewind(1)
    assert client.open("refuse").transcript.length == 4


def test_rewind_to_zero_and_events_past_the_cut(client: Client) -> None:
    s = client.open("zero")
    _talk(s, 2)
    s.transcript.log_event("note", {"x": 1})
    s.transcript.rewind(4)  # only the event lay past the fourth message
    assert [r.kind for r in s.transcript.records] == ["user", "assistant"] * 2
    s.transcript.rewind(0)
    assert s.transcript.records == [] and s.transcript.length == 0
    s.inject({"role": "user", "content": "fresh start"})
    assert [m.text for m in s.history()] == ["fresh start"]


def test_a_rewind_of_a_rewind_and_undo_twice(client: Client) -> None:
    s = client.open("twice")
    _talk(s, 3)
    first = s.transcript.rewind(4)
    s.transcript.rewind(2)
    assert len(s.transcript.hidden_heads()) == 2 and s.transcript.hidden_heads()[1] == first
    s.transcript.undo_rewind()
    assert s.transcript.length == 4
    s.transcript.undo_rewind(first)
    assert s.transcript.length == 6 and [m.text for m in s.history()][-1] == "a2"
    ancestry = s.transcript.ancestry()
    assert set(ancestry.child_ids) == set(s.transcript.hidden_heads())


def test_forks_made_before_a_rewind_keep_their_messages(client: Client) -> None:
    s = client.open("forked")
    _talk(s, 3)
    fork = s.fork()
    s.transcript.rewind(1)
    assert [m.text for m in client.open(fork.id).history()][-1] == "a2"
    s.inject({"role": "assistant", "content": "new answer"})
    assert [m.text for m in client.open(fork.id).history()][-1] == "a2"


def test_delete_takes_the_hidden_heads_with_it(client: Client) -> None:
    s = client.open("gone")
    _talk(s, 3)
    hidden = s.transcript.rewind(1)
    client.sessions.delete("gone")
    assert not client.exists(hidden) and not client.exists("gone")
    assert client.store.integrity_check() == []


def test_erase_leaves_no_trace_in_the_sqlite_files(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    secret = "the launch code is 0000-SWORDFISH"
    with Client(tmp_path, store=path) as client:
        keep = client.open("keep")
        keep.inject({"role": "user", "content": "nothing to hide"})
        s = client.open("forget-me")
        for i in range(50):
            s.inject({"role": "user", "content": f"{secret} #{i}"})
        s.transcript.rewind(10)
        client.sessions.erase("forget-me")
        assert not client.exists("forget-me")
        assert [m.text for m in client.open("keep").history()] == ["nothing to hide"]
    for name in os.listdir(tmp_path):
        if name.startswith("s.db") and (tmp_path / name).is_file():
            assert b"SWORDFISH" not in (tmp_path / name).read_bytes(), name
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 1


# -- a crash leaves the old head or the new one --------------------------------------------


def _worker(ws: Path, path: Path, wfd: int, seed: int) -> None:  # pragma: no cover - child
    try:
        rng = random.Random(seed)
        client = Client(ws, store=path)
        s = client.open("crash")
        while True:
            n = s.transcript.length
            op = rng.random()
            if op < 0.4 or n < 2:
                after = n + 1
                os.write(wfd, f"pre {n} {after}\n".encode())
                s.inject({"role": "user", "content": f"m{n}"})
            elif op < 0.8:
                after = rng.randrange(n)
                os.write(wfd, f"pre {n} {after}\n".encode())
                s.transcript.rewind(after)
            else:
                heads = s.transcript.hidden_heads()
                if not heads:
                    continue
                target = client.store.get(heads[0])
                assert target is not None
                after = target.layout.length
                os.write(wfd, f"pre {n} {after}\n".encode())
                s.transcript.undo_rewind()
            os.write(wfd, b"ok\n")
    finally:
        os._exit(0)


@pytest.mark.slow
def test_sigkill_during_rewinds_leaves_one_head_or_the_other(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    with Client(tmp_path, store=path) as client:
        _talk(client.open("crash"), 2)
    rng = random.Random(20261201)
    for _ in range(40):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(rfd)
            _worker(tmp_path, path, wfd, rng.randrange(1 << 30))
        os.close(wfd)
        data = os.read(rfd, 1)  # the first op has begun
        time.sleep(rng.uniform(0, 0.05))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        while chunk := os.read(rfd, 65536):
            data += chunk
        os.close(rfd)
        lines = [x for x in data.decode().split("\n")[:-1] if x]
        last_pre = next(x for x in reversed(lines) if x.startswith("pre"))
        done = lines[-1] == "ok"
        before, after = (int(v) for v in last_pre.split()[1:])
        store = SQLiteStore(path)
        try:
            with Client(tmp_path, store=store) as client:
                s = client.open("crash")
                assert s.transcript.length in ({after} if done else {before, after})
                texts = [r.text for r in s.transcript.records]
                assert len(texts) == s.transcript.length
                assert store.integrity_check() == []
                for hidden in s.transcript.hidden_heads():
                    row = store.get(hidden)
                    assert row is not None
                    assert len(store.read(row, 0, row.layout.end_seq)) == row.layout.end_seq
        finally:
            store.close()


def test_deleting_a_hidden_head_keeps_what_the_session_still_reads(client: Client) -> None:
    s = client.open("shared-rows")
    _talk(s, 4)
    first = s.transcript.rewind(3)  # the session reads the first 3 of the hidden head's rows
    client.sessions.delete(first)
    assert [m.text for m in client.open("shared-rows").history()] == ["q0", "a0", "q1"]
    s.inject({"role": "assistant", "content": "a1 again"})
    second = s.transcript.rewind(2)
    s.transcript.undo_rewind(second)  # back on the row that reads the deleted head's rows
    client.sessions.delete(s.transcript.hidden_heads()[0])
    assert [m.text for m in client.open("shared-rows").history()][-1] == "a1 again"
    assert client.store.integrity_check() == []
