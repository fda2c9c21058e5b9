"""Retention gives the space back: the SQLite file shrinks, an older file once rewritten;
and what it removes of the object space is only what the removed sessions' checkpoints
needed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plait import Client
from plait.session.checkpoints import checkpoints_of
from plait.store import SQLiteStore
from tests.conftest import POSTGRES_URL, make_store, needs_postgres


def _fill(client: Client, n: int, size: int = 4000) -> list[str]:
    ids = []
    for k in range(n):
        s = client.sessions.new()
        big = [{"role": "user", "content": f"{k} " + "z" * size} for _ in range(30)]
        s.transcript.inject_many(big)
        ids.append(s.id)
    return ids


def _mode(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA auto_vacuum").fetchone()[0])


def test_a_new_store_shrinks_its_file(tmp_path: Path) -> None:
    """Freed pages go back to the file system at once: the file is smaller, no free page left."""
    db = tmp_path / "plait.db"
    with Client(tmp_path, store=db) as client:
        old = _fill(client, 4)
        time.sleep(2.2)
        kept = _fill(client, 1)
        done = client.sessions.retain(2, all_workspaces=True)
        assert sorted(done.sessions) == sorted(old)
        assert done.reclaimed == "incremental vacuum" and done.free_bytes == 0
        assert done.bytes_freed > 4 * 30 * 4000 * 0.9
        # The log is checkpointed and truncated: the file is the store, shrunk.
        assert done.bytes_before is not None
        assert db.stat().st_size == done.bytes_after < done.bytes_before
        assert [i.id for i in client.sessions.list()] == kept
    assert _mode(db) == 2  # incremental


def test_an_older_file_keeps_its_free_pages_until_asked_to_rewrite(tmp_path: Path) -> None:
    """auto_vacuum NONE (a store made before D311): pages are free for reuse; --vacuum shrinks."""
    db = tmp_path / "plait.db"
    SQLiteStore(db).close()
    with sqlite3.connect(db, isolation_level=None) as raw:  # what an older plait made
        raw.execute("PRAGMA auto_vacuum = NONE")
        raw.execute("VACUUM")
    assert _mode(db) == 0
    with Client(tmp_path, store=db) as client:
        _fill(client, 3)
        time.sleep(1.2)
        done = client.sessions.retain(1, all_workspaces=True)
        assert len(done.sessions) == 3
        assert done.reclaimed == "free pages kept for reuse"
        assert done.bytes_freed == 0 and done.free_bytes is not None
        assert done.free_bytes > 3 * 30 * 4000 * 0.9
        assert db.stat().st_size == done.bytes_after == done.bytes_before
        again = client.sessions.retain(1, all_workspaces=True, vacuum=True)
        assert again.sessions == () and again.reclaimed == "vacuum"
        assert again.free_bytes == 0 and again.bytes_freed > done.free_bytes * 0.9
        assert done.bytes_after is not None
        assert db.stat().st_size == again.bytes_after < done.bytes_after - done.free_bytes * 0.9
    assert _mode(db) == 2  # rewritten in incremental mode: the next pass shrinks it


def test_objects_no_checkpoint_names_are_never_touched(tmp_path: Path) -> None:
    """Another user of the object space (LangGraph's channel values) keeps its objects."""
    with Client(tmp_path, store=tmp_path / "plait.db") as client:
        store = client.store
        body = b"a value another part of plait keeps"
        digest = hashlib.sha256(body).hexdigest()
        store.object_put(digest, [body], 0)  # long unused: no grace keeps it
        folder = tmp_path / "files"
        folder.mkdir()
        (folder / "a.txt").write_text("only the old session's")
        checkpoint = checkpoints_of(store).checkpoint(folder)
        s = client.sessions.new()
        s.transcript.inject_many([
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "name": "write_file", "arguments": {}}],
            },
            {"role": "tool", "content": "ok", "tool_call_id": "c",
             "meta": {"workspace": {"after": checkpoint}}},
        ])
        time.sleep(1.2)
        done = client.sessions.retain(1, all_workspaces=True, checkpoint_grace=0)
        assert done.sessions == (s.id,) and done.checkpoint_objects == 2
        assert store.object_has([digest]) == {digest}
        assert store.object_digests() == [digest]


@needs_postgres
def test_postgres_vacuums_and_says_the_space_is_reusable(pg_schema: str, tmp_path: Path) -> None:
    """Plain VACUUM: rows gone, no free-byte figure claimed; vacuum=True runs VACUUM FULL."""
    with Client(tmp_path, store=make_store("postgres", tmp_path, pg_schema)) as client:
        _fill(client, 3)
        time.sleep(1.2)
        done = client.sessions.retain(1, all_workspaces=True)
        assert len(done.sessions) == 3 and done.reclaimed == "vacuum"
        assert done.free_bytes is None and done.records == 90
        full = client.sessions.retain(1, all_workspaces=True, vacuum=True)
        assert full.reclaimed == "vacuum full"
        assert full.bytes_after is not None and done.bytes_after is not None
        assert full.bytes_after < done.bytes_after


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_retaining_at_once_remove_each_session_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """As two replicas on one store would (D313): both succeed, each session goes once."""
    if kind == "postgres":
        schema = request.getfixturevalue("pg_schema")
        store = make_store("postgres", tmp_path, schema)
        target = f"{POSTGRES_URL}?schema={schema}" if "?" not in str(POSTGRES_URL) else (
            f"{POSTGRES_URL}&schema={schema}"
        )
    else:
        store = make_store("sqlite", tmp_path)
        target = str(tmp_path / "plait.db")
    with Client(tmp_path, store=store) as client:
        old = _fill(client, 12, size=200)
        time.sleep(8.5)  # past the age, with room for two commands' start-up on a busy machine
        kept = _fill(client, 1, size=200)
    store.close()
    command = [sys.executable, "-m", "plait", "--store", target, "db", "retain",
               "--older-than", "8s", "--json"]
    procs = [
        subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    removed = [sid for out, _ in outs for sid in json.loads(out)["sessions"]]
    assert sorted(removed) == sorted(old)  # every one, none twice
    # A session one pass was erasing when the other looked may be named as in use by it.
    assert {sid for out, _ in outs for sid in json.loads(out)["skipped"]} <= set(old)
    with Client(tmp_path, store=make_store(kind, tmp_path, schema if kind == "postgres" else None)
                ) as client:
        assert [i.id for i in client.sessions.list(all_workspaces=True)] == kept
        assert client.store.integrity_check() == []
