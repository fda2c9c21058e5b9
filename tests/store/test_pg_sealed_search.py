"""Search on an encrypted PostgreSQL store, read from its tables: hashed terms, never the words.

The conformance kit's ``SearchConformance`` and ``EncryptionConformance`` check what a
caller finds there; these tests read what the tables hold, and kill writers and
catch-ups part way to see that the index never disagrees with the transcripts (D326).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.records import Record, UserRecord
from plait.store import PostgresStore, new_encryption_key
from plait.store.search import MARK_END, MARK_START
from plait.testing._transcript import appended, new_row
from tests.conftest import POSTGRES_URL, needs_postgres

pytestmark = needs_postgres

WORDS = ("okapicontent", "okapireply", "pangolinphrase", "caf\u00e9okapi", "secretword")


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("PLAIT_ENCRYPTION_KEY", raising=False)
    return new_encryption_key()


@pytest.fixture
def target(pg_schema: str) -> str:
    return f"{POSTGRES_URL}?schema={pg_schema}"


@pytest.fixture
def sealed(target: str, key: str) -> Iterator[PostgresStore]:
    store = PostgresStore(target, encryption_key=key)
    yield store
    store.close()


def _said(store: PostgresStore, sid: str, *texts: str) -> Any:
    recs: list[Record] = [UserRecord(seq=i, content=t) for i, t in enumerate(texts)]
    return store.create(appended(new_row(sid), recs), recs)


def _hits(store: PostgresStore, query: str) -> set[tuple[str, int]]:
    return {(h.session_id, h.position) for h in store.search(query, 1000)}


def _table_text(schema: str) -> str:
    """Every row of every table of the schema, as PostgreSQL prints it."""
    import psycopg
    from psycopg import sql

    assert POSTGRES_URL is not None
    out: list[str] = []
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
        ]
        assert {"record_tokens", "record_token_marks", "records"} <= set(tables)
        for table in tables:
            query = sql.SQL("SELECT t::text FROM {}.{} t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            out.extend(str(r[0]) for r in conn.execute(query).fetchall())
    return "\n".join(out)


def _count(schema: str, table: str) -> int:
    import psycopg
    from psycopg import sql

    assert POSTGRES_URL is not None
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.{}").format(
            sql.Identifier(schema), sql.Identifier(table)
        )
        return int(conn.execute(query).fetchone()[0])  # type: ignore[index]


def _raw_delete(schema: str) -> None:
    import psycopg
    from psycopg import sql

    assert POSTGRES_URL is not None
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:  # another search_path
        conn.execute(sql.SQL("DELETE FROM {}.records").format(sql.Identifier(schema)))


def test_searches_leave_no_word_of_an_encrypted_session_in_the_tables(
    sealed: PostgresStore, pg_schema: str
) -> None:
    """Every table, read raw after searches and a rebuild, holds no searched word."""
    _said(sealed, "s", "the okapicontent here", "an okapireply to the pangolinphrase here")
    _said(sealed, "t", "caf\u00e9okapi is open", "a secretword")
    hits = sealed.search("okapicontent")
    assert [(h.session_id, h.position) for h in hits] == [("s", 0)]
    assert f"{MARK_START}okapicontent{MARK_END}" in hits[0].snippet
    assert [h.position for h in sealed.search('"the pangolinphrase"')] == [1]
    assert sealed.search('"pangolinphrase the"') == []
    # Accents and case are folded as on SQLite: one tokenizer for both sides.
    assert [h.session_id for h in sealed.search("CAFEOKAPI")] == ["t"]
    sealed.reindex()
    assert _hits(sealed, "okapireply") == {("s", 1)}
    assert _count(pg_schema, "record_tokens") == 4
    raw = _table_text(pg_schema).lower()
    assert [w for w in (*WORDS, "okapi", "pangolin", "cafe") if w in raw] == []
    # The engine's own text index (a plain store's) is given nothing of a sealed record.
    with sealed._conn("read") as conn:
        given = conn.execute(
            "SELECT count(*) FROM records WHERE plait_record_text(kind, payload) IS NOT NULL"
        ).fetchone()
    assert given == (0,)


def test_forks_share_their_tokens_and_an_erase_takes_what_only_it_read(
    sealed: PostgresStore, pg_schema: str
) -> None:
    """A shared row is indexed once and found in each fork; erase and delete take tokens."""
    from plait.layout import branch

    base = _said(sealed, "a", "numbat zero", "numbat one", "numbat secretword")
    lay = branch(base.layout, base.pk, 2, 2)
    own = [UserRecord(seq=2, content="numbat fork")]
    sealed.create(appended(new_row("b", layout=lay, parent_ids=("a",)), own), own)
    assert _hits(sealed, "numbat") == {("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)}
    assert _count(pg_schema, "record_tokens") == 4  # three of a, one of b: shared ones once
    sealed.erase("a")
    assert _hits(sealed, "numbat") == {("b", 0), ("b", 1), ("b", 2)}
    assert sealed.search("secretword") == []
    assert _count(pg_schema, "record_tokens") == 3  # the row only a read went with it
    sealed.delete("b")
    assert sealed.search("numbat") == []
    assert _count(pg_schema, "record_tokens") == 0
    assert _count(pg_schema, "record_token_marks") == 0
    # Records deleted by any statement, from any connection, take their tokens with them.
    _said(sealed, "z", "numbat again")
    assert _hits(sealed, "numbat") == {("z", 0)}
    assert _count(pg_schema, "record_tokens") == 1
    _raw_delete(pg_schema)
    assert _count(pg_schema, "record_tokens") == 0


def test_retention_erases_idle_sessions_and_their_hits(
    sealed: PostgresStore, tmp_path: Path
) -> None:
    """Sessions retention removes are no hit; the kept ones still are."""
    with Client(tmp_path, store=sealed) as c:
        old = c.sessions.create()
        old.inject({"role": "user", "content": "an idle quokka"})
        time.sleep(1.2)  # retention counts whole seconds of idleness
        kept = c.sessions.create()
        kept.inject({"role": "user", "content": "a busy quokka"})
        assert {h.session_id for h in c.sessions.search("quokka")} == {old.id, kept.id}
        gone = c.sessions.retain("1s")
        assert gone.sessions == (old.id,)
        assert [h.session_id for h in c.sessions.search("quokka")] == [kept.id]


_WRITER = """
import sys
from plait.records import UserRecord
from plait.store import PostgresStore
from plait.testing._transcript import appended, new_row

store = PostgresStore({target!r}, encryption_key={key!r})
first = UserRecord(seq=0, content="kangaroo 0")
row = store.create(appended(new_row("w"), [first]), [first])
seq = 1
while True:
    row = store.append(row, [UserRecord(seq=seq, content=f"kangaroo {{seq}}")])
    if seq % 7 == 0:
        store.search("kangaroo", 5)  # catch-ups in flight too when the kill comes
    print(seq, flush=True)
    seq += 1
"""


def test_a_writer_killed_mid_append_leaves_an_index_that_agrees(target: str, key: str) -> None:
    """SIGKILL at any point: every committed record is found once, and nothing else."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_WRITER.format(target=target, key=key))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if int(line) >= 40:
                break
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    store = PostgresStore(target, encryption_key=key)
    try:
        row = store.get("w")
        assert row is not None
        written = {r.seq for r in store.read(row, 0, row.layout.end_seq)}
        assert len(written) > 40
        assert _hits(store, "kangaroo") == {("w", s) for s in written}
        last = max(written)
        assert _hits(store, f'"kangaroo {last}"') == {("w", last)}
    finally:
        store.close()


_CATCH_UP_DIES = """
import os, signal
from plait.store import PostgresStore
from plait.store.postgres import _text as _pgtext

feed = _pgtext._feed

def dying(*args, **kwargs):
    feed(*args, **kwargs)  # tokens and marks written, not committed
    os.kill(os.getpid(), signal.SIGKILL)

_pgtext._feed = dying
store = PostgresStore({target!r}, encryption_key={key!r})
store.search("kangaroo")
"""


def test_a_catch_up_killed_before_it_commits_leaves_the_records_to_the_next(
    sealed: PostgresStore, target: str, key: str, pg_schema: str
) -> None:
    """A catch-up that dies writes nothing: its records stay past their marks."""
    _said(sealed, "k", "a kangaroo", "another kangaroo")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_CATCH_UP_DIES.format(target=target, key=key))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert _count(pg_schema, "record_tokens") == 0
    assert _count(pg_schema, "record_token_marks") == 0
    assert _hits(sealed, "kangaroo") == {("k", 0), ("k", 1)}
    assert _count(pg_schema, "record_tokens") == 2


def test_an_encrypted_schema_migrated_from_13_finds_what_it_held(target: str, key: str) -> None:
    """The token table starts empty: the first search indexes every record it finds."""
    from plait.store.postgres import MIGRATIONS

    old = PostgresStore(target, encryption_key=key, migrations=MIGRATIONS[:13])
    try:
        _said(old, "o", "an old quokka")
    finally:
        old.close()
    store = PostgresStore(target, encryption_key=key, auto_migrate=True)
    try:
        assert store.schema_version == 14
        assert _hits(store, "quokka") == {("o", 0)}
    finally:
        store.close()


def test_a_catch_up_in_many_reads_indexes_every_record_once(
    sealed: PostgresStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Owners and records read a few at a time: every record found, every mark moved."""
    from plait.store.postgres import _text as _pgtext

    monkeypatch.setattr(_pgtext, "OWNERS_PER_READ", 2)
    monkeypatch.setattr(_pgtext, "ROWS_PER_READ", 3)
    for n in range(5):
        _said(sealed, f"s{n}", *(f"wallaby {n} {i}" for i in range(n + 2)))
    assert _hits(sealed, "wallaby") == {(f"s{n}", i) for n in range(5) for i in range(n + 2)}
    assert _count(pg_schema, "record_tokens") == sum(n + 2 for n in range(5))
    assert _count(pg_schema, "record_token_marks") == 5
    assert _hits(sealed, '"wallaby 4 5"') == {("s4", 5)}
