"""The PostgreSQL event bus under the hub: batches of any size, in order, never one's own,
only the sessions wanted, what a listener missed read after it reconnects, a batch
deleted unread reported lost; and a relaying channel holds its own store reads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import Client
from plait.errors import StoreError
from plait.server import relay
from plait.server.sse import Hub
from plait.store import BusMessage, EventBus
from plait.store.postgres import PostgresStore
from tests.conftest import make_store, needs_postgres

pytestmark = needs_postgres


@pytest.fixture
def pair(tmp_path: Path, pg_store_schema: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    a = make_store("postgres", tmp_path, pg_store_schema)
    b = make_store("postgres", tmp_path, pg_store_schema)
    assert isinstance(a, PostgresStore) and isinstance(b, PostgresStore)
    yield a, b
    a.close()
    b.close()


def _batches(messages: Iterator[BusMessage]) -> list[tuple[str, list[object]]]:
    return [(m.session_id, json.loads(m.body)) for m in messages if m.kind == "events"]


def test_batches_cross_in_order_whatever_their_size(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = pair
    assert isinstance(a, EventBus)
    heard = b.events(timeout=0.5)  # listening from here on
    mine = a.events(timeout=0.5)
    big = "x" * 100_000  # far past NOTIFY's 8000 bytes
    a.publish_events("s1", ['"one"', '"two"'])
    a.publish_events("s2", [json.dumps(big)])
    assert a.flush_events()
    a.publish_events("s1", ['"three"'])
    assert a.flush_events()
    got = _batches(heard)
    assert [sid for sid, _ in got].count("s2") == 1
    assert [e for sid, events in got if sid == "s1" for e in events] == ["one", "two", "three"]
    assert next(events for sid, events in got if sid == "s2") == [big]
    assert _batches(mine) == []  # a store does not hear its own batches


def test_a_listener_reads_only_the_sessions_it_wants(
    pair: tuple[PostgresStore, PostgresStore],
) -> None:
    a, b = pair
    heard = b.events(timeout=0.5, wanted=lambda sid: sid == "watched")
    a.publish_events("elsewhere", ['"no"'])
    a.publish_events("watched", ['"yes"'])
    assert a.flush_events()
    assert _batches(heard) == [("watched", ["yes"])]


def test_writes_and_batches_are_heard_in_commit_order(
    tmp_path: Path, pair: tuple[PostgresStore, PostgresStore]
) -> None:
    a, b = pair
    heard = b.events(timeout=0.5)
    with Client(tmp_path, store=a) as client:
        session = client.sessions.new()
        session.inject({"role": "user", "content": "first"})
        assert a.flush_changes()
        a.publish_events(session.id, ['"after the write"'])
        assert a.flush_events()
    kinds = [m.kind for m in heard if m.session_id == session.id]
    assert kinds.index("changed") < kinds.index("events")


def test_a_listener_that_reconnects_reads_what_it_missed(
    pair: tuple[PostgresStore, PostgresStore], pg_store_schema: str
) -> None:
    a, b = pair
    heard = b.events(timeout=0.5)
    a.publish_events("s", ['"before"'])
    assert a.flush_events()
    assert _batches(heard) == [("s", ["before"])]
    # The listening connection goes (a proxy's idle cut); batches are sent meanwhile.
    listener = b._bus_in._conn
    assert listener is not None
    with a._conn("kill the listener") as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (listener.info.backend_pid,))
    a.publish_events("s", ['"while away"'])
    assert a.flush_events()
    with pytest.raises(StoreError):
        list(b.events(timeout=0.5))
    assert _batches(b.events(timeout=0.5)) == [("s", ["while away"])]


def test_a_batch_deleted_unread_is_lost(pair: tuple[PostgresStore, PostgresStore]) -> None:
    a, b = pair
    heard = b.events(timeout=0.5)
    a.publish_events("s", ['"gone"'])
    assert a.flush_events()
    with a._conn("delete") as conn:  # as if a minute passed
        conn.execute("DELETE FROM plait_bus")
    assert [(m.kind, m.session_id) for m in heard] == [("lost", "s")]


def test_a_relaying_channel_reads_the_store_again_after_the_origin_goes_silent(
    tmp_path: Path, pg_store_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While it relays, a poke (the change feed, the tick) publishes nothing; after the
    origin's silence it does."""
    monkeypatch.setattr(relay, "RELAY_SILENCE", 0.5)

    async def main() -> None:
        store_a = make_store("postgres", tmp_path, pg_store_schema)
        store_b = make_store("postgres", tmp_path, pg_store_schema)
        client_a, client_b = Client(tmp_path, store=store_a), Client(tmp_path, store=store_b)
        hub = Hub(client_b.host)
        try:
            session = client_a.sessions.new()
            session.inject({"role": "system", "content": "s"})
            _, sub = await hub.open(session.id, None)
            hub.relay(BusMessage("events", session.id, "[]"))  # a run starts elsewhere
            session.inject({"role": "user", "content": "written by the run"})
            await hub.refresh(session.id)
            assert sub.queue.empty()  # its marker has not come: the record waits
            await asyncio.sleep(0.6)  # the origin died
            await hub.refresh(session.id)
            event = sub.queue.get_nowait()
            assert event is not None and event.data["seq"] == 1
        finally:
            hub.close_all()
            client_a.close()
            client_b.close()
            store_a.close()
            store_b.close()

    asyncio.run(main())


def test_a_batch_heard_twice_is_relayed_once(tmp_path: Path, pg_store_schema: str) -> None:
    """A publisher whose connection broke sends its batch again: observers see it once."""

    async def main() -> None:
        store = make_store("postgres", tmp_path, pg_store_schema)
        client = Client(tmp_path, store=store)
        hub = Hub(client.host)
        try:
            session = client.sessions.new()
            session.inject({"role": "system", "content": "s"})
            _, sub = await hub.open(session.id, None)
            batch = json.dumps([
                ["0.1~1", "run_start", {"session_id": session.id, "run_id": "r"}],
                ["0.2~1", "text_delta", {"session_id": session.id, "text": "once"}],
            ])
            for _ in range(2):
                hub.relay(BusMessage("events", session.id, batch))
            hub.relay(BusMessage("events", session.id, json.dumps([
                ["0.3~1", "text_delta", {"session_id": session.id, "text": "then"}],
            ])))
            seen = []
            while len(seen) < 3:
                event = await asyncio.wait_for(sub.queue.get(), 10)
                assert event is not None
                seen.append((event.id, event.event))
            # In order: a repeat would have come before the last one.
            assert seen == [
                ("0.1~1", "run_start"), ("0.2~1", "text_delta"), ("0.3~1", "text_delta")
            ]
        finally:
            hub.close_all()
            client.close()
            store.close()

    asyncio.run(main())


def test_a_feed_that_reconnects_reads_the_changes_it_missed(
    tmp_path: Path, pg_store_schema: str
) -> None:
    """The server's listening connection dies; a write meanwhile still reaches observers
    (the keep-alive tick is an hour: only the feed, listening again, can deliver it)."""
    import httpx

    from .conftest import AUTH, LiveServer, SseReader, make_served

    served_store = make_store("postgres", tmp_path, pg_store_schema)
    other_store = make_store("postgres", tmp_path, pg_store_schema)
    assert isinstance(served_store, PostgresStore)
    served = make_served(tmp_path, store=served_store, ping_interval=3600)
    try:
        with (
            LiveServer(served.app) as live,
            httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http,
        ):
            sid = http.post("/sessions", json={}).json()["id"]
            with http.stream("GET", f"/sessions/{sid}/events") as stream:
                reader = SseReader(stream)
                listener = served_store._bus_in._conn
                assert listener is not None
                with other_store._conn("cut the listener") as conn:
                    conn.execute("SELECT pg_terminate_backend(%s)", (listener.info.backend_pid,))
                with Client(served.client.workspace, store=other_store) as other:
                    other.open(sid).inject({"role": "user", "content": "while it was deaf"})
                ev = reader.next()
                assert ev["data"]["record"]["payload"]["content"] == "while it was deaf"
    finally:
        served.client.close()
        served_store.close()
        other_store.close()
