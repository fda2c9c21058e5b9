"""Full-text search as the SQL stores keep it: migrated stores, crashes, deletes, odd text.

The protocol's cases are the conformance kit's (plait.testing, SearchConformance);
these are about the index the engines keep beside the records.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from plait import Client
from plait.store import SearchStore, SQLiteStore, Store
from plait.store import sqlite as lite
from plait.store.sqlite import _text as litetext
from tests.conftest import POSTGRES_URL, needs_postgres


def _hits(store: Store, query: str) -> list[tuple[str, int]]:
    return [(h.session_id, h.position) for h in store.search(query, 50, None)]  # type: ignore[attr-defined]


def test_a_store_migrated_from_schema_11_finds_what_it_held(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Client(tmp_path, store=SQLiteStore(path, migrations=lite.MIGRATIONS[:11])) as c:
        s = c.sessions.create()
        s.inject({"role": "user", "content": "an old quokka"})
        c.store.close()
    store = SQLiteStore(path)  # migrates past 12: the records it holds are indexed
    try:
        assert store.schema_version == lite.MIGRATIONS[-1][0] > 11
        assert _hits(store, "quokka") == [(s.id, 0)]
    finally:
        store.close()


@needs_postgres
def test_a_postgres_schema_migrated_from_11_finds_what_it_held(
    tmp_path: Path, pg_schema: str
) -> None:
    from plait.store.postgres import MIGRATIONS, PostgresStore

    assert POSTGRES_URL is not None
    old = PostgresStore(POSTGRES_URL, schema=pg_schema, migrations=MIGRATIONS[:11])
    with Client(tmp_path, store=old) as c:
        s = c.sessions.create()
        s.inject({"role": "user", "content": "an old quokka"})
    old.close()
    store = PostgresStore(POSTGRES_URL, schema=pg_schema, auto_migrate=True)
    try:
        assert _hits(store, "quokka") == [(s.id, 0)]
    finally:
        store.close()


def test_a_message_is_found_after_its_writer_died(tmp_path: Path) -> None:
    """What an append committed is in the index, even if its process never ran again."""
    path = tmp_path / "crash.db"
    code = textwrap.dedent(
        f"""
        import os
        from plait import Client
        c = Client({str(tmp_path)!r}, store={str(path)!r})
        s = c.sessions.create()
        s.inject({{"role": "user", "content": "a dying wombat"}})
        print(s.id, flush=True)
        os._exit(9)  # no close, no checkpoint, no search ever ran in this process
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 9, done.stderr
    store = SQLiteStore(path)
    try:
        assert _hits(store, "wombat") == [(done.stdout.strip(), 0)]
    finally:
        store.close()


def test_the_sqlite_index_stays_whole_through_deletes_and_erases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows collected by a delete or an erase leave the FTS5 tables as they were added."""
    monkeypatch.setattr(litetext, "SHARD_BITS", 1)  # two owners a table: several tables
    store = SQLiteStore(tmp_path / "gc.db")
    with Client(tmp_path, store=store) as c:
        a = c.sessions.create()
        a.transcript.inject_many([{"role": "user", "content": f"numbat {i}"} for i in range(5)])
        b = a.fork()
        b.inject({"role": "assistant", "content": "numbat in b"})
        assert len(_hits(store, "numbat")) == 11  # indexes what the appends wrote
        e = c.sessions.create()
        e.inject({"role": "user", "content": "numbat written, never indexed"})
        c.sessions.delete(b.id)
        c.sessions.erase(e.id)
        a.inject({"role": "user", "content": "numbat again"})
        c.sessions.delete(a.id)
        assert _hits(store, "numbat") == []
        _integrity_check(store)
        assert store._db.execute("SELECT count(*) FROM record_text_gone").fetchone()[0] == 0
        assert store._db.execute("SELECT count(*) FROM record_text_shards").fetchone()[0] > 1


def test_a_row_rewritten_after_it_was_indexed_is_found_by_its_new_text(tmp_path: Path) -> None:
    """A repair that rewrites a payload takes the old words out of the index."""
    store = SQLiteStore(tmp_path / "fix.db")
    with Client(tmp_path, store=store) as c:
        s = c.sessions.create()
        s.inject({"role": "user", "content": "a garbled gnu"})
        assert [h.position for h in c.sessions.search("gnu")] == [0]
        store._db.execute(
            "UPDATE records SET payload = ? WHERE key >> 32 = "
            "(SELECT pk FROM sessions WHERE id = ?)",
            ('{"content":"a mended moose"}', s.id),
        )
        assert c.sessions.search("gnu") == []
        assert [h.position for h in c.sessions.search("moose")] == [0]
        _integrity_check(store)


def _integrity_check(store: SQLiteStore) -> None:
    """FTS5 compares each table's index with the text it was built from: an error if
    they differ (a row indexed twice, or removed with other text than it was added)."""
    for (shard,) in store._db.execute("SELECT shard FROM record_text_shards").fetchall():
        t = f"record_text_{shard}"
        store._db.execute(f"INSERT INTO {t} ({t}, rank) VALUES ('integrity-check', 1)")


def test_text_with_a_nul_is_written_and_found_by_its_words(store: Store, tmp_path: Path) -> None:
    """A NUL (which PostgreSQL's json operators refuse) neither fails an append nor hides it."""
    with Client(tmp_path, store=store) as c:
        s = c.sessions.create()
        s.inject({"role": "user", "content": "before\x00after bilby"})
        # The text of the escape itself, as code quotes it, after a backslash.
        s.inject({"role": "user", "content": "printf('\\u0000') bilby"})
        assert sorted(h.position for h in c.sessions.search("bilby")) == [0, 1]
        assert [h.position for h in c.sessions.search("after")] == [0]


def test_an_erase_leaves_no_term_of_it_in_the_sqlite_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terms already indexed leave the file with the records: the FTS5 table that held
    them is made again, and what any page held of them is overwritten."""
    monkeypatch.setattr(litetext, "SHARD_BITS", 1)
    path = tmp_path / "s.db"
    with Client(tmp_path, store=path) as client:
        client.open("keep").inject({"role": "user", "content": "nothing to hide"})
        for i in range(4):  # sessions in other FTS5 tables
            client.open(f"other {i}").inject({"role": "user", "content": "hide and seek"})
        s = client.open("forget-me")
        for i in range(60):
            s.inject({"role": "user", "content": f"the launch code is swordfishcode {i}"})
            # Pages that split and FTS5 segments that merge, one search after another:
            # the copies they leave behind must be overwritten too.
            client.open("keep").inject({"role": "user", "content": f"filler {i} " * 40})
            assert len(client.sessions.search("swordfishcode", limit=100)) == i + 1
        client.sessions.erase("forget-me")
        assert client.sessions.search("swordfishcode") == []
        found = {h.session_id for h in client.sessions.search("hide")}
        assert found == {"keep", *(f"other {i}" for i in range(4))}
    for f in tmp_path.iterdir():
        if f.name.startswith("s.db") and f.is_file():
            assert b"swordfishcode" not in f.read_bytes(), f.name


def test_a_word_written_by_each_path_is_found_in_forks_too(store: Store, tmp_path: Path) -> None:
    """A run, inject, an import and a framework adapter each write a word that is found,
    in the session that holds it and in a fork of it."""
    import asyncio

    from plait.interop import seed_from_jsonl
    from plait.providers import ScriptedProvider

    if not isinstance(store, SearchStore):
        pytest.skip(f"{type(store).__name__} keeps no full-text index")
    with Client(tmp_path, store=store) as c:
        ran = c.sessions.create()
        asyncio.run(ran.prompt("ask of the axolotl", provider=ScriptedProvider(["an aardwolf"])))
        injected = c.sessions.create()
        injected.inject({"role": "user", "content": "an injected ibex"})
        transcript = tmp_path / "chat.jsonl"
        lines = [
            {"role": "user", "content": "imported impala"},
            {"role": "assistant", "content": "ok"},
        ]
        transcript.write_text("".join(json.dumps(m) + "\n" for m in lines))
        imported = seed_from_jsonl(c, transcript, format="openai").session_id
        if importlib.util.find_spec("agents") is not None:
            from plait.integrations.openai_agents import PlaitSession

            adapted = PlaitSession("agents/1", c)
            asyncio.run(adapted.add_items([{"role": "user", "content": "an adapted addax"}]))
            assert [h.session_id for h in c.sessions.search("addax")] == ["agents/1"]
        words = {"axolotl": ran.id, "aardwolf": ran.id, "ibex": injected.id, "impala": imported}
        for word, sid in words.items():
            assert [h.session_id for h in c.sessions.search(word)] == [sid], word
        forks = {sid: c.open(sid).fork().id for sid in set(words.values())}
        for word, sid in words.items():
            assert {h.session_id for h in c.sessions.search(word)} == {sid, forks[sid]}, word


def test_a_writer_of_many_sessions_forgets_them_and_a_search_still_finds_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owners a store remembers writing to are bounded; past that it reads every mark."""
    monkeypatch.setattr(litetext, "DIRTY_MAX", 3)
    store = SQLiteStore(tmp_path / "many.db")
    store._checkpoint_every = 2
    with Client(tmp_path, store=store) as c:
        assert c.sessions.search("kudu") == []
        ids = {c.sessions.create([{"role": "user", "content": f"kudu {i}"}]).id for i in range(8)}
        assert len(store._text.dirty) <= 3 + 2
        assert {h.session_id for h in c.sessions.search("kudu")} == ids
