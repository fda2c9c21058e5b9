"""Encryption at rest, read from the engines' own storage: no plain text, erase by key.

The conformance kit (``EncryptionConformance`` and the whole kit on encrypted stores)
checks what a caller sees; these tests read what the files and tables hold.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import EncryptionKeyMismatchError, EncryptionKeyMissingError, StoreCorruptError
from plait.store import PostgresStore, SQLiteStore, Store, new_encryption_key, open_store
from plait.store.sql._sealing import Sealer, _record_aad, parse_key
from tests.conftest import POSTGRES_URL, needs_postgres

SECRETS = (
    "zebracontent",
    "zebrareply",
    "zebratitle",
    "zebrameta",
    "zebrapad",
    "zebrasetting",
    "zebraobject",
    "zebratool",
)


def _fill(client: Client, store: Store) -> str:
    """A session holding each kind of secret: messages, title, meta, pad, settings, object."""
    s = client.sessions.new()
    s.inject({"role": "user", "content": "the zebracontent is here"})
    s.inject({"role": "assistant", "content": "a zebrareply"})
    s.inject({"role": "tool", "content": "zebratool output", "tool_call_id": "c1"})
    s.rename("zebratitle")
    s.scratchpad.set({"note": "zebrapad"}, reason="zebrapad reason")
    s.settings.set_metadata("tag", "zebrasetting")
    s.settings.set(system_note="zebrasetting")
    s.fork().inject({"role": "user", "content": "zebracontent in the fork"})
    data = b"zebraobject " * 100
    store.object_put(hashlib.sha256(data).hexdigest(), [data], 1)  # type: ignore[attr-defined]
    return s.id


def _raw_sqlite(path: Path) -> bytes:
    out = b""
    for suffix in ("", "-wal", "-journal"):
        f = Path(f"{path}{suffix}")
        if f.exists():
            out += f.read_bytes()
    return out


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("PLAIT_ENCRYPTION_KEY", raising=False)
    return new_encryption_key()


def test_no_plain_text_in_the_sqlite_file_or_its_log(tmp_path: Path, key: str) -> None:
    """The main file and the write-ahead log, read raw while the store is open, hold none."""
    path = tmp_path / "s.db"
    store = SQLiteStore(path, encryption_key=key)
    with Client(tmp_path, store=store) as client:
        sid = _fill(client, store)
        raw = _raw_sqlite(path)
        assert Path(f"{path}-wal").exists() and len(raw) > 0
        assert [s for s in SECRETS if s.encode() in raw] == []
        # ... while the client reads every secret back through the key.
        session = client.open(sid)
        assert session.title == "zebratitle"
        assert session.history()[0].text == "the zebracontent is here"
        assert session.scratchpad() == {"note": "zebrapad"}
    store.close()
    raw = _raw_sqlite(path)
    assert [s for s in SECRETS if s.encode() in raw] == []


def test_a_plain_store_does_hold_the_text(tmp_path: Path, key: str) -> None:
    """The control: the same session in a plain store is readable in the file."""
    path = tmp_path / "p.db"
    store = SQLiteStore(path)
    with Client(tmp_path, store=store) as client:
        _fill(client, store)
        assert b"zebracontent" in _raw_sqlite(path)
    store.close()


def _data_keys(store: Any) -> list[tuple[int, int | None, bytes]]:
    rows = store._all("SELECT kid, owner_pk, wrapped FROM data_keys ORDER BY kid", (), "keys")
    return [(int(k), o, bytes(w)) for k, o, w in rows]


def _sealed_rows(store: Any, pk: int) -> list[tuple[int, str, str, str]]:
    """``(key, id, kind, payload)`` of a session's own rows, as stored (sealed)."""
    rows = store._all(
        store.dialect.sql("SELECT key, id, kind, payload FROM records WHERE key >= ? AND key < ?"),
        (pk << 32, (pk + 1) << 32),
        "sealed",
    )
    return [tuple(r) for r in rows]


def _nothing_opens(key: str, store: Any, sealed: list[tuple[int, str, str, str]]) -> None:
    """With the master key, no data key left in the store opens any row of ``sealed``.

    Its own key is gone (the store names it as such), and every other key, given the
    right nonce and associated data, fails the tag: the rows are noise to whoever holds
    the master key and every byte of the store.
    """
    from cryptography.exceptions import InvalidTag

    def load(by: str, value: int) -> tuple[int | None, int, bytes] | None:
        found = [k for k in _data_keys(store) if (k[0] if by == "kid" else k[1]) == value]
        return None if not found else (found[0][1], found[0][0], found[0][2])

    fresh = Sealer(parse_key(key), load)
    others = [fresh._keep((o, k, w)) for k, o, w in _data_keys(store) if o is not None]
    for rkey, rid, kind, text in sealed:
        seq = rkey & 0xFFFFFFFF
        aad = partial(_record_aad, seq=seq, rid=rid, kind=kind, column=b"p")
        with pytest.raises(StoreCorruptError, match="not in the store"):
            fresh.open(text, aad, None, "an erased row")
        blob = base64.b64decode(text)
        kid, nonce, body = int.from_bytes(blob[:8], "big"), blob[8:20], blob[20:]
        for other in others:
            with pytest.raises(InvalidTag):
                other.aead.decrypt(nonce, body, aad(kid))
            with pytest.raises(InvalidTag):
                other.aead.decrypt(nonce, body, aad(other.kid))


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def sealed_store(request: pytest.FixtureRequest, tmp_path: Path, key: str) -> Iterator[Any]:
    if request.param == "postgres":
        schema = request.getfixturevalue("pg_store_schema")
        s: Any = PostgresStore(f"{POSTGRES_URL}?schema={schema}", encryption_key=key)
    elif request.param == "memory":
        s = open_store(":memory:", encryption_key=key)
    else:
        s = SQLiteStore(tmp_path / "e.db", encryption_key=key)
    yield s
    s.close()


def test_erase_destroys_the_key_so_nothing_it_wrote_opens(
    sealed_store: Any, tmp_path: Path, key: str
) -> None:
    """After an erase, rows copied before it do not open with the master key."""
    with Client(tmp_path, store=sealed_store) as client:
        s = client.sessions.new()
        s.inject({"role": "user", "content": "zebracontent to forget"})
        row = sealed_store.get(s.id)
        sealed = _sealed_rows(sealed_store, row.pk)  # what free pages or a log could keep
        assert len(sealed) == 1
        owners = {o for _, o, _ in _data_keys(sealed_store)}
        assert row.pk in owners
        client.sessions.erase(s.id)
    assert row.pk not in {o for _, o, _ in _data_keys(sealed_store)}
    _nothing_opens(key, sealed_store, sealed)


def test_erase_with_a_live_fork_reseals_what_the_fork_reads_and_destroys_the_old_key(
    sealed_store: Any, tmp_path: Path, key: str
) -> None:
    """The fork reads on; nothing the erased session wrote opens from an earlier copy."""
    with Client(tmp_path, store=sealed_store) as client:
        s = client.sessions.new()
        s.inject({"role": "user", "content": "shared zebracontent"})
        fork = s.fork()
        s.inject({"role": "user", "content": "zebracontent after the fork"})
        s.rename("zebratitle")
        fork.inject({"role": "user", "content": "the fork's own"})
        pk = sealed_store.get(s.id).pk
        sealed = _sealed_rows(sealed_store, pk)  # both rows, as a copy of the file holds them
        assert len(sealed) == 2
        client.sessions.erase(s.id)
        assert pk in {o for _, o, _ in _data_keys(sealed_store)}  # a new key, for the fork
        assert [m.text for m in fork.history()] == ["shared zebracontent", "the fork's own"]
        _nothing_opens(key, sealed_store, sealed)
        assert len(_sealed_rows(sealed_store, pk)) == 1  # what the fork reads, sealed anew
        assert sealed_store.check(deep=True) == []
        client.sessions.delete(fork.id)
    assert {o for _, o, _ in _data_keys(sealed_store)} == {None}  # the store's own two


def test_rewind_and_undo_keep_an_encrypted_session_whole(sealed_store: Any, tmp_path: Path) -> None:
    with Client(tmp_path, store=sealed_store) as client:
        s = client.sessions.new()
        for i in range(4):
            s.inject({"role": "user", "content": f"zebra {i}"})
        s.scratchpad.set({"n": 1})
        s.rename("zebratitle")
        s.transcript.rewind(2)
        s.inject({"role": "user", "content": "after the rewind"})
        assert [m.text for m in s.history()] == ["zebra 0", "zebra 1", "after the rewind"]
        assert s.title == "zebratitle" and s.scratchpad() == {"n": 1}
        assert [v.scratchpad for v in s.scratchpad.history()] == [{"n": 1}]
        assert sealed_store.check(deep=True) == []
        client.sessions.erase(s.id)
        assert {o for _, o, _ in _data_keys(sealed_store)} == {None}


@needs_postgres
def test_no_plain_text_in_the_postgres_tables(
    pg_store_schema: str, tmp_path: Path, key: str
) -> None:
    """Every table read raw with SQL (each row cast to text) holds none of the secrets."""
    import psycopg

    store = PostgresStore(f"{POSTGRES_URL}?schema={pg_store_schema}", encryption_key=key)
    try:
        with Client(tmp_path, store=store) as client:
            _fill(client, store)
    finally:
        store.close()
    assert POSTGRES_URL is not None
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (pg_store_schema,)
            ).fetchall()
        ]
        found = []
        for table in tables:
            rows = conn.execute(
                f'SELECT t::text FROM "{pg_store_schema}"."{table}" t'
            ).fetchall()
            text = " ".join(r[0] for r in rows)
            found += [f"{table}: {s}" for s in SECRETS if s in text]
            # bytea cast to text is hex: look for the secrets' bytes too
            found += [f"{table}: {s} (hex)" for s in SECRETS if s.encode().hex() in text]
        assert "records" in tables and found == []


def test_the_key_comes_from_the_environment(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_ENCRYPTION_KEY", key)
    path = tmp_path / "env.db"
    with Client(tmp_path, store=path) as client:
        client.sessions.new().inject({"role": "user", "content": "zebracontent"})
        assert client.store.encrypted  # type: ignore[attr-defined]
    monkeypatch.delenv("PLAIT_ENCRYPTION_KEY")
    with pytest.raises(EncryptionKeyMissingError):
        Client(tmp_path, store=path)
    with pytest.raises(EncryptionKeyMismatchError):
        Client(tmp_path, store=path, encryption_key=new_encryption_key())


def test_recover_copies_an_encrypted_store_with_its_keys(
    tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``salvage`` (``plait db recover``) of an encrypted file opens with the same key."""
    from plait.store import salvage

    path, copy = tmp_path / "e.db", tmp_path / "copy.db"
    with Client(tmp_path, store=path, encryption_key=key) as client:
        s = client.sessions.new()
        s.inject({"role": "user", "content": "zebracontent"})
        sid = s.id
    monkeypatch.setenv("PLAIT_ENCRYPTION_KEY", key)
    report = salvage(path, copy)
    assert report.records == 1
    with Client(tmp_path, store=copy) as client:
        assert client.open(sid).history()[0].text == "zebracontent"
    assert b"zebracontent" not in _raw_sqlite(copy)


def test_a_wrong_key_is_refused_before_a_migration_writes(tmp_path: Path, key: str) -> None:
    """An encrypted file that a newer plait would migrate is refused first, unchanged."""
    from plait.store.sqlite import MIGRATIONS

    path = tmp_path / "m.db"
    SQLiteStore(path, encryption_key=key).close()
    newer = (*MIGRATIONS, (MIGRATIONS[-1][0] + 1, "test: one more table", ("CREATE TABLE x (y)",)))
    before = path.read_bytes()
    with pytest.raises(EncryptionKeyMismatchError):
        SQLiteStore(path, migrations=newer, encryption_key=new_encryption_key())
    with pytest.raises(EncryptionKeyMissingError):
        SQLiteStore(path, migrations=newer)
    assert path.read_bytes() == before
    store = SQLiteStore(path, migrations=newer, encryption_key=key)
    assert store.schema_version == newer[-1][0]
    store.close()


def test_a_key_with_an_open_store_is_refused(tmp_path: Path, key: str) -> None:
    from plait.errors import InvalidArgumentError

    store = SQLiteStore(tmp_path / "o.db")
    try:
        with pytest.raises(InvalidArgumentError, match="not with an open store"):
            Client(tmp_path, store=store, encryption_key=key)
    finally:
        store.close()


@needs_postgres
def test_run_events_cross_the_bus_sealed(pg_store_schema: str, key: str) -> None:
    """Another process hears the events as sent; the bus table holds none of their text."""
    import json

    import psycopg

    url = f"{POSTGRES_URL}?schema={pg_store_schema}"
    a, b = PostgresStore(url, encryption_key=key), PostgresStore(url, encryption_key=key)
    try:
        heard = b.events(timeout=0.5)
        a.publish_events("s1", [json.dumps({"delta": "zebradelta"}), '"two"'])
        assert a.flush_events()
        got = [(m.session_id, json.loads(m.body)) for m in heard if m.kind == "events"]
        assert got == [("s1", [{"delta": "zebradelta"}, "two"])]
        assert POSTGRES_URL is not None
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            rows = conn.execute(
                f'SELECT body FROM "{pg_store_schema}".plait_bus'
            ).fetchall()
        assert rows and not any("zebradelta" in r[0] for r in rows)
    finally:
        a.close()
        b.close()


@needs_postgres
def test_a_wrong_key_is_refused_before_a_postgres_migration(pg_schema: str, key: str) -> None:
    """An encrypted schema a newer plait would migrate is refused first, unchanged."""
    from plait.store.postgres import MIGRATIONS

    url = f"{POSTGRES_URL}?schema={pg_schema}"
    PostgresStore(url, encryption_key=key).close()
    extra = (MIGRATIONS[-1][0] + 1, "test: one more table", ("CREATE TABLE x (y int)",))
    newer = (*MIGRATIONS, extra)
    with pytest.raises(EncryptionKeyMismatchError):
        PostgresStore(url, migrations=newer, auto_migrate=True, encryption_key=new_encryption_key())
    with pytest.raises(EncryptionKeyMissingError):
        PostgresStore(url, migrations=newer, auto_migrate=True)
    store = PostgresStore(url, encryption_key=key)
    assert store.schema_version == MIGRATIONS[-1][0]  # nothing was applied
    store.close()
