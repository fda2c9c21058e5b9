"""A live client named on event streams is present while one is open; gone, it lets go.

Driven over a real loopback connection (uvicorn in a thread, httpx): closing a stream is a
closed TCP connection, as when a browser tab is killed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from plait.errors import InvalidArgumentError
from plait.server import create_app
from tests.conftest import eventually
from tests.server.conftest import AUTH, LiveServer, make_served


def _controller(http: httpx.Client, sid: str) -> str | None:
    found: str | None = http.get(f"/sessions/{sid}/clients").json()["controller_id"]
    return found


def _attach(http: httpx.Client, sid: str, client_id: str) -> None:
    r = http.post(f"/sessions/{sid}/clients", json={"client_id": client_id, "mode": "controller"})
    assert r.status_code == 200, r.text


class _Follow:
    """An open event stream (named by ``client_id``), its first line read; ``close`` it."""

    def __init__(self, http: httpx.Client, sid: str, client_id: str | None) -> None:
        params = {"client_id": client_id} if client_id is not None else {}
        self._stream = http.stream("GET", f"/sessions/{sid}/events", params=params)
        response = self._stream.__enter__()
        assert response.status_code == 200
        self._lines = response.iter_lines()  # kept: a dropped reader closes the stream
        assert next(self._lines).startswith("retry:")

    def close(self) -> None:
        self._stream.__exit__(None, None, None)


def _follow(http: httpx.Client, sid: str, client_id: str | None) -> _Follow:
    return _Follow(http, sid, client_id)


def test_a_controller_whose_page_is_gone_is_released_after_the_grace(tmp_path: Path) -> None:
    served = make_served(tmp_path, presence_grace=0.2)
    with LiveServer(served.app) as server, httpx.Client(base_url=server.url, headers=AUTH) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        stream = _follow(http, sid, "tab-1")
        _attach(http, sid, "tab-1")
        # Another client may not run while the page controls the session.
        assert http.post(f"/sessions/{sid}/runs", json={"text": "hi"}).status_code == 403
        stream.close()  # the tab is killed: its connection closes
        assert eventually(lambda: _controller(http, sid) is None)
        assert http.get(f"/sessions/{sid}/clients").json()["clients"] == []
        events = [
            r["payload"]
            for r in http.get(f"/sessions/{sid}/records").json()["records"]
            if r["kind"] == "event"
        ]
        assert events[-1]["data"]["action"] == "detach"
        assert events[-1]["data"]["reason"] == "gone"
        # Now anyone who may write may run.
        r = http.post(f"/sessions/{sid}/runs", json={"text": "hi", "stream": True})
        assert r.status_code == 200 and "event: run_end" in r.text
    served.client.close()


def test_a_page_that_reconnects_within_the_grace_keeps_control(tmp_path: Path) -> None:
    served = make_served(tmp_path, presence_grace=0.5)
    with LiveServer(served.app) as server, httpx.Client(base_url=server.url, headers=AUTH) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        _attach(http, sid, "tab-1")
        first = _follow(http, sid, "tab-1")
        first.close()
        again = _follow(http, sid, "tab-1")  # a reconnect, well within the grace
        time.sleep(1.0)  # twice the grace: a release would have come by now
        assert _controller(http, sid) == "tab-1"
        again.close()
        assert eventually(lambda: _controller(http, sid) is None)
    served.client.close()


def test_a_client_never_named_on_a_stream_is_never_released_for_it(tmp_path: Path) -> None:
    served = make_served(tmp_path, presence_grace=0.1)
    with LiveServer(served.app) as server, httpx.Client(base_url=server.url, headers=AUTH) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        _attach(http, sid, "script-1")  # an API client: it follows without naming itself
        stream = _follow(http, sid, None)
        stream.close()
        time.sleep(0.5)  # five times the grace
        assert _controller(http, sid) == "script-1"
    served.client.close()


def test_a_stream_may_not_name_another_principals_client(tmp_path: Path) -> None:
    served = make_served(tmp_path)
    state = served.app.state.plait
    state.api_keys = {**state.api_keys, "other-key-0123456789": "other"}
    other = {"Authorization": "Bearer other-key-0123456789"}
    with LiveServer(served.app) as server, httpx.Client(base_url=server.url, headers=AUTH) as http:
        sid = http.post("/sessions", json={}).json()["id"]
        _attach(http, sid, "tab-1")
        r = http.get(f"/sessions/{sid}/events", params={"client_id": "tab-1"}, headers=other)
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "client_not_owned"
    served.client.close()


@pytest.mark.parametrize("grace", [-1, float("inf"), float("nan"), True, "30"])
def test_a_grace_that_is_no_number_of_seconds_is_refused(tmp_path: Path, grace: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="presence_grace"):
        create_app(":memory:", api_keys={"k" * 20: "p"}, presence_grace=grace)


def _lock_free(path: Path, sid: str) -> bool:
    """Whether another process could take the session's writer lock now."""
    import subprocess
    import sys

    code = (
        "import sys; from plait.store import SQLiteStore; s = SQLiteStore(sys.argv[1]); "
        "print(s.lock(sys.argv[2]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), sid], capture_output=True, text=True, check=True
    )
    return out.stdout.strip() == "True"


def test_a_client_whose_stream_moved_to_another_replica_stays_and_a_release_keeps_no_lock(
    tmp_path: Path,
) -> None:
    """Two servers on one store: the page's stream goes from A to B and it stays present;
    gone from both, it is released, and the release leaves the session's lock with nobody."""
    from plait import Client
    from plait.store import SQLiteStore

    a = make_served(tmp_path, presence_grace=0.3)
    b_client = Client(tmp_path / "ws", store=SQLiteStore(tmp_path / "plait.db"))
    b = create_app(b_client, api_keys={AUTH["Authorization"].split()[1]: "tester"},
                   presence_grace=0.3)  # fmt: skip
    with (
        LiveServer(a.app) as server_a,
        LiveServer(b) as server_b,
        httpx.Client(base_url=server_a.url, headers=AUTH) as http_a,
        httpx.Client(base_url=server_b.url, headers=AUTH) as http_b,
    ):
        sid = http_a.post("/sessions", json={}).json()["id"]
        on_a = _follow(http_a, sid, "tab-1")
        _attach(http_a, sid, "tab-1")
        on_b = _follow(http_b, sid, "tab-1")  # the page reconnected through the balancer to B
        on_a.close()
        time.sleep(1.0)  # three times the grace: A would have released it by now
        assert _controller(http_a, sid) == "tab-1"
        on_b.close()  # gone from every replica
        assert eventually(lambda: _controller(http_b, sid) is None)
        assert eventually(lambda: _lock_free(tmp_path / "plait.db", sid))
    a.client.close()
    b_client.close()
