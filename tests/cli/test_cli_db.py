"""``plait db ...``: path, migrate, check."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import Client
from plait.cli import cli
from plait.store import SQLiteStore
from plait.store.sqlite import MIGRATIONS

from ._helpers import Run, assert_clean_error, conversation

# A schema one version ahead of the shipped one, to play an older database.
NEXT = (*MIGRATIONS, (MIGRATIONS[-1][0] + 1, "test: one more table", ("CREATE TABLE extra (x)",)))


def test_check_says_ok(run: Run, api: Client) -> None:
    conversation(api).fork()
    result = run("db", "check")
    assert result.exit_code == 0, result.output
    assert result.stdout == "ok\n"


def test_check_reports_missing_rows_and_exits_1(run: Run, api: Client, db_path: Path) -> None:
    s = conversation(api)
    api.close()
    with sqlite3.connect(db_path) as raw:
        raw.execute("DELETE FROM records WHERE key = (SELECT MAX(key) FROM records)")
    raw.close()
    result = run("db", "check")
    assert result.exit_code == 1
    assert f"session {s.id} record 4: the record is missing" in result.stdout
    assert result.stderr.startswith("Error: 1 problem(s)")


def test_check_without_a_store_file(run: Run, db_path: Path) -> None:
    assert_clean_error(run("db", "check"), "no store at")
    assert not db_path.exists()


def test_check_a_file_that_is_not_a_store(run: Run, db_path: Path) -> None:
    db_path.write_bytes(b"garbage" * 1000)
    result = run("db", "check")
    # It never was a database: said as that, not called damaged, with nothing to recover.
    assert_clean_error(result, f"{db_path} is not a plait store", "not a SQLite database")
    assert "damaged" not in result.output and "recover" not in result.output
    assert db_path.read_bytes() == b"garbage" * 1000


def test_migrate_creates_then_is_up_to_date(run: Run, db_path: Path) -> None:
    created = run("db", "migrate")
    assert created.exit_code == 0, created.output
    latest = MIGRATIONS[-1][0]
    assert "created" in created.stdout and f"schema version {latest}" in created.stdout
    again = run("db", "migrate")
    assert again.stdout == f"up to date (schema version {latest})\n"


def test_migrate_upgrades_an_older_schema(
    run: Run, api: Client, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = conversation(api)
    api.close()
    newer = functools.partial(SQLiteStore, migrations=NEXT)
    monkeypatch.setattr("plait.cli.db.SQLiteStore", newer)
    # check refuses to touch an outdated schema and says what upgrades it.
    # (The command named is aimed at this store, as given.)
    assert_clean_error(run("db", "check"), f"plait --store {db_path} db migrate")
    result = run("db", "migrate")
    assert result.exit_code == 0, result.output
    assert "migrated" in result.stdout and f"schema version {NEXT[-1][0]}" in result.stdout
    assert run("db", "check").stdout == "ok\n"
    # The shipped code now refuses the newer file, cleanly.
    monkeypatch.undo()
    assert_clean_error(run("sessions", "show", s.id), "newer")


def test_db_path_honours_plait_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path / "home"))
    result = CliRunner().invoke(cli, ["db", "path"])
    assert result.stdout.strip() == str((tmp_path / "home" / "plait.db").resolve())
    result = CliRunner().invoke(
        cli, ["--store", "sqlite:///" + str(tmp_path / "y.db"), "db", "path"]
    )
    assert result.stdout.strip() == str((tmp_path / "y.db").resolve())


def test_db_commands_need_a_file() -> None:
    for command in (["db", "check"], ["db", "migrate"]):
        result = CliRunner().invoke(cli, ["--store", ":memory:", *command])
        assert result.exit_code == 2
        assert ":memory:" in result.stderr


def test_check_reports_a_newer_schema_and_nothing_writes_to_it(
    run: Run, api: Client, db_path: Path
) -> None:
    conversation(api)
    api.close()
    with sqlite3.connect(db_path) as raw:
        raw.execute("INSERT INTO plait_schema VALUES (999, 'from the future', 0)")
    raw.close()
    assert_clean_error(run("db", "check"), "newer than this plait")
    assert_clean_error(run("sessions", "list"), "newer than this plait")
    with sqlite3.connect(db_path) as raw:
        assert raw.execute("SELECT MAX(version) FROM plait_schema").fetchone()[0] == 999
    raw.close()


def test_migrate_and_check_a_postgresql_store(tmp_path: Path) -> None:
    import os
    import uuid

    url = os.environ.get("PLAIT_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("set PLAIT_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test "
                    "to run the PostgreSQL store tests")
    schema = f"plait_t_cli_{uuid.uuid4().hex[:12]}"
    target = f"{url}{'&' if '?' in url else '?'}schema={schema}"
    runner = CliRunner()
    try:
        first = runner.invoke(cli, ["--store", target, "db", "migrate"])
        assert first.exit_code == 0, first.output
        again = runner.invoke(cli, ["--store", target, "db", "migrate"])
        assert again.output.startswith("up to date")
        checked = runner.invoke(cli, ["--store", target, "db", "check"])
        assert (checked.exit_code, checked.output) == (0, "ok\n")
    finally:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
