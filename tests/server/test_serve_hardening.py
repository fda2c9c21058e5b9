"""``plait serve`` as an operator runs it: where keys come from and go, what approvals
default to, and connections that never finish a request."""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from plait.cli import cli

KEY = "operator-key-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            assert proc.poll() is None, "plait serve exited"
            time.sleep(0.05)
    raise AssertionError("plait serve never listened")


def _serve_args(tmp_path: Path, port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "plait.cli", "--store", str(tmp_path / "s.db"),
        "--workspace", str(tmp_path), "serve", "--port", str(port), "--log-level", "warning",
        *extra,
    ]


@contextmanager
def _served(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None, nofile: int | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = _free_port()

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    log = (tmp_path / "serve.out").open("wb")  # a file: a full pipe would stop the server
    proc = subprocess.Popen(
        _serve_args(tmp_path, port, *extra),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        preexec_fn=limit,
        start_new_session=True,  # no controlling terminal, like a service
    )
    try:
        _wait_listening(proc, port)
        yield proc, port
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def _fake_serve(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the command's body without a server: record what it would serve."""
    import plait.server
    import plait.server.serving

    made: dict[str, Any] = {}

    def fake_app(client: object, **kwargs: object) -> str:
        made.update(kwargs)
        return "app"

    def fake_serve(app: object, **kwargs: object) -> None:
        made["serve"] = kwargs

    monkeypatch.setattr(plait.server, "create_app", fake_app)
    monkeypatch.setattr(plait.server.serving, "serve_app", fake_serve)
    monkeypatch.delenv("PLAIT_API_KEYS", raising=False)
    return made


def _invoke(tmp_path: Path, *args: str) -> Any:
    base = ["--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path), "serve"]
    return CliRunner().invoke(cli, [*base, *args])


# -- keys --------------------------------------------------------------------------------


def test_a_key_on_the_command_line_works_and_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _fake_serve(monkeypatch)
    result = _invoke(tmp_path, "--api-key", f"me:{KEY}")
    assert result.exit_code == 0, result.output
    assert "process list" in result.output and "--api-key-file" in result.output
    assert made["api_keys"] == [f"me:{KEY}"]


def test_keys_from_a_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _fake_serve(monkeypatch)
    keys = tmp_path / "keys"
    keys.write_text(f"me:{KEY}\nother-key-0123456789abcdef\n")
    keys.chmod(0o600)
    monkeypatch.setenv("PLAIT_API_KEYS", "env:env-key-0123456789abcdef")
    result = _invoke(tmp_path, "--api-key-file", str(keys))
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output and KEY not in result.output
    assert made["api_keys"] == [
        f"me:{KEY}", "other-key-0123456789abcdef", "env:env-key-0123456789abcdef"
    ]
    keys.chmod(0o644)
    result = _invoke(tmp_path, "--api-key-file", str(keys))
    assert result.exit_code == 0 and "can be read by other users" in result.output
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for bad in (empty, tmp_path / "missing"):
        result = _invoke(tmp_path, "--api-key-file", str(bad))
        assert result.exit_code == 2 and "--api-key-file" in result.output


def test_without_a_terminal_no_key_is_minted_into_a_log(tmp_path: Path) -> None:
    """As a service (no terminal, output to a log), a minted key would only land in the
    log: the command refuses to start and says how to give one."""
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_API_KEYS"}
    proc = subprocess.run(
        _serve_args(tmp_path, _free_port()),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=env,
        start_new_session=True,
        timeout=60,
    )
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "PLAIT_API_KEYS" in err and "--api-key-file" in err
    assert not re.search(r"[A-Za-z0-9_-]{43}", proc.stdout.decode() + err)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_minted_key_is_shown_on_the_terminal_once_and_not_in_the_log(tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    tmux = ["tmux", "-L", f"plait-test-{uuid.uuid4().hex[:8]}"]  # a tmux server of its own
    status = tmp_path / "status"
    command = " ".join(_serve_args(tmp_path, port)) + f" 2>{log} >{log}.out; echo $? >{status}"
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "200", "-y", "50", f"env -u PLAIT_API_KEYS {command}"],
        check=True,
    )

    def pane() -> str:
        shown = subprocess.run([*tmux, "capture-pane", "-p", "-J"], capture_output=True, text=True)
        return shown.stdout

    try:
        key = None
        for _ in range(600):
            found = re.search(r"bearer token\): (\S+)", pane())
            if found:
                key = found.group(1)
                break
            time.sleep(0.05)
        assert key is not None, f"no key on the terminal: {pane()!r}"
        assert f"web page, signed in: http://127.0.0.1:{port}/#key={key}" in pane()
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert http.get("/sessions").status_code == 401
            auth = {"Authorization": f"Bearer {key}"}
            assert http.get("/auth/whoami", headers=auth).json()["principal"] == "api-key"
        subprocess.run([*tmux, "send-keys", "C-c"], check=True)
        for _ in range(600):
            if subprocess.run([*tmux, "has-session"], capture_output=True).returncode != 0:
                break  # the command ended, and its window with it
            time.sleep(0.05)
        logged = log.read_text() + Path(f"{log}.out").read_text()
        assert "plait serving" in logged and "denied" in logged
        assert key not in logged
        # Ctrl-C is how a server in the foreground is stopped: an orderly end, not an abort.
        assert "Aborted" not in logged
        assert status.read_text().strip() == "0"
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


# -- approvals ---------------------------------------------------------------------------


def test_approvals_default_to_deny_and_the_start_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _fake_serve(monkeypatch)
    result = _invoke(tmp_path, "--api-key-file", str(_key_file(tmp_path)), "--builtin-tools")
    assert result.exit_code == 0, result.output
    assert made["approval_default"] == "deny"
    assert "no live controller to approve it is denied" in result.output
    result = _invoke(
        tmp_path, "--api-key-file", str(_key_file(tmp_path)), "--approval-default", "allow"
    )
    assert made["approval_default"] == "allow"
    assert "allowed unasked" in result.output


def _key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key"
    path.write_text(KEY)
    path.chmod(0o600)
    return path


def test_the_server_passes_its_limits_to_uvicorn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _fake_serve(monkeypatch)
    result = _invoke(
        tmp_path, "--api-key-file", str(_key_file(tmp_path)), "--max-body", "1000",
        "--header-timeout", "2.5", "--idle-timeout", "3", "--max-connections", "40",
    )
    assert result.exit_code == 0, result.output
    limits = made["serve"]
    assert made["max_body"] == 1000
    assert limits["header_timeout"] == 2.5 and limits["idle_timeout"] == 3
    assert limits["max_connections"] == 40
    assert _invoke(tmp_path, "--max-body", "0").exit_code == 2
    from plait.server.protocol import default_max_connections, serve_config

    config = serve_config("app", header_timeout=2.5, idle_timeout=3, max_connections=40)
    assert config.timeout_keep_alive == 3 and config.backlog == 20
    assert config.http.header_timeout == 2.5 and config.http.max_connections == 40
    assert serve_config("app").http.max_connections == default_max_connections()


# -- connections -------------------------------------------------------------------------


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed the connection (read until EOF; a reset counts)."""
    sock.settimeout(30)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


@pytest.mark.slow
def test_idle_connections_cannot_exhaust_the_descriptors(tmp_path: Path) -> None:
    """300 connections that never send a request, against a server allowed 256 files:
    past its cap they are closed at once, the rest when their head's deadline passes,
    and a real request is served afterwards."""
    key_file = _key_file(tmp_path)
    with _served(
        tmp_path, "--api-key-file", str(key_file), "--header-timeout", "1", nofile=256
    ) as (_, port):
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(300)]
        half_head = socket.create_connection(("127.0.0.1", port), timeout=10)
        half_head.sendall(b"GET /sessions HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        try:
            open_still = [i for i, s in enumerate(idle) if not _closed_by_server(s)]
            assert open_still == []
            assert _closed_by_server(half_head)
        finally:
            for s in (*idle, half_head):
                s.close()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            r = http.get("/sessions", headers={"Authorization": f"Bearer {KEY}"})
            assert r.status_code == 200


def test_a_request_that_completes_its_head_is_not_cut_off(tmp_path: Path) -> None:
    """The head's deadline ends with the head: an event stream that outlasts it stays open."""
    with _served(
        tmp_path, "--api-key-file", str(_key_file(tmp_path)), "--header-timeout", "0.5"
    ) as (_, port):
        auth = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            sid = http.post("/sessions", json={}, headers=auth).json()["id"]
            with http.stream("GET", f"/sessions/{sid}/events", headers=auth) as events:
                lines = events.iter_lines()
                assert next(lines).startswith("retry")
                time.sleep(1.5)  # three deadlines' worth, with the stream open
                message = {"messages": [{"role": "user", "content": "still here"}]}
                assert http.post(
                    f"/sessions/{sid}/messages", json=message, headers=auth
                ).status_code == 200
                for line in lines:
                    if "still here" in line:
                        break
