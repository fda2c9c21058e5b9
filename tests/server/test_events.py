"""Observers follow a session over SSE from a real server; a reconnect loses no record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from plait import Client
from tests.conftest import make_store, needs_postgres

from .conftest import AUTH, REPLY, GatedProvider, LiveServer, Served, SseReader, make_served


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
            assert [seq_of(e["id"]) for e in records] == ["1", "2"]
            assert len({e["id"].partition("~")[2] for e in seen}) == 1  # one head throughout
            assert [e["data"]["record"]["kind"] for e in records] == ["user", "assistant"]
            assert "".join(e["data"]["text"] for e in seen if e["event"] == "text_delta") == REPLY
        # The observer dropped after record 1: reconnecting with its id replays record 2.
        with http.stream("GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": "1"}) as again:
            ev = SseReader(again).next()
            assert ev["event"] == "record" and seq_of(ev["id"]) == "2"
            assert ev["data"]["record"]["payload"]["content"] == REPLY
        # A delta's id names the record before it: reconnecting with it replays from there.
        delta_id = next(e["id"] for e in seen_a if e["event"] == "text_delta")
        with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": delta_id}
        ) as again:
            assert seq_of(SseReader(again).next()["id"]) == "2"
        # ?after=-1 replays everything in view, in order, then follows.
        with http.stream("GET", f"/sessions/{sid}/events", params={"after": -1}) as replay:
            r = SseReader(replay)
            assert [seq_of(r.next()["id"]) for _ in range(3)] == ["0", "1", "2"]
            http.post(f"/sessions/{sid}/clients", json={"client_id": "late"})
            ev = r.next()
            assert seq_of(ev["id"]) == "3"
            assert ev["data"]["record"]["payload"]["name"] == "live_session_client"


def seq_of(event_id: str) -> str:
    """The seq part of an event id (``"12~h"`` and ``"12.3~h"`` give ``"12"``)."""
    return event_id.partition("~")[0].partition(".")[0]


def _texts(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [
        (e["data"]["seq"], e["data"]["record"]["payload"]["content"])
        for e in events
        if e["event"] == "record"
    ]


def test_a_rewind_reaches_observers_as_a_moved_head(live: LiveServer, served: Served) -> None:
    """After a rewind the stream says which records stand, then sends the new ones.

    The positions past the cut are reused by the records written after it, so an
    observer that only counted seqs would keep the rewound records and never see the
    new ones.
    """
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        said = [{"role": "user", "content": t} for t in ("one", "two", "three")]
        http.post(f"/sessions/{sid}/messages", json={"messages": said})
        with http.stream("GET", f"/sessions/{sid}/events", params={"after": -1}) as stream:
            reader = SseReader(stream)
            first = [reader.next() for _ in range(3)]
            assert _texts(first) == [(0, "one"), (1, "two"), (2, "three")]
            old_head = first[-1]["id"]
            rewound = http.post(f"/sessions/{sid}/rewind", json={"keep_first": 1})
            assert rewound.status_code == 200, rewound.text
            moved = reader.next()
            assert moved["event"] == "head"
            assert (moved["data"]["keep"], moved["data"]["end_seq"]) == (1, 1)
            assert moved["id"].partition("~")[2] != old_head.partition("~")[2]
            http.post(
                f"/sessions/{sid}/messages",
                json={"messages": [{"role": "user", "content": "TWO"}]},
            )
            again = reader.next()
            assert _texts([again]) == [(1, "TWO")]
            # The undo brings the old head back: keep one, then "two" and "three" again.
            undone = http.post(f"/sessions/{sid}/rewind", json={"undo": True})
            assert undone.status_code == 200, undone.text
            back = reader.until(lambda e: e["event"] == "record" and e["data"]["seq"] == 2)
            assert back[0]["event"] == "head" and back[0]["data"]["keep"] == 1
            assert _texts(back) == [(1, "two"), (2, "three")]
        # A reconnect with an id of the rewound head gets everything in view again.
        http.post(f"/sessions/{sid}/rewind", json={"keep_first": 2})
        with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": old_head}
        ) as stream:
            reader = SseReader(stream)
            reset = reader.next()
            assert reset["event"] == "head" and reset["data"]["keep"] == 0
            assert _texts([reader.next(), reader.next()]) == [(0, "one"), (1, "two")]
        # The records page names the head its seqs count on; resuming from it is exact.
        page = http.get(f"/sessions/{sid}/records").json()
        mark = f"{page['records'][-1]['seq']}~{page['head']}"
        with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": mark}
        ) as stream:
            reader = SseReader(stream)
            http.post(
                f"/sessions/{sid}/messages",
                json={"messages": [{"role": "user", "content": "four"}]},
            )
            assert _texts([reader.next()]) == [(2, "four")]


def test_records_from_another_writer_reach_observers(live: LiveServer, served: Served) -> None:
    """A write the server did not make (another client of the store) arrives on the next tick."""
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        with http.stream("GET", f"/sessions/{sid}/events") as stream:
            reader = SseReader(stream)
            with Client(served.client.workspace, store=served.client.store) as other:
                other.open(sid).inject({"role": "user", "content": "from elsewhere"})
            ev = reader.next()
            assert (
                ev["event"] == "record"
                and ev["data"]["record"]["payload"]["content"] == "from elsewhere"
            )


def test_a_quiet_stream_is_kept_open_by_pings(live: LiveServer) -> None:
    """With nothing to send, the stream sends a comment every ping interval (0.2 s here)."""
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        with http.stream("GET", f"/sessions/{sid}/events") as stream:
            lines = stream.iter_lines()
            pings = 0
            for line in lines:
                assert not line.startswith("event: "), line  # nothing happened to report
                pings += line == ": ping"
                if pings == 2:
                    break
            assert pings == 2


def test_event_stream_errors(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as http:
        r = http.get("/sessions/0190f4a0-0000-7000-8000-0000000000ff/events")
        assert r.status_code == 401
        r = http.get("/sessions/0190f4a0-0000-7000-8000-0000000000ff/events", headers=AUTH)
        assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
        sid = http.post("/sessions", json={}, headers=AUTH).json()["id"]
        for bad in ("abc", "3~", "x~1"):
            r = http.get(f"/sessions/{sid}/events", headers={**AUTH, "Last-Event-ID": bad})
            assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_argument"


@needs_postgres
def test_postgres_notifies_wake_observers_at_once(tmp_path: Path, pg_store_schema: str) -> None:
    """On PostgreSQL another process's write arrives by LISTEN/NOTIFY, not by the tick.

    The keep-alive tick is an hour here, so only the store's change feed can deliver it.
    """
    served_store = make_store("postgres", tmp_path, pg_store_schema)
    served = make_served(tmp_path, store=served_store, ping_interval=3600)
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
                    other.open(sid).inject({"role": "user", "content": "from another process"})
                ev = reader.next()
                assert ev["data"]["record"]["payload"]["content"] == "from another process"
    finally:
        other_store.close()
        served.client.close()
        served_store.close()  # a Client closes only a store it opened itself


def _until_event(lines: Any, name: str, *, most: int = 400) -> list[dict[str, Any]]:
    """Events read until one named ``name``; fails (never hangs) after ``most`` lines."""
    import json as _json

    seen: list[dict[str, Any]] = []
    ev: dict[str, Any] = {}
    for n, line in enumerate(lines):
        assert n < most, f"no {name} event in {most} lines: {seen}"
        if line == "":
            if "event" in ev:
                seen.append(ev)
                if ev["event"] == name:
                    return seen
            ev = {}
        elif line.startswith("event: "):
            ev["event"] = line[7:]
        elif line.startswith("data: "):
            ev["data"] = _json.loads(line[6:])
    raise AssertionError(f"the stream ended without {name}: {seen}")


def test_a_stream_ends_when_its_token_is_revoked_or_expires(live: LiveServer) -> None:
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={"title": "watched"}).json()["id"]

        def bearer(ttl: int) -> dict[str, str]:
            r = http.post("/auth/sessions", json={"principal": "bob", "ttl_seconds": ttl})
            return {"Authorization": f"Bearer {r.json()['id']}"}

        revoked, short = bearer(3600), bearer(1)
        message = {"messages": [{"role": "user", "content": "hello"}]}
        with (
            http.stream("GET", f"/sessions/{sid}/events", headers=revoked) as a,
            http.stream("GET", f"/sessions/{sid}/events", headers=short) as b,
        ):
            a_lines, b_lines = a.iter_lines(), b.iter_lines()
            http.post(f"/sessions/{sid}/messages", json=message)
            assert _until_event(a_lines, "record")[-1]["data"]["record"]["kind"] == "user"
            assert http.delete("/auth/sessions/current", headers=revoked).status_code == 200
            ended = _until_event(a_lines, "credential_ended")[-1]["data"]
            assert ended["reason"] == "revoked" and "revoked" in ended["message"]
            assert list(a_lines) == []  # and the stream is over
            # The short-lived token's stream ends at its expiry, with nothing sent after it.
            ended = _until_event(b_lines, "credential_ended")[-1]["data"]
            assert ended["reason"] == "expired"
            assert list(b_lines) == []
        for gone in (revoked, short):
            assert http.get(f"/sessions/{sid}/events", headers=gone).status_code == 401


def test_a_runs_own_stream_ends_when_its_token_is_revoked_or_expires(tmp_path: Path) -> None:
    """``POST .../runs`` with ``stream: true`` is held to its token as ``GET .../events`` is.

    The run itself goes on: only the stream belonged to the token.
    """
    gated: list[GatedProvider] = []

    def provider() -> GatedProvider:
        gated.append(GatedProvider())
        return gated[-1]

    served = make_served(tmp_path, provider=provider)
    try:
        with (
            LiveServer(served.app) as live,
            httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http,
        ):

            def bearer(ttl: int) -> dict[str, str]:
                r = http.post("/auth/sessions", json={"principal": "bob", "ttl_seconds": ttl})
                return {"Authorization": f"Bearer {r.json()['id']}"}

            for reason, ttl in (("revoked", 3600), ("expired", 2)):
                sid = http.post("/sessions", json={"title": reason}).json()["id"]
                token = bearer(ttl)
                with http.stream(
                    "POST",
                    f"/sessions/{sid}/runs",
                    headers=token,
                    json={"text": "hi", "stream": True},
                ) as run:
                    assert run.status_code == 200
                    lines = run.iter_lines()
                    assert _until_event(lines, "text_delta")[-1]["data"]["text"] == "first piece "
                    if reason == "revoked":
                        gone = http.delete("/auth/sessions/current", headers=token)
                        assert gone.status_code == 200
                    ended = _until_event(lines, "credential_ended")[-1]["data"]
                    assert ended["reason"] == reason and reason in ended["message"]
                    assert list(lines) == []  # and the stream is over
                gated[-1].gate.set()
                wait_idle_live(http, sid)
                kinds = [r["kind"] for r in http.get(f"/sessions/{sid}/records").json()["records"]]
                assert "assistant" in kinds  # the run finished without its stream
    finally:
        for held in gated:
            held.gate.set()  # a failed assertion leaves no run waiting on its model
        served.client.close()


def wait_idle_live(http: httpx.Client, sid: str) -> None:
    """Wait (bounded) until the session has no run in progress."""
    import time

    for _ in range(3000):
        if not http.get(f"/sessions/{sid}/runs/current").json()["running"]:
            return
        time.sleep(0.01)
    raise AssertionError("the run never ended")
