"""The HTTP API, in process: every route, auth, the error shape and its codes, runs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from plait import errors as E
from plait.server.errors import CODES, status_and_code
from plait.store import SQLiteStore

from .conftest import AUTH, KEY, REPLY, GatedProvider, Served, make_served, parse_sse, wait_idle


def error_of(response) -> dict:
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert CODES[body["error"]["code"]] == response.status_code
    return body["error"]


def new_session(api: TestClient, **body) -> dict:
    r = api.post("/sessions", json=body)
    assert r.status_code == 201, r.text
    return r.json()


# -- auth -------------------------------------------------------------------------------


def test_every_api_route_needs_a_bearer_credential(served: Served) -> None:
    with TestClient(served.app, raise_server_exceptions=False) as anon:
        doc = anon.get("/openapi.json").json()
        sid = "0190f4a0-0000-7000-8000-000000000000"
        checked = 0
        for path, ops in doc["paths"].items():
            url = path.replace("{session_id}", sid).replace("{client_id}", "c1")
            for method in ops:
                r = anon.request(method.upper(), url, json={})
                assert r.status_code == 401, (method, path, r.text)
                assert error_of(r)["code"] == "unauthorized"
                assert r.headers["www-authenticate"] == "Bearer"
                checked += 1
        assert checked >= 20
        for bad in ("Bearer nope", "Basic " + KEY, KEY, "Bearer "):
            r = anon.get("/sessions", headers={"Authorization": bad})
            assert r.status_code == 401, bad


def test_the_document_and_the_page_need_no_credential(served: Served) -> None:
    with TestClient(served.app) as anon:
        doc = anon.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
        assert "ErrorResponse" in doc["components"]["schemas"]
        assert "HTTPValidationError" not in doc["components"]["schemas"]
        page = anon.get("/")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert '<script src="/static/app.js"' in page.text
        assert "http" not in page.text.replace("http-equiv", "")  # nothing from elsewhere
        assert anon.get("/static/app.js").status_code == 200


def test_durable_bearer_sessions(api: TestClient, served: Served) -> None:
    r = api.post("/auth/sessions", json={"principal": "alice", "ttl_seconds": 3600})
    assert r.status_code == 201
    token = r.json()["id"]
    assert token and r.json()["handle"] != token
    me = api.get("/auth/whoami", headers={"Authorization": f"Bearer {token}"}).json()
    assert me["principal"] == "alice" and me["method"] == "durable_session"
    # A durable session may not mint others.
    r = api.post(
        "/auth/sessions",
        json={"principal": "bob", "ttl_seconds": 60},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 403 and error_of(r)["code"] == "forbidden"
    # Read-only: scopes without "write".
    ro = api.post(
        "/auth/sessions", json={"principal": "eve", "ttl_seconds": 60, "scopes": ["read"]}
    ).json()["id"]
    ro_auth = {"Authorization": f"Bearer {ro}"}
    assert api.get("/sessions", headers=ro_auth).status_code == 200
    r = api.post("/sessions", json={}, headers=ro_auth)
    assert r.status_code == 403 and error_of(r)["code"] == "read_only_credential"
    # A read-only credential may still watch: attach an observer, heartbeat, release.
    sid = new_session(api)["id"]
    clients = f"/sessions/{sid}/clients"
    r = api.post(clients, json={"client_id": "viewer"}, headers=ro_auth)
    assert r.status_code == 200 and r.json()["mode"] == "observer"
    assert api.post(f"{clients}/viewer/heartbeat", json={}, headers=ro_auth).status_code == 200
    assert api.post(f"{clients}/viewer/release", json={}, headers=ro_auth).status_code == 200
    r = api.post(clients, json={"client_id": "boss", "mode": "controller"}, headers=ro_auth)
    assert r.status_code == 403 and error_of(r)["code"] == "read_only_credential"
    r = api.post(f"{clients}/boss/takeover", json={}, headers=ro_auth)
    assert r.status_code == 403 and error_of(r)["code"] == "read_only_credential"
    # Revoked: 401 from then on.
    assert api.delete(
        "/auth/sessions/current", headers={"Authorization": f"Bearer {token}"}
    ).json() == {"ok": True}
    r = api.get("/auth/whoami", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401
    r = api.delete("/auth/sessions/current")
    assert r.status_code == 409 and error_of(r)["code"] == "nothing_to_do"
    # Only the hash is stored.
    assert served.client.store.bearer_get(token) is None


def test_api_keys_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.server import create_app

    monkeypatch.setenv("PLAIT_API_KEYS", "ops:k-one, k-two")
    app = create_app(tmp_path / "e.db", workspace=tmp_path)
    with TestClient(app) as c:
        assert (
            c.get("/auth/whoami", headers={"Authorization": "Bearer k-one"}).json()["principal"]
            == "ops"
        )
        assert (
            c.get("/auth/whoami", headers={"Authorization": "Bearer k-two"}).json()["principal"]
            == "api-key"
        )
        assert c.get("/auth/whoami", headers={"Authorization": "Bearer ops"}).status_code == 401


# -- sessions ---------------------------------------------------------------------------


def test_create_open_list_get_rename(api: TestClient) -> None:
    s = new_session(api, title="first")
    sid = s["id"]
    assert s["title"] == "first" and s["length"] == 0 and s["live_clients"] == []
    again = api.post("/sessions", json={"id": sid})
    assert again.status_code == 200 and again.json()["id"] == sid
    listed = api.get("/sessions").json()["sessions"]
    assert [x["id"] for x in listed] == [sid]
    r = api.patch(f"/sessions/{sid}", json={"title": "  renamed  "})
    assert r.json()["title"] == "renamed"
    assert api.get(f"/sessions/{sid}").json()["title"] == "renamed"
    named = new_session(api, id="0190f4a0-0000-7000-8000-0000000000aa")
    assert named["id"] == "0190f4a0-0000-7000-8000-0000000000aa"
    assert len(api.get("/sessions?limit=1").json()["sessions"]) == 1


def test_messages_history_records(api: TestClient) -> None:
    sid = new_session(
        api, messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    )["id"]
    r = api.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "assistant", "content": "hello"}]}
    )
    assert r.status_code == 200 and r.json()["records"][0]["seq"] == 2
    hist = api.get(f"/sessions/{sid}/history").json()
    assert [(m["role"], m["text"]) for m in hist["messages"]] == [
        ("user", "hi"),
        ("assistant", "hello"),
    ]
    recs = api.get(f"/sessions/{sid}/records?after=0").json()
    assert [r["seq"] for r in recs["records"]] == [1, 2] and recs["end_seq"] == 3
    assert api.get(f"/sessions/{sid}").json()["system_prompt"] == "be brief"
    # All or nothing: one bad message, nothing written.
    r = api.post(
        f"/sessions/{sid}/messages",
        json={"messages": [{"role": "user", "content": "ok"}, {"content": "no role"}]},
    )
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_message"
    assert api.get(f"/sessions/{sid}/records").json()["end_seq"] == 3


def test_fork_fork_at_lineage_close(api: TestClient) -> None:
    sid = new_session(
        api,
        title="root",
        messages=[
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
        ],
    )["id"]
    fork = api.post(f"/sessions/{sid}/fork", json={})
    assert fork.status_code == 201
    f = fork.json()
    assert f["parent_session_ids"] == [sid] and f["length"] == 3
    at = api.post(f"/sessions/{sid}/fork_at", json={"keep_first": 1}).json()
    assert at["length"] == 1 and at["branched_at_event_index"] == 1
    assert sorted(api.get(f"/sessions/{sid}").json()["child_ids"]) == sorted([f["id"], at["id"]])
    lineage = api.get(f"/sessions/{sid}/lineage").json()
    assert {b["id"] for b in lineage["boxes"]} == {sid, f["id"], at["id"]}
    assert lineage["svg"].startswith("<svg") and "root" in lineage["svg"]
    closed = api.post(f"/sessions/{sid}/close", json={"status": {"reason": "done"}})
    assert closed.json()["status"] == "closed"
    r = api.post(f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 409 and error_of(r)["code"] == "session_closed"


def test_error_codes_for_bad_input(api: TestClient) -> None:
    missing = "0190f4a0-0000-7000-8000-0000000000ff"
    for method, path, body in [
        ("GET", f"/sessions/{missing}", None),
        ("GET", f"/sessions/{missing}/history", None),
        ("POST", f"/sessions/{missing}/fork", {}),
        ("GET", "/sessions/not..an-id/records", None),
        ("POST", f"/sessions/{missing}/runs", {"text": "hi"}),
    ]:
        r = api.request(method, path, json=body)
        assert r.status_code == 404, (path, r.text)
        assert error_of(r)["code"] == "session_not_found"
    sid = new_session(api)["id"]
    r = api.post(f"/sessions/{sid}/fork_at", json={"keep_first": 5})
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_argument"
    r = api.post("/sessions", json={"colour": "blue"})
    err = error_of(r)
    assert r.status_code == 422 and err["code"] == "invalid_request"
    assert err["details"][0]["loc"] == ["body", "colour"]
    r = api.post("/sessions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_request"
    r = api.post("/sessions", json={"id": "line\nbreak"})
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_argument"
    taken = api.post("/sessions", json={"id": sid, "messages": []})
    assert taken.status_code == 409 and error_of(taken)["code"] == "session_exists"
    assert error_of(api.get("/nowhere"))["code"] == "not_found"
    r = api.put("/sessions")
    assert r.status_code == 405 and error_of(r)["code"] == "method_not_allowed"
    r = api.get("/sessions?limit=0")
    assert r.status_code == 422 and error_of(r)["code"] == "invalid_request"


def test_status_and_code_cover_the_hierarchy() -> None:
    assert status_and_code(E.SessionNotFoundError("x")) == (404, "session_not_found")
    assert status_and_code(E.SessionBusyError("x")) == (409, "session_busy")
    assert status_and_code(E.SessionLockedError("x")) == (409, "session_locked")
    assert status_and_code(E.WriterLockLostError("x", 3)) == (409, "writer_lock_lost")
    assert status_and_code(E.StaleSessionError("x", 1, 2)) == (409, "stale_session")
    assert status_and_code(E.InvalidArgumentError("x")) == (422, "invalid_argument")
    assert status_and_code(E.UnknownOptionError("v", ["k"], [])) == (422, "unknown_option")
    assert status_and_code(E.NotControllerError("s", "c", None)) == (403, "not_controller")
    assert status_and_code(E.ControllerConflictError("s", "c")) == (409, "controller_conflict")
    assert status_and_code(E.ClientNotAttachedError("s", "c")) == (404, "client_not_attached")
    assert status_and_code(E.AuthError("x")) == (401, "unauthorized")
    assert status_and_code(KeyError("x")) == (500, "internal_error")
    # Every concrete error class has a code that is not the catch-all.
    for name in E.__all__:
        cls = getattr(E, name)
        if cls is not E.PlaitError:
            assert status_and_code(cls.__new__(cls))[1] != "internal_error", name


# -- runs -------------------------------------------------------------------------------


def test_a_run_streamed_as_sse(api: TestClient) -> None:
    sid = new_session(api)["id"]
    r = api.post(f"/sessions/{sid}/runs", json={"text": "say hello", "stream": True})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(r.text)
    names = [e["event"] for e in events]
    assert names[0] == "run_start" and names[-1] == "run_end"
    assert events[-1]["data"]["ok"] is True and events[-1]["data"]["text"] == REPLY
    records = [e for e in events if e["event"] == "record"]
    assert [e["data"]["record"]["kind"] for e in records] == ["user", "assistant"]
    assert [e["id"].partition("~")[0] for e in records] == ["0", "1"]
    deltas = "".join(e["data"]["text"] for e in events if e["event"] == "text_delta")
    assert deltas == REPLY
    for e in events:
        if e["event"] != "record":
            head, _, n = e["id"].partition("~")[0].partition(".")
            assert int(head) >= -1 and int(n) >= 1
    assert "iteration_end" in names and "finish" in names
    hist = api.get(f"/sessions/{sid}/history").json()["messages"]
    assert [m["text"] for m in hist] == ["say hello", REPLY]


def test_a_run_in_the_background(api: TestClient) -> None:
    sid = new_session(api)["id"]
    r = api.post(f"/sessions/{sid}/runs", json={"text": "hi"})
    assert r.status_code == 202
    body = r.json()
    assert body["session_id"] == sid and body["events_url"] == f"/sessions/{sid}/events"
    wait_idle(api, sid)
    assert [m["text"] for m in api.get(f"/sessions/{sid}/history").json()["messages"]] == [
        "hi",
        REPLY,
    ]
    state = api.get(f"/sessions/{sid}/runs/current").json()
    assert state == {
        "session_id": sid,
        "running": False,
        "run_id": None,
        "replica_id": None,
        "started_at": None,
        "resumable": None,
    }
    r = api.post(f"/sessions/{sid}/runs/current/steer", json={"message": "x"})
    assert r.status_code == 409 and error_of(r)["code"] == "nothing_to_do"
    r = api.delete(f"/sessions/{sid}/runs/current")
    assert r.status_code == 409 and error_of(r)["code"] == "nothing_to_do"
    r = api.post(f"/sessions/{sid}/resume", json={})
    assert r.status_code == 409 and error_of(r)["code"] == "nothing_to_do"


def test_busy_steer_cancel_resume(tmp_path: Path) -> None:
    gated: list[GatedProvider] = []

    def provider() -> GatedProvider:
        gated.append(GatedProvider())
        return gated[-1]

    served = make_served(tmp_path, provider)
    with TestClient(served.app, headers=AUTH, raise_server_exceptions=False) as api:
        sid = new_session(api)["id"]
        run = api.post(f"/sessions/{sid}/runs", json={"text": "go"}).json()
        assert gated[0].started.wait(10)
        state = api.get(f"/sessions/{sid}/runs/current").json()
        assert state["running"] is True and state["run_id"] == run["run_id"]
        r = api.post(f"/sessions/{sid}/runs", json={"text": "again"})
        assert r.status_code == 409 and error_of(r)["code"] == "session_busy"
        assert api.get("/sessions").json()["sessions"][0]["running"] is True
        assert api.post(f"/sessions/{sid}/runs/current/steer", json={"message": "also"}).json() == {
            "ok": True
        }
        assert api.delete(f"/sessions/{sid}/runs/current").json() == {"ok": True}
        wait_idle(api, sid)
        resumable = api.get(f"/sessions/{sid}/runs/current").json()["resumable"]
        assert resumable["kind"] in {"call_model", "retry_response", "continue_response"}
        gated.clear()
        r = api.post(f"/sessions/{sid}/resume", json={})
        assert r.status_code == 202
        assert gated and gated[0].started.wait(10)
        gated[0].gate.set()
        wait_idle(api, sid)
        texts = [m["text"] for m in api.get(f"/sessions/{sid}/history").json()["messages"]]
        assert texts[0] == "go" and texts[-1] == "first piece gated reply"
    served.client.close()


def test_a_failed_run_reports_its_code(tmp_path: Path) -> None:
    from plait.providers import ScriptedProvider

    served = make_served(tmp_path, lambda: ScriptedProvider([]))
    with TestClient(served.app, headers=AUTH) as api:
        sid = new_session(api)["id"]
        events = parse_sse(
            api.post(f"/sessions/{sid}/runs", json={"text": "hi", "stream": True}).text
        )
        end = events[-1]
        assert end["event"] == "run_end" and end["data"]["ok"] is False
        assert end["data"]["error"]["error"]["code"] == "provider_error"
        assert end["data"]["status"] == 502
    served.client.close()


def test_runs_check_their_arguments(api: TestClient) -> None:
    sid = new_session(api)["id"]
    for body in (
        {"text": ""},
        {"text": "   "},
        {"text": "x", "max_steps": 0},
        {"text": "x", "temperature": 1},
    ):
        r = api.post(f"/sessions/{sid}/runs", json=body)
        assert r.status_code == 422, body
        assert error_of(r)["code"] == "invalid_request"


# -- live clients -----------------------------------------------------------------------


def test_live_clients_and_an_observers_write(api: TestClient) -> None:
    sid = new_session(api)["id"]
    r = api.post(f"/sessions/{sid}/clients", json={"client_id": "portal"})
    assert r.json()["mode"] == "observer" and r.json()["controller_id"] is None
    r = api.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
    assert r.json()["controller_id"] == "tui"
    r = api.post(f"/sessions/{sid}/clients", json={"client_id": "mobile", "mode": "controller"})
    assert r.status_code == 409 and error_of(r)["code"] == "controller_conflict"
    # The observer's writes are 403, whatever the route.
    for path, body in [
        (f"/sessions/{sid}/clients/portal/inject", {"content": "hi"}),
        (f"/sessions/{sid}/clients/portal/permissions", {"request": {"id": "p1", "tool": "shell"}}),
        (f"/sessions/{sid}/runs", {"text": "hi", "client_id": "portal"}),
        (f"/sessions/{sid}/runs", {"text": "hi"}),
        (
            f"/sessions/{sid}/messages",
            {"messages": [{"role": "user", "content": "x"}], "client_id": "portal"},
        ),
    ]:
        r = api.post(path, json=body)
        assert r.status_code == 403, (path, r.text)
        assert error_of(r)["code"] == "not_controller"
    assert api.post(f"/sessions/{sid}/clients/tui/inject", json={"content": "from tui"}).json() == {
        "ok": True
    }
    route = api.post(
        f"/sessions/{sid}/clients/tui/permissions", json={"request": {"id": "p1"}}
    ).json()
    assert route["request_id"] == "p1" and route["client_id"] == "tui"
    hb = api.post(f"/sessions/{sid}/clients/portal/heartbeat", json={"metadata": {"tab": 2}}).json()
    assert hb["action"] == "heartbeat" and hb["client"]["metadata"] == {
        "tab": 2,
        "principal": "tester",
    }
    t = api.post(
        f"/sessions/{sid}/clients/mobile/takeover", json={"metadata": {"reason": "handoff"}}
    ).json()
    assert t["controller_id"] == "mobile" and t["demoted_id"] == "tui"
    r = api.post(f"/sessions/{sid}/clients/tui/inject", json={"content": "late"})
    assert r.status_code == 403 and error_of(r)["code"] == "not_controller"
    clients = api.get(f"/sessions/{sid}/clients").json()
    assert clients["controller_id"] == "mobile"
    assert {c["client_id"]: c["mode"] for c in clients["clients"]} == {
        "portal": "observer",
        "tui": "observer",
        "mobile": "controller",
    }
    rel = api.post(f"/sessions/{sid}/clients/mobile/release", json={"reason": "client_exit"}).json()
    assert rel["released_control"] is True and rel["controller_id"] is None
    r = api.post(f"/sessions/{sid}/clients/mobile/heartbeat", json={})
    assert r.status_code == 404 and error_of(r)["code"] == "client_not_attached"
    # Every step is in the transcript; the injected prompt names its controller.
    recs = api.get(f"/sessions/{sid}/records").json()["records"]
    injected = [r for r in recs if r["kind"] == "user"]
    assert injected[0]["meta"]["live_session"]["client_id"] == "tui"
    names = [r["payload"]["name"] for r in recs if r["kind"] == "event"]
    assert "live_session_permission_route" in names and names.count("live_session_client") == 5
    detail = api.get(f"/sessions/{sid}").json()
    assert detail["live_controller_id"] is None and len(detail["live_clients"]) == 2


def test_the_controller_drives_runs(api: TestClient) -> None:
    sid = new_session(api)["id"]
    api.post(f"/sessions/{sid}/clients", json={"client_id": "tui", "mode": "controller"})
    r = api.post(f"/sessions/{sid}/runs", json={"text": "hi", "client_id": "tui", "stream": True})
    assert parse_sse(r.text)[-1]["data"]["ok"] is True
    r = api.post(f"/sessions/{sid}/clients", json={"client_id": "x y\n", "mode": "observer"})
    assert r.status_code == 422


def test_the_server_runs_sessions_side_by_side(tmp_path: Path) -> None:
    gated: list[GatedProvider] = []
    lock = threading.Lock()

    def provider() -> GatedProvider:
        with lock:
            gated.append(GatedProvider())
            return gated[-1]

    served = make_served(tmp_path, provider)
    with TestClient(served.app, headers=AUTH) as api:
        a = new_session(api)["id"]
        b = new_session(api)["id"]
        assert api.post(f"/sessions/{a}/runs", json={"text": "a"}).status_code == 202
        assert api.post(f"/sessions/{b}/runs", json={"text": "b"}).status_code == 202
        for g in gated:
            g.gate.set()
        wait_idle(api, a)
        wait_idle(api, b)
    served.client.close()


def test_runs_with_tools_leave_no_sandbox_folder_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc
    import tempfile

    from plait import Client
    from plait.providers import Reply, ScriptedProvider
    from plait.records import ToolCall
    from plait.server import create_app
    from plait.tools import BUILTIN_TOOLS

    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where managed sandboxes are made
    ws = tmp_path / "ws"
    ws.mkdir()
    call = ToolCall("c1", "write_file", {"path": "a.txt", "content": "x"})

    def provider() -> ScriptedProvider:
        first = Reply(tool_calls=(call,), finish_reason="tool_calls")
        return ScriptedProvider([first, Reply("ok")])

    with Client(ws, store=tmp_path / "plait.db") as client:
        app = create_app(
            client,
            api_keys={KEY: "tester"},
            provider=provider,
            tools=BUILTIN_TOOLS,
            approval_default="allow",
        )
        with TestClient(app, headers=AUTH, raise_server_exceptions=False) as api:
            for _ in range(3):  # sessions with no sandbox target: each run makes one
                sid = new_session(api)["id"]
                r = api.post(f"/sessions/{sid}/runs", json={"text": "write", "stream": True})
                assert parse_sse(r.text)[-1]["data"]["ok"] is True
                tool = api.get(f"/sessions/{sid}/history").json()["messages"][2]
                assert tool["role"] == "tool" and tool["ok"] is True, tool
            gc.collect()
            # Only the session the server's client holds as current keeps its folder.
            assert len([p for p in temp.iterdir() if "sandbox" in p.name]) <= 1
        client.sessions.new()  # that session is current no more
        del app, api
        gc.collect()
        assert [p.name for p in temp.iterdir() if "sandbox" in p.name] == []


def test_sessions_q_searches_every_message_of_the_store(api: TestClient, served: Served) -> None:
    a = new_session(api, messages=[{"role": "user", "content": "Where is the quokka?"}])["id"]
    b = api.post(f"/sessions/{a}/fork", json={}).json()["id"]  # shares the question
    gone = new_session(api, messages=[{"role": "user", "content": "a quokka"}])["id"]
    served.client.sessions.delete(gone)  # no route deletes: the server's client does
    new_session(api, messages=[{"role": "user", "content": "nothing to find"}])
    body = api.get("/sessions?q=quokka").json()
    assert sorted((h["session_id"], h["position"], h["role"]) for h in body["hits"]) == sorted(
        [(a, 0, "user"), (b, 0, "user")]
    )
    assert all(h["snippet"] == "Where is the «quokka»?" for h in body["hits"])
    assert sorted(s["id"] for s in body["sessions"]) == sorted([a, b])
    assert api.get("/sessions?q=absent").json() == {"sessions": [], "hits": []}
    assert api.get("/sessions").json()["hits"] is None  # a plain listing is unchanged
    assert len(api.get("/sessions?q=quokka&limit=1").json()["hits"]) == 1
    assert error_of(api.get("/sessions?q="))["code"] == "invalid_request"
    # FTS5 (SQLite) refuses an unclosed quote; PostgreSQL's web search reads any text.
    bad = api.get("/sessions", params={"q": '"unclosed'})
    if isinstance(served.client.store, SQLiteStore):
        assert error_of(bad)["code"] == "invalid_argument"
        assert "bad search query" in error_of(bad)["message"]
    else:
        assert bad.status_code == 200
