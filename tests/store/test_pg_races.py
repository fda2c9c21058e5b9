"""A branch being created on PostgreSQL while another process deletes what it reads.

A branch of its base owner locks only that row (see ``CREATE`` in store/postgres/_sql.py): the
owners further up its chain stay because its source keeps them. These tests hold the
branch's transaction open at the point where it has locked its source and inserted
itself, run a delete in another process, and let the branch commit only once that
process has shown what it does meanwhile: wait for the lock, or finish. No step waits
for a length of time; each waits for the other side to reach a state it can see.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import pytest

from plait.layout import Layout, branch
from plait.records import Record, UserRecord
from plait.store import SessionRow
from plait.store.postgres import PostgresStore
from tests.conftest import POSTGRES_URL, eventually

URL = POSTGRES_URL or "postgresql://unset"

_DELETE = """
import sys
from plait.store.postgres import PostgresStore
store = PostgresStore(sys.argv[1], schema=sys.argv[2])
store.delete(sys.argv[3])
store.close()
"""


def users(start: int, n: int, tag: str) -> list[Record]:
    return [UserRecord(seq=start + i, content=f"{tag}{start + i}") for i in range(n)]


def grown(
    store: PostgresStore, row: SessionRow, source: SessionRow, sid: str, n: int
) -> SessionRow:
    """A branch of ``source`` at its end, with ``n`` records of its own."""
    lay = branch(source.layout, source.pk, source.layout.end_seq, source.layout.end_msgs)
    records = users(lay.end_seq, n, sid)
    made = replace(row, id=sid, layout=lay.appended(n, n), parent_ids=(source.id,))
    return store.create(made, records)


def root(store: PostgresStore, sid: str, n: int) -> SessionRow:
    return store.create(
        SessionRow(id=sid, workspace="/ws", layout=Layout().appended(n, n)), users(0, n, sid)
    )




class Held:
    """Make the next ``create`` of a store keep its transaction open until released."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.inside = threading.Event()
        self.release = threading.Event()
        self.result: list[Any] = []

    @contextmanager
    def _conn(self, what: str) -> Iterator[Any]:
        store = self.store
        with store._guard(what), store._pool.connection() as conn, conn.transaction():
            yield conn
            self.inside.set()  # the statement ran: its locks are held, its rows not committed
            assert self.release.wait(60)

    def create(self, row: SessionRow) -> threading.Thread:
        def run() -> None:
            self.store._conn = self._conn  # type: ignore[method-assign]
            try:
                self.result.append(self.store.create(row))
            except Exception as exc:  # reported by the test
                self.result.append(exc)
            finally:
                del self.store._conn

        thread = threading.Thread(target=run)
        thread.start()
        assert self.inside.wait(60)
        return thread


def deleter(schema: str, sid: str) -> subprocess.Popen[bytes]:
    """Another process deleting ``sid``; the server knows its connections by their name."""
    url = f"{URL}{'&' if '?' in URL else '?'}application_name=plait-race-deleter"
    return subprocess.Popen([sys.executable, "-c", _DELETE, url, schema, sid])


def waiting_on_a_lock(store: PostgresStore) -> bool:
    """Whether the deleting process is blocked on a row lock."""
    with store._pool.connection() as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
            "'plait-race-deleter' AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(found and found[0])


def rows_of(store: PostgresStore, *pks: int) -> int:
    with store._pool.connection() as conn:
        found = conn.execute(
            "SELECT count(*) FROM records WHERE key >> 32 = ANY(%s)", (list(pks),)
        ).fetchone()
    assert found is not None
    return int(found[0])


def chain(pg: PostgresStore) -> tuple[SessionRow, SessionRow, SessionRow]:
    """``r`` <- ``s1`` <- ``s``, two records each; ``r`` and ``s1`` deleted (``s`` reads them)."""
    r = root(pg, "r", 2)
    s1 = grown(pg, r, r, "s1", 2)
    s = grown(pg, r, s1, "s", 2)
    pg.delete("r")
    pg.delete("s1")
    assert rows_of(pg, r.pk, s1.pk) == 4
    return r, s1, s


def fork_of(source: SessionRow) -> SessionRow:
    lay = branch(source.layout, source.pk, source.layout.end_seq, source.layout.end_msgs)
    return SessionRow(id="f", workspace="/ws", layout=lay, parent_ids=(source.id,))


def test_a_fork_locks_only_its_source(pg: PostgresStore) -> None:
    r, s1, s = chain(pg)
    held = Held(pg)
    thread = held.create(fork_of(s))
    try:
        with pg._pool.connection() as conn, conn.transaction():
            # The owners up the chain are not locked by the fork: another transaction may.
            conn.execute(
                "SELECT pk FROM sessions WHERE pk = ANY(%s) FOR UPDATE NOWAIT", ([r.pk, s1.pk],)
            )
    finally:
        held.release.set()
        thread.join()
    assert isinstance(held.result[0], SessionRow)


def test_a_layout_of_another_shape_locks_every_owner(pg: PostgresStore) -> None:
    import psycopg

    s = chain(pg)[2]
    q = root(pg, "q", 4)
    held = Held(pg)
    odd = SessionRow(id="odd", workspace="/ws", layout=Layout(((q.pk, 4), (s.pk, 6)), 6, 6))
    thread = held.create(odd)
    try:
        with (
            pytest.raises(psycopg.errors.LockNotAvailable),
            pg._pool.connection() as conn,
            conn.transaction(),
        ):
            conn.execute("SELECT pk FROM sessions WHERE pk = %s FOR UPDATE NOWAIT", (q.pk,))
    finally:
        held.release.set()
        thread.join()
    assert isinstance(held.result[0], SessionRow)


def test_a_delete_of_a_forks_source_waits_and_keeps_what_the_fork_reads(
    pg: PostgresStore, pg_schema: str
) -> None:
    r, s1, s = chain(pg)
    held = Held(pg)
    thread = held.create(fork_of(s))
    proc = deleter(pg_schema, "s")
    try:
        assert eventually(lambda: waiting_on_a_lock(pg))  # the delete waits for the fork
    finally:
        held.release.set()
        thread.join()
    assert proc.wait(60) == 0
    (f,) = held.result
    assert isinstance(f, SessionRow)
    assert pg.get("s") is None
    assert [x.text for x in pg.read(f, 0, 6)] == ["r0", "r1", "s12", "s13", "s4", "s5"]
    assert pg.integrity_check() == []
    pg.delete("f")  # the last reader: the whole chain goes with it
    assert rows_of(pg, r.pk, s1.pk, s.pk, f.pk) == 0
    assert pg.integrity_check() == []


def test_a_delete_first_makes_a_fork_of_its_collected_source_fail(
    pg: PostgresStore, pg_schema: str
) -> None:
    r, s1, s = chain(pg)
    pg.delete("s")  # nothing else reads the chain: it is collected
    assert rows_of(pg, r.pk, s1.pk, s.pk) == 0
    from plait.errors import SessionNotFoundError

    with pytest.raises(SessionNotFoundError):
        pg.create(fork_of(s))
    assert pg.integrity_check() == []


def test_a_full_collection_keeps_what_a_fork_reads_through_its_source(
    pg: PostgresStore, pg_schema: str
) -> None:
    r, s1, s = chain(pg)
    g = pg.create(replace(fork_of(s), id="g"))
    pg.delete("s")  # g reads it: kept, and so are r and s1 (s reads them)
    # A layout of another shape reads s, and not what s reads: positions [0, 4) from q.
    q = root(pg, "q", 4)
    odd = pg.create(
        SessionRow(id="odd", workspace="/ws", layout=Layout(((q.pk, 4), (s.pk, 6)), 6, 6))
    )
    held = Held(pg)
    thread = held.create(fork_of(s))  # planned while s was live
    proc = deleter(pg_schema, "g")  # with such a layout stored, it reads every layout
    try:
        assert proc.wait(60) == 0  # and waits for nothing: the fork locked s alone
    finally:
        held.release.set()
        thread.join()
    (f,) = held.result
    assert isinstance(f, SessionRow)
    assert rows_of(pg, g.pk) == 0
    assert rows_of(pg, r.pk, s1.pk) == 4  # s is kept (odd reads it), and what s reads too
    assert [x.text for x in pg.read(f, 0, 6)] == ["r0", "r1", "s12", "s13", "s4", "s5"]
    assert [x.text for x in pg.read(odd, 0, 6)] == ["q0", "q1", "q2", "q3", "s4", "s5"]
    assert pg.integrity_check() == []
    for sid in ("odd", "f", "q"):
        pg.delete(sid)
    assert rows_of(pg, r.pk, s1.pk, s.pk, f.pk, q.pk, odd.pk) == 0
    assert pg.integrity_check() == []
