"""SIGTERM during a streamed ``plait run`` / ``plait chat`` keeps the streamed text, as Ctrl-C does.

The command runs in its own process against a local server that streams the first pieces of
a reply and then holds the stream open, so the signal lands mid-reply. Afterwards the
transcript is read from the same store: the cut-off reply is there, marked interrupted, and
the session can be resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from plait import Client

pytest.importorskip("openai")

PIECES = ["The lighthouse ", "keeper woke "]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-held",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "held-1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


@pytest.fixture
def held_server() -> Iterator[tuple[str, threading.Event]]:
    """Streams two pieces of a reply, then holds the stream until released (or 60 s)."""
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # the model-limits questions: this server says nothing
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path != "/v1/chat/completions":
                self.do_GET()
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            try:
                for piece in PIECES:
                    self.wfile.write(_chunk({"content": piece}))
                    self.wfile.flush()
                release.wait(60)
                self.wfile.write(_chunk({}, "stop") + b"data: [DONE]\n\n")
            except OSError:
                pass  # the client went away: what the test is about
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", release
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _env(url: str, home: Path) -> dict[str, str]:
    env = {**os.environ, "OPENAI_BASE_URL": url, "PLAIT_HOME": str(home),
           "PLAIT_MODEL": "openai:held"}
    env.pop("OPENAI_API_KEY", None)
    return env


def _read_until(stream: Any, wanted: str) -> str:
    seen = ""
    while wanted not in seen:
        char = stream.read(1)
        assert char, f"the command ended before printing {wanted!r}: {seen!r}"
        seen += char
    return seen


def _kept(home: Path, monkeypatch: pytest.MonkeyPatch, workspace: Path) -> Any:
    monkeypatch.setenv("PLAIT_HOME", str(home))
    client = Client(workspace)
    (info,) = client.sessions.list()
    return client, client.sessions.open(info.id)


def test_sigterm_during_plait_run_keeps_the_streamed_text(
    held_server: tuple[str, threading.Event], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = held_server
    proc = subprocess.Popen(
        [sys.executable, "-m", "plait", "run", "--json", "--no-tools", "Tell me a story."],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(url, tmp_path), cwd=tmp_path,
    )
    assert proc.stdout is not None
    try:
        _read_until(proc.stdout, PIECES[1])  # both pieces reached the command
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    last = json.loads(out.strip().splitlines()[-1])
    assert last["type"] == "error" and last["error"]["code"] == "RunInterruptedError"
    client, session = _kept(tmp_path, monkeypatch, tmp_path)
    with client:
        reply = session.transcript.records[-1]
        assert reply.kind == "assistant" and reply.text == "".join(PIECES)
        assert reply.meta["finish_reason"] == "interrupted"
        resumable = session.resumable()
        assert resumable is not None and resumable.kind == "retry_response"


def test_an_interrupted_plait_run_names_the_command_that_picks_it_up(
    held_server: tuple[str, threading.Event], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = held_server
    proc = subprocess.Popen(
        [sys.executable, "-m", "plait", "run", "--no-tools", "Tell me a story."],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**_env(url, tmp_path), "COLUMNS": "200"}, cwd=tmp_path,
    )
    assert proc.stdout is not None
    try:
        _read_until(proc.stdout, PIECES[1])
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    client, session = _kept(tmp_path, monkeypatch, tmp_path)
    with client:
        # Not chat's /retry: the command a script runs next.
        assert f"interrupted: plait run --resume --session {session.id} picks the request up" in (
            out
        )
        assert "/retry" not in out


def test_sigterm_during_plait_chat_keeps_the_text_and_ends_the_chat(
    held_server: tuple[str, threading.Event], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = held_server
    proc = subprocess.Popen(
        [sys.executable, "-m", "plait", "chat", "--no-tools"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**_env(url, tmp_path), "COLUMNS": "200"}, cwd=tmp_path,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("Tell me a story.\n")
        proc.stdin.flush()  # stdin stays open: only the signal ends the chat
        _read_until(proc.stdout, PIECES[1].strip())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    client, session = _kept(tmp_path, monkeypatch, tmp_path)
    with client:
        reply = session.transcript.records[-1]
        assert reply.kind == "assistant" and reply.text == "".join(PIECES)
        assert reply.meta["finish_reason"] == "interrupted"
