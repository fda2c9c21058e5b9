"""Listing by id prefix: the range it reads is exactly the prefix, through an index.

The kit (``ListingConformance``) checks what a listing returns on every store; this
checks how plait's SQL stores find it: ``[prefix, successor(prefix))`` holds exactly
the strings that start with the prefix, and each engine reads that range from an
index of the ids, so a listing costs what it returns, not the number of sessions.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait import Client
from plait.store import SQLiteStore
from plait.store.sql._dialect import Statements
from plait.store.sql._store import successor
from tests.conftest import POSTGRES_URL, needs_postgres

_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)


@given(_TEXT, _TEXT)
def test_the_range_holds_exactly_the_strings_with_the_prefix(prefix: str, other: str) -> None:
    upper = successor(prefix)
    for text in (other, prefix + other, prefix[:-1] + other):
        inside = prefix <= text and (upper is None or text < upper)
        assert inside == text.startswith(prefix), (prefix, text, upper)


def test_the_successor_steps_over_surrogates_and_the_last_code_point() -> None:
    assert successor("user/") == "user0"
    assert successor("a\ud7ff") == "a\ue000"
    assert successor("a\U0010ffff") == "b"
    assert successor("\U0010ffff\U0010ffff") is None
    assert successor("") is None


def test_sqlite_reads_the_range_from_the_id_index(tmp_path: Path) -> None:
    db = tmp_path / "plait.db"
    with Client(tmp_path, store=db) as client:
        for i in range(50):
            client.sessions.create([{"role": "user", "content": "hi"}], session_id=f"u{i}/s")
        assert [s.id for s in client.sessions.list(prefix="u1/")] == ["u1/s"]
    q = Statements(SQLiteStore.dialect)
    with sqlite3.connect(db) as conn:
        for statement, params in (
            (q.prefix_all, ("u1/", "u10", 10)),
            (q.prefix, ("u1/", "u10", str(tmp_path), 10)),
        ):
            plan = " ".join(
                str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {statement}", params)
            )
            assert "SEARCH s USING INDEX sqlite_autoindex_sessions_1 (id>? AND id<?)" in plan, plan


@needs_postgres
def test_postgres_reads_the_range_from_the_byte_order_index(pg_schema: str) -> None:
    import psycopg

    from plait.store.postgres import PostgresStore

    assert POSTGRES_URL is not None
    store = PostgresStore(POSTGRES_URL, schema=pg_schema)
    try:
        q = Statements(PostgresStore.dialect)
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{pg_schema}"')
            conn.execute("SET enable_seqscan = off")  # a tiny table: the index only if usable
            for statement, params in (
                (q.prefix_all, ("u1/", "u10", 10)),
                (q.prefix, ("u1/", "u10", "/ws", 10)),
            ):
                rows: list[Any] = conn.execute(f"EXPLAIN {statement}", params).fetchall()
                plan = "\n".join(r[0] for r in rows)
                assert "sessions_id_bytes" in plan, plan
    finally:
        store.close()


@pytest.mark.parametrize("prefix", [None, "", "a/"])
def test_client_lists_by_prefix_in_its_workspace(tmp_path: Path, prefix: str | None) -> None:
    (tmp_path / "w1").mkdir()
    (tmp_path / "w2").mkdir()
    db = tmp_path / "plait.db"
    with Client(tmp_path / "w1", store=db) as one, Client(tmp_path / "w2", store=db) as two:
        for sid in ("a/1", "a/2", "b/1"):
            one.sessions.create([{"role": "user", "content": sid}], session_id=sid)
        two.sessions.create([{"role": "user", "content": "x"}], session_id="a/3")
        mine = [s.id for s in one.sessions.list(prefix=prefix)]
        every = [s.id for s in one.sessions.list(prefix=prefix, all_workspaces=True)]
    if prefix == "a/":
        assert mine == ["a/2", "a/1"] and every == ["a/3", "a/2", "a/1"]
    else:
        assert mine == ["b/1", "a/2", "a/1"] and every == ["a/3", "b/1", "a/2", "a/1"]


def test_a_prefix_that_is_not_text_is_refused(tmp_path: Path) -> None:
    from plait.errors import InvalidArgumentError

    with (
        Client(tmp_path, store=tmp_path / "plait.db") as client,
        pytest.raises(InvalidArgumentError, match="prefix must be text"),
    ):
        client.sessions.list(prefix=3)  # type: ignore[arg-type]
