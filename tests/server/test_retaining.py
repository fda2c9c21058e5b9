"""``plait serve --retain-older-than``: a server removes idle sessions every so often."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from plait import Client
from plait.cli import cli
from plait.errors import InvalidArgumentError
from plait.server import create_app
from plait.server.retaining import Retention
from tests.conftest import eventually

KEY = "k-0123456789abcdef0123"


def test_a_server_removes_idle_sessions_and_keeps_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every pass removes what has been idle past the age, and says so in the log."""
    log = logging.getLogger("plait.server.retention")
    log.addHandler(caplog.handler)  # whatever `plait serve` in this process set up
    caplog.set_level(logging.INFO, "plait.server.retention")
    db = tmp_path / "plait.db"
    client = Client(tmp_path, store=db)
    old = client.sessions.new()
    old.inject({"role": "user", "content": "forget me"})
    old.live.release()
    time.sleep(1.2)
    app = create_app(client, api_keys=[KEY], retain_older_than="1s", retain_every=1)
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as api:
        assert eventually(lambda: not client.exists(old.id), seconds=20)
        made = api.post("/sessions", json={}).json()["id"]
        api.post(f"/sessions/{made}/messages", json={"role": "user", "content": "hello"})
        assert api.get(f"/sessions/{made}").status_code == 200
        assert eventually(lambda: not client.exists(made), seconds=20)  # idle once 1 s passes
    client.close()
    log.removeHandler(caplog.handler)
    said = [r.getMessage() for r in caplog.records if r.name == "plait.server.retention"]
    assert any(m.startswith("retention removed 1 session(s) idle over 0:00:01") for m in said)


@pytest.mark.parametrize(
    ("age", "every"),
    [("banana", 60), ("-1d", 60), (0, 60), ("30d", 0), ("30d", "soon"), ("30d", True)],
)
def test_a_bad_setting_is_refused(age: object, every: object) -> None:
    with pytest.raises(InvalidArgumentError):
        Retention(age, every)
    with pytest.raises(InvalidArgumentError):
        create_app(":memory:", api_keys=[KEY], retain_older_than=age, retain_every=every)


def test_the_setting_reads_ages_and_periods() -> None:
    r = Retention("30d", "6h")
    assert (r.older_than, r.every) == (timedelta(days=30), 6 * 3600.0)
    assert Retention(timedelta(hours=1), 90).every == 90.0


def test_serve_passes_the_setting_to_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import plait.server
    import plait.server.serving

    made: dict[str, object] = {}

    def fake_app(client: object, **kwargs: object) -> str:
        made.update(kwargs)
        return "app"

    monkeypatch.setattr(plait.server, "create_app", fake_app)
    monkeypatch.setattr(plait.server.serving, "serve_app", lambda app, **kw: None)
    result = CliRunner().invoke(
        cli,
        ["--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path), "serve",
         "--api-key", KEY, "--retain-older-than", "30d", "--retain-every", "15m"],
    )
    assert result.exit_code == 0, result.output
    assert made["retain_older_than"] == timedelta(days=30) and made["retain_every"] == 900.0
    assert "sessions idle for longer than 30d are removed every 15m" in result.stderr


def test_serve_refuses_a_bad_age_before_it_starts(tmp_path: Path) -> None:
    """As a script starts it: no terminal, no key minted, nothing made, a one-line error."""
    done = subprocess.run(
        [sys.executable, "-m", "plait", "--store", str(tmp_path / "s.db"), "serve",
         "--retain-older-than", "banana"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "Error: --retain-older-than is a duration such as 30d, 12h, 90m, 45s or 2w, "
        "not 'banana'"
    )
    assert not (tmp_path / "s.db").exists()
    every = subprocess.run(
        [sys.executable, "-m", "plait", "--store", str(tmp_path / "s.db"), "serve",
         "--retain-older-than", "30d", "--retain-every", "-5"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )
    assert every.returncode == 1
    assert every.stderr.strip().splitlines()[-1] == (
        "Error: --retain-every is at least 1 second, not '-5'"
    )
