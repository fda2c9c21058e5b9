"""Fixtures for the HTTP service: an app on a fresh store, an in-process client, a real server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the [server] extra is not installed")

import httpx
import uvicorn
from fastapi import FastAPI
from starlette.testclient import TestClient

from plait import Client
from plait.providers import Finish, ScriptedProvider, TextDelta
from plait.providers.base import Request as ModelRequest
from plait.server import create_app
from plait.store import SQLiteStore, Store
from tests.conftest import make_store, needs_postgres
from tests.server.fleet import FakeModel

KEY = "test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
REPLY = "Hello from the scripted model"


class GatedProvider:
    """A provider whose reply waits until the test opens the gate (to hold a run open)."""

    def __init__(self, text: str = "gated reply") -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.text = text

    @property
    def name(self) -> str:
        return "gated"

    @property
    def model(self) -> str:
        return "gated"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.started.set()
        yield TextDelta("first piece ")
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        yield TextDelta(self.text)
        yield Finish("stop")


@dataclass
class Served:
    """An app and the client it serves."""

    app: FastAPI
    client: Client
    providers: list[Any] = field(default_factory=list)


def make_served(
    tmp_path: Path,
    provider: Callable[[], Any] | None = None,
    store: Store | None = None,
    ping_interval: float = 0.2,
    presence_grace: float = 30.0,
    drain_grace: float = 10.0,
) -> Served:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    client = Client(ws, store=store if store is not None else SQLiteStore(tmp_path / "plait.db"))
    made: list[Any] = []

    def factory() -> Any:
        p = provider() if provider is not None else ScriptedProvider([REPLY])
        made.append(p)
        return p

    app = create_app(
        client,
        api_keys={KEY: "tester"},
        provider=factory,
        ping_interval=ping_interval,
        presence_grace=presence_grace,
        drain_grace=drain_grace,
    )
    return Served(app, client, made)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_postgres)])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Served]:
    """The app on each store that can hold a server's sessions (SQLite, PostgreSQL)."""
    store: Store | None = None
    if request.param == "postgres":
        store = make_store("postgres", tmp_path, request.getfixturevalue("pg_store_schema"))
    s = make_served(tmp_path, store=store)
    yield s
    s.client.close()
    if store is not None:
        store.close()  # the client closes only a store it opened (each holds connections)


@pytest.fixture
def api(served: Served) -> Iterator[TestClient]:
    """An in-process client with the test key (the app's loop lives as long as it does)."""
    with TestClient(served.app, headers=AUTH, raise_server_exceptions=False) as c:
        yield c


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Split a text/event-stream body into events: {id, event, data}."""
    events = []
    for block in text.split("\n\n"):
        ev: dict[str, Any] = {}
        for line in block.splitlines():
            if line.startswith("id: "):
                ev["id"] = line[4:]
            elif line.startswith("event: "):
                ev["event"] = line[7:]
            elif line.startswith("data: "):
                ev["data"] = json.loads(line[6:])
        if "event" in ev:
            events.append(ev)
    return events


def wait_idle(api: TestClient, sid: str) -> None:
    """Wait until no run is in progress on a session (bounded; asserts nothing about time)."""
    for _ in range(1000):
        if not api.get(f"/sessions/{sid}/runs/current").json()["running"]:
            return
        time.sleep(0.01)
    raise AssertionError("the run never ended")


class LiveServer:
    """A real uvicorn on a loopback port (a free one, or ``port``), in a thread."""

    def __init__(self, app: FastAPI, port: int = 0) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))  # a given port: a server started again
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        for _ in range(1000):
            if self.server.started:
                return self
            time.sleep(0.01)
        raise AssertionError("uvicorn did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def live(served: Served) -> Iterator[LiveServer]:
    with LiveServer(served.app) as server:
        yield server


class SseReader:
    """Read events from a streaming httpx response, one at a time."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def next(self) -> dict[str, Any]:
        ev: dict[str, Any] = {}
        for line in self.lines:
            if line == "":
                if "event" in ev:
                    return ev
                ev = {}
                continue
            if line.startswith("id: "):
                ev["id"] = line[4:]
            elif line.startswith("event: "):
                ev["event"] = line[7:]
            elif line.startswith("data: "):
                ev["data"] = json.loads(line[6:])
        raise AssertionError("the stream ended")

    def until(self, predicate: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        seen = []
        while True:
            ev = self.next()
            seen.append(ev)
            if predicate(ev):
                return seen


@pytest.fixture
def model() -> Iterator[FakeModel]:
    """The fleet tests' OpenAI-compatible model on loopback, one per test."""
    served = FakeModel()
    served.start()
    yield served
    served.stop()
