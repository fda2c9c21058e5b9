"""The PostgreSQL store's statements sent straight through libpq, and the threads behind appends.

``store/postgres/_prep.py`` runs the append, the announcements and the owed moves without a
cursor; these tests hold it to what a cursor did: the same values, the same errors, a
statement the server forgot prepared again. The owed moves' thread is tested without a
server. Tests that need one take the ``pg_schema`` fixture (PLAIT_TEST_POSTGRES_URL).
"""

from __future__ import annotations

import threading

import pytest

from plait.errors import StoreError
from plait.records import UserRecord
from plait.store import SessionRow
from plait.store.postgres import PostgresStore
from plait.store.postgres._prep import int_array, prepare, run_prepared, text_array
from plait.store.postgres._recency import OwedMoves
from plait.store.sql import _due
from tests.conftest import POSTGRES_URL, eventually

URL = POSTGRES_URL or "postgresql://unset"




# -- numbering and literals (no server) -----------------------------------------------------


def test_named_placeholders_are_numbered_in_order_of_first_use() -> None:
    stmt = prepare("x", "SELECT %(b)s, %(a)s::int, %(b)s || 'x' WHERE %(c)s")
    assert stmt.name == b"plait_x"
    assert stmt.sql == b"SELECT $1, $2::int, $1 || 'x' WHERE $3"
    assert stmt.keys == ("b", "a", "c")


def test_the_append_sends_its_values_in_the_statements_order() -> None:
    from plait.store.postgres._sql import APPEND_ONE_PREPARED

    # PostgresStore.append builds its values in this order.
    assert APPEND_ONE_PREPARED.keys == (
        "pk", "seq", "mpos", "rid", "kind", "payload", "meta", "created", "tokens",
    )  # fmt: skip


def test_array_literals() -> None:
    assert int_array([]) == "{}"
    assert int_array([1, -2, 3]) == "{1,-2,3}"
    assert text_array(["a"]) == '{"a"}'
    assert text_array(['q"uote', "back\\slash", "{x,y}", " NULL "]) == (
        '{"q\\"uote","back\\\\slash","{x,y}"," NULL "}'
    )


# -- against a server -------------------------------------------------------------------


def test_literals_read_back_as_they_were(pg: PostgresStore) -> None:
    ids = ['q"uote', "back\\slash", "{x,y}", "NULL", " spaced ", "é ünïcode", ""]
    stmt = prepare("t_arrays", "SELECT %(t)s::text[], %(i)s::bigint[]")
    with pg._conn("test") as conn:
        result = run_prepared(conn, stmt, (text_array(ids), int_array([1, 2**40])))
        assert result.get_value(0, 1) == b"{1,1099511627776}"
        cast = conn.execute("SELECT %s::text[]", (text_array(ids),)).fetchone()
    assert cast == (ids,)


def test_values_and_nulls_come_back_as_text(pg: PostgresStore) -> None:
    stmt = prepare("t_values", "SELECT %(a)s::bigint + 1, %(b)s::text, %(c)s::text IS NULL")
    with pg._conn("test") as conn:
        result = run_prepared(conn, stmt, (41, "héllo", None))
    assert [result.get_value(0, i) for i in range(3)] == [b"42", "héllo".encode(), b"t"]


def test_errors_are_psycopgs_and_nul_is_refused_before_sending(pg: PostgresStore) -> None:
    import psycopg

    stmt = prepare("t_errors", "SELECT 1 / %(n)s::int")
    with pg._conn("test") as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            run_prepared(conn, stmt, (0,))
        with pytest.raises(psycopg.DataError, match="NUL"):
            run_prepared(conn, prepare("t_nul", "SELECT %(s)s::text"), ("a\x00b",))
        assert run_prepared(conn, stmt, (1,)).get_value(0, 0) == b"1"  # still usable


def test_a_statement_the_server_forgot_is_prepared_again(pg: PostgresStore) -> None:
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    row = pg.append(row, [UserRecord(seq=0, content="one")])
    with pg._conn("test") as conn:  # the connection the appends use (the spare)
        conn.execute("DEALLOCATE ALL")
    row = pg.append(row, [UserRecord(seq=1, content="two")])
    assert [r.text for r in pg.read(row, 0, 2)] == ["one", "two"]


def test_an_append_holding_nul_writes_nothing(pg: PostgresStore) -> None:
    row = pg.create(SessionRow(id="s", workspace="/ws"))
    with pytest.raises(StoreError) as info:
        pg.append(row, [UserRecord(seq=0, content="x", id="a\x00b")])
    assert type(info.value) is StoreError and info.value.__cause__ is not None
    fresh = pg.get("s")
    assert fresh is not None and fresh.layout.end_seq == 0


def test_ids_that_need_quoting_are_announced_as_they_are(pg: PostgresStore, pg_schema: str) -> None:
    other = PostgresStore(URL, schema=pg_schema)
    try:
        feed = other.changes(timeout=5.0)
        ids = ['q"uote', "back\\slash", "{x,y}", "NULL"]
        for sid in ids:  # created close together: announced in one batch, in order
            pg.create(SessionRow(id=sid, workspace="/ws"))
        assert [next(feed) for _ in ids] == ids
    finally:
        other.close()


def test_writes_queued_during_a_send_go_in_one_batch(pg: PostgresStore, pg_schema: str) -> None:
    other = PostgresStore(URL, schema=pg_schema)
    sent: list[list[str]] = []
    release = threading.Event()
    send = pg._notifier._send

    def held(batch: list[str]) -> None:
        sent.append(batch)
        release.wait(10)  # the first batch is still being sent while the writes go on
        send(batch)

    pg._notifier._send = held  # type: ignore[method-assign]
    try:
        feed = other.changes(timeout=5.0)
        rows = [pg.create(SessionRow(id=f"s{i}", workspace="/ws")) for i in range(3)]
        assert eventually(lambda: bool(sent))
        for n in range(20):  # every session written again and again
            rows = [pg.append(r, [UserRecord(seq=n, content=f"{n}")]) for r in rows]
        release.set()
        assert pg.flush_changes()
        # Repeats are folded: the 60 appends queued meanwhile went in one batch.
        assert len(sent) == 2 and sorted(sent[1]) == ["s0", "s1", "s2"]
        heard = [next(feed) for _ in range(len(sent[0]) + 3)]
        assert heard == sent[0] + sent[1]
    finally:
        release.set()
        other.close()


# -- the owed moves' thread (no server) -------------------------------------------------------


class Recorder:
    """A write of owed moves that records what it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], list[int]]] = []
        self.lock = threading.Lock()

    def __call__(self, pks: list[int], times: list[int]) -> None:
        with self.lock:
            self.calls.append((pks, times))


def test_owed_moves_are_written_by_the_thread_in_append_order() -> None:
    write = Recorder()
    owed = OwedMoves(write, 0.01)
    owed.appended(1, 100, top=9)
    owed.appended(2, 100, top=9)  # the same time: the order still strictly increases
    owed.appended(1, 150, top=9)  # queued again: now after 2
    assert eventually(lambda: bool(write.calls))
    assert write.calls[0] == ([2, 1], [100, 150])
    owed.close()


def test_the_top_session_owes_nothing() -> None:
    write = Recorder()
    owed = OwedMoves(write, 0.01)
    owed.appended(1, 100, top=1)
    owed.close()
    assert write.calls == []


def test_close_writes_what_is_owed_and_stops_the_thread() -> None:
    write = Recorder()
    owed = OwedMoves(write, 3600.0)  # the thread would wait an hour
    owed.appended(1, 100, top=9)
    thread = owed._due._thread
    assert thread is not None
    owed.close()
    assert write.calls == [([1], [100])]
    thread.join(5)
    assert not thread.is_alive()


def test_a_failed_write_is_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[list[int]] = []

    def flaky(pks: list[int], times: list[int]) -> None:
        calls.append(pks)
        if len(calls) == 1:
            raise StoreError("the server went away")

    owed = OwedMoves(flaky, 0.01)
    owed.appended(1, 100, top=9)
    assert eventually(lambda: len(calls) >= 2)
    assert calls[:2] == [[1], [1]]
    assert "could not order recent appends yet" in caplog.text
    owed.close()


def test_the_thread_keeps_a_store_alive_only_while_it_owes_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc
    import weakref

    class Owner:
        def __init__(self) -> None:
            self.calls: list[list[int]] = []
            self.owed = OwedMoves(self.write, 0.01)

        def write(self, pks: list[int], times: list[int]) -> None:
            self.calls.append(pks)

    monkeypatch.setattr(_due, "_IDLE_FOR", 60.0)  # the thread outlives the test
    owner = Owner()
    owner.owed.appended(1, 100, top=9)
    calls, due = owner.calls, owner.owed._due
    ref = weakref.ref(owner)
    del owner  # dropped unclosed, with a move owed: written all the same
    assert eventually(lambda: calls == [[1]])
    assert eventually(lambda: (gc.collect(), ref() is None)[1])  # then let go
    thread = due._thread
    assert thread is not None and thread.is_alive()  # while the thread waits
    due.close()


def test_an_append_on_a_dropped_connection_fails_and_the_next_one_reconnects(
    pg: PostgresStore,
) -> None:
    import psycopg

    row = pg.create(SessionRow(id="s", workspace="/ws"))
    row = pg.append(row, [UserRecord(seq=0, content="one")])
    with pg._conn("test") as conn:  # the spare: the next append's connection
        pid = conn.info.backend_pid
    with psycopg.connect(URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    failed = 0
    for seq, text in ((1, "two"), (1, "two"), (1, "two")):
        try:
            row = pg.append(row, [UserRecord(seq=seq, content=text)])
            break
        except StoreError:  # the dropped connection, named as the store's error
            failed += 1
    assert failed <= 1
    fresh = pg.get("s")
    assert fresh is not None and [r.text for r in pg.read(fresh, 0, 2)] == ["one", "two"]


def test_without_psycopgs_parts_the_statements_run_through_a_cursor(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A psycopg lacking the parts used below its API: the same statements, the same
    results and errors, through a cursor."""
    import psycopg

    from plait.store.postgres import _prep as _pgprep

    monkeypatch.setattr(_pgprep, "_execute", _pgprep._CURSOR)
    with pg._conn("test") as conn:
        stmt = prepare("t_cursor", "SELECT %(a)s::bigint + 1, %(b)s::text, %(c)s::text IS NULL")
        result = run_prepared(conn, stmt, (41, "héllo", None))
        assert [result.get_value(0, i) for i in range(3)] == [b"42", "héllo".encode(), b"t"]
        arrays = prepare("t_cursor_arrays", "SELECT %(i)s::bigint[]")
        assert run_prepared(conn, arrays, (int_array([1, 2**40]),)).get_value(0, 0) == (
            b"{1,1099511627776}"
        )
        with pytest.raises(psycopg.errors.DivisionByZero):
            run_prepared(conn, prepare("t_cursor_err", "SELECT 1 / %(n)s::int"), (0,))
    with pytest.raises(StoreError):
        nul = pg.create(SessionRow(id="n", workspace="/ws"))
        pg.append(nul, [UserRecord(seq=0, content="x", id="a\x00b")])
    a = pg.create(SessionRow(id="a", workspace="/ws"))
    b = pg.create(SessionRow(id="b", workspace="/ws"))
    for i in range(3):
        a = pg.append(a, [UserRecord(seq=i, content=f"a{i}")])
        b = pg.append(b, [UserRecord(seq=i, content=f"b{i}")])
    a = pg.append(a, [UserRecord(seq=3, content="a3")])  # owes its move past b
    assert [r.text for r in pg.read(a, 0, 4)] == ["a0", "a1", "a2", "a3"]
    assert [r.id for r in pg.recent(None, 2)] == ["a", "b"]
