"""A write served leaves no writer lock behind; a run in progress keeps its own (D94, D227)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from plait.errors import StoreError
from tests.server.conftest import AUTH, GatedProvider, make_served


def new_session(api: TestClient) -> dict[str, Any]:
    r = api.post("/sessions", json={})
    assert r.status_code == 201, r.text
    body: dict[str, Any] = r.json()
    return body


def _held_elsewhere(path: Path, session_id: str) -> bool:
    """Whether another process, opening the same file, finds the session's writer lock taken."""
    probe = (
        "import sys\n"
        "from plait.store import SQLiteStore\n"
        "s = SQLiteStore(sys.argv[1])\n"
        "print(s.locked_elsewhere(sys.argv[2]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(path), session_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert out in ("True", "False"), out
    return out == "True"


def _say(api: TestClient, session_id: str, body: dict[str, Any]) -> int:
    return api.post(f"/sessions/{session_id}/messages", json={"messages": [body]}).status_code


def test_a_write_answers_with_its_lock_already_given_up(tmp_path: Path) -> None:
    served = make_served(tmp_path)
    try:
        with TestClient(served.app, headers=AUTH) as api:
            sid = new_session(api)["id"]
            assert _say(api, sid, {"role": "user", "content": "hi"}) == 200
            # The answer is in the client's hands: the lock is gone, here and for other processes.
            assert not served.client.host.idle_locks
            assert not _held_elsewhere(tmp_path / "plait.db", sid)
            # A write that fails is let go of too.
            assert _say(api, sid, {"content": "no role"}) == 422
            assert not served.client.host.idle_locks
            assert not _held_elsewhere(tmp_path / "plait.db", sid)
    finally:
        served.client.close()


def test_a_streamed_run_keeps_its_lock_until_it_ends(tmp_path: Path) -> None:
    gated: list[GatedProvider] = []

    def provider() -> GatedProvider:
        gated.append(GatedProvider())
        return gated[-1]

    served = make_served(tmp_path, provider=provider)
    try:
        with TestClient(served.app, headers=AUTH) as api:
            sid = new_session(api)["id"]
            run = {"text": "go", "stream": True}
            with api.stream("POST", f"/sessions/{sid}/runs", json=run) as r:
                assert r.status_code == 200
                lines = r.iter_lines()
                first = next(line for line in lines if line.startswith("event: "))
                assert first == "event: run_start"  # streamed as it goes, not held back
                assert gated and gated[0].started.wait(10)
                # Meanwhile another write is served: it lets go of nothing the run holds.
                other = new_session(api)["id"]
                assert _say(api, other, {"role": "user", "content": "x"}) == 200
                assert _held_elsewhere(tmp_path / "plait.db", sid)
                assert not _held_elsewhere(tmp_path / "plait.db", other)
                gated[0].gate.set()
                rest = [line for line in lines if line.startswith("event: ")]
            assert rest[-1] == "event: run_end"
            assert not _held_elsewhere(tmp_path / "plait.db", sid)
    finally:
        served.client.close()


def test_a_failure_to_let_go_is_logged_and_the_write_keeps_its_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = make_served(tmp_path)

    def broken() -> int:
        raise StoreError("the lock files are gone")

    try:
        with TestClient(served.app, headers=AUTH) as api:
            sid = new_session(api)["id"]
            with monkeypatch.context() as patched, caplog.at_level(logging.ERROR, "plait.server"):
                patched.setattr(served.client.host, "release_idle", broken)
                assert _say(api, sid, {"role": "user", "content": "kept"}) == 200
            assert "could not give up the idle writer locks" in caplog.text
            records = api.get(f"/sessions/{sid}/records").json()["records"]
            assert [r["payload"]["content"] for r in records] == ["kept"]
            assert _say(api, sid, {"role": "user", "content": "next"}) == 200
            assert not served.client.host.idle_locks  # the next write let go of it
    finally:
        served.client.close()


def test_a_run_on_a_session_another_process_writes_is_refused_before_it_starts(
    tmp_path: Path,
) -> None:
    served = make_served(tmp_path)
    holder = (
        "import sys\n"
        "from plait import Client\n"
        "with Client(sys.argv[2], store=sys.argv[1]) as c:\n"
        "    c.open(sys.argv[3]).live.acquire()\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    try:
        with TestClient(served.app, headers=AUTH) as api:
            sid = new_session(api)["id"]
            # A first run binds the caller to the session: later runs have nothing to write first.
            first = api.post(f"/sessions/{sid}/runs", json={"text": "hi", "stream": True})
            assert "event: run_end" in first.text
            kept = api.get(f"/sessions/{sid}/records").json()["records"]
            proc = subprocess.Popen(
                [sys.executable, "-c", holder, str(tmp_path / "plait.db"), str(tmp_path), sid],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
                for stream in (False, True):
                    r = api.post(f"/sessions/{sid}/runs", json={"text": "go", "stream": stream})
                    assert r.status_code == 409, r.text
                    assert r.json()["error"]["code"] == "session_locked"
                    assert api.get(f"/sessions/{sid}/runs/current").json()["running"] is False
                assert api.get(f"/sessions/{sid}/records").json()["records"] == kept
            finally:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(30)
            # Once the other process is gone, the run goes ahead.
            r = api.post(f"/sessions/{sid}/runs", json={"text": "go", "stream": True})
            assert r.status_code == 200
            assert "event: run_end" in r.text
    finally:
        served.client.close()


def test_a_run_refused_after_its_checks_leaves_no_lock_behind(tmp_path: Path) -> None:
    served = make_served(tmp_path)
    try:
        with TestClient(served.app, headers=AUTH) as api:
            sid = new_session(api)["id"]
            assert _say(api, sid, {"role": "user", "content": "hi"}) == 200
            assert _say(api, sid, {"role": "assistant", "content": "hello"}) == 200
            # Nothing was interrupted: the resume is refused once its lock was taken.
            for stream in (False, True):
                r = api.post(f"/sessions/{sid}/resume", json={"stream": stream})
                assert r.status_code == 409, r.text
                assert r.json()["error"]["code"] == "nothing_to_do"
                assert not served.client.host.idle_locks
                assert not _held_elsewhere(tmp_path / "plait.db", sid)
    finally:
        served.client.close()
