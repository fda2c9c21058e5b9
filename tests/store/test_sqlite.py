"""What only the SQLite store does: files, WAL, durability, migrations, garbage collection."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import (
    SchemaOutdatedError,
    SchemaTooNewError,
    StaleSessionError,
    StoreCorruptError,
    StoreError,
)
from plait.store import SQLiteStore, default_path, open_store
from plait.store.sqlite import MIGRATIONS


def _top_level(statements: list[str]) -> Callable[[str], None]:
    """A trace callback that keeps the statements the store ran itself.

    SQLite reports the statements a trigger runs inside one (the full-text index's,
    and FTS5's own) with a ``-- `` prefix: they are part of that statement.
    """

    def keep(q: str) -> None:
        # A trigger's program is also reported under the text of the statement it runs in.
        if not q.startswith("-- ") and (not statements or statements[-1] != q):
            statements.append(q)

    return keep


def test_default_location_follows_plait_home(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / "plait.db"
    store = open_store()
    assert store.location == str((tmp_path / "home" / "plait.db").resolve())
    store.close()
    monkeypatch.delenv("PLAIT_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_path() == tmp_path / "xdg" / "plait" / "plait.db"


def test_open_store_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.errors import InvalidArgumentError

    s = open_store(f"sqlite://{tmp_path}/u.db")
    assert s.location.endswith("u.db")
    s.close()
    assert open_store(":memory:").location == ":memory:"
    monkeypatch.setenv("PLAIT_STORE", str(tmp_path / "env.db"))
    s = open_store()
    assert s.location.endswith("env.db")
    s.close()
    with pytest.raises(InvalidArgumentError):
        open_store("mongodb://x")


def test_wal_and_synchronous_settings(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "a.db").close()
    db = sqlite3.connect(tmp_path / "a.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()
    full = SQLiteStore(tmp_path / "b.db", durability="full")
    assert full._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    full.close()
    normal = SQLiteStore(tmp_path / "c.db")
    assert normal._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    normal.close()
    with pytest.raises(ValueError):
        SQLiteStore(tmp_path / "d.db", durability="sometimes")  # type: ignore[arg-type]


def test_sessions_survive_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    with Client(tmp_path, store=path) as c:
        s = c.session
        s.inject({"role": "user", "content": "kept"})
        child = s.fork()
        sid, cid = s.id, child.id
    with Client(tmp_path, store=path) as c:
        assert [m.text for m in c.sessions.history_of(sid)] == ["kept"]
        assert c.open(cid).parent_session_ids == (sid,)


def test_a_schema_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    db.execute("INSERT INTO plait_schema VALUES (999, 'from the future', 0)")
    db.commit()
    db.close()
    with pytest.raises(SchemaTooNewError, match="upgrade plait"):
        SQLiteStore(path)


def test_an_older_schema_is_migrated_or_refused_with_the_command(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    SQLiteStore(path).close()
    nxt = max(m[0] for m in MIGRATIONS) + 1
    extra = (*MIGRATIONS, (nxt, "add a column", ("ALTER TABLE sessions ADD COLUMN extra TEXT",)))
    with pytest.raises(SchemaOutdatedError, match="plait db migrate"):
        SQLiteStore(path, auto_migrate=False, migrations=extra)
    store = SQLiteStore(path, migrations=extra)
    assert store.schema_version == nxt == store.code_version
    assert store.migrate() == []
    cols = [r[1] for r in store._db.execute("PRAGMA table_info(sessions)")]
    assert "extra" in cols
    store.close()


def test_a_failing_migration_leaves_the_schema_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    SQLiteStore(path).close()
    current = max(m[0] for m in MIGRATIONS)
    broken = (
        *MIGRATIONS,
        (current + 1, "broken", ("ALTER TABLE sessions ADD COLUMN ok TEXT", "THIS IS NOT SQL")),
    )
    with pytest.raises(StoreError):
        SQLiteStore(path, migrations=broken)
    store = SQLiteStore(path)
    assert store.schema_version == current
    assert "ok" not in [r[1] for r in store._db.execute("PRAGMA table_info(sessions)")]
    store.close()


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        SQLiteStore(path)


def test_deleting_every_sharer_frees_every_row(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "gc.db")
    c = Client(tmp_path, store=store)
    a = Session.from_user_message("a", client=c)
    a.transcript.inject_many([{"role": "user", "content": str(i)} for i in range(20)])
    b = a.fork()
    b.inject({"role": "user", "content": "b"})
    d = b.detach()
    m = d.merge(a)
    for s in (a, b, d, m):
        c.sessions.delete(s.id)
    assert store._db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 0
    assert store._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 0
    assert store.integrity_check() == []
    store.close()


def test_fork_writes_no_record_rows(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "cow.db")
    c = Client(tmp_path, store=store)
    s = Session.from_user_message("x", client=c)
    s.transcript.inject_many([{"role": "assistant", "content": "y" * 100}] * 500)
    count = store._db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    s.fork()
    s.fork_at(250)
    s.detach()
    assert store._db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == count
    assert store._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 4
    store.close()


def test_two_clients_on_one_file_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    one = Client(tmp_path, store=path)
    two = Client(tmp_path, store=path)
    s1 = one.open("shared")
    s1.inject({"role": "user", "content": "first"})
    s2 = two.open("shared")
    s2.inject({"role": "assistant", "content": "second"})
    # s1's view is stale now: a strict write fails, a plain one lands on the new head.
    with pytest.raises(StaleSessionError):
        s1.inject({"role": "user", "content": "strict"}, expect_version=s1.live.version)
    s1.inject({"role": "user", "content": "third"})
    assert [m.text for m in s2.history()] == ["first", "second", "third"]
    assert [r.seq for r in s1.transcript.records] == [0, 1, 2]
    one.close()
    two.close()


def test_expect_version_guards_a_write(tmp_path: Path) -> None:
    with Client(tmp_path, store=":memory:") as c:
        s = c.open()
        s.inject({"role": "user", "content": "a"})
        v = s.live.version
        s.inject({"role": "user", "content": "b"}, expect_version=v)
        with pytest.raises(StaleSessionError):
            s.inject({"role": "user", "content": "c"}, expect_version=v)
        assert s.transcript.length == 2


def test_closed_store_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "x.db")
    store.close()
    with pytest.raises(StoreError):
        store.get("x")


def test_an_unreadable_session_is_not_found(tmp_path: Path) -> None:
    from plait.errors import SessionNotFoundError

    store = SQLiteStore(tmp_path / "bad.db")
    c = Client(tmp_path, store=store)
    s = c.open("broken")
    s.inject({"role": "user", "content": "x"})
    store._db.execute("UPDATE sessions SET bases = '{not json' WHERE id = 'broken'")
    fresh = Client(tmp_path, store=store)
    with pytest.raises(SessionNotFoundError, match="cannot be read"):
        fresh.sessions.open("broken")
    assert fresh.exists("broken") is False
    store.close()


def test_threads_with_their_own_clients_never_lose_or_interleave(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "threads.db"
    Client(tmp_path, store=path).open("shared").inject({"role": "user", "content": "start"})
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with Client(tmp_path, store=path) as c:
                s = c.open("shared")
                for i in range(40):
                    s.inject({"role": "user", "content": f"{n}:{i}"})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Client(tmp_path, store=path) as c:
        records = c.open("shared").transcript.records
    assert [r.seq for r in records] == list(range(161))
    texts = [r.text for r in records[1:]]
    for n in range(4):
        mine = [t for t in texts if t.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(40)]


def test_a_version_1_file_gains_tallies_and_counts_its_old_records(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    old = SQLiteStore(path, migrations=MIGRATIONS[:1])
    c = Client(tmp_path, store=old)
    s = Session.from_user_message("hello there", client=c)
    s.inject({"role": "assistant", "content": "hi"})
    sid = s.id
    c.close()
    store = SQLiteStore(path)
    assert store.schema_version == max(m[0] for m in MIGRATIONS)
    c = Client(tmp_path, store=store)
    s = c.sessions.open(sid)
    report = s.context()
    assert report is not None and not report.partial
    assert [sh.name for sh in report.shares] == ["User messages", "Assistant messages"]
    c.close()


def test_reads_and_branches_deep_in_a_chain_cost_the_same_statements(tmp_path: Path) -> None:
    """open, tail, context, fork and ancestry run as many statements at depth 200 as at 1.

    (And each statement reads a bounded number of rows: one point read per owner was
    the cost of a branch deep in a chain.)
    """
    store = SQLiteStore(tmp_path / "deep.db")
    c = Client(tmp_path, store=store)
    root = Session.from_user_message("root", client=c)
    root.transcript.inject_many([{"role": "user", "content": str(i)} for i in range(50)])
    chain = [root.id]
    current = root
    for i in range(200):
        current = current.fork()
        current.inject({"role": "user", "content": f"link {i}"})
        chain.append(current.id)
    statements: list[str] = []

    def count(session_id: str) -> int:
        c.open(session_id).context()  # the first count of new records is work done once
        statements.clear()
        store._db.set_trace_callback(_top_level(statements))
        try:
            s = c.open(session_id)
            assert len(s.transcript.tail(20)) == 20
            s.context()
            s.fork()
            assert s.transcript.ancestry().root_id == root.id
        finally:
            store._db.set_trace_callback(None)
        return len(statements)

    shallow, deep = count(chain[1]), count(chain[-1])
    assert deep <= shallow
    last = c.open(chain[-1]).transcript.tail(3)
    assert [r.text for r in last] == ["link 197", "link 198", "link 199"]
    store.close()


def test_a_short_read_over_many_segments_keeps_their_order_and_finds_a_missing_row(
    tmp_path: Path,
) -> None:
    """A tail across a chain: one arm per segment up to 64 segments, a JSON list past that."""
    store = SQLiteStore(tmp_path / "deep.db")
    c = Client(tmp_path, store=store)
    current = Session.from_user_message("root", client=c)
    for i in range(100):
        current = current.fork()
        current.inject({"role": "user", "content": f"link {i}"})
    row = store.get(current.id)
    assert row is not None
    end = row.layout.end_seq
    for n in (20, 64, 65, 100):
        assert [r.text for r in store.read(row, end - n, end)] == [
            f"link {i}" for i in range(100 - n, 100)
        ]
    owner = row.layout.bases[-10][0]  # the owner of position end - 10
    store._db.execute("DELETE FROM records WHERE key >> 32 = ?", (owner,))
    for n in (20, 100):
        with pytest.raises(StoreCorruptError, match=f"of owner {owner}, found 0"):
            store.read(row, end - n, end)
    store.close()


def test_a_held_layout_is_compared_in_the_engine_and_a_changed_one_read_anew(
    tmp_path: Path,
) -> None:
    """A deep row read again comes back without its layout text, which the engine compared
    with the one this process holds; a layout changed meanwhile is read, never the old one."""
    store = SQLiteStore(tmp_path / "kept.db")
    c = Client(tmp_path, store=store)
    current = Session.from_user_message("root", client=c)
    for i in range(40):
        current = current.fork()
        current.inject({"role": "user", "content": f"link {i}"})
    first = store.get(current.id)
    assert first is not None and len(first.layout.bases) == 40
    statements: list[str] = []
    store._db.set_trace_callback(_top_level(statements))
    try:
        again = store.get(current.id)
    finally:
        store._db.set_trace_callback(None)
    assert again == first and again.layout.bases is first.layout.bases
    assert any("CASE WHEN s.bases = " in q for q in statements)
    # Another writer (here: by hand) gives the row another layout of as many segments.
    pairs = [list(p) for p in first.layout.bases]
    pairs[-1] = pairs[-2]
    other = json.dumps(pairs)
    store._db.execute("UPDATE sessions SET bases = ? WHERE pk = ?", (other, first.pk))
    changed = store.get(current.id)
    assert changed is not None
    assert changed.layout.bases == tuple(tuple(p) for p in json.loads(other))
    assert changed.layout.bases != first.layout.bases
    store.close()


def test_parent_ids_holding_quotes_backslashes_or_several_ids_read_back(tmp_path: Path) -> None:
    """One parent is read without the JSON decoder; any id that needs an escape is not."""
    from plait.store import SessionRow

    store = SQLiteStore(tmp_path / "parents.db")
    for i, parents in enumerate(
        [("plain",), ('a"b',), ("x\\y",), ("p", "q"), ("",), ("é/ü",), ('"',)]
    ):
        store.create(SessionRow(id=f"s{i}", workspace="/ws", parent_ids=parents))
        row = store.get(f"s{i}")
        assert row is not None and row.parent_ids == parents
    store._db.execute("UPDATE sessions SET parent_ids = ? WHERE id = 's0'", ('["]',))
    with pytest.raises(StoreCorruptError, match="parent_ids"):
        store.get("s0")
    store.close()


def test_a_short_read_puts_rows_the_engine_gave_in_another_order_back_in_order(
    tmp_path: Path,
) -> None:
    """The positions prove a short read's order; rows given in another order are sorted."""
    from plait.layout import segments
    from plait.store.sqlite._read import read_small

    store = SQLiteStore(tmp_path / "order.db")
    c = Client(tmp_path, store=store)
    current = Session.from_user_message("root", client=c)
    for i in range(30):
        current = current.fork()
        current.inject({"role": "user", "content": f"link {i}"})
    row = store.get(current.id)
    assert row is not None
    end = row.layout.end_seq
    parts = segments(row.layout, row.pk, end - 20, end)

    class Reversed:
        """A connection whose statements give their rows newest first."""

        def __init__(self, db: sqlite3.Connection, drop: int = 0) -> None:
            self.db, self.drop = db, drop

        def execute(self, sql: str, params: list[int]) -> Reversed:
            self.rows = self.db.execute(sql, params).fetchall()[::-1][self.drop :]
            return self

        def fetchall(self) -> list[tuple[object, ...]]:
            return self.rows

    got = read_small(Reversed(store._db), row, parts)  # type: ignore[arg-type]
    assert [r.text for r in got] == [f"link {i}" for i in range(10, 30)]
    with pytest.raises(StoreCorruptError, match="expected 1 rows at"):
        read_small(Reversed(store._db, drop=1), row, parts)  # type: ignore[arg-type]
    store.close()


def _tombstones_and_referenced(store: SQLiteStore) -> tuple[set[int], set[int]]:
    db = store._db
    tombs = {int(pk) for (pk,) in db.execute("SELECT pk FROM sessions WHERE deleted = 1")}
    referenced: set[int] = set()
    for (bases,) in db.execute("SELECT bases FROM sessions WHERE deleted = 0"):
        referenced.update(int(owner) for owner, _ in json.loads(bases))
    return tombs, referenced


def test_delete_frees_exactly_the_rows_no_live_layout_reads(tmp_path: Path) -> None:
    """Random branches and deletes: what is kept is exactly what live layouts read."""
    rng = random.Random(11)
    store = SQLiteStore(tmp_path / "gc.db")
    c = Client(tmp_path, store=store)
    live = [Session.from_user_message("root", client=c)]
    live[0].transcript.inject_many([{"role": "user", "content": str(i)} for i in range(6)])
    texts: dict[str, list[str]] = {}
    for step in range(300):
        action = rng.random()
        if action < 0.55 or len(live) < 3:
            src = rng.choice(live)
            if src.transcript.length > 1 and rng.random() < 0.3:
                child = src.fork_at(rng.randint(1, src.transcript.length))
            elif rng.random() < 0.15:
                child = src.detach()
            elif rng.random() < 0.1 and len(live) > 1:
                child = src.merge(rng.choice([s for s in live if s.id != src.id]))
            else:
                child = src.fork()
            child.inject({"role": "user", "content": f"step {step}"})
            live.append(child)
        else:
            gone = live.pop(rng.randrange(len(live)))
            c.sessions.delete(gone.id)
            texts.pop(gone.id, None)
            tombs, referenced = _tombstones_and_referenced(store)
            assert tombs == tombs & referenced  # no garbage kept
        for s in live:
            texts.setdefault(s.id, [r.text for r in c.open(s.id).history(full=True)])
    for s in live:
        assert [r.text for r in c.open(s.id).history(full=True)] == texts[s.id]
    assert store.integrity_check() == []
    for s in live:
        c.sessions.delete(s.id)
    assert store._db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 0
    assert store._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 0
    store.close()


def test_delete_reads_no_layout_but_the_ones_it_frees(tmp_path: Path) -> None:
    """A delete's statements do not depend on how many sessions the store holds."""
    store = SQLiteStore(tmp_path / "many.db")
    c = Client(tmp_path, store=store)
    statements: list[str] = []

    def deleting(n_sessions: int) -> int:
        while store._db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] < n_sessions:
            s = Session.from_user_message("x", client=c)
            s.fork().inject({"role": "user", "content": "y"})
        victim = Session.from_user_message("v", client=c)
        child = victim.fork()
        statements.clear()
        store._db.set_trace_callback(_top_level(statements))
        try:
            c.sessions.delete(victim.id)  # kept: its child reads it
            c.sessions.delete(child.id)  # frees both
        finally:
            store._db.set_trace_callback(None)
        return len(statements)

    few, many = deleting(10), deleting(300)
    assert many == few
    assert all("SELECT bases FROM sessions WHERE deleted = 0" not in q for q in statements)
    store.close()


def test_sessions_written_in_turn_stay_on_the_append_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends alternating between sessions are one INSERT each; the order is still right."""
    import plait.store.sqlite._store as sqlite_store

    monkeypatch.setattr(sqlite_store, "_TOP_TTL", 60.0)  # trust never runs out in this test
    store = SQLiteStore(tmp_path / "turns.db")
    c = Client(tmp_path, store=store)
    a, b, idle = (Session.from_user_message(x, client=c) for x in "abi")
    a.inject({"role": "user", "content": "a0"})
    b.inject({"role": "user", "content": "b0"})
    statements: list[str] = []
    store._db.set_trace_callback(_top_level(statements))
    try:
        for i in range(1, 6):
            a.inject({"role": "user", "content": f"a{i}"})
            b.inject({"role": "user", "content": f"b{i}"})
    finally:
        store._db.set_trace_callback(None)
    assert len(statements) == 10 and all(q.startswith("INSERT INTO records") for q in statements)
    other = SQLiteStore(tmp_path / "turns.db")  # another process's view, before the moves
    assert [r.id for r in store.recent(None, 3)] == [b.id, a.id, idle.id]
    assert [r.id for r in other.recent(None, 3)] == [b.id, a.id, idle.id]
    a.inject({"role": "user", "content": "a6"})
    store.close()  # writes what it owes
    assert [r.id for r in other.recent(None, 3)] == [a.id, b.id, idle.id]
    other.close()


def test_an_idle_store_writes_the_order_it_owes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Moves queued by bare INSERTs reach other processes though this one does nothing more."""
    import time

    import plait.store.sqlite._store as sqlite_store

    monkeypatch.setattr(sqlite_store, "_TOP_TTL", 1.0)
    store = SQLiteStore(tmp_path / "idle.db")
    c = Client(tmp_path, store=store)
    a, b = (Session.from_user_message(x, client=c) for x in "ab")
    a.inject({"role": "user", "content": "a0"})
    b.inject({"role": "user", "content": "b0"})
    a.inject({"role": "user", "content": "a1"})  # a bare INSERT: a's move is owed
    other = SQLiteStore(tmp_path / "idle.db")
    deadline = time.monotonic() + 30
    while other.recent(None, 1)[0].id != a.id:
        assert time.monotonic() < deadline, "the owed move was never written"
        time.sleep(0.1)
    other.close()
    store.close()


def test_the_store_checkpoints_its_log_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No commit runs SQLite's automatic checkpoint; the store runs one per so many rows."""
    store = SQLiteStore(tmp_path / "ckpt.db")
    assert store._db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    runs: list[int] = []
    real = store._checkpoint
    monkeypatch.setattr(store, "_checkpoint", lambda: (runs.append(1), real())[1])
    store._checkpoint_every = 10
    with Client(tmp_path, store=store) as client:
        s = client.open("s")
        for i in range(25):
            s.inject({"role": "user", "content": str(i)})
        assert len(runs) == 2
    store.close()
    assert len(runs) == 3  # and one on close, for what it wrote since


def test_a_layout_is_spelled_as_the_json_encoder_spells_it() -> None:
    """A stored layout is compared as text (a branch's owner check), so every length of it
    is spelled one way: compact JSON."""
    from plait.store.sql._rows import bases_text

    rng = random.Random(7)
    for n in (0, 1, 2, 31, 32, 33, 300):
        bases = tuple((rng.randrange(1, 2**31), rng.randrange(0, 2**32)) for _ in range(n))
        assert bases_text(bases) == json.dumps([list(p) for p in bases], separators=(",", ":"))


def test_a_branch_spelled_from_its_source_text_is_spelled_as_the_encoder_spells_it() -> None:
    """A branch's layout text is its source's (read, so held) plus one pair, with no pair
    compared; the owner check compares the source's very text."""
    from plait.layout import Layout, branch, branched_from
    from plait.store.sql._rows import bases_of, bases_text, prefix_text

    def spelled(bases: tuple[tuple[int, int], ...]) -> str:
        return json.dumps([list(p) for p in bases], separators=(",", ":"))

    source_text = spelled(tuple((i, 10_000 + i) for i in range(1, 1001)))
    source = bases_of(source_text, 77)
    child = branch(Layout(source, 12_000, 12_000), 77, 12_000, 12_000)
    assert branched_from(child.bases) is source
    text = bases_text(child.bases, branched_from(child.bases))
    assert text == spelled(child.bases)
    assert prefix_text(child.bases, text) is source_text
    # Without the name (a layout built otherwise), the same text.
    assert bases_text(tuple(child.bases)) == text
    rebuilt = (*source, (77, 12_000))
    assert bases_text(rebuilt) == text and prefix_text(rebuilt, text) == source_text


def test_held_layouts_are_bounded_and_the_newest_stay_held() -> None:
    """The held layouts drop their oldest entries when full, never all at once: a layout
    read a moment ago is still found by its text (no decode) after many others."""
    from plait.store.sql import _rows

    def text_of(k: int) -> str:
        return json.dumps([[k, h] for h in range(1, 40)], separators=(",", ":"))

    held = [_rows.bases_of(text_of(k), 10_000 + k) for k in range(3 * _rows._BASES_CACHED)]
    assert len(_rows._by_text) <= _rows._BASES_CACHED
    assert len(_rows._by_owner) <= _rows._BASES_CACHED
    newest = 3 * _rows._BASES_CACHED - 1
    for k in range(newest - _rows._BASES_CACHED // 2, newest + 1):
        assert _rows.bases_of(text_of(k)) is held[k]  # found, not decoded anew


def test_held_layouts_take_reads_from_many_threads_at_once() -> None:
    """Rows are decoded outside the store's lock: threads filling the held layouts past
    their bound at once each get their own layout back, and none fails."""
    import sys
    import threading

    from plait.store.sql import _rows

    def text_of(t: int, k: int) -> str:
        return json.dumps([[t * 100_000 + k, h] for h in range(1, 40)], separators=(",", ":"))

    failures: list[BaseException] = []

    def reader(t: int) -> None:
        try:
            for k in range(2 * _rows._BASES_CACHED):
                text = text_of(t, k)
                assert _rows.bases_text(_rows.bases_of(text, t * 100_000 + k)) == text
        except BaseException as exc:  # reported below, in the test's own thread
            failures.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        threads = [threading.Thread(target=reader, args=(t,)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(_rows._by_text) <= _rows._BASES_CACHED
