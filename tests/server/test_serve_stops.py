"""``plait serve`` in its own process: the sign-in URL it prints, and a prompt, clean stop
while a web page's event stream is open (no waiting out a grace period, no traceback)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from plait import Client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_stops_with_an_open_stream_and_logs_no_traceback(
    tmp_path: Path, stop: signal.Signals
) -> None:
    db = tmp_path / "s.db"
    with Client(tmp_path, store=db) as client:
        sid = client.sessions.create([{"role": "user", "content": "hi"}]).id
    port = _free_port()
    key = "stop-test-key-0123456789abcdef"
    # A key of its own: a minted one is shown only on a terminal, which this process lacks.
    proc = subprocess.Popen(
        [sys.executable, "-m", "plait", "--store", str(db), "--workspace", str(tmp_path),
         "serve", "--port", str(port), "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PLAIT_API_KEYS": key},
    )
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        for line in proc.stderr:  # the sign-in URL comes first, without the key
            lines.append(line)
            if "web page" in line:
                break
        found = re.search(r"(http://127\.0\.0\.1:\d+/) \(sign in", lines[-1])
        assert found, lines
        base = found.group(1)
        assert not any(key in line for line in lines)
        for _ in range(600):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                assert proc.poll() is None
                time.sleep(0.05)
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=auth, timeout=30) as http, http.stream(
            "GET", f"/sessions/{sid}/events"
        ) as stream:
            assert stream.status_code == 200
            chunks = stream.iter_bytes()
            assert next(chunks).startswith(b"retry:")
            proc.send_signal(stop)
            started = time.monotonic()
            rest = b"".join(chunks)  # the server ends the stream: a clean end, not a reset
            proc.wait(30)
            took = time.monotonic() - started
        log = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert rest == b"" or rest.startswith(b":")
    assert "Traceback" not in log and "CancelledError" not in log, log
    # uvicorn says these when it has to wait for an open response, or cut it off.
    assert "Waiting for connections to close" not in log, log
    assert "timeout graceful shutdown exceeded" not in log, log
    assert "Finished server process" in log
    # An orderly stop: the process ends by itself, having closed its store (SQLite removes
    # the write-ahead log as its last connection closes), for SIGTERM as for Ctrl-C.
    assert proc.returncode == 0, (proc.returncode, log)
    assert not (tmp_path / "s.db-wal").exists()
    print(f"plait serve stopped {took:.2f} s after {stop.name} with a stream open")
