"""What the server refuses before it does any work: no credential, a body too large,
metadata too large, and a writer who is not the live controller."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from plait import Client
from plait.auth import DurableSessions
from plait.server import DEFAULT_MAX_BODY, create_app
from plait.server.schemas import MAX_CLIENT_METADATA

from .conftest import AUTH, KEY, GatedProvider, LiveServer, wait_idle

OTHER = "other-writer-key-0123456789"
OTHER_AUTH = {"Authorization": f"Bearer {OTHER}"}


def _client(tmp_path: Path) -> Client:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return Client(ws, store=tmp_path / "plait.db")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    made = _client(tmp_path)
    yield made
    made.close()


def _app(client: Client, **options: Any) -> Any:
    return create_app(client, api_keys={KEY: "tester", OTHER: "other"}, **options)


def _code(response: httpx.Response) -> str:
    code: str = response.json()["error"]["code"]
    return code


# -- auth before the body ----------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-key-0123456789"}, {"Authorization": "Basic eDp5"}],
    ids=["missing", "wrong", "not-bearer"],
)
def test_a_malformed_body_without_a_valid_credential_is_401(
    client: Client, headers: dict[str, str]
) -> None:
    with TestClient(_app(client)) as api:
        for body in (b"{not json", b'{"id": 7, "nonsense": true}', b"\xff\xfe"):
            r = api.post(
                "/sessions", content=body, headers={**headers, "Content-Type": "application/json"}
            )
            assert r.status_code == 401, (body, r.text)
            assert _code(r) == "unauthorized"
            assert r.headers["WWW-Authenticate"] == "Bearer"
        # The same bodies with the key are the request's own fault: 422.
        r = api.post("/sessions", content=b"{not json", headers={**AUTH})
        assert r.status_code == 422 and _code(r) == "invalid_request"


def _raw_request(port: int, head: str) -> bytes:
    """Send a request head (no body) and return what the server answers, until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1"))
        answer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise AssertionError(f"no answer without the body; got {answer!r}") from None
            if not chunk:
                return answer
            answer += chunk


def test_the_server_answers_before_it_reads_a_body_it_will_not_take(client: Client) -> None:
    """A 150 MB body announced without a credential, or over the limit with one, is
    answered at once from the head alone; the body is never sent, so never held."""
    with LiveServer(_app(client)) as server:
        head = (
            "POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 157286400\r\n{auth}\r\n"
        )
        unauthenticated = _raw_request(server.port, head.format(auth=""))
        assert unauthenticated.startswith(b"HTTP/1.1 401"), unauthenticated[:200]
        assert b"unauthorized" in unauthenticated
        too_large = _raw_request(server.port, head.format(auth=f"Authorization: Bearer {KEY}\r\n"))
        assert too_large.startswith(b"HTTP/1.1 413"), too_large[:200]
        assert b"payload_too_large" in too_large
        # The server is still there, and answers a request it takes.
        ok = httpx.get(f"{server.url}/sessions", headers=AUTH, timeout=10)
        assert ok.status_code == 200


def test_a_body_over_the_limit_is_413_declared_or_streamed(client: Client) -> None:
    with TestClient(_app(client, max_body=2000), headers=AUTH) as api:
        message = {"role": "user", "content": "x" * 3000}
        r = api.post("/sessions", json={"messages": [message]})
        assert r.status_code == 413 and _code(r) == "payload_too_large"

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b'{"messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}]}'

        r = api.post("/sessions", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413 and _code(r) == "payload_too_large"
        assert api.get("/sessions").json()["sessions"] == []  # nothing was made
        small = api.post("/sessions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert small.status_code == 201


def test_the_default_limit_refuses_a_huge_message_and_takes_a_large_one(client: Client) -> None:
    assert DEFAULT_MAX_BODY == 8 * 1024 * 1024
    with TestClient(_app(client), headers=AUTH) as api:
        sid = api.post("/sessions", json={}).json()["id"]
        big = {"messages": [{"role": "user", "content": "z" * (DEFAULT_MAX_BODY + 1)}]}
        r = api.post(f"/sessions/{sid}/messages", json=big)
        assert r.status_code == 413
        fits = {"messages": [{"role": "user", "content": "z" * (DEFAULT_MAX_BODY // 2)}]}
        assert api.post(f"/sessions/{sid}/messages", json=fits).status_code == 200
        assert api.get(f"/sessions/{sid}").json()["length"] == 1


def test_a_bad_limit_is_refused(client: Client) -> None:
    from plait.errors import InvalidArgumentError

    for bad in (0, -1, True, 1.5, "8M"):
        with pytest.raises(InvalidArgumentError):
            _app(client, max_body=bad)


def test_what_needs_no_credential_still_needs_none(client: Client) -> None:
    with TestClient(_app(client)) as api:
        assert api.get("/").status_code == 200
        assert api.get("/openapi.json").status_code == 200
        assert "413" in api.get("/openapi.json").json()["paths"]["/sessions"]["post"]["responses"]
        assert api.get("/nowhere").status_code == 401  # no credential: nothing to learn
        assert api.get("/nowhere", headers=AUTH).status_code == 404
        assert api.delete("/auth/whoami", headers=AUTH).status_code == 405


def test_a_read_only_token_passes_the_guard_and_is_refused_a_write(client: Client) -> None:
    bearers = DurableSessions(client.store)
    made = bearers.create("reader", ttl=timedelta(hours=1), scopes=["read"])
    with TestClient(_app(client)) as api:
        r = api.get("/auth/whoami", headers={"Authorization": f"Bearer {made.id}"})
        assert r.status_code == 200 and r.json()["principal"] == "reader"
        r = api.post("/sessions", json={}, headers={"Authorization": f"Bearer {made.id}"})
        assert r.status_code == 403 and _code(r) == "read_only_credential"


# -- live-client metadata ----------------------------------------------------------------


def test_a_reader_cannot_store_large_or_deep_metadata(client: Client) -> None:
    reader = DurableSessions(client.store).create("reader", ttl=timedelta(hours=1), scopes=["read"])
    read_auth = {"Authorization": f"Bearer {reader.id}"}
    with TestClient(_app(client), headers=read_auth) as api:
        sid = api.post("/sessions", json={}, headers=AUTH).json()["id"]
        huge = {"blob": "m" * 200_000}
        deep: dict[str, Any] = {}
        for _ in range(20):
            deep = {"d": deep}
        url = f"/sessions/{sid}/clients"
        for metadata in (huge, deep):
            r = api.post(url, json={"client_id": "o1", "metadata": metadata})
            assert r.status_code == 422, r.text
        assert api.get(url).json()["clients"] == []
        attached = api.post(url, json={"client_id": "o1", "metadata": {"ui": "tui"}})
        assert attached.status_code == 200, attached.text
        for metadata in (huge, deep):
            r = api.post(f"{url}/o1/heartbeat", json={"metadata": metadata})
            assert r.status_code == 422
            r = api.post(f"{url}/o1/release", json={"metadata": metadata})
            assert r.status_code == 422
        r = api.post(f"{url}/o1/release", json={"reason": "r" * 5000})
        assert r.status_code == 422
        [seen] = api.get(url).json()["clients"]
        assert seen["metadata"] == {"ui": "tui", "principal": "reader"}
        just_fits = {"k": "v" * (MAX_CLIENT_METADATA - 20)}
        assert len(json.dumps(just_fits, separators=(",", ":"))) <= MAX_CLIENT_METADATA
        r = api.post(f"{url}/o1/heartbeat", json={"metadata": just_fits})
        assert r.status_code == 200, r.text


# -- the live controller -----------------------------------------------------------------


def test_only_the_controller_cancels_its_run_or_closes_its_session(tmp_path: Path) -> None:
    gated: list[GatedProvider] = []

    def provider() -> GatedProvider:
        gated.append(GatedProvider())
        return gated[-1]

    client = _client(tmp_path)
    app = _app(client, provider=provider)
    with TestClient(app, headers=AUTH, raise_server_exceptions=False) as api:
        sid = api.post("/sessions", json={}, headers=AUTH).json()["id"]
        attach = {"client_id": "tui", "mode": "controller"}
        assert api.post(f"/sessions/{sid}/clients", json=attach, headers=AUTH).status_code == 200
        r = api.post(f"/sessions/{sid}/runs", json={"text": "go", "client_id": "tui"}, headers=AUTH)
        assert r.status_code == 202
        assert gated[0].started.wait(10)
        # Another writer, with no client id, with its own, or naming the controller's.
        for url_suffix in ("", "?client_id=mine", "?client_id=tui"):
            r = api.delete(f"/sessions/{sid}/runs/current{url_suffix}", headers=OTHER_AUTH)
            assert r.status_code == 403, (url_suffix, r.text)
            assert _code(r) in {"not_controller", "client_not_owned"}
        for body in ({}, {"client_id": "mine"}, {"client_id": "tui"}):
            r = api.post(f"/sessions/{sid}/close", json=body, headers=OTHER_AUTH)
            assert r.status_code == 403, (body, r.text)
        # The controller's own principal without naming it is refused too.
        assert api.delete(f"/sessions/{sid}/runs/current", headers=AUTH).status_code == 403
        state = api.get(f"/sessions/{sid}/runs/current", headers=AUTH).json()
        assert state["running"] is True
        assert api.get(f"/sessions/{sid}", headers=AUTH).json()["status"] != "closed"
        # The controller may.
        r = api.delete(f"/sessions/{sid}/runs/current?client_id=tui", headers=AUTH)
        assert r.json() == {"ok": True}
        wait_idle(api, sid)
        r = api.post(f"/sessions/{sid}/close", json={"client_id": "tui"}, headers=AUTH)
        assert r.status_code == 200 and r.json()["status"] == "closed"
    client.close()


def test_with_no_controller_any_writer_cancels_and_closes(client: Client) -> None:
    with TestClient(_app(client), headers=OTHER_AUTH) as api:
        sid = api.post("/sessions", json={}, headers=AUTH).json()["id"]
        r = api.delete(f"/sessions/{sid}/runs/current")
        assert r.status_code == 409 and _code(r) == "nothing_to_do"
        assert api.post(f"/sessions/{sid}/close", json={}).json()["status"] == "closed"
