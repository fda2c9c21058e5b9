"""What only the PostgreSQL store does: URLs, migrations, advisory locks, NOTIFY, errors.

The conformance suite runs against it too (the ``postgres`` store kind). Tests that need a
server take the ``pg_schema`` fixture: set PLAIT_TEST_POSTGRES_URL (``.ci/run`` does);
without it they skip. The rest (URL checks, a missing driver) run everywhere.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from plait import Client
from plait.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    SchemaOutdatedError,
    SchemaTooNewError,
    SessionNotFoundError,
    StaleSessionError,
    StoreError,
)
from plait.layout import branch
from plait.records import Record, UserRecord
from plait.store import SessionRow, open_store
from plait.store.postgres import MIGRATIONS, PostgresStore
from plait.store.postgres._locks import lock_key
from tests.conftest import POSTGRES_URL, eventually

URL = POSTGRES_URL or "postgresql://unset"


def users(start: int, n: int, tag: str = "m") -> list[Record]:
    return [UserRecord(seq=start + i, content=f"{tag}{start + i}") for i in range(n)]


def with_records(row: SessionRow, records: list[Record]) -> SessionRow:
    msgs = sum(1 for r in records if r.kind != "event")
    return replace(row, layout=row.layout.appended(len(records), msgs))




@pytest.fixture
def other(pg: PostgresStore, pg_schema: str) -> Iterator[PostgresStore]:
    """A second store on the same schema: another process, as far as the server knows."""
    s = PostgresStore(URL, schema=pg_schema)
    yield s
    s.close()


# -- opening: URLs, locations, errors ---------------------------------------------------


def test_open_store_picks_postgres_by_url(pg_schema: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for scheme in ("postgresql://", "postgres://"):
        url = URL.replace("postgresql://", scheme, 1) + f"?schema={pg_schema}"
        s = open_store(url)
        assert isinstance(s, PostgresStore)
        assert s.location.startswith("postgresql://") and s.location.endswith(pg_schema)
        s.close()
    monkeypatch.setenv("PLAIT_STORE", f"{URL}?schema={pg_schema}")
    s = open_store()
    assert isinstance(s, PostgresStore)
    # The location names the store well enough to open it again.
    again = open_store(s.location)
    assert again.location == s.location
    s.close()
    again.close()


def test_location_and_errors_never_show_the_password(pg_schema: str) -> None:
    secret_url = URL.replace("://", "://postgres:hunter2@", 1) if "@" not in URL else (
        URL.replace("@", ":hunter2@", 1))
    s = PostgresStore(secret_url, schema=pg_schema)  # trust auth ignores the password
    assert "hunter2" not in s.location and "hunter2" not in repr(s)
    s.close()
    with pytest.raises(StoreError) as info:
        PostgresStore("postgresql://someone:hunter2@127.0.0.1:1/nowhere")
    assert "hunter2" not in str(info.value)


def test_unreachable_server_and_bad_urls_are_store_errors() -> None:
    start = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL") as info:
        PostgresStore("postgresql://postgres@127.0.0.1:1/test")
    assert time.monotonic() - start < 5
    assert isinstance(info.value.__cause__, Exception)  # the driver's error, chained
    for bad in ("postgresql://[::1/x", "postgresql://u@127.0.0.1:port/db", "nonsense=1"):
        with pytest.raises(StoreError):
            PostgresStore(bad)
    for schema in ("Bad", "1x", "a-b", "x" * 49, "a;drop"):
        with pytest.raises(InvalidArgumentError):
            PostgresStore(URL, schema=schema)


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependencyError, match=r"plait\[postgres\]"):
        PostgresStore(URL)


def test_the_store_opens_on_a_driver_imported_again(
    pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package imported anew (a test hid it from sys.modules) finds its submodules in
    sys.modules but not as its attributes: the store takes them by import."""
    import psycopg
    import psycopg.errors  # noqa: F401  (loaded, so that it stays in sys.modules)

    monkeypatch.delitem(sys.modules, "psycopg")
    store = PostgresStore(URL, schema=pg_schema)
    try:
        first = store.create(SessionRow(id="s", workspace="/ws"))
        row = store.append(first, [UserRecord(seq=0, content="one")])
        with pytest.raises(StaleSessionError):  # the driver's unique violation, recognised
            store.append(first, [UserRecord(seq=0, content="again")])
        assert [r.text for r in store.read(row, 0, 1)] == ["one"]
    finally:
        store.close()


def test_driver_errors_are_wrapped(pg: PostgresStore) -> None:
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    with pytest.raises(StoreError) as info:  # PostgreSQL text cannot hold NUL
        pg.write(row, replace(row, title="a\x00b"))
    assert type(info.value) is StoreError and info.value.__cause__ is not None
    pg.close()
    with pytest.raises(StoreError, match="closed"):
        pg.get("s")


def test_one_spare_connection_serves_a_store_in_turn_and_goes_back_on_close(
    pg: PostgresStore,
) -> None:
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    pids = set()
    for i in range(5):
        row = pg.append(row, users(i, 1))
        pids.add(pg._one("SELECT pg_backend_pid()", (), "read the backend"))
    assert len(pids) == 1  # one connection, kept between calls, with its one cursor
    spare = pg._spare
    assert spare is not None and spare[0].__dict__.get("_plait_cursor") is not None
    pg.close()
    assert spare[0].closed  # given back to the pool, which closed it with the rest


def test_a_spare_connection_the_server_dropped_is_replaced(
    pg: PostgresStore, other: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pool logs the connection it discards, and the test's log capture would keep it.
    monkeypatch.setattr(logging.getLogger("psycopg.pool"), "disabled", True)
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    row = pg.append(row, users(0, 1))
    spare = pg._spare
    assert spare is not None
    (pid,) = pg._one("SELECT pg_backend_pid()", (), "read the backend")
    assert other._one("SELECT pg_terminate_backend(%s)", (pid,), "terminate")[0]
    dropped = weakref.ref(spare[0])
    del spare
    with pytest.raises(StoreError):  # as a pooled connection would: the call fails
        pg.append(row, users(1, 1))
    assert pg._spare is None  # the broken one went back to the pool, to be replaced
    gc.collect()
    assert dropped() is None  # with its cursor: nothing keeps a replaced connection alive
    assert eventually(lambda: pg.get("s") is not None)
    row = pg.append(pg.get("s") or row, users(1, 1))
    assert row.layout.end_seq == 2


def test_a_spare_connection_goes_back_to_the_pool_in_time(pg: PostgresStore) -> None:
    pg.create(SessionRow(id="s", workspace="/ws"))
    spare = pg._spare
    assert spare is not None
    spare[0].__dict__["_plait_kept_until"] = time.monotonic()  # out of the pool long enough
    pg.get("s")  # taken once more, then given back to the pool
    assert pg._spare is None
    pg.get("s")  # one from the pool is the spare now, for SPARE_FOR seconds
    assert pg._spare is not None


def test_threads_beyond_the_pool_are_served_while_the_spare_goes_round(pg_schema: str) -> None:
    # One connection in all: a thread waiting for the pool must get it when the thread
    # holding it is done, not see it kept as the spare for that thread's next call.
    store = PostgresStore(URL, schema=pg_schema, pool_size=1, connect_timeout=1)
    try:
        rows = [store.create(SessionRow(id=f"s{k}", workspace="/ws")) for k in range(3)]
        failed: list[BaseException] = []

        def write(k: int) -> None:
            row = rows[k]
            try:
                for i in range(150):
                    row = store.append(row, users(i, 1))
            except BaseException as exc:  # reported below, by the test's own thread
                failed.append(exc)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert failed == []
        assert [store.get(f"s{k}").layout.end_seq for k in range(3)] == [150] * 3  # type: ignore[union-attr]
    finally:
        store.close()


# -- migrations --------------------------------------------------------------------------

CURRENT = max(m[0] for m in MIGRATIONS)
NEXT = CURRENT + 1
EXTRA = (*MIGRATIONS, (NEXT, "add a column", ("ALTER TABLE sessions ADD COLUMN extra TEXT",)))


def test_fresh_schema_is_created_and_versions_are_checked(pg_schema: str) -> None:
    s = PostgresStore(URL, schema=pg_schema)
    assert s.schema_version == s.code_version == CURRENT
    assert s.migrate() == []
    s.close()
    # Newer code on an older schema: refused by default on a shared server ...
    with pytest.raises(SchemaOutdatedError, match="plait db migrate"):
        PostgresStore(URL, schema=pg_schema, migrations=EXTRA)
    # ... applied when asked.
    s = PostgresStore(URL, schema=pg_schema, migrations=EXTRA, auto_migrate=True)
    assert s.schema_version == NEXT
    s.close()
    # Older code on a newer schema: refused, whatever auto_migrate says.
    for auto in (False, True):
        with pytest.raises(SchemaTooNewError, match="upgrade plait"):
            PostgresStore(URL, schema=pg_schema, auto_migrate=auto)


def test_a_schema_another_process_is_setting_up_is_waited_for_not_refused(
    pg_schema: str,
) -> None:
    import psycopg

    # The fourth migration takes a while: meanwhile the schema stands at version 3.
    slow = tuple(
        (v, name, (*steps, "SELECT pg_sleep(1)") if v == 4 else steps)
        for v, name, steps in MIGRATIONS
    )
    opened: list[PostgresStore] = []
    first = threading.Thread(
        target=lambda: opened.append(PostgresStore(URL, schema=pg_schema, migrations=slow))
    )
    first.start()

    def version() -> int:
        with psycopg.connect(URL, autocommit=True) as conn:
            table = conn.execute("SELECT to_regclass(%s)", (f"{pg_schema}.plait_schema",))
            if table.fetchone() == (None,):
                return 0
            row = conn.execute(f"SELECT max(version) FROM {pg_schema}.plait_schema").fetchone()
            return int(row[0] or 0) if row else 0

    try:
        assert eventually(lambda: version() == 3)
        # Half set up, by another opener: this one waits for it, and finds it current.
        second = PostgresStore(URL, schema=pg_schema, migrations=slow)
        assert second.schema_version == CURRENT
        second.close()
        first.join(30)
        assert len(opened) == 1 and opened[0].schema_version == CURRENT
    finally:
        first.join(30)
        for s in opened:
            s.close()


def test_migrate_applies_pending_versions_once(pg_schema: str) -> None:
    PostgresStore(URL, schema=pg_schema).close()
    with pytest.raises(SchemaOutdatedError):
        PostgresStore(URL, schema=pg_schema, migrations=EXTRA)
    # Two processes migrating at once take turns under the advisory lock.
    stores = [PostgresStore(URL, schema=pg_schema, migrations=MIGRATIONS) for _ in range(2)]
    for s in stores:
        s._migrations = EXTRA  # as if the code had been upgraded under them
    results: list[list[int]] = []
    threads = [threading.Thread(target=lambda s=s: results.append(s.migrate())) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [[], [NEXT]]
    assert stores[0].schema_version == NEXT
    for s in stores:
        s.close()


def test_two_processes_creating_one_fresh_schema(pg_schema: str) -> None:
    errors: list[BaseException] = []
    opened: list[PostgresStore] = []

    def open_one() -> None:
        try:
            opened.append(PostgresStore(URL, schema=pg_schema))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(opened) == 3
    for s in opened:
        assert s.schema_version == CURRENT
        s.close()


# -- writer locks ------------------------------------------------------------------------

PEER = """
import sys
from plait.store.postgres import PostgresStore

store = PostgresStore(sys.argv[1], schema=sys.argv[2])
print("ready", flush=True)
for line in sys.stdin:
    verb, _, sid = line.strip().partition(" ")
    if verb == "lock":
        print(store.lock(sid), flush=True)
    elif verb == "unlock":
        store.unlock(sid)
        print("ok", flush=True)
    elif verb == "elsewhere":
        print(store.locked_elsewhere(sid), flush=True)
"""


class Peer:
    """A store in another process, driven line by line."""

    def __init__(self, schema: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PEER, URL, schema],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.ask("") == "ready"

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(5)


@pytest.fixture
def peer(pg: PostgresStore, pg_schema: str) -> Iterator[Peer]:
    p = Peer(pg_schema)
    yield p
    p.kill()


def test_writer_locks_between_processes(pg: PostgresStore, peer: Peer) -> None:
    assert pg.lock("s") and pg.lock("s")  # taken again without harm
    assert not pg.locked_elsewhere("s")
    assert peer.ask("elsewhere s") == "True" and peer.ask("lock s") == "False"
    pg.unlock("s")
    pg.unlock("s")  # not held any more: nothing to do
    assert peer.ask("elsewhere s") == "False"
    assert peer.ask("lock s") == "True"
    assert pg.locked_elsewhere("s") and not pg.lock("s")
    assert peer.ask("unlock s") == "ok"
    assert not pg.locked_elsewhere("s") and pg.lock("s")
    # However the other process ends, kill -9 included, its locks go with it.
    assert peer.ask("lock k") == "True" and pg.locked_elsewhere("k")
    peer.kill()
    assert eventually(lambda: not pg.locked_elsewhere("k"))
    assert pg.lock("k")


def test_stores_of_one_process_share_its_locks(
    pg: PostgresStore, other: PostgresStore, peer: Peer
) -> None:
    assert pg.lock("s") and other.lock("s")  # the lock belongs to the process
    assert not other.locked_elsewhere("s") and not pg.locked_elsewhere("s")
    pg.unlock("s")
    assert peer.ask("elsewhere s") == "True"  # other still holds it
    other.close()  # closing a store lets go of what it held
    assert peer.ask("elsewhere s") == "False"
    assert pg.lock("c")
    pg.close()  # the last store of the process: the lock connection closes
    assert eventually(lambda: peer.ask("elsewhere c") == "False")
    assert peer.ask("lock c") == "True"


def test_writer_locks_are_separate_per_schema(pg: PostgresStore, pg_schema: str) -> None:
    from tests.conftest import drop_schema

    assert lock_key("a", "s") != lock_key("b", "s")
    assert lock_key(pg_schema, "s") == lock_key(pg_schema, "s")
    elsewhere = PostgresStore(URL, schema=pg_schema + "_2")
    try:
        assert pg.lock("s") and elsewhere.lock("s")
        assert not elsewhere.locked_elsewhere("s")
    finally:
        elsewhere.close()
        drop_schema(pg_schema + "_2")


# -- LISTEN / NOTIFY ---------------------------------------------------------------------


def test_another_store_hears_every_write_without_polling(
    pg: PostgresStore, other: PostgresStore
) -> None:
    feed = other.changes(timeout=5.0)  # listening from here on
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    assert next(feed) == "s"
    row = pg.append(row, users(0, 2))
    assert next(feed) == "s"
    pg.write(row, replace(row, title="t"))
    assert next(feed) == "s"
    pg.create(SessionRow(id="u", workspace="/ws"))
    pg.delete("s")
    assert [next(feed), next(feed)] == ["u", "s"]
    # A failed write notifies nobody; an idle feed ends after its timeout.
    with pytest.raises(SessionNotFoundError):
        pg.append(row, users(2, 1))
    assert list(other.changes(timeout=0.2)) == []
    assert pg.channel == other.channel == f"plait_session.{other.location.split('=')[-1]}"


def test_notifications_are_delivered_as_they_commit(
    pg: PostgresStore, other: PostgresStore
) -> None:
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    assert pg.flush_changes()  # the create is announced before anyone listens
    feed = other.changes(timeout=5.0)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(next(feed)))
    reader.start()  # blocks in the server socket, not in a sleep loop
    time.sleep(0.05)
    assert got == []
    pg.append(row, users(0, 1))
    reader.join(5)
    assert got == ["s"]


# -- semantics under real concurrency ------------------------------------------------------


def test_two_stores_appending_at_one_head(pg: PostgresStore, other: PostgresStore) -> None:
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def append(store: PostgresStore, tag: str) -> None:
        barrier.wait()
        try:
            store.append(row, users(0, 3, tag))
            outcomes.append("ok")
        except StaleSessionError:
            outcomes.append("stale")

    threads = [threading.Thread(target=append, args=(s, t)) for s, t in ((pg, "a"), (other, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["ok", "stale"]
    fresh = pg.get("s")
    assert fresh is not None and fresh.layout.end_seq == 3
    texts = [r.text for r in pg.read(fresh, 0, 3)]
    assert texts in (["a0", "a1", "a2"], ["b0", "b1", "b2"])
    assert pg.integrity_check() == []


def test_append_writes_the_session_row_only_when_another_is_ahead(pg: PostgresStore) -> None:
    a = pg.create(SessionRow(id="a", workspace="/ws"))
    b = pg.create(SessionRow(id="b", workspace="/ws"))

    def row_updated_at(sid: str) -> int:
        with pg._pool.connection() as conn:
            found = conn.execute("SELECT updated_at FROM sessions WHERE id = %s", (sid,)).fetchone()
        assert found is not None
        return int(found[0])

    before = row_updated_at("b")
    b = pg.append(b, users(0, 1))  # b is already the most recent: the row is not written
    assert row_updated_at("b") == before
    a = pg.append(a, users(0, 1))  # b is ahead: a owes a move, written before the order is read
    assert [r.id for r in pg.recent("/ws", 5)] == ["a", "b"]
    assert row_updated_at("a") > row_updated_at("b")


def test_appends_in_turn_keep_the_order_of_their_appends(pg: PostgresStore) -> None:
    rows = {sid: pg.create(SessionRow(id=sid, workspace="/ws")) for sid in "abc"}
    for i, sid in enumerate("abcbab"):  # every append but the first finds another ahead
        rows[sid] = pg.append(rows[sid], users(rows[sid].layout.end_seq, 1))
        if i == 2:
            assert [r.id for r in pg.recent("/ws", 5)] == ["c", "b", "a"]
    assert [r.id for r in pg.recent_with_prefix("/ws", "", 5)] == ["b", "a", "c"]
    rows["a"] = pg.append(rows["a"], users(rows["a"].layout.end_seq, 1))
    assert [r.id for r in pg.recent_with_prefix("/ws", "a", 5)] == ["a"]
    assert [r.id for r in pg.recent("/ws", 5)] == ["a", "b", "c"]
    rows["c"] = pg.write(rows["c"], replace(rows["c"], title="now"))  # a write moves after the owed
    assert [r.id for r in pg.recent("/ws", 5)] == ["c", "a", "b"]


def test_an_idle_store_writes_the_order_it_owes(
    pg: PostgresStore, other: PostgresStore
) -> None:
    a = pg.create(SessionRow(id="a", workspace="/ws"))
    pg.create(SessionRow(id="b", workspace="/ws"))
    pg.append(a, users(0, 1))  # owes a move; the writer reads nothing after
    assert eventually(lambda: [r.id for r in other.recent("/ws", 5)] == ["a", "b"], 30)


def test_delete_collects_rows_no_layout_reads(pg: PostgresStore) -> None:
    base = pg.create(with_records(SessionRow(id="a", workspace="/ws"), users(0, 3)), users(0, 3))
    child = pg.create(SessionRow(id="b", workspace="/ws", layout=branch(base.layout, base.pk, 3, 3),
                                 parent_ids=("a",)))

    def rows_of(pk: int) -> int:
        with pg._pool.connection() as conn:
            found = conn.execute(
                "SELECT count(*) FROM records WHERE key >> 32 = %s", (pk,)).fetchone()
        assert found is not None
        return int(found[0])

    pg.delete("a")
    assert rows_of(base.pk) == 3  # the child still reads them
    assert [r.text for r in pg.read(child, 0, 3)] == ["m0", "m1", "m2"]
    pg.delete("b")
    assert rows_of(base.pk) == 0
    assert pg.integrity_check() == []


def test_integrity_check_reports_missing_and_orphan_rows(pg: PostgresStore) -> None:
    row = pg.create(with_records(SessionRow(id="a", workspace="/ws"), users(0, 3)), users(0, 3))
    with pg._pool.connection() as conn:
        conn.execute("DELETE FROM records WHERE key = %s", ((row.pk << 32) | 1,))
        conn.execute("INSERT INTO records VALUES (%s, 0, 'x', 'user', '{}', NULL, 0, NULL)",
                     ((row.pk + 1000) << 32,))
    problems = pg.integrity_check()
    assert any("session a record 1: the record is missing" in p for p in problems)
    assert any(f"owner {row.pk + 1000}" in p for p in problems)


def test_a_fork_of_a_deleted_session_is_refused(pg: PostgresStore) -> None:
    base = pg.create(with_records(SessionRow(id="a", workspace="/ws"), users(0, 2)), users(0, 2))
    pg.delete("a")  # nothing reads its rows: collected at once
    with pytest.raises(SessionNotFoundError):
        pg.create(SessionRow(id="b", workspace="/ws", layout=branch(base.layout, base.pk, 2, 2),
                             parent_ids=("a",)))
    assert pg.get("b") is None


def test_a_client_on_postgres(pg_schema: str, tmp_path: Path) -> None:
    with Client(tmp_path, store=f"{URL}?schema={pg_schema}") as c:
        s = c.open("hello")
        s.inject({"role": "user", "content": "hi"})
        fork = s.fork()
        fork.inject({"role": "user", "content": "more"})
        assert [m.text for m in fork.history()] == ["hi", "more"]
        assert c.sessions.open("hello").transcript.length == 1


def test_migration_5_renames_old_tombstones_out_of_the_ids_sessions_may_take(
    pg_schema: str,
) -> None:
    import psycopg

    old = PostgresStore(URL, schema=pg_schema, migrations=MIGRATIONS[:4])
    gone = old.create(SessionRow(id="gone", workspace="/ws"))
    old.create(SessionRow(id="child", workspace="/ws", parent_ids=("gone",)))
    # What the code before migration 5 did on delete: the tombstone took "/<pk>".
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {pg_schema}.sessions SET deleted = true, id = '/' || pk WHERE id = 'gone'"
        )
    old.close()
    store = PostgresStore(URL, schema=pg_schema, auto_migrate=True)
    try:
        assert store.schema_version == CURRENT
        store.create(SessionRow(id=f"/{gone.pk}", workspace="/ws"))
        assert store.get(f"/{gone.pk}") is not None and store.integrity_check() == []
    finally:
        store.close()


def test_migration_8_stores_layouts_uncompressed_and_reads_older_ones(pg_schema: str) -> None:
    """A store made before migration 8 keeps its (compressed) layouts readable after it."""
    import psycopg

    old = PostgresStore(URL, schema=pg_schema, migrations=MIGRATIONS[:7])
    c = Client("/ws", store=old)
    current = c.sessions.create([{"role": "user", "content": "root"}])
    for i in range(300):  # a layout long enough to be stored out of line
        current = current.fork()
        current.inject({"role": "user", "content": f"link {i}"})
    deep = current.id
    before = old.get(deep)
    old.close()
    store = PostgresStore(URL, schema=pg_schema, auto_migrate=True)
    try:
        assert store.schema_version == CURRENT >= 8
        row = store.get(deep)
        assert row is not None and before is not None and row.layout == before.layout
        assert [r.text for r in Client("/ws", store=store).open(deep).transcript.tail(2)] == [
            "link 298",
            "link 299",
        ]
        branch_of = Client("/ws", store=store).open(deep).fork()
        assert store.get(branch_of.id).layout.bases[:-1] == row.layout.bases  # type: ignore[union-attr]
        with psycopg.connect(URL, autocommit=True) as conn:
            storage = conn.execute(
                "SELECT a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname = 'sessions' AND a.attname = 'bases'",
                (pg_schema,),
            ).fetchone()
        assert storage == ("e",)
    finally:
        store.close()


def test_a_schema_the_urls_own_options_name_holds_the_writer_locks_too(
    pg_schema: str, tmp_path: Path
) -> None:
    """A URL's ``options=-c search_path=...`` reaches the writer-lock connection as well."""
    import psycopg

    with psycopg.connect(URL, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {pg_schema}")
    sep = "&" if "?" in URL else "?"
    store = PostgresStore(f"{URL}{sep}options=-csearch_path%3D{pg_schema}")
    with Client(tmp_path, store=store) as client:
        session = client.sessions.new()
        session.inject({"role": "user", "content": "kept in its schema"})  # takes the lock
        assert session.live.holds_lock
        assert [m.text for m in client.open(session.id).history()] == ["kept in its schema"]
    store.close()
    with psycopg.connect(URL, autocommit=True) as admin:
        held = admin.execute(f"SELECT count(*) FROM {pg_schema}.writer_fences").fetchone()
    assert held is not None and held[0] == 1
