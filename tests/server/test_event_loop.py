"""The server never blocks its event loop: a served run under ``blockbuster``.

``blockbuster`` patches the blocking calls of the standard library (socket and file
I/O, ``time.sleep``, lock waits, ``sqlite3``) to raise ``BlockingError`` when made on
a thread that runs an event loop. The server (uvicorn, on the test's own loop) serves a
run with a tool call that the live controller approves over HTTP, while an observer
follows the session's event stream, and a few reads after it; any store call made on
the loop fails the run or a request, and the test with it.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("blockbuster", reason="blockbuster is in the [test] extra")

import blockbuster
import httpx
import uvicorn

from plait import Client
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.server import create_app
from plait.store import SQLiteStore, Store
from plait.tools import tool
from tests.conftest import make_store, needs_postgres

from .conftest import AUTH, KEY


@tool(read_only=True)
def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: the word.
    """
    return f"{word}: a word"


def _psycopg_waits() -> dict[str, Any]:
    """psycopg's own round trips: every one of them waits in ``Connection.wait``.

    ``blockbuster`` knows ``sqlite3`` but not psycopg, whose C side talks to the socket
    itself; the pool's ``getconn`` waits for a free connection.
    """
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        return {}
    return {
        "psycopg.Connection.wait": blockbuster.BlockBusterFunction(psycopg.Connection, "wait"),
        "psycopg_pool.ConnectionPool.getconn": blockbuster.BlockBusterFunction(
            psycopg_pool.ConnectionPool, "getconn"
        ),
    }


@contextmanager
def no_blocking_calls() -> Iterator[None]:
    """Fail any blocking call made on an event loop's thread inside the block."""
    with blockbuster.blockbuster_ctx() as bb:
        for name, function in _psycopg_waits().items():
            bb.functions[name] = function
            function.activate()
        # The test's own client speaks to the server on the same loop: it is not served code.
        for name in ("io.TextIOWrapper.write", "io.BufferedWriter.write"):
            if name in bb.functions:  # pytest's captured output
                bb.functions[name].deactivate()
        yield


async def _events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in event:
                yield event
            event = {}
        elif line.startswith("event: "):
            event["event"] = line[7:]
        elif line.startswith("data: "):
            event["data"] = json.loads(line[6:])


async def _serve_a_run(store: Store, workspace: Path) -> dict[str, Any]:
    call = ToolCall("c1", "lookup", {"word": "plait"})
    provider = ScriptedProvider(
        [Reply(tool_calls=(call,), finish_reason="tool_calls"), Reply("done")]
    )
    client = Client(workspace, store=store)
    app = create_app(client, api_keys={KEY: "tester"}, provider=provider, tools=[lookup])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=AUTH) as http:
            with no_blocking_calls():
                return await _drive(http)
    finally:
        server.should_exit = True
        await serving
        sock.close()
        client.close()


async def _drive(http: httpx.AsyncClient) -> dict[str, Any]:
    sid = (await http.post("/sessions", json={"title": "loop"})).raise_for_status().json()["id"]
    attached = await http.post(
        f"/sessions/{sid}/clients", json={"client_id": "ui", "mode": "controller"}
    )
    attached.raise_for_status()
    observed: list[dict[str, Any]] = []
    joined = asyncio.Event()

    async def observe() -> None:
        async with http.stream("GET", f"/sessions/{sid}/events", params={"after": -1}) as r:
            r.raise_for_status()
            joined.set()
            async for event in _events(r):
                observed.append(event)
                if event["event"] == "run_end":
                    return

    observer = asyncio.create_task(observe())
    await joined.wait()
    ran: list[dict[str, Any]] = []
    body = {"text": "look it up", "stream": True, "client_id": "ui"}
    async with http.stream("POST", f"/sessions/{sid}/runs", json=body) as r:
        r.raise_for_status()
        async for event in _events(r):
            ran.append(event)
            if event["event"] == "approval_requested":
                answer = await http.post(
                    f"/sessions/{sid}/approvals/c1", json={"client_id": "ui", "approve": True}
                )
                answer.raise_for_status()
            if event["event"] == "run_end":
                break
    await asyncio.wait_for(observer, 30)
    await _the_other_routes(http, sid)
    return {"ran": ran, "observed": observed}


async def _the_other_routes(http: httpx.AsyncClient, sid: str) -> None:
    """Reads and writes outside a run, each through the store, and a durable credential."""
    url = f"/sessions/{sid}"
    for path in ("", "/history", "/records", "/context", "/clients", "/runs/current"):
        (await http.get(url + path)).raise_for_status()
    for path in ("/lineage", "/approvals", "/model-settings", "/export?format=md"):
        (await http.get(url + path)).raise_for_status()
    (await http.get("/sessions")).raise_for_status()
    writes: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", f"{url}/clients/ui/heartbeat", {}),
        ("POST", f"{url}/clients/ui/release", {}),
        ("PATCH", url, {"title": "renamed"}),
        ("PUT", f"{url}/model-settings", {"model_settings": {"temperature": 0.5}}),
        ("POST", f"{url}/messages", {"messages": [{"role": "user", "content": "hi"}]}),
        ("POST", f"{url}/fork", {}),
        ("POST", f"{url}/fork_at", {"keep_first": 1}),
        ("POST", f"{url}/compact", {"dry_run": True, "keep_last": 1}),
        ("POST", f"{url}/compact", {"keep_last": 1}),
        ("POST", f"{url}/uncompact", {}),
        ("POST", f"{url}/rewind", {"keep_first": 2}),
        ("POST", f"{url}/rewind", {"undo": True}),
        ("POST", f"{url}/close", {}),
    ]
    for method, path, body in writes:
        answer = await http.request(method, path, json=body)
        assert answer.status_code in (200, 201), (path, answer.text)
    minted = await http.post("/auth/sessions", json={"principal": "p", "ttl_seconds": 60})
    token = minted.raise_for_status().json()["id"]
    durable = {"Authorization": f"Bearer {token}"}
    (await http.get("/auth/whoami", headers=durable)).raise_for_status()
    (await http.get(url, headers=durable)).raise_for_status()
    (await http.delete("/auth/sessions/current", headers=durable)).raise_for_status()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        found = make_store("postgres", tmp_path, request.getfixturevalue("pg_store_schema"))
    else:
        found = SQLiteStore(tmp_path / "plait.db")
    yield found
    found.close()


def test_a_served_run_makes_no_blocking_call_on_the_event_loop(
    store: Store, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    seen = asyncio.run(_serve_a_run(store, workspace))
    end = seen["ran"][-1]
    assert end["event"] == "run_end" and end["data"]["ok"] is True, end
    assert end["data"]["text"] == "done"
    names = [e["event"] for e in seen["ran"]]
    assert "approval_requested" in names and "tool_end" in names
    records = [e["data"]["record"] for e in seen["observed"] if e["event"] == "record"]
    kinds = [r["kind"] for r in records]
    assert kinds.count("tool") == 1 and kinds.count("assistant") == 2
    assert [r["seq"] for r in records] == sorted({r["seq"] for r in records})
