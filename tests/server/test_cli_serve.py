"""``plait serve``: its help, and the install command when the [server] extra is missing."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from plait.cli import cli
from plait.errors import MissingDependencyError
from plait.server import create_app


def test_serve_help() -> None:
    result = CliRunner().invoke(cli, ["serve", "-h"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--api-key", "--model", "--builtin-tools",
                   "--approval-default", "--approval-timeout", "--advertise-url", "--lease",
                   "--drain-grace", "--replica-id"):
        assert option in result.output


def test_serve_passes_the_approval_policy_to_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import plait.server
    import plait.server.serving

    made: dict[str, object] = {}

    def fake_app(client: object, **kwargs: object) -> str:
        made.update(kwargs)
        return "app"

    monkeypatch.setattr(plait.server, "create_app", fake_app)
    monkeypatch.setattr(
        plait.server.serving, "serve_app", lambda app, **kw: made.update(app=app, port=kw["port"])
    )
    result = CliRunner().invoke(
        cli,
        ["--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path), "serve",
         "--api-key", "k-0123456789abcdef", "--port", "9", "--approval-default", "deny",
         "--approval-timeout", "2.5"],
    )
    assert result.exit_code == 0, result.output
    assert made["approval_default"] == "deny" and made["approval_timeout"] == 2.5
    assert made["app"] == "app" and made["port"] == 9
    bad = CliRunner().invoke(cli, ["serve", "--approval-timeout", "0"])
    assert bad.exit_code == 2
    # Listening on every address, it says its peers cannot reach it, until told where.
    base = ["--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path), "serve",
            "--api-key", "k-0123456789abcdef", "--host", "0.0.0.0"]
    wild = CliRunner().invoke(cli, base)
    assert wild.exit_code == 0, wild.output
    assert made["replica_url"] is None
    assert "cannot forward writes to this one" in wild.output
    assert "--advertise-url" in wild.output
    told = CliRunner().invoke(cli, [*base, "--advertise-url", "http://10.0.0.11:8765"])
    assert told.exit_code == 0, told.output
    assert made["replica_url"] == "http://10.0.0.11:8765"
    assert "cannot forward" not in told.output
    CliRunner().invoke(cli, [*base[:-1], "127.0.0.1"])
    assert made["replica_url"] == "http://127.0.0.1:8765"


def test_serve_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def missing(name: str, *args: object) -> object:
        return None if name == "fastapi" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    result = CliRunner().invoke(cli, ["--store", ":memory:", "serve"])
    assert result.exit_code == 1
    assert "pip install 'plait[server]'" in result.output
    with pytest.raises(MissingDependencyError) as caught:
        create_app(":memory:")
    assert caught.value.extra == "server"


def test_plait_serve_serves(tmp_path: Path) -> None:
    """The real command, in its own process: the API with the key given, the page, the doc."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "serve-test-key-0123456789"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "plait.cli",
            "--store",
            str(tmp_path / "s.db"),
            "--workspace",
            str(tmp_path),
            "serve",
            "--port",
            str(port),
            "--api-key",
            f"me:{key}",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.05)
        with httpx.Client(base_url=base, timeout=10) as http:
            assert http.get("/sessions").status_code == 401
            me = http.get("/auth/whoami", headers={"Authorization": f"Bearer {key}"}).json()
            assert me == {
                "principal": "me",
                "method": "static_key",
                "scopes": [],
                "expires_at": None,
            }
            assert http.get("/openapi.json").json()["info"]["title"] == "plait"
            assert "plait" in http.get("/").text
    finally:
        proc.terminate()
        proc.wait(20)


def _serve_in(cwd: Path, store: Path, *workspace: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "plait.cli", "--store", str(store), *workspace, "serve"),
            *(
                "--port",
                str(port),
                "--api-key",
                "me:scope-key-0123456789",
                "--log-level",
                "warning",
            ),
        ],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port}"


def test_a_servers_scope_is_its_configuration_not_its_folder(tmp_path: Path) -> None:
    """Started in a folder with no sessions, it serves every workspace (or the one named)."""
    from plait import Client
    from plait.store import SQLiteStore

    store = tmp_path / "s.db"
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        with Client(tmp_path / name, store=SQLiteStore(store)) as client:
            client.sessions.create([{"role": "user", "content": f"in {name}"}], title=name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    auth = {"Authorization": "Bearer scope-key-0123456789"}
    for workspace, expected in (
        ((), {"one", "two"}),
        (("--workspace", str(tmp_path / "one")), {"one"}),
    ):
        proc, base = _serve_in(elsewhere, store, *workspace)
        try:
            with httpx.Client(base_url=base, timeout=10, headers=auth) as http:
                listed = {s["title"] for s in http.get("/sessions").json()["sessions"]}
                assert listed == expected
                latest = http.get("/sessions/latest").json()["title"]
                assert latest == "two" if expected == {"one", "two"} else latest == "one"
        finally:
            proc.terminate()
            proc.wait(20)
