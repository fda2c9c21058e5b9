"""Any session id in a URL: ``/sessions/{id}/...`` with the id percent-encoded, ``/`` included."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from starlette.testclient import TestClient

from plait.server.paths import routed_path, session_path_id, session_url

from .conftest import AUTH, REPLY, LiveServer, Served, wait_idle

HOSTILE = [
    "user/123",
    "tenant:acme:chat-9",
    "../../etc/passwd",
    "a/b/../c",
    "a\\b",
    "über/日本 ✓",
    "100%25 sure?#frag",
    "/leading/and/trailing/",
    "x" * 200,
]


def url(session_id: str, *rest: str) -> str:
    """What a browser's ``encodeURIComponent`` gives."""
    return "/".join(["/sessions", quote(session_id, safe=""), *rest])


def test_routed_path_keeps_the_id_segment_encoded() -> None:
    raw = b"/sessions/user%2F123/history"
    assert routed_path("/sessions/user/123/history", raw) == "/sessions/user%2F123/history"
    assert routed_path("/sessions/plain/fork", b"/sessions/plain/fork") == "/sessions/plain/fork"
    # A query string on the raw path (some servers keep it) is not part of the path.
    assert routed_path("/sessions/a/b", b"/sessions/a%2Fb?x=1") == "/sessions/a%2Fb"
    # The rest of the path is decoded as before; a "/" there is a separator.
    assert (
        routed_path("/sessions/a/clients/c 1/release", b"/sessions/a/clients/c%201/release")
        == "/sessions/a/clients/c 1/release"
    )
    # Paths that name no session are untouched.
    for path in ("/sessions", "/sessions/", "/auth/whoami", "/"):
        assert routed_path(path, path.encode()) == path
    # Without a raw path the decoded one is all there is: still encoded once.
    assert routed_path("/sessions/a b/history", None) == "/sessions/a%20b/history"
    # The id is read from the wire (a test client may decode it twice in the path) ...
    assert routed_path("/sessions/1% x/h", b"/sessions/1%2525%20x/h") == "/sessions/1%2525%20x/h"
    # ... but a raw path whose route is not this request's is not trusted.
    assert routed_path("/sessions/x/history", b"/sessions/y/fork") == "/sessions/x/history"
    # Under a root path.
    assert routed_path("/api/sessions/a/b/x", b"/api/sessions/a%2Fb/x", "/api") == (
        "/api/sessions/a%2Fb/x"
    )
    for sid in HOSTILE:
        assert session_path_id(quote(sid, safe="")) == sid
        assert session_url(sid, "events") == url(sid, "events")


@pytest.mark.parametrize("sid", HOSTILE)
def test_every_route_serves_an_id_holding_slashes(api: TestClient, sid: str) -> None:
    made = api.post(
        "/sessions", json={"id": sid, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert made.status_code == 201, made.text
    assert made.json()["id"] == sid
    got = api.get(url(sid))
    assert got.status_code == 200, got.text
    assert got.json()["id"] == sid
    assert api.patch(url(sid), json={"title": "named"}).json()["title"] == "named"
    r = api.post(url(sid, "messages"), json={"messages": [{"role": "assistant", "content": "yo"}]})
    assert r.status_code == 200, r.text
    assert [m["text"] for m in api.get(url(sid, "history")).json()["messages"]] == ["hi", "yo"]
    assert api.get(url(sid, "records")).json()["end_seq"] == 2
    assert api.get(url(sid, "context")).status_code == 200
    fork = api.post(url(sid, "fork"), json={})
    assert fork.status_code == 201 and fork.json()["parent_session_ids"] == [sid]
    lineage = api.get(url(sid, "lineage")).json()
    assert sid in {b["id"] for b in lineage["boxes"]}
    page = api.get(url(sid, "export"))
    assert page.status_code == 200
    disposition = page.headers["content-disposition"]
    name = disposition.split('filename="', 1)[1].rstrip('"')
    assert "/" not in name and "\\" not in name and ".." not in name and name.endswith(".html")
    # The decoded path names another session (or none): never this one.
    if "/" in sid:
        plain = api.get("/sessions/" + sid)
        assert plain.status_code == 404 or plain.json().get("id") != sid
    # A run, its events URL, and its run state.
    started = api.post(url(sid, "runs"), json={"text": "go"})
    assert started.status_code == 202, started.text
    assert started.json()["events_url"] == url(sid, "events")
    wait_idle_encoded(api, sid)
    assert api.get(url(sid, "history")).json()["messages"][-1]["text"] == REPLY
    assert api.get(url(sid, "runs", "current")).json()["session_id"] == sid


def wait_idle_encoded(api: TestClient, sid: str) -> None:
    # wait_idle builds its URL with the id as it is; an encoded id is a valid path too.
    wait_idle(api, quote(sid, safe=""))


def test_ids_that_are_not_keys_are_refused_and_unknown_ones_are_not_found(
    api: TestClient,
) -> None:
    for bad in ("", " padded", "line\nbreak", "nul\x00", "x" * 201, ".."):
        r = api.post("/sessions", json={"id": bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"]["code"] == "invalid_argument"
    for unknown in ("user%2Fnobody", "%2E%2E%2Fx", "%F0%28%8C%28"):  # the last: not UTF-8
        r = api.get(f"/sessions/{unknown}/history")
        assert r.status_code == 404, (unknown, r.text)
        assert r.json()["error"]["code"] == "session_not_found"


def test_httpx_through_the_asgi_transport(served: Served) -> None:
    """The same through httpx's own ASGI transport (its raw path carries the encoding)."""

    async def go() -> None:
        transport = httpx.ASGITransport(app=served.app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://plait", headers=AUTH
        ) as http:
            made = await http.post("/sessions", json={"id": "user/123"})
            assert made.status_code == 201
            await http.post("/sessions", json={"id": "user"})
            got = await http.get("/sessions/user%2F123")
            assert got.status_code == 200 and got.json()["id"] == "user/123"
            assert (await http.get("/sessions/user")).json()["id"] == "user"
            # "/sessions/user/123" is session "user", route "123": no such route.
            assert (await http.get("/sessions/user/123")).status_code == 404

    asyncio.run(go())


def test_the_web_page_encodes_every_session_url() -> None:
    import plait.server

    static = Path(plait.server.__file__).parent / "static"
    scripts = ("app.js", "transcript.js", "live.js")
    script = "\n".join((static / name).read_text() for name in scripts)
    assert 'function sessionPath(id) { return "/sessions/" + encodeURIComponent(id); }' in script
    # Every request to a session's routes goes through sessionPath (no id pasted in raw).
    assert '"/sessions/" +' not in script.replace(
        'return "/sessions/" + encodeURIComponent(id);', ""
    )
    assert '"#/s/" + encodeURIComponent(' in script
    assert "decodeURIComponent(hash.slice(4))" in script


def test_a_real_server_routes_the_encoded_id(live: LiveServer) -> None:
    """uvicorn gives the raw path as it came: an encoded "/" stays inside the id."""
    with httpx.Client(base_url=live.url, headers=AUTH) as http:
        for sid in ("user/123", "../../etc/passwd", "100%25 sure?#frag"):
            assert http.post("/sessions", json={"id": sid}).status_code == 201
            got = http.get(url(sid, "history"))
            assert got.status_code == 200, (sid, got.text)
            assert http.get(url(sid)).json()["id"] == sid
