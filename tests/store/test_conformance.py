"""The conformance kit (plait.testing) against every store plait ships.

A third-party backend runs the same classes the same way: subclass
``StoreConformance`` and give it a ``StoreFactory``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from plait.store import MemoryStore, PostgresStore, SQLiteStore, Store
from plait.store.base import LiveClientRow, SessionRow, TranscriptStore
from plait.testing import StoreConformance, StoreFactory, open_encrypted_store
from tests.conftest import POSTGRES_URL, _empty_schema, drop_schema, fresh_schema, needs_postgres


class SQLiteFactory(StoreFactory):
    """A SQLite file in the test's folder."""

    lock_kept: ClassVar[str] = (
        "SQLite's writer lock is a kernel file lock: it is lost only with its process"
    )

    def new_target(self, tmp_path: Path) -> str:
        return str(tmp_path / "plait.db")


class MemoryFactory(StoreFactory):
    """``:memory:``: a private store per open."""

    shared: ClassVar[bool] = False

    def new_target(self, tmp_path: Path) -> str:
        return ":memory:"


class PostgresFactory(StoreFactory):
    """A schema of its own per test; emptied schemas are handed to the next test.

    Creating a schema (a dozen tables and indexes) costs far more than emptying one,
    so, like the ``pg_store_schema`` fixture, a finished test's schema is emptied,
    checked and reused; one whose shape a test changed is dropped.
    """

    _spare: ClassVar[list[str]] = []
    _admin: ClassVar[list[Any]] = []

    def _conn(self) -> Any:
        import psycopg

        if not self._admin:
            assert POSTGRES_URL is not None
            self._admin.append(psycopg.connect(POSTGRES_URL, autocommit=True))
        return self._admin[0]

    def new_target(self, tmp_path: Path) -> str:
        schema = self._spare.pop() if self._spare else fresh_schema()
        return f"{POSTGRES_URL}?schema={schema}"

    def lose_lock(self, store: TranscriptStore, session_id: str) -> None:
        """Cut the connection that holds the lock, as an idle timeout or a failover would."""
        from plait.store.postgres._locks import lock_key

        assert isinstance(store, PostgresStore)
        key = lock_key(store.location.rsplit("schema=", 1)[1], session_id)
        found = self._conn().execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1 "
            "AND granted AND pid <> pg_backend_pid()",
            ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
        ).fetchall()
        assert found == [(True,)], "no connection held the lock"

    def dispose(self, target: str) -> None:
        schema = target.rsplit("schema=", 1)[1]
        conn = self._conn()
        if _empty_schema(conn, schema):
            self._spare.append(schema)
        else:
            drop_schema(schema, conn)


@pytest.fixture(scope="module", autouse=True)
def _drop_spare_schemas() -> Any:
    yield
    if POSTGRES_URL is not None:
        for schema in PostgresFactory._spare:
            drop_schema(schema, PostgresFactory()._conn())
        PostgresFactory._spare.clear()
        for conn in PostgresFactory._admin:
            conn.close()
        PostgresFactory._admin.clear()


class TestSQLite(StoreConformance):
    factory = SQLiteFactory()

    def test_the_factory_opens_the_store_plait_ships(self, store: Store) -> None:
        assert type(store) is SQLiteStore and isinstance(store, Store)


class TestMemory(StoreConformance):
    factory = MemoryFactory()

    def test_the_factory_opens_the_store_plait_ships(self, store: Store) -> None:
        assert type(store) is MemoryStore and isinstance(store, Store)


@needs_postgres
class TestPostgres(StoreConformance):
    factory = PostgresFactory()

    def test_the_factory_opens_the_store_plait_ships(self, store: Store) -> None:
        assert type(store) is PostgresStore and isinstance(store, Store)


class EncryptedSQLiteFactory(SQLiteFactory):
    """A SQLite file opened with the kit's key: every case runs on sealed rows."""

    opener: ClassVar[str] = "plait.testing:open_encrypted_store"
    encrypted: ClassVar[bool] = True


class EncryptedMemoryFactory(MemoryFactory):
    """``:memory:`` with the kit's key."""

    opener: ClassVar[str] = "plait.testing:open_encrypted_store"
    encrypted: ClassVar[bool] = True


class EncryptedPostgresFactory(PostgresFactory):
    """A schema of its own per test, opened with the kit's key."""

    opener: ClassVar[str] = "plait.testing:open_encrypted_store"
    encrypted: ClassVar[bool] = True


class TestEncryptedSQLite(StoreConformance):
    factory = EncryptedSQLiteFactory()

    def test_the_factory_opens_an_encrypted_store(self, store: Store) -> None:
        assert type(store) is SQLiteStore and store.encrypted


class TestEncryptedMemory(StoreConformance):
    factory = EncryptedMemoryFactory()

    def test_the_factory_opens_an_encrypted_store(self, store: Store) -> None:
        assert type(store) is MemoryStore and store.encrypted


@needs_postgres
class TestEncryptedPostgres(StoreConformance):
    factory = EncryptedPostgresFactory()

    def test_the_factory_opens_an_encrypted_store(self, store: Store) -> None:
        assert type(store) is PostgresStore and store.encrypted


def test_the_kit_opener_opens_an_encrypted_store(tmp_path: Path) -> None:
    store = open_encrypted_store(str(tmp_path / "k.db"))
    try:
        assert isinstance(store, SQLiteStore) and store.encrypted
    finally:
        store.close()


def _live_rows(store: Store) -> int:
    if hasattr(store, "_db"):
        return int(store._db.execute("SELECT count(*) FROM live_clients").fetchone()[0])
    with store._conn("count") as conn:  # type: ignore[attr-defined]
        return int(conn.execute("SELECT count(*) FROM live_clients").fetchone()[0])


def test_deleting_a_session_drops_its_live_client_rows(store: Store) -> None:
    """No row of a deleted session's clients stays in the table (plait's SQL stores)."""
    store.create(SessionRow(id="a", workspace="/ws"))
    store.create(SessionRow(id="b", workspace="/ws"))
    store.live_attach(LiveClientRow("a", "x", "controller", 1, 1), takeover=False)
    store.live_attach(LiveClientRow("a", "y", "observer", 1, 1), takeover=False)
    store.live_attach(LiveClientRow("b", "x", "observer", 1, 1), takeover=False)
    assert _live_rows(store) == 3
    store.delete("a")
    assert _live_rows(store) == 1
