"""A damaged store: reads raise StoreCorruptError, listings skip, the checks name the damage.

Damage is made the way it happens: a 4 KiB page of a real SQLite file zeroed, a
row or a payload written by another program (``sqlite3``, or SQL on PostgreSQL).
Each test then reads through the public API and the ``plait`` command.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from plait import Client, Session
from plait.cli import cli
from plait.errors import SessionNotFoundError, StoreCorruptError, StoreCorruptWarning
from plait.store import SQLiteStore
from tests.conftest import POSTGRES_URL, needs_postgres

PAGE = 4096


def _fill(client: Client, tag: str, n: int = 60) -> Session:
    """A session of ``n`` messages, each ~600 bytes holding a marker unique in the file."""
    return client.sessions.create(
        [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"<{tag}-{i:03d}>" + "x" * 600,
            }
            for i in range(n)
        ],
        title=tag,
    )


def _zero_page_holding(db: Path, marker: str) -> int:
    """Zero the page of the file that holds ``marker`` (the store is closed); its number."""
    data = db.read_bytes()
    page = data.index(marker.encode()) // PAGE
    assert page > 0  # never the header page: the file must still open
    with db.open("r+b") as f:
        f.seek(page * PAGE)
        f.write(b"\0" * PAGE)
    return page


def _plait(db: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the plait command as a script would: no terminal, stdin at /dev/null."""
    return subprocess.run(
        [sys.executable, "-m", "plait", "--store", str(db), "--workspace", str(ws), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def damaged(tmp_path: Path) -> Iterator[tuple[Path, Path, list[str]]]:
    """A store of three sessions whose middle one lost a page of its records."""
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        ids = [_fill(client, tag).id for tag in ("alpha", "bravo", "charlie")]
    _zero_page_holding(db, "<bravo-030>")
    yield db, ws, ids


def test_a_zeroed_page_is_a_store_corrupt_error_and_the_rest_reads(
    damaged: tuple[Path, Path, list[str]],
) -> None:
    db, ws, (alpha, bravo, charlie) = damaged
    with Client(ws, store=db) as client:
        with pytest.raises(StoreCorruptError, match="malformed"):
            client.open(bravo).history()
        with pytest.raises(StoreCorruptError):
            client.sessions.history_of(bravo)
        assert len(client.open(alpha).history()) == 60
        assert len(client.open(charlie).history()) == 60
        assert {i.id for i in client.sessions.list()} == {alpha, bravo, charlie}


def test_db_check_reports_a_zeroed_page_without_a_traceback(
    damaged: tuple[Path, Path, list[str]],
) -> None:
    db, ws, (_, bravo, _) = damaged
    plain = _plait(db, ws, "db", "check")
    assert plain.returncode == 1, plain.stderr
    assert "Traceback" not in plain.stderr + plain.stdout
    assert "malformed" in plain.stdout
    assert f"session {bravo}" in plain.stdout
    assert plain.stderr.startswith("Error: ")
    assert "hint: " in plain.stdout and "db recover" in plain.stdout


def test_db_check_deep_names_the_session_and_records_of_a_zeroed_page(
    damaged: tuple[Path, Path, list[str]],
) -> None:
    db, ws, (alpha, bravo, charlie) = damaged
    deep = _plait(db, ws, "db", "check", "--deep", "--json")
    assert deep.returncode == 1, deep.stderr
    report = json.loads(deep.stdout)
    assert report["ok"] is False and report["deep"] is True
    records = [p for p in report["problems"] if p["seq"] is not None]
    assert {p["session_id"] for p in records} == {bravo}
    lost = sorted(p["seq"] for p in records)
    assert 30 in lost and len(lost) < 20  # one page's records, each named
    assert all("cannot be read" in p["what"] for p in records)
    # What can be kept: every message before the first lost record, and the command.
    first = min(records, key=lambda p: p["seq"])
    assert first["kept"] == lost[0]
    # Aimed at this store, as the command was given it.
    fork = f"plait --store {db} sessions fork {bravo} --at {lost[0]}"
    assert any(fork in h for h in report["hints"])
    assert not any(p["session_id"] in (alpha, charlie) for p in report["problems"])
    # The command it names saves those messages.
    kept = _plait(db, ws, "sessions", "fork", bravo, "--at", str(lost[0]))
    assert kept.returncode == 0, kept.stderr
    with Client(ws, store=db) as client:
        branch = next(i for i in client.sessions.list() if i.parent_session_ids == (bravo,))
        assert len(client.open(branch.id).history()) == lost[0]


def test_db_recover_copies_what_a_zeroed_page_left_into_a_new_file(
    damaged: tuple[Path, Path, list[str]],
) -> None:
    db, ws, (alpha, bravo, charlie) = damaged
    with closing(sqlite3.connect(db)) as raw, raw:  # a checkpoint object, as stored
        raw.execute("INSERT INTO checkpoint_objects VALUES ('ab', 3, 1)")
        raw.execute("INSERT INTO checkpoint_parts VALUES ('ab', 0, x'010203')")
    before = db.read_bytes()
    new = db.parent / "recovered.db"
    done = _plait(db, ws, "db", "recover", str(new))
    assert done.returncode == 0, done.stderr
    assert db.read_bytes() == before  # the damaged file is only read
    assert "copied 3 session row(s)" in done.stdout
    lost = int(done.stdout.split("could not read: ")[1].split(" record")[0])
    assert 0 < lost < 20
    assert f"plait --store {new} db check --deep" in done.stdout
    report = json.loads(_plait(new, ws, "db", "check", "--deep", "--json").stdout)
    assert {p["session_id"] for p in report["problems"]} == {bravo}
    assert all(p["what"] == "the record is missing" for p in report["problems"])
    assert len(report["problems"]) == lost
    with Client(ws, store=new) as client:
        assert len(client.open(alpha).history()) == 60
        assert len(client.open(charlie).history()) == 60
    with closing(sqlite3.connect(new)) as raw:
        assert raw.execute("SELECT data FROM checkpoint_parts").fetchall() == [(b"\x01\x02\x03",)]
    again = _plait(db, ws, "db", "recover", str(new))
    assert again.returncode == 1 and "exists" in again.stderr


def test_an_undecodable_payload_is_corrupt_on_read_and_named_by_the_deep_check(
    tmp_path: Path,
) -> None:
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        good, bad = _fill(client, "good", 6), _fill(client, "bad", 6)
        rid = bad.transcript.records[4].id
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute("UPDATE records SET payload = '{\"content\": 5}' WHERE id = ?", (rid,))
    with Client(ws, store=db) as client:
        with pytest.raises(StoreCorruptError, match="seq=4"):
            client.open(bad.id).history()
        assert len(client.open(good.id).history()) == 6
    with closing(SQLiteStore(db)) as store:
        found = store.check(deep=True)
    assert [(p.session_id, p.seq, p.record_id) for p in found] == [(bad.id, 4, rid)]
    assert found[0].kept == 4
    with closing(SQLiteStore(db)) as store:
        assert [(p.session_id, p.seq) for p in store.check()] == [(bad.id, 4)]  # plain too
    plain = CliRunner().invoke(cli, ["--store", str(db), "db", "check"])
    assert plain.exit_code == 1 and f"session {bad.id} record 4 (id {rid}):" in plain.stdout
    result = CliRunner().invoke(cli, ["--store", str(db), "db", "check", "--deep"])
    assert result.exit_code == 1
    assert f"session {bad.id} record 4 (id {rid}):" in result.stdout
    assert f"plait --store {db} sessions fork {bad.id} --at 4" in result.stdout
    assert f"plait --store {db} sessions rm ID --yes" in result.stdout
    # The commands it names save the readable part and remove the rest.
    base = ["--store", str(db), "--workspace", str(ws), "sessions"]
    assert CliRunner().invoke(cli, [*base, "fork", bad.id, "--at", "4"]).exit_code == 0
    assert CliRunner().invoke(cli, [*base, "rm", bad.id, "--yes"]).exit_code == 0
    with closing(SQLiteStore(db)) as store:
        assert store.check(deep=True) == []


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("bases", "not json"),
        ("lineage_operator", b"\x00\xff"),  # a BLOB another program stored
        ("metadata", "[1, 2]"),
        ("title", b"\x01"),
    ],
)
def test_an_undecodable_session_row_is_skipped_by_listings_and_named_by_the_check(
    tmp_path: Path, column: str, value: Any
) -> None:
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        ok = [_fill(client, f"ok{i}", 2).id for i in range(3)]
        bad = _fill(client, "bad", 2).id
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, bad))
    with Client(ws, store=db) as client:
        with pytest.warns(StoreCorruptWarning, match=bad):
            listed = [i.id for i in client.sessions.list()]
        assert sorted(listed) == sorted(ok)
        with pytest.warns(StoreCorruptWarning):
            assert len(client.sessions.list(3)) == 3  # the next session takes its place
        with pytest.raises(SessionNotFoundError, match="cannot be read"):
            client.sessions.open(bad)
    shown = _plait(db, ws, "sessions", "list")
    assert shown.returncode == 0, shown.stderr
    assert all(sid[:8] in shown.stdout for sid in ok)
    assert shown.stderr.startswith("warning: 1 session row(s) could not be read")
    checked = _plait(db, ws, "db", "check")
    assert checked.returncode == 1
    assert f"session {bad}: session row" in checked.stdout and column in checked.stdout


def test_db_check_deep_checks_a_rows_layout_and_settings(tmp_path: Path) -> None:
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        s = _fill(client, "s", 4)
        s.settings.set(model="m")
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute(
            "UPDATE sessions SET metadata = '{\"settings\": [1]}', status = 'gone', "
            "view_start = 99 WHERE id = ?",
            (s.id,),
        )
    with closing(SQLiteStore(db)) as store:
        assert store.check() == []  # the row decodes; only the deep check reads its sense
        found = {p.what for p in store.check(deep=True)}
    assert any("settings are a list" in w for w in found)
    assert any("status is 'gone'" in w for w in found)
    assert any("view (99" in w for w in found)


def test_a_healthy_store_with_branches_passes_the_deep_check(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "plait.db") as client:
        s = _fill(client, "root", 10)
        s.fork().inject({"role": "user", "content": "more"})
        s.fork_at(4).inject({"role": "user", "content": "other"})
        s.transcript.rewind(3)  # the old head stays as a hidden row
        s.inject({"role": "user", "content": "after the rewind"})
        client.sessions.delete(s.id)  # its rows stay for the branches
        assert client.store.integrity_check() == []
        result = CliRunner().invoke(
            cli, ["--store", str(tmp_path / "plait.db"), "db", "check", "--deep", "--json"]
        )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "store": str((tmp_path / "plait.db").resolve()),
        "deep": True,
        "ok": True,
        "problems": [],
        "hints": [],
        "notes": [],
    }


# -- PostgreSQL -----------------------------------------------------------------------


@needs_postgres
def test_postgres_a_corrupt_payload_is_typed_and_named_by_the_deep_check(
    tmp_path: Path, pg_store_schema: str
) -> None:
    from psycopg import sql

    from plait.store.postgres import PostgresStore

    assert POSTGRES_URL is not None
    url = f"{POSTGRES_URL}?schema={pg_store_schema}"
    with Client(tmp_path, store=PostgresStore(POSTGRES_URL, schema=pg_store_schema)) as client:
        good, bad = _fill(client, "good", 5), _fill(client, "bad", 5)
        rid = bad.transcript.records[3].id
        with client.store._conn("corrupt") as conn:  # type: ignore[attr-defined]
            conn.execute(
                sql.SQL("UPDATE {}.records SET payload = 'not json' WHERE id = %s").format(
                    sql.Identifier(pg_store_schema)
                ),
                (rid,),
            )
        with pytest.raises(StoreCorruptError, match="seq=3"):
            client.open(bad.id).history()
        assert len(client.open(good.id).history()) == 5
        found = client.store.check(deep=True)  # type: ignore[attr-defined]
        assert [(p.session_id, p.seq, p.record_id) for p in found] == [(bad.id, 3, rid)]
        client.store.close()
    result = CliRunner().invoke(cli, ["--store", url, "db", "check", "--deep", "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert [p["session_id"] for p in report["problems"]] == [bad.id]
    assert any(
        f"sessions fork {bad.id} --at 3" in h and "plait --store " in h for h in report["hints"]
    )


@needs_postgres
def test_postgres_damaged_storage_is_a_store_corrupt_error(pg_store_schema: str) -> None:
    import psycopg

    from plait.store.postgres import PostgresStore

    assert POSTGRES_URL is not None
    with closing(PostgresStore(POSTGRES_URL, schema=pg_store_schema)) as store:
        # The server's own report of a damaged page (SQLSTATE XX001), raised where the
        # driver raises it: inside the store's one wrapping of driver errors.
        def damaged() -> None:
            with store._conn("read"):  # type: ignore[attr-defined]
                raise psycopg.errors.DataCorrupted("invalid page in block 7 of relation")

        with pytest.raises(StoreCorruptError, match="invalid page"):
            damaged()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert store.check(deep=True) == []
