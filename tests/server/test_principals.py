"""Principals over HTTP (issue 7; seed 003): actor chains bound at session entry, live client
ids owned by the principal that attached them, and tool-call approvals routed to the controller.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

import plait
from plait import Client
from plait.auth import actor_chain, current_session
from plait.providers import ScriptedProvider
from plait.providers.base import Reply
from plait.records import ToolCall
from plait.server import create_app
from plait.store import SQLiteStore, Store
from plait.tools import tool
from tests.conftest import make_store, needs_postgres

from .conftest import AUTH, KEY, LiveServer, Served, SseReader, wait_idle


@tool
def probe() -> str:
    """Report who the run acts for."""
    entered = current_session()
    return json.dumps(
        {
            "current_id": plait.current_id(),
            "entered": entered.id if entered is not None else None,
            "chain": actor_chain(),
        }
    )


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


def calling(name: str, arguments: dict[str, Any], call_id: str = "call-1") -> ScriptedProvider:
    """A model that calls one tool, then says it is done."""
    return ScriptedProvider(
        [
            Reply(tool_calls=(ToolCall(call_id, name, arguments),), finish_reason="tool_calls"),
            "done",
        ]
    )


class App:
    """An app with tools, a scripted tool-calling model per run, and bearer tokens."""

    def __init__(self, store: Store, ws: Path, **options: Any) -> None:
        self.store = store
        self.client = Client(ws, store=store)
        self.providers: list[ScriptedProvider] = []
        self.script: tuple[str, dict[str, Any]] = ("probe", {})

        def factory() -> ScriptedProvider:
            self.providers.append(calling(*self.script))
            return self.providers[-1]

        self.app = create_app(
            self.client,
            api_keys={KEY: "tester"},
            provider=factory,
            tools=[probe, echo],
            ping_interval=0.2,
            **{"approval_default": "allow", **options},  # tools run unasked unless a test asks
        )

    def close(self) -> None:
        self.client.close()
        self.store.close()  # the client closes only a store it opened


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=needs_postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "postgres":
        return make_store("postgres", tmp_path, request.getfixturevalue("pg_store_schema"))
    return SQLiteStore(tmp_path / "plait.db")


def _app(store: Store, tmp_path: Path, **options: Any) -> App:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return App(store, ws, **options)


@pytest.fixture
def served(store: Store, tmp_path: Path) -> Iterator[App]:
    app = _app(store, tmp_path, approval_timeout=30)
    yield app
    app.close()


@pytest.fixture
def api(served: App) -> Iterator[TestClient]:
    with TestClient(served.app, headers=AUTH, raise_server_exceptions=False) as c:
        yield c


def token(api: TestClient, principal: str, **body: Any) -> dict[str, str]:
    """Mint a durable bearer session with the static key; return its Authorization header."""
    r = api.post("/auth/sessions", json={"principal": principal, "ttl_seconds": 3600, **body})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['id']}"}


def code(r: httpx.Response) -> str:
    value: str = r.json()["error"]["code"]
    return value


def tool_results(api: TestClient, sid: str) -> list[dict[str, Any]]:
    msgs = api.get(f"/sessions/{sid}/history").json()["messages"]
    return [m for m in msgs if m["role"] == "tool"]


def events(api: TestClient, sid: str, name: str) -> list[dict[str, Any]]:
    recs = api.get(f"/sessions/{sid}/records", params={"limit": 1000}).json()["records"]
    return [r["payload"] for r in recs if r["kind"] == "event" and r["payload"]["name"] == name]


def run(api: TestClient, sid: str, headers: dict[str, str] | None = None, **body: Any) -> str:
    r = api.post(f"/sessions/{sid}/runs", json={"text": "go", **body}, headers=headers)
    assert r.status_code == 202, r.text
    run_id: str = r.json()["run_id"]
    return run_id


def pending(api: TestClient, sid: str) -> list[dict[str, Any]]:
    """Wait (bounded) until a tool call of the session waits for an approval."""
    for _ in range(1000):
        found: list[dict[str, Any]] = api.get(f"/sessions/{sid}/approvals").json()["approvals"]
        if found:
            return found
        time.sleep(0.01)
    raise AssertionError("no approval was requested")


# -- 1. the principal is bound at session entry -----------------------------------------


def test_a_session_whose_kept_chain_is_not_an_object_reads_as_unbound(
    served: Served, api: TestClient
) -> None:
    """Metadata a session was created with may hold anything under ``actor_chain``."""
    s = served.client.sessions.create(
        [{"role": "user", "content": "hi"}], metadata={"actor_chain": "alice"}
    )
    r = api.get(f"/sessions/{s.id}")
    assert r.status_code == 200, r.text
    assert r.json()["actor_chain"] is None and actor_chain(s) is None


def test_the_creator_is_bound_and_a_run_acts_for_its_caller(api: TestClient) -> None:
    alice = token(api, "alice", scopes=["read", "write"])
    bob = token(api, "bob", scopes=["write"])
    made = api.post("/sessions", json={"title": "alice's"}, headers=alice)
    assert made.status_code == 201
    sid = made.json()["id"]
    assert made.json()["actor_chain"] == {"sub": "alice", "scopes": ["read", "write"]}
    # A static key's principal is the key's (here "tester"), with no scopes stated.
    assert api.post("/sessions", json={}).json()["actor_chain"] == {"sub": "tester"}
    # Opening it again, as anyone, does not rebind it.
    again = api.post("/sessions", json={"id": sid}, headers=bob)
    assert again.status_code == 200 and again.json()["actor_chain"]["sub"] == "alice"
    # alice's run: inside the run (its tool), the session is entered and the chain is hers.
    run(api, sid, headers=alice)
    wait_idle(api, sid)
    seen = json.loads(tool_results(api, sid)[-1]["text"])
    assert seen == {
        "current_id": sid,
        "entered": sid,
        "chain": {"sub": "alice", "scopes": ["read", "write"]},
    }
    # bob runs alice's session: the chain records him as the acting principal.
    run(api, sid, headers=bob)
    wait_idle(api, sid)
    acting = {
        "sub": "alice",
        "scopes": ["read", "write"],
        "act": {"sub": "bob", "kind": "principal"},
    }
    assert json.loads(tool_results(api, sid)[-1]["text"])["chain"] == acting
    assert api.get(f"/sessions/{sid}").json()["actor_chain"] == acting
    # tester (a static key) next: it replaces bob on top; it is not nested under him.
    run(api, sid)
    wait_idle(api, sid)
    chain = api.get(f"/sessions/{sid}").json()["actor_chain"]
    assert chain["act"] == {"sub": "tester", "kind": "principal"}
    # Each change of who acts is in the transcript; alice's own runs changed nothing.
    changes = [e["data"] for e in events(api, sid, "identity.actor_chain")]
    assert [c["principal"] for c in changes] == ["bob", "tester"]
    assert changes[0]["previous"] == {"sub": "alice", "scopes": ["read", "write"]}
    assert changes[1]["actor_chain"] == chain
    # alice again: she is the subject, so nobody else is acting.
    run(api, sid, headers=alice)
    wait_idle(api, sid)
    assert api.get(f"/sessions/{sid}").json()["actor_chain"] == {
        "sub": "alice",
        "scopes": ["read", "write"],
    }
    # No controller attached: the server's default (allow) let every tool call run.
    assert all(m["ok"] for m in tool_results(api, sid))


def test_a_session_bound_elsewhere_keeps_its_principal(api: TestClient, served: App) -> None:
    made = served.client.sessions.create([{"role": "user", "content": "hi"}])
    # Created outside the service, never bound: the first caller to enter binds it.
    assert api.get(f"/sessions/{made.id}").json()["actor_chain"] is None
    run(api, made.id, headers=token(api, "carol"))
    wait_idle(api, made.id)
    assert api.get(f"/sessions/{made.id}").json()["actor_chain"] == {"sub": "carol"}


def test_an_agent_fork_pushes_its_actor_and_may_not_widen(api: TestClient, served: App) -> None:
    alice = token(api, "alice", scopes=["read", "write"])
    agent = token(api, "agent-7", scopes=["read", "write"], attributes={"agent": True})
    narrow = token(api, "agent-8", scopes=["write"], attributes={"agent": True})
    wide = token(api, "agent-x", scopes=["read", "write", "admin"], attributes={"agent": True})
    bob = token(api, "bob")
    sid = api.post(
        "/sessions", json={"messages": [{"role": "user", "content": "hi"}]}, headers=alice
    )
    sid = sid.json()["id"]
    child = api.post(f"/sessions/{sid}/fork", json={}, headers=agent)
    assert child.status_code == 201
    root = {"sub": "alice", "scopes": ["read", "write"]}
    assert child.json()["actor_chain"] == {
        **root,
        "act": {"sub": "agent-7", "scopes": ["read", "write"]},
    }
    # A child's child: the new actor is outermost, the earlier one nested inside it.
    grand = api.post(
        f"/sessions/{child.json()['id']}/fork_at", json={"keep_first": 1}, headers=narrow
    )
    assert grand.status_code == 201
    assert grand.json()["actor_chain"] == {
        **root,
        "act": {
            "sub": "agent-8",
            "scopes": ["write"],
            "act": {"sub": "agent-7", "scopes": ["read", "write"]},
        },
    }
    # An agent claiming a scope its parent does not hold: 403, and no session is made.
    dst = "0190f4a0-0000-7000-8000-00000000beef"
    r = api.post(f"/sessions/{sid}/fork", json={"dst": dst}, headers=wide)
    assert r.status_code == 403 and code(r) == "scope_violation"
    assert api.get(f"/sessions/{dst}").status_code == 404
    r = api.post(f"/sessions/{sid}/fork_at", json={"keep_first": 1, "dst": dst}, headers=wide)
    assert r.status_code == 403 and code(r) == "scope_violation"
    # Not an agent: a branch is a new session of its creator (forks do not inherit chains).
    branch = api.post(f"/sessions/{sid}/fork", json={}, headers=bob).json()
    assert branch["actor_chain"] == {"sub": "bob"}
    # A parent bound to a static key states no scopes: the agent's are not a widening.
    keyed = api.post("/sessions", json={"messages": [{"role": "user", "content": "x"}]}).json()
    pushed = api.post(f"/sessions/{keyed['id']}/fork", json={}, headers=agent).json()
    assert pushed["actor_chain"] == {
        "sub": "tester",
        "act": {"sub": "agent-7", "scopes": ["read", "write"]},
    }
    # An agent forking a session nobody is bound to originates the branch.
    free = served.client.sessions.create([{"role": "user", "content": "x"}])
    loose = api.post(f"/sessions/{free.id}/fork", json={}, headers=agent).json()
    assert loose["actor_chain"] == {"sub": "agent-7", "scopes": ["read", "write"]}


# -- 2. live client ids belong to the principal that attached them ------------------------


def test_a_client_id_speaks_only_for_its_principal(api: TestClient, served: App) -> None:
    alice = token(api, "alice")
    bob = token(api, "bob")
    sid = api.post("/sessions", json={}, headers=alice).json()["id"]
    clients = f"/sessions/{sid}/clients"
    r = api.post(clients, json={"client_id": "tui", "mode": "controller"}, headers=alice)
    assert r.status_code == 200 and r.json()["client"]["metadata"] == {"principal": "alice"}
    # Whatever metadata the caller sends, the owner is the server's to set.
    r = api.post(
        f"{clients}/tui/heartbeat", json={"metadata": {"principal": "bob", "tab": 1}}, headers=alice
    )
    assert r.json()["client"]["metadata"] == {"principal": "alice", "tab": 1}
    refused = [
        (clients, {"client_id": "tui", "mode": "observer"}),
        (f"{clients}/tui/heartbeat", {}),
        (f"{clients}/tui/inject", {"content": "hi"}),
        (f"{clients}/tui/permissions", {"request": {"id": "p1"}}),
        (f"{clients}/tui/release", {}),
        (f"{clients}/tui/takeover", {}),
        (f"/sessions/{sid}/runs", {"text": "hi", "client_id": "tui"}),
        (
            f"/sessions/{sid}/messages",
            {"messages": [{"role": "user", "content": "x"}], "client_id": "tui"},
        ),
    ]
    for who in (bob, AUTH):  # another durable session, and a static key (principal "tester")
        for path, body in refused:
            r = api.post(path, json=body, headers=who)
            assert r.status_code == 403, (path, r.text)
            assert code(r) == "client_not_owned", path
    # Nothing changed: tui is still alice's controller, and alice may still drive.
    listed = api.get(clients).json()
    assert listed["controller_id"] == "tui" and len(listed["clients"]) == 1
    assert api.post(f"{clients}/tui/inject", json={"content": "hi"}, headers=alice).json() == {
        "ok": True
    }
    # Taking over under a client id of one's own is allowed (it demotes alice's controller) ...
    t = api.post(f"{clients}/bob-tui/takeover", json={}, headers=bob).json()
    assert t["controller_id"] == "bob-tui" and t["demoted_id"] == "tui"
    assert t["client"]["metadata"] == {"principal": "bob"}
    # ... and alice cannot speak for bob's client either.
    r = api.post(f"{clients}/bob-tui/inject", json={"content": "x"}, headers=alice)
    assert r.status_code == 403 and code(r) == "client_not_owned"
    assert api.post(f"{clients}/tui/release", json={}, headers=alice).status_code == 200
    # A client attached outside the service (plait.live directly) belongs to no HTTP caller.
    from plait.live import LiveClients

    LiveClients(served.client).attach(sid, "local-tui")
    r = api.post(f"{clients}/local-tui/heartbeat", json={}, headers=bob)
    assert r.status_code == 403 and code(r) == "client_not_owned"
    # An id nobody attached is still the verb's own answer (404), not an ownership error.
    r = api.post(f"{clients}/ghost/heartbeat", json={}, headers=bob)
    assert r.status_code == 404 and code(r) == "client_not_attached"


# -- 3. approvals reach a running run -----------------------------------------------------


def test_the_controller_approves_and_denies_tool_calls(api: TestClient, served: App) -> None:
    served.script = ("echo", {"text": "hi"})
    bob = token(api, "bob")
    sid = api.post("/sessions", json={}).json()["id"]
    clients = f"/sessions/{sid}/clients"
    api.post(clients, json={"client_id": "tui", "mode": "controller"})
    api.post(clients, json={"client_id": "portal"})
    answer = f"/sessions/{sid}/approvals/call-1"
    run_id = run(api, sid, client_id="tui")
    [req] = pending(api, sid)
    assert req["call_id"] == "call-1" and req["tool"] == "echo" and req["run_id"] == run_id
    assert req["arguments"] == {"text": "hi"} and req["controller_id"] == "tui"
    # Only the controller may answer: the observer, no client, someone else's client.
    r = api.post(answer, json={"client_id": "portal", "approve": True})
    assert r.status_code == 403 and code(r) == "not_controller"
    r = api.post(answer, json={"client_id": "tui", "approve": True}, headers=bob)
    assert r.status_code == 403 and code(r) == "client_not_owned"
    r = api.post(answer, json={"approve": True})
    assert r.status_code == 422
    r = api.post(f"/sessions/{sid}/approvals/nope", json={"client_id": "tui", "approve": True})
    assert r.status_code == 404 and code(r) == "approval_not_found"
    r = api.post(answer, json={"client_id": "tui", "approve": True})
    assert r.status_code == 200, r.text
    assert r.json() == {
        "ok": True,
        "session_id": sid,
        "call_id": "call-1",
        "run_id": run_id,
        "tool": "echo",
        "approve": True,
        "client_id": "tui",
    }
    wait_idle(api, sid)
    [result] = tool_results(api, sid)
    assert result["ok"] is True and result["text"] == "echo: hi"
    # Answered: it waits no more.
    r = api.post(answer, json={"client_id": "tui", "approve": False})
    assert r.status_code == 404 and code(r) == "approval_not_found"
    # Denied: the model reads the denial.
    run(api, sid, client_id="tui")
    pending(api, sid)
    assert api.post(answer, json={"client_id": "tui", "approve": False}).status_code == 200
    wait_idle(api, sid)
    denied = tool_results(api, sid)[-1]
    assert denied["ok"] is False and "denied" in denied["text"]
    request = served.providers[-1].requests[-1]
    assert "denied" in json.dumps([m.text for m in request.messages])
    # Both recorded: the route (the controller owns it) and the decision.
    routes = events(api, sid, "live_session_permission_route")
    assert [r["data"]["client_id"] for r in routes] == ["tui", "tui"]
    assert routes[0]["data"]["request"] == {
        "id": "call-1",
        "tool": "echo",
        "arguments": {"text": "hi"},
        "run_id": run_id,
    }
    decisions = [e["data"] for e in events(api, sid, "live_session_permission_decision")]
    assert [(d["approve"], d["reason"], d["client_id"]) for d in decisions] == [
        (True, "controller", "tui"),
        (False, "controller", "tui"),
    ]
    assert decisions[0]["request_id"] == routes[0]["data"]["request_id"] == "call-1"


def test_no_answer_in_time_denies(store: Store, tmp_path: Path) -> None:
    served = _app(store, tmp_path, approval_timeout=0.3)
    served.script = ("echo", {"text": "hi"})
    with TestClient(served.app, headers=AUTH) as api:
        sid = api.post("/sessions", json={}).json()["id"]
        api.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
        run(api, sid, client_id="tui")
        wait_idle(api, sid)
        [result] = tool_results(api, sid)
        assert result["ok"] is False and "no one answered" in result["text"]
        assert "within 0.3 seconds" in result["text"]
        [decision] = events(api, sid, "live_session_permission_decision")
        assert decision["data"]["reason"] == "timeout" and decision["data"]["client_id"] is None
        assert api.get(f"/sessions/{sid}/approvals").json()["approvals"] == []
    served.close()


def test_a_cancelled_run_stops_waiting(api: TestClient, served: App) -> None:
    served.script = ("echo", {"text": "hi"})
    sid = api.post("/sessions", json={}).json()["id"]
    api.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
    run(api, sid, client_id="tui")
    pending(api, sid)
    assert api.delete(f"/sessions/{sid}/runs/current?client_id=tui").json() == {"ok": True}
    wait_idle(api, sid)
    assert api.get(f"/sessions/{sid}/approvals").json()["approvals"] == []
    [decision] = events(api, sid, "live_session_permission_decision")
    assert decision["data"]["approve"] is False and decision["data"]["reason"] == "cancelled"
    [result] = tool_results(api, sid)  # the call never ran: the loop records the interruption
    assert result["ok"] is False and result["text"].startswith("interrupted")


def test_with_no_controller_the_server_default_answers(store: Store, tmp_path: Path) -> None:
    served = _app(store, tmp_path, approval_default="deny")
    served.script = ("echo", {"text": "hi"})
    with TestClient(served.app, headers=AUTH) as api:
        sid = api.post("/sessions", json={}).json()["id"]
        run(api, sid)
        wait_idle(api, sid)
        [result] = tool_results(api, sid)
        # The model reads that nobody was there and the server's rule denied it, not that
        # the user chose to.
        assert result["ok"] is False and "no one was connected to approve" in result["text"]
        assert "the user denied" not in result["text"]
        assert events(api, sid, "live_session_permission_route") == []
    served.close()
    from plait.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        create_app(tmp_path / "x.db", workspace=tmp_path, api_keys={KEY: "t"}, approval_timeout=0)
    with pytest.raises(InvalidArgumentError):
        create_app(
            tmp_path / "x.db",
            workspace=tmp_path,
            api_keys={KEY: "t"},
            approval_default="ask",  # type: ignore[arg-type]
        )


def test_the_request_and_its_answer_go_out_on_the_event_stream(served: App) -> None:
    served.script = ("echo", {"text": "over the wire"})
    with (
        LiveServer(served.app) as live,
        httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http,
    ):
        sid = http.post("/sessions", json={}).json()["id"]
        http.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
        with http.stream("GET", f"/sessions/{sid}/events") as stream:
            sse = SseReader(stream)
            run_id = http.post(
                f"/sessions/{sid}/runs", json={"text": "go", "client_id": "tui"}
            ).json()["run_id"]
            seen = sse.until(lambda e: e["event"] == "approval_requested")
            asked = seen[-1]["data"]
            assert asked["session_id"] == sid and asked["run_id"] == run_id
            assert asked["call_id"] == "call-1" and asked["tool"] == "echo"
            assert asked["arguments"] == {"text": "over the wire"}
            # The route's record went out first: a reconnecting controller replays it.
            routes = [
                e
                for e in seen
                if e["event"] == "record"
                and e["data"]["record"]["payload"].get("name") == "live_session_permission_route"
            ]
            assert len(routes) == 1
            r = http.post(
                f"/sessions/{sid}/approvals/call-1", json={"client_id": "tui", "approve": True}
            )
            assert r.status_code == 200
            rest = sse.until(lambda e: e["event"] == "run_end")
        resolved = [e["data"] for e in rest if e["event"] == "approval_resolved"]
        assert resolved and resolved[0]["approve"] is True and resolved[0]["reason"] == "controller"
        ends = [e["data"] for e in rest if e["event"] == "tool_end"]
        assert ends[0]["ok"] is True and ends[0]["content"] == "echo: over the wire"
        assert rest[-1]["data"]["ok"] is True


def test_act_on_records_who_acts_without_nesting_callers(tmp_path: Path) -> None:
    from plait.auth import act_on, bind_principal, push_actor

    with Client(tmp_path, store=tmp_path / "a.db") as client:
        s = client.sessions.create([{"role": "user", "content": "hi"}])
        assert act_on(s, "alice", scopes=["write"]) == {"sub": "alice", "scopes": ["write"]}
        assert act_on(s, "bob")["act"] == {"sub": "bob", "kind": "principal"}
        assert act_on(s, "carol")["act"] == {"sub": "carol", "kind": "principal"}
        assert act_on(s, "alice") == {"sub": "alice", "scopes": ["write"]}
        # On a child agent's session the agent is the current actor; a caller goes on top.
        child = s.fork()
        push_actor(child, "agent", parent=s)
        assert act_on(child, "agent") == actor_chain(child)
        on_top = act_on(child, "bob")
        assert on_top["act"] == {"sub": "bob", "kind": "principal", "act": {"sub": "agent"}}
        assert act_on(child, "agent")["act"] == {"sub": "agent"}
        other = client.sessions.create([{"role": "user", "content": "x"}])
        bind_principal(other, "dan")
        with pytest.raises(plait.errors.InvalidArgumentError):
            act_on(other, " ")


def test_the_document_describes_the_approval_routes(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    answer = doc["paths"]["/sessions/{session_id}/approvals/{call_id}"]["post"]
    assert "approval_not_found" in answer["responses"]["404"]["description"]
    assert "client_not_owned" in answer["responses"]["403"]["description"]
    assert answer["responses"]["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorResponse"
    }
    assert answer["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ApprovalIn"
    }
    assert "get" in doc["paths"]["/sessions/{session_id}/approvals"]


# -- 4. an answer reaches the run through any server on the store (D109) -------------------


def _twin_store(request: pytest.FixtureRequest, store: Store, tmp_path: Path) -> Store:
    """A second store on the same database (another server's own client)."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(tmp_path / "plait.db")
    return make_store("postgres", tmp_path, request.getfixturevalue("pg_store_schema"))


def _knows(api: TestClient | httpx.Client, replica_id: str) -> None:
    """Wait until the server behind ``api`` sees the replica alive (so it forwards to it)."""
    for _ in range(600):
        rows = api.get("/replicas").json()["replicas"]
        if any(r["replica_id"] == replica_id and r["alive"] for r in rows):
            return
        time.sleep(0.05)
    raise AssertionError(f"replica {replica_id} never seen")


@contextlib.contextmanager
def _reachable(app: App) -> Iterator[httpx.Client]:
    """``app`` on a loopback port its peers forward to (a replica of the fleet)."""
    server = LiveServer(app.app)
    app.app.state.plait.fleet.url = server.url
    with server, httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as api:
        yield api


@pytest.fixture
def twins(
    request: pytest.FixtureRequest, store: Store, tmp_path: Path
) -> Iterator[tuple[httpx.Client, TestClient, App]]:
    """Two servers on one store: A runs the runs, B (returned third) is the other process.

    A listens on loopback, so B forwards to it the writes of a session A runs (D256).
    """
    a = _app(store, tmp_path, approval_timeout=30)
    b = _app(_twin_store(request, store, tmp_path), tmp_path, approval_timeout=30)
    a.script = b.script = ("echo", {"text": "hi"})
    with (
        _reachable(a) as api_a,
        TestClient(b.app, headers=AUTH, raise_server_exceptions=False) as api_b,
    ):
        _knows(api_b, a.app.state.plait.fleet.replica_id)
        yield api_a, api_b, b
    a.close()
    b.close()


def _started(api_a: TestClient, api_b: TestClient) -> tuple[str, str]:
    """A session whose controller is ``tui``, and the run A started, waiting (seen on B)."""
    sid = api_a.post("/sessions", json={}).json()["id"]
    api_a.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
    run_id = run(api_a, sid, client_id="tui")
    [req] = pending(api_b, sid)  # B lists what A's run waits for: it reads the transcript
    assert req["call_id"] == "call-1" and req["run_id"] == run_id and req["tool"] == "echo"
    assert req["arguments"] == {"text": "hi"} and req["controller_id"] == "tui"
    return sid, run_id


def test_an_answer_sent_to_another_server_reaches_the_run(
    twins: tuple[httpx.Client, TestClient, App],
) -> None:
    api_a, api_b, _ = twins
    sid, run_id = _started(api_a, api_b)
    answer = f"/sessions/{sid}/approvals/call-1"
    # B checks as A does: the controller only, spoken for by its principal.
    api_a.post(f"/sessions/{sid}/clients", json={"client_id": "portal"})
    r = api_b.post(answer, json={"client_id": "portal", "approve": True})
    assert r.status_code == 403 and code(r) == "not_controller"
    r = api_b.post(f"/sessions/{sid}/approvals/nope", json={"client_id": "tui", "approve": True})
    assert r.status_code == 404 and code(r) == "approval_not_found"
    r = api_b.post(answer, json={"client_id": "tui", "approve": True})
    assert r.status_code == 200, r.text
    assert r.json()["run_id"] == run_id and r.json()["approve"] is True
    wait_idle(api_a, sid)
    [result] = tool_results(api_a, sid)
    assert result["ok"] is True and result["text"] == "echo: hi"
    [decision] = events(api_a, sid, "live_session_permission_decision")
    assert decision["data"]["reason"] == "controller" and decision["data"]["client_id"] == "tui"
    assert decision["data"]["approve"] is True and decision["data"]["run_id"] == run_id
    for api in (api_a, api_b):
        assert api.get(f"/sessions/{sid}/approvals").json()["approvals"] == []
    r = api_b.post(answer, json={"client_id": "tui", "approve": False})
    assert r.status_code == 404 and code(r) == "approval_not_found"
    # A denial through B: the model reads it.
    run(api_a, sid, client_id="tui")
    pending(api_b, sid)
    assert api_b.post(answer, json={"client_id": "tui", "approve": False}).status_code == 200
    wait_idle(api_a, sid)
    denied = tool_results(api_a, sid)[-1]
    assert denied["ok"] is False and "denied" in denied["text"]
    decisions = events(api_a, sid, "live_session_permission_decision")
    assert [d["data"]["approve"] for d in decisions] == [True, False]


def test_two_answers_on_two_servers_record_one(
    twins: tuple[httpx.Client, TestClient, App], monkeypatch: pytest.MonkeyPatch
) -> None:
    api_a, api_b, b = twins
    sid, _ = _started(api_a, api_b)
    answer = f"/sessions/{sid}/approvals/call-1"
    # B read the call as waiting just before A's answer was recorded: its append finds
    # the decision on the head it checks, and is refused.
    from plait.server.routes import approvals as route

    state_b = b.app.state.plait
    seen = route.waiting_calls(state_b, state_b.session(sid))
    assert "call-1" in seen
    r = api_a.post(answer, json={"client_id": "tui", "approve": True})
    assert r.status_code == 200, r.text
    monkeypatch.setattr(route, "waiting_calls", lambda state, session: dict(seen))
    r = api_b.post(answer, json={"client_id": "tui", "approve": False})
    # Answered by A, which runs the session (B forwards), or by B's own check if A's run
    # ended first: either way it is refused, and the first answer stands.
    assert (r.status_code, code(r)) in ((409, "nothing_to_do"), (404, "approval_not_found"))
    monkeypatch.undo()
    wait_idle(api_a, sid)
    [decision] = events(api_a, sid, "live_session_permission_decision")
    assert decision["data"]["approve"] is True
    assert tool_results(api_a, sid)[-1]["ok"] is True
    # Both at once: one is recorded, the other refused (409 if it saw the call waiting,
    # 404 if it came after), and the run goes on with the recorded one.
    run(api_a, sid, client_id="tui")
    pending(api_b, sid)
    barrier = threading.Barrier(2)
    codes: dict[str, int] = {}

    def send(name: str, api: TestClient, approve: bool) -> None:
        barrier.wait(timeout=10)
        codes[name] = api.post(answer, json={"client_id": "tui", "approve": approve}).status_code

    threads = [
        threading.Thread(target=send, args=("a", api_a, True)),
        threading.Thread(target=send, args=("b", api_b, False)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(codes.values())[0] == 200 and sorted(codes.values())[1] in (404, 409), codes
    wait_idle(api_a, sid)
    decisions = events(api_a, sid, "live_session_permission_decision")
    assert len(decisions) == 2
    winner = decisions[-1]["data"]["approve"]
    assert winner is (codes["a"] == 200)
    assert tool_results(api_a, sid)[-1]["ok"] is winner


def test_an_approval_wait_keeps_the_session_from_every_other_client(
    twins: tuple[httpx.Client, TestClient, App],
) -> None:
    """While A's run waits for an approval, no run, resume or message gets in, from A or B;
    once answered, each tool call has exactly one result."""
    api_a, api_b, _ = twins
    sid, _ = _started(api_a, api_b)
    for api in (api_a, api_b):
        r = api.post(f"/sessions/{sid}/runs", json={"text": "another", "client_id": "tui"})
        assert r.status_code == 409 and code(r) == "session_busy", r.text
        r = api.post(f"/sessions/{sid}/resume", json={"client_id": "tui"})
        assert r.status_code == 409, r.text
        r = api.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "user", "content": "in between"}], "client_id": "tui"},
        )
        assert r.status_code == 409 and code(r) == "session_busy", r.text
    r = api_b.post(f"/sessions/{sid}/approvals/call-1", json={"client_id": "tui", "approve": True})
    assert r.status_code == 200, r.text
    wait_idle(api_a, sid)
    history = api_a.get(f"/sessions/{sid}/history").json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    [result] = tool_results(api_a, sid)
    assert result["ok"] is True and result["text"] == "echo: hi"
    assert "in between" not in [m["text"] for m in history]
    assert api_b.get(f"/sessions/{sid}/runs/current").json()["running"] is False


@contextlib.contextmanager
def _serve_elsewhere(tmp_path: Path) -> Iterator[httpx.Client]:
    """``plait serve`` on the test's SQLite file, in its own process (its own writer locks)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "plait.cli", "--store", str(tmp_path / "plait.db")),
            *("--workspace", str(tmp_path / "ws"), "serve", "--port", str(port)),
            *("--api-key", f"tester:{KEY}", "--log-level", "warning"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.05)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=AUTH, timeout=30) as b:
            yield b
    finally:
        proc.terminate()
        proc.wait(20)


def test_an_answer_sent_to_a_server_in_another_process_reaches_the_run(tmp_path: Path) -> None:
    """The real case: B is ``plait serve`` in its own process (its own writer lock)."""
    a = _app(SQLiteStore(tmp_path / "plait.db"), tmp_path, approval_timeout=30)
    a.script = ("echo", {"text": "hi"})
    try:
        with _serve_elsewhere(tmp_path) as api_b, _reachable(a) as api_a:
            _knows(api_b, a.app.state.plait.fleet.replica_id)
            sid = api_a.post("/sessions", json={}).json()["id"]
            api_a.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
            run_id = run(api_a, sid, client_id="tui")
            [req] = pending(api_b, sid)  # type: ignore[arg-type]
            assert req["run_id"] == run_id
            r = api_b.post(
                f"/sessions/{sid}/approvals/call-1", json={"client_id": "tui", "approve": True}
            )
            assert r.status_code == 200, r.text
            wait_idle(api_a, sid)
            [result] = tool_results(api_a, sid)
            assert result["ok"] is True and result["text"] == "echo: hi"
            [decision] = events(api_a, sid, "live_session_permission_decision")
            assert decision["data"]["reason"] == "controller"
            # A wrote after the answer: it holds the writer lock again, and goes on writing.
            api_a.post(f"/sessions/{sid}/clients/tui/release", json={})
            assert api_a.get(f"/sessions/{sid}/clients").json()["controller_id"] is None
    finally:
        a.close()


def test_servers_in_two_processes_take_turns_writing_one_session(tmp_path: Path) -> None:
    """D94: a server holds a session's writer lock only while it runs it, not after a write."""
    a = _app(SQLiteStore(tmp_path / "plait.db"), tmp_path, approval_timeout=30)
    try:
        with _serve_elsewhere(tmp_path) as api_b, TestClient(a.app, headers=AUTH) as api_a:
            sid = api_a.post("/sessions", json={}).json()["id"]
            clients_url = f"/sessions/{sid}/clients"
            ok = api_a.post(clients_url, json={"client_id": "tui", "mode": "controller"})
            assert ok.status_code == 200, ok.text
            r = api_b.post(clients_url, json={"client_id": "web", "mode": "observer"})
            assert r.status_code == 200, r.text  # A let go after its write
            r = api_a.post(f"/sessions/{sid}/clients/tui/heartbeat", json={})
            assert r.status_code == 200, r.text  # and so did B
            clients = api_b.get(f"/sessions/{sid}/clients").json()
            assert clients["controller_id"] == "tui"
            assert sorted(c["client_id"] for c in clients["clients"]) == ["tui", "web"]
            # A run holds the lock while it runs; once it ended, B writes again.
            run(api_a, sid, client_id="tui")
            pending(api_a, sid)  # its tool call waits for the controller
            answer = {"client_id": "tui", "approve": True}
            assert api_a.post(f"/sessions/{sid}/approvals/call-1", json=answer).status_code == 200
            wait_idle(api_a, sid)
            assert tool_results(api_a, sid)[-1]["ok"] is True
            r = api_b.post(f"/sessions/{sid}/clients/web/heartbeat", json={})
            assert r.status_code == 200, r.text
    finally:
        a.close()


def test_only_the_controller_changes_what_its_runs_send_or_see(api: TestClient) -> None:
    alice = token(api, "alice")
    bob = token(api, "bob")
    messages = [{"role": "user", "content": f"m{i}"} for i in range(30)]
    made = api.post("/sessions", json={"id": "ctl", "messages": messages}, headers=alice)
    sid = made.json()["id"]
    base = f"/sessions/{sid}"
    attached = api.post(f"{base}/clients", json={"client_id": "tui", "mode": "controller"},
                        headers=alice)
    assert attached.status_code == 200
    before = api.get(f"{base}/model-settings").json()["model_settings"]
    writes = [
        ("PUT", f"{base}/model-settings", {"model_settings": {"max_tokens": 1, "stop": ["a"]}}),
        ("POST", f"{base}/compact", {"keep_last": 2}),
        ("POST", f"{base}/uncompact", None),
        ("POST", "/sessions", {"id": sid, "workspace_anchor": "/somewhere/else"}),
        ("POST", "/sessions", {"id": sid, "workspace_policy": {"default_mount_mode": "read_only"}}),
    ]
    for method, path, body in writes:
        r = api.request(method, path, json=body, headers=bob)
        assert r.status_code == 403 and code(r) == "not_controller", (path, r.text)
    # Nothing changed.
    assert api.get(f"{base}/model-settings").json()["model_settings"] == before
    detail = api.get(base).json()
    assert detail["length"] == 30 and detail["live_controller_id"] == "tui"
    # Re-opening without a change, and a dry run, are still anyone's; reads too.
    assert api.post("/sessions", json={"id": sid}, headers=bob).status_code == 200
    assert api.post(f"{base}/compact", json={"dry_run": True}, headers=bob).status_code == 200
    # The controller may do each of them.
    owner = {"client_id": "tui"}
    r = api.put(f"{base}/model-settings", json={"model_settings": {"max_tokens": 5}, **owner},
                headers=alice)
    assert r.status_code == 200 and r.json()["model_settings"] == {"max_tokens": 5}
    assert api.post(f"{base}/compact", json={"keep_last": 2, **owner}, headers=alice).is_success
    assert api.post(f"{base}/uncompact", json=owner, headers=alice).is_success
    r = api.post("/sessions", json={"id": sid, "workspace_anchor": "/elsewhere", **owner},
                 headers=alice)
    assert r.status_code == 200
    # Released, the rule no longer applies: any writer may again.
    assert api.post(f"{base}/clients/tui/release", json={}, headers=alice).status_code == 200
    assert api.post(f"{base}/uncompact", headers=bob).status_code in (200, 409)
    r = api.put(f"{base}/model-settings", json={"model_settings": {}}, headers=bob)
    assert r.status_code == 200
