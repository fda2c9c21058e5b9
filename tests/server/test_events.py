"""Observers follow a session over SSE from a real server; a reconnect loses no record."""

from __future__ import annotations

from pathlib import Path

import httpx

from plait import Client
from tests.conftest import make_store, needs_postgres

from .conftest import AUTH, REPLY, LiveServer, Served, SseReader, make_served


def test_observers_see_a_run_and_reconnect_without_losing_records(
    live: LiveServer, served: Served
) -> None:
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={"title": "watched"}).json()["id"]
        with (
            http.stream("GET", f"/sessions/{sid}/events") as first,
            http.stream("GET", f"/sessions/{sid}/events") as second,
        ):
            assert first.status_code == 200
            assert first.headers["content-type"].startswith("text/event-stream")
            a, b = SseReader(first), SseReader(second)
            # A write outside any run reaches observers too.
            http.post(
                f"/sessions/{sid}/messages",
                json={"messages": [{"role": "system", "content": "sys"}]},
            )
            assert a.next()["data"]["record"]["kind"] == "system"
            assert b.next()["data"]["record"]["kind"] == "system"
            run_id = http.post(f"/sessions/{sid}/runs", json={"text": "hello"}).json()["run_id"]
            seen_a = a.until(lambda e: e["event"] == "run_end")
            seen_b = b.until(lambda e: e["event"] == "run_end")
        for seen in (seen_a, seen_b):
            assert seen[0]["event"] == "run_start" and seen[0]["data"]["run_id"] == run_id
            assert seen[-1]["data"]["ok"] is True and seen[-1]["data"]["run_id"] == run_id
            records = [e for e in seen if e["event"] == "record"]
            assert [e["id"] for e in records] == ["1", "2"]
            assert [e["data"]["record"]["kind"] for e in records] == ["user", "assistant"]
            assert "".join(e["data"]["text"] for e in seen if e["event"] == "text_delta") == REPLY
        # The observer dropped after record 1: reconnecting with its id replays record 2.
        with http.stream("GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": "1"}) as again:
            ev = SseReader(again).next()
            assert ev["event"] == "record" and ev["id"] == "2"
            assert ev["data"]["record"]["payload"]["content"] == REPLY
        # A delta's id names the record before it: reconnecting with it replays from there.
        delta_id = next(e["id"] for e in seen_a if e["event"] == "text_delta")
        with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": delta_id}
        ) as again:
            assert SseReader(again).next()["id"] == "2"
        # ?after=-1 replays everything in view, in order, then follows.
        with http.stream("GET", f"/sessions/{sid}/events", params={"after": -1}) as replay:
            r = SseReader(replay)
            assert [r.next()["id"] for _ in range(3)] == ["0", "1", "2"]
            http.post(f"/sessions/{sid}/clients", json={"client_id": "late"})
            ev = r.next()
            assert (
                ev["id"] == "3" and ev["data"]["record"]["payload"]["name"] == "live_session_client"
            )


def test_records_from_another_writer_reach_observers(live: LiveServer, served: Served) -> None:
    """A write the server did not make (another client of the store) arrives on the next tick."""
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        with http.stream("GET", f"/sessions/{sid}/events") as stream:
            reader = SseReader(stream)
            with Client(served.client.workspace, store=served.client.store) as other:
                other.get(sid).inject({"role": "user", "content": "from elsewhere"})
            ev = reader.next()
            assert (
                ev["event"] == "record"
                and ev["data"]["record"]["payload"]["content"] == "from elsewhere"
            )


def test_event_stream_errors(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        r = http.get("/sessions/0190f4a0-0000-7000-8000-0000000000ff/events")
        assert r.status_code == 401
        r = http.get("/sessions/0190f4a0-0000-7000-8000-0000000000ff/events", headers=AUTH)
        assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
        sid = http.post("/sessions", json={}, headers=AUTH).json()["id"]
        r = http.get(f"/sessions/{sid}/events", headers={**AUTH, "Last-Event-ID": "abc"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_argument"


@needs_postgres
def test_postgres_notifies_wake_observers_at_once(tmp_path: Path, pg_store_schema: str) -> None:
    """On PostgreSQL another process's write arrives by LISTEN/NOTIFY, not by the tick.

    The keep-alive tick is an hour here, so only the store's change feed can deliver it.
    """
    served = make_served(
        tmp_path, store=make_store("postgres", tmp_path, pg_store_schema), ping_interval=3600
    )
    other_store = make_store("postgres", tmp_path, pg_store_schema)
    try:
        with (
            LiveServer(served.app) as live,
            httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http,
        ):
            sid = http.post("/sessions", json={}).json()["id"]
            with http.stream("GET", f"/sessions/{sid}/events") as stream:
                reader = SseReader(stream)
                with Client(served.client.workspace, store=other_store) as other:
                    other.get(sid).inject({"role": "user", "content": "from another process"})
                ev = reader.next()
                assert ev["data"]["record"]["payload"]["content"] == "from another process"
    finally:
        other_store.close()
        served.client.close()
