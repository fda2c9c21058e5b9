"""Shared fixtures: every store plait ships, and a guard against reaching the network."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from plait import Client
from plait.store import MemoryStore, SQLiteStore, Store

# A shared or small machine (CI has two cores) can make input generation slow for
# reasons that say nothing about the code under test; every other health check stays.
settings.register_profile("plait", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("plait")

# Subprocesses the tests start (``python -m plait`` in a temporary folder) must import
# the plait under test: a relative PYTHONPATH (``PYTHONPATH=src pytest``) is made
# absolute, or from another folder they would import whichever plait is installed.
if os.environ.get("PYTHONPATH"):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        str(Path(p).resolve()) for p in os.environ["PYTHONPATH"].split(os.pathsep) if p
    )

POSTGRES_URL = os.environ.get("PLAIT_TEST_POSTGRES_URL") or None
"""The server the PostgreSQL store is tested on; its tests skip when unset."""
POSTGRES_SKIP = (
    "set PLAIT_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/test "
    "to run the PostgreSQL store tests"
)
needs_postgres = pytest.mark.skipif(POSTGRES_URL is None, reason=POSTGRES_SKIP)
"""Mark a test that needs a PostgreSQL server."""

STORE_KINDS = [
    "sqlite",
    "memory",
    pytest.param("postgres", marks=needs_postgres),
]


def fresh_schema() -> str:
    """A schema name no other test (or xdist worker) uses."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return f"plait_t_{worker}_{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def _pg_admin() -> Iterator[Any]:
    """One connection per test process for dropping and emptying test schemas."""
    import psycopg

    assert POSTGRES_URL is not None
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        yield conn


def drop_schema(schema: str, conn: Any = None) -> None:
    """Drop a test's schema and everything in it."""
    import psycopg
    from psycopg import sql

    assert POSTGRES_URL is not None
    statement = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
    if conn is not None:
        conn.execute(statement)
        return
    with psycopg.connect(POSTGRES_URL, autocommit=True) as own:
        own.execute(statement)


def make_store(kind: str, tmp_path: Path, schema: str | None = None) -> Store:
    """Open a fresh store of the given kind.

    PostgreSQL: in ``schema`` (take one from the ``pg_store_schema`` or ``pg_schema``
    fixture, which clean up); without one, in a new schema nobody drops until the next
    ``.ci/run``.
    """
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "plait.db")
    if kind == "memory":
        return MemoryStore()
    if kind == "postgres":
        from plait.store.postgres import PostgresStore

        if POSTGRES_URL is None:
            pytest.skip(POSTGRES_SKIP)
        return PostgresStore(POSTGRES_URL, schema=schema or fresh_schema())
    raise AssertionError(kind)


@pytest.fixture
def pg_schema(request: pytest.FixtureRequest) -> Iterator[str]:
    """A new PostgreSQL schema name for one test (not yet created), dropped afterwards."""
    if POSTGRES_URL is None:
        pytest.skip(POSTGRES_SKIP)
    admin = request.getfixturevalue("_pg_admin")
    schema = fresh_schema()
    yield schema
    drop_schema(schema, admin)


@pytest.fixture(scope="session")
def _pg_spare() -> Iterator[list[str]]:
    """Emptied, migrated schemas of this test process, waiting for the next test."""
    spare: list[str] = []
    yield spare
    if POSTGRES_URL is not None:
        for schema in spare:
            drop_schema(schema)


def _empty_schema(conn: Any, schema: str) -> bool:
    """Empty a test's schema for the next test; False if it is not plain plait any more."""
    from psycopg import sql

    from plait.store.postgres import MIGRATIONS

    tables = conn.execute(
        "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)
    ).fetchone()[0]
    # sessions, records, lineage, scratchpads, durable_sessions, live_clients, plait_schema,
    # checkpoint_objects, checkpoint_parts, replicas, runs, live_streams, plait_bus,
    # writer_fences, data_keys, record_tokens, record_token_marks (emptied with the records
    # and the sessions, by a trigger and a cascading key)
    if tables != 17:
        return False
    ident = sql.Identifier(schema)
    version = conn.execute(
        sql.SQL("SELECT max(version) FROM {}.plait_schema").format(ident)
    ).fetchone()[0]
    if version != max(m[0] for m in MIGRATIONS):
        return False
    conn.execute(
        sql.SQL(
            "DELETE FROM {0}.lineage; DELETE FROM {0}.scratchpads; "
            "DELETE FROM {0}.live_clients; DELETE FROM {0}.durable_sessions; "
            "DELETE FROM {0}.records; DELETE FROM {0}.sessions; "
            "DELETE FROM {0}.checkpoint_parts; DELETE FROM {0}.checkpoint_objects; "
            "DELETE FROM {0}.plait_bus; DELETE FROM {0}.replicas; DELETE FROM {0}.runs; "
            "DELETE FROM {0}.live_streams; DELETE FROM {0}.writer_fences; "
            "DELETE FROM {0}.data_keys"
        ).format(ident)
    )
    return True


@pytest.fixture
def pg_store_schema(request: pytest.FixtureRequest, _pg_spare: list[str]) -> Iterator[str]:
    """An empty schema at the current migration, for one test alone.

    Creating and dropping a schema (a dozen tables and indexes) costs far more than
    emptying one, and every store test runs on PostgreSQL too: so each test process
    keeps the schemas its finished tests used, emptied and checked, and hands them to
    the next test. A test that changes a schema's shape gets it dropped, not reused;
    tests of migrations use ``pg_schema``.
    """
    if POSTGRES_URL is None:
        pytest.skip(POSTGRES_SKIP)
    admin = request.getfixturevalue("_pg_admin")
    schema = _pg_spare.pop() if _pg_spare else fresh_schema()
    yield schema
    if _empty_schema(admin, schema):
        _pg_spare.append(schema)
    else:
        drop_schema(schema, admin)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each store plait ships, fresh for every test (PostgreSQL: in a schema of its own)."""
    if request.param == "postgres":
        schema = request.getfixturevalue("pg_store_schema")
        s = make_store("postgres", tmp_path, schema)
    else:
        s = make_store(request.param, tmp_path)
    yield s
    s.close()


@pytest.fixture
def client(store: Store, tmp_path: Path) -> Iterator[Client]:
    """A client on each store, in a temporary workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=store) as c:
        yield c


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that tries to reach a host other than this machine."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in {"127.0.0.1", "localhost", "::1"} and not (
            self.family == socket.AF_UNIX
        ):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _plait_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test's default store out of the user's home."""
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path_factory.mktemp("plait-home")))
    monkeypatch.delenv("PLAIT_STORE", raising=False)


def eventually(check: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Poll ``check`` until it holds: what another thread or process does is seen a moment
    later (bounded; asserts nothing about time)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()
