"""PostgreSQL's writer fences: what the conformance kit cannot see from outside a process.

The kit checks that a writer whose lock was lost and taken by another process writes
nothing. These check the store's own bookkeeping: a hold lost with its connection
stays fenced when the process takes the lock again through another store, letting go
of it never releases that new hold, a schema without fences locks and writes as before,
the fenced statements send their parameters in the order they number them, and a holder
appending without pause while its lock is cut and taken over lands nothing after the
new holder began.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest

from plait.errors import StaleSessionError, StoreError, WriterLockLostError
from plait.records import Record, UserRecord
from plait.store import SessionRow
from plait.store.postgres import MIGRATIONS, PostgresStore
from plait.store.postgres._locks import lock_key
from plait.store.postgres._sql import APPEND_ONE_FENCED_PREPARED, APPEND_ONE_PREPARED
from tests.conftest import POSTGRES_URL, eventually, needs_postgres

URL = POSTGRES_URL or "postgresql://unset"

# Another process: takes the lock once it is free, appends one record, and says so.
_TAKE = """
import sys, time
from plait.records import UserRecord
from plait.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1], schema=sys.argv[2])
while not store.lock("s"):
    time.sleep(0.02)
row = store.get("s")
store.append(row, [UserRecord(seq=row.layout.end_seq, content="peer")])
print("appended", flush=True)
sys.stdin.read()  # holds the lock until told to end
"""


def users(start: int, n: int, tag: str = "m") -> list[Record]:
    return [UserRecord(seq=start + i, content=f"{tag}{start + i}") for i in range(n)]


def _texts(store: PostgresStore, sid: str) -> list[str]:
    row = store.get(sid)
    assert row is not None
    return [r.text for r in store.read(row, 0, row.layout.end_seq)]


def _cut_holder(schema: str, sid: str) -> None:
    """Terminate the connection that holds the session's lock."""
    key = lock_key(schema, sid)
    with psycopg.connect(URL, autocommit=True) as admin:
        cut = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1 "
            "AND granted",
            ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
        ).fetchall()
    assert cut == [(True,)]


@pytest.fixture
def stores(pg_store_schema: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    first = PostgresStore(URL, schema=pg_store_schema)
    second = PostgresStore(URL, schema=pg_store_schema)
    try:
        yield first, second
    finally:
        second.close()
        first.close()


def test_the_fenced_one_record_append_numbers_the_fence_first() -> None:
    """The store sends the session id and the epoch before the unfenced append's values."""
    assert APPEND_ONE_FENCED_PREPARED.keys == ("id", "epoch", *APPEND_ONE_PREPARED.keys)


@needs_postgres
def test_a_hold_lost_with_its_connection_stays_fenced_when_the_process_takes_the_lock_again(
    stores: tuple[PostgresStore, PostgresStore], pg_store_schema: str
) -> None:
    first, second = stores
    row = first.create(SessionRow(id="s", workspace="/ws"), [])
    assert first.lock("s") is True
    row = first.append(row, users(0, 1))
    _cut_holder(pg_store_schema, "s")
    # The process finds its lock connection cut (a lock of another session fails on it)
    # and takes the lock again through its other store: a new hold, a new epoch.
    with pytest.raises(StoreError):
        second.lock("t")
    assert eventually(lambda: second.lock("s"))
    row = second.append(row, users(1, 1, "second"))
    with pytest.raises(WriterLockLostError):
        first.append(row, users(2, 1, "lost"))
    # Letting go of the lost hold leaves the new one held: another process cannot take it.
    first.unlock("s")
    assert first.locked_elsewhere("s") is False  # this process's hold, through ``second``
    peer = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom plait.store.postgres import PostgresStore\n"
         "s = PostgresStore(sys.argv[1], schema=sys.argv[2])\nprint(s.lock('s'))\ns.close()",
         URL, pg_store_schema],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert peer.communicate(timeout=60)[0].strip() == "False"
    # Unfenced again once it let go, the first store's writes go through the fence of
    # its process's hold only after it takes the lock itself.
    assert first.lock("s") is True
    first.append(row, users(2, 1, "first"))
    assert _texts(first, "s") == ["m0", "second1", "first2"]


@needs_postgres
def test_a_lost_lock_nobody_took_leaves_its_holder_writing(
    stores: tuple[PostgresStore, PostgresStore], pg_store_schema: str
) -> None:
    """The fence stops two writers, not one: until another takes the lock, the epoch holds."""
    first, _ = stores
    row = first.create(SessionRow(id="s", workspace="/ws"), [])
    assert first.lock("s") is True
    _cut_holder(pg_store_schema, "s")
    row = first.append(row, users(0, 1))
    peer = subprocess.Popen(
        [sys.executable, "-c", _TAKE, URL, pg_store_schema],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert peer.stdout is not None and peer.stdout.readline().strip() == "appended"
        with pytest.raises(WriterLockLostError):
            first.append(store_row(first, "s"), users(2, 1, "lost"))
        assert _texts(first, "s") == ["m0", "peer"]
    finally:
        peer.kill()
        peer.wait()
        for stream in (peer.stdin, peer.stdout):
            if stream is not None:
                stream.close()


def store_row(store: PostgresStore, sid: str) -> SessionRow:
    row = store.get(sid)
    assert row is not None
    return row


@needs_postgres
def test_a_schema_without_fences_locks_and_writes_as_before(pg_schema: str) -> None:
    """Opened with the migrations before writer_fences, the lock carries no epoch."""
    old = PostgresStore(URL, schema=pg_schema, migrations=MIGRATIONS[:8])
    try:
        row = old.create(SessionRow(id="s", workspace="/ws"), [])
        assert old.lock("s") is True
        row = old.append(row, users(0, 1))
        row = old.append(row, users(1, 2))
        old.write(row, row)
        assert _texts(old, "s") == ["m0", "m1", "m2"]
        old.unlock("s")
    finally:
        old.close()


# Another process: takes the lock once it is free and appends ``n`` records, re-reading
# the head when an append of the old holder got in first (before it took the lock).
_TAKE_AND_APPEND = """
import sys, time
from plait.errors import StaleSessionError
from plait.records import UserRecord
from plait.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1], schema=sys.argv[2])
while not store.lock("s"):
    time.sleep(0.005)
row = store.get("s")
done = 0
while done < int(sys.argv[3]):
    try:
        row = store.append(row, [UserRecord(seq=row.layout.end_seq, content="peer")])
        done += 1
    except StaleSessionError:
        row = store.get("s")
print(done, flush=True)
store.close()
"""


@needs_postgres
def test_no_append_of_the_old_holder_lands_after_the_new_holder_began(
    stores: tuple[PostgresStore, PostgresStore], pg_store_schema: str
) -> None:
    """The old holder appends without pause while its lock is cut and taken over."""
    import threading

    first, _ = stores
    row = first.create(SessionRow(id="s", workspace="/ws"), [])
    assert first.lock("s") is True
    stop = threading.Event()
    refused: list[WriterLockLostError] = []

    def keep_appending() -> None:
        head = row
        while not stop.is_set():
            try:
                head = first.append(head, users(head.layout.end_seq, 1, "old"))
            except WriterLockLostError as exc:
                refused.append(exc)
                return
            except StaleSessionError:
                head = store_row(first, "s")

    writer = threading.Thread(target=keep_appending)
    writer.start()
    try:
        assert eventually(lambda: store_row(first, "s").layout.end_seq >= 20)
        _cut_holder(pg_store_schema, "s")
        peer = subprocess.run(
            [sys.executable, "-c", _TAKE_AND_APPEND, URL, pg_store_schema, "50"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert peer.stdout.strip() == "50", peer.stderr
    finally:
        stop.set()
        writer.join()
    assert refused, "the old holder was never refused"
    texts = _texts(first, "s")
    began = texts.index("peer")
    assert texts[began:] == ["peer"] * 50
    assert all(t.startswith("old") for t in texts[:began])


@needs_postgres
def test_a_take_that_waits_too_long_for_the_epoch_leaves_no_lock_behind(
    stores: tuple[PostgresStore, PostgresStore], pg_store_schema: str
) -> None:
    """A write of the last holder keeps the fence row all through the take's wait.

    The take then fails like a lock held elsewhere, and the advisory lock its statement
    took is let go again, not kept by a connection whose process does not know it holds it.
    """
    first, _ = stores
    first.create(SessionRow(id="s", workspace="/ws"), [])
    assert first.lock("s") is True
    first.unlock("s")
    key = lock_key(pg_store_schema, "s")
    held = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
        "AND classid = %s::bigint::oid AND objid = %s::bigint::oid AND objsubid = 1 AND granted"
    )
    parts = ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)
    with psycopg.connect(URL) as writer, psycopg.connect(URL, autocommit=True) as admin:
        writer.execute(
            f"SELECT 1 FROM {pg_store_schema}.writer_fences WHERE session_id = 's' FOR SHARE"
        )  # a write in flight, as the last holder's would be
        assert first.lock("s") is False
        assert admin.execute(held, parts).fetchone() == (0,)
        writer.commit()
    assert first.lock("s") is True
