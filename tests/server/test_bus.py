"""Replicas on one PostgreSQL store: an observer anywhere sees a run as its own replica does.

Each test holds the run open with a gate: the first text delta must reach the other
replica while the gate is still shut (long before the run ends), and after the run
both observers have seen the same events, in the same order, with the same ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from plait import Client
from plait.providers import Finish, TextDelta
from plait.server.feed import StoreFeed
from plait.server.sse import Hub, SseEvent
from plait.store.postgres import PostgresStore
from tests.conftest import make_store, needs_postgres

from .conftest import AUTH, GatedProvider, LiveServer, SseReader, make_served

pytestmark = needs_postgres


def _run_part(events: list[dict[str, Any]], run_id: str) -> list[tuple[str, str]]:
    """``(event, id)`` of each event from the run's ``run_start`` to its ``run_end``."""
    start = next(
        i for i, e in enumerate(events)
        if e["event"] == "run_start" and e["data"]["run_id"] == run_id
    )
    return [(e["event"], e["id"]) for e in events[start:]]


def test_a_run_on_one_replica_streams_to_an_observer_of_another(
    tmp_path: Path, pg_store_schema: str
) -> None:
    """Two servers (threads, each its own loop and store) on one schema: A runs, B relays."""
    gated = GatedProvider("and the rest")
    stores = [make_store("postgres", tmp_path, pg_store_schema) for _ in range(2)]
    # An hour between keep-alive ticks: only the bus (and the change feed) can deliver.
    a = make_served(tmp_path, provider=lambda: gated, store=stores[0], ping_interval=3600)
    b = make_served(tmp_path, store=stores[1], ping_interval=3600)
    try:
        with (
            LiveServer(a.app) as live_a,
            LiveServer(b.app) as live_b,
            httpx.Client(base_url=live_a.url, headers=AUTH, timeout=30) as http_a,
            httpx.Client(base_url=live_b.url, headers=AUTH, timeout=30) as http_b,
        ):
            sid = http_a.post("/sessions", json={"title": "fleet"}).json()["id"]
            with (
                http_a.stream("GET", f"/sessions/{sid}/events") as on_a,
                http_b.stream("GET", f"/sessions/{sid}/events") as on_b,
            ):
                reader_a, reader_b = SseReader(on_a), SseReader(on_b)
                run_id = http_a.post(f"/sessions/{sid}/runs", json={"text": "hi"}).json()[
                    "run_id"
                ]
                # The first delta reaches B while the model still holds its reply.
                early = reader_b.until(lambda e: e["event"] == "text_delta")
                assert not gated.gate.is_set()
                assert early[-1]["data"]["text"] == "first piece "
                assert "run_start" in [e["event"] for e in early]
                gated.gate.set()
                seen_b = early + reader_b.until(lambda e: e["event"] == "run_end")
                seen_a = reader_a.until(lambda e: e["event"] == "run_end")
            assert _run_part(seen_b, run_id) == _run_part(seen_a, run_id)
            kinds = [e for e, _ in _run_part(seen_b, run_id)]
            assert kinds[0] == "run_start" and kinds[-1] == "run_end"
            assert {"text_delta", "record"} <= set(kinds)
            records = [e for e in seen_b if e["event"] == "record"]
            assert [r["data"]["record"]["kind"] for r in records] == ["user", "assistant"]
            assert records[-1]["data"]["record"]["payload"]["content"] == (
                "first piece and the rest"
            )
            # Last-Event-ID on B replays from the id of a delta B relayed, as on A.
            delta = next(e["id"] for e in seen_b if e["event"] == "text_delta")
            for http in (http_a, http_b):
                with http.stream(
                    "GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": delta}
                ) as again:
                    assert SseReader(again).next()["id"] == records[-1]["id"]
    finally:
        for served in (a, b):
            served.client.close()
        for store in stores:
            store.close()


class _Held:
    """A provider that streams a few deltas, then waits for the gate, then a few more."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    name = model = "held"

    async def stream(self, request: Any) -> Any:
        for n in range(5):
            yield TextDelta(f"a{n} ")
        while not self.gate.is_set():
            await asyncio.sleep(0.005)
        for n in range(5):
            yield TextDelta(f"b{n} ")
        yield Finish("stop")


def _untallied(data: dict[str, Any]) -> dict[str, Any]:
    record = data.get("record")
    return {**data, "record": {**record, "tokens": None}} if isinstance(record, dict) else data


def _marks(events: list[SseEvent]) -> list[tuple[str, str]]:
    return [(e.event, e.id) for e in events]


async def _drain_until(queue: asyncio.Queue[SseEvent | None], name: str) -> list[SseEvent]:
    out: list[SseEvent] = []
    while True:
        event = await asyncio.wait_for(queue.get(), 30)
        assert event is not None, "the stream ended"
        out.append(event)
        if event.event == name:
            return out


def test_two_hubs_relay_a_run_in_its_order(tmp_path: Path, pg_store_schema: str) -> None:
    """The hubs alone: B's channel publishes A's sequence, records read by their markers.

    Twice: once with an observer on A, once with none there (ids do not depend on who
    watches where: B sees the same ids either way).
    """
    from tests.conftest import POSTGRES_URL

    assert POSTGRES_URL is not None
    (tmp_path / "ws").mkdir()

    async def relayed(
        client_a: Client, hub_a: Hub, hub_b: Hub, watched_on_a: bool
    ) -> tuple[list[SseEvent], list[SseEvent]]:
        held = _Held()
        session = client_a.sessions.new()
        session.inject({"role": "system", "content": "be brief"})
        sid = session.id
        _, sub_a = await hub_a.open(sid, None)
        if not watched_on_a:
            hub_a.close(sid, sub_a)
        _, sub_b = await hub_b.open(sid, None)
        hub_a.broadcast(sid)
        hub_a.publish(sid, "run_start", {"run_id": "r"})
        await hub_a.announced()
        task = asyncio.ensure_future(session.stream("hello", provider=held, tools=[]).result())
        # B relays the deltas before the gate opens.
        early = await _drain_until(sub_b.queue, "text_delta")
        assert not held.gate.is_set()
        held.gate.set()
        await task
        await hub_a.published(sid, ())
        hub_a.publish(sid, "run_end", {"run_id": "r"})
        hub_a.unbroadcast(sid)
        seen_b = early + await _drain_until(sub_b.queue, "run_end")
        seen_a = await _drain_until(sub_a.queue, "run_end") if watched_on_a else []
        return seen_a, seen_b

    async def main() -> None:
        store_a = PostgresStore(POSTGRES_URL, schema=pg_store_schema)
        store_b = PostgresStore(POSTGRES_URL, schema=pg_store_schema)
        client_a = Client(tmp_path / "ws", store=store_a)
        client_b = Client(tmp_path / "ws", store=store_b)
        hub_a, hub_b = Hub(client_a.host), Hub(client_b.host)
        feed = StoreFeed(store_b, hub_b, asyncio.get_running_loop())
        feed.start()
        # B must be listening before A announces the run, as a serving replica is.
        assert await asyncio.to_thread(feed.wait_listening, 10.0)
        try:
            seen_a, seen_b = await relayed(client_a, hub_a, hub_b, watched_on_a=True)
            assert _marks(seen_b) == _marks(seen_a)
            # A relayed record is read from the store: the same record, its token count
            # perhaps filled in since it was written (as a replay on A shows it too).
            assert [_untallied(e.data) for e in seen_b] == [_untallied(e.data) for e in seen_a]
            names = [e.event for e in seen_a]
            assert names.count("record") == 2 and names.count("text_delta") == 10
            _, unwatched = await relayed(client_a, hub_a, hub_b, watched_on_a=False)
            assert _headless(unwatched) == _headless(seen_b)
        finally:
            feed.stop()
            hub_a.close_all()
            hub_b.close_all()
            client_a.close()
            client_b.close()
            store_a.close()
            store_b.close()

    asyncio.run(main())


def _headless(events: list[SseEvent]) -> list[tuple[str, str]]:
    """``(event, id)`` with the id's head left out (two sessions, two heads)."""
    return [(e.event, e.id.partition("~")[0]) for e in events]


@contextlib.contextmanager
def _replica(schema: str, workspace: Path, gate: Path) -> Iterator[str]:
    """A replica in a process of its own; yields its base URL."""
    from tests.conftest import POSTGRES_URL

    assert POSTGRES_URL is not None
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.server.bus_replica", POSTGRES_URL, schema,
         str(workspace), str(gate)],
        cwd=root, env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        for _ in range(1000):  # until it answers
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{url}/sessions", timeout=5)
                break
            time.sleep(0.01)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_replicas_in_two_processes_show_a_run_alike(tmp_path: Path, pg_store_schema: str) -> None:
    """Two uvicorn processes on one schema: a run on A, watched on A and on B."""
    make_store("postgres", tmp_path, pg_store_schema).close()  # the schema, migrated
    gate = tmp_path / "gate"
    (tmp_path / "ws").mkdir()
    with (
        _replica(pg_store_schema, tmp_path / "ws", gate) as url_a,
        _replica(pg_store_schema, tmp_path / "ws", gate) as url_b,
        httpx.Client(base_url=url_a, headers=AUTH, timeout=30) as http_a,
        httpx.Client(base_url=url_b, headers=AUTH, timeout=30) as http_b,
    ):
        sid = http_a.post("/sessions", json={"title": "two processes"}).json()["id"]
        with (
            http_a.stream("GET", f"/sessions/{sid}/events") as on_a,
            http_b.stream("GET", f"/sessions/{sid}/events") as on_b,
        ):
            reader_a, reader_b = SseReader(on_a), SseReader(on_b)
            run = http_a.post(f"/sessions/{sid}/runs", json={"text": "hi"})
            run_id = run.json()["run_id"]
            early = reader_b.until(lambda e: e["event"] == "text_delta")
            assert not gate.exists()  # the model holds the rest of its reply
            assert early[-1]["data"]["text"] == "first piece "
            gate.touch()
            seen_b = early + reader_b.until(lambda e: e["event"] == "run_end")
            seen_a = reader_a.until(lambda e: e["event"] == "run_end")
        part = _run_part(seen_b, run_id)
        assert part == _run_part(seen_a, run_id)
        names = [name for name, _ in part]
        assert names[0] == "run_start" and names[-1] == "run_end"
        assert names.count("text_delta") == 2 and names.count("record") == 2
        assert names.index("text_delta") < names.index("record", names.index("record") + 1)
        assert seen_b[-1]["data"]["text"] == "first piece and the rest"
