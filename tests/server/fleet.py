"""A fleet on loopback: `plait serve` replicas on one PostgreSQL schema, a model they share.

:class:`FakeModel` is an OpenAI-compatible chat-completions server in a thread of the
test. For a request whose last message is the user's ``job NAME [hold] [slow]`` it
streams a few words (``hold``: then waits until the test releases ``NAME``; ``slow``:
a word every 0.2 s), then calls the ``shell`` tool with the command the test gave for
``NAME``; for a request whose last message is a tool result it answers ``finished``.
Every request is kept, so a test counts model calls.

:class:`Replica` is ``plait serve`` in its own process, reachable by its peers at its
own loopback address, killed with any signal. :class:`Observer` reads a replica's
event stream of one session in a thread, keeping every event in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

KEY = "fleet-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fleet",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "fleet-1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


@dataclass
class FakeModel:
    """The model every replica calls (see the module docstring)."""

    commands: dict[str, str] = field(default_factory=dict)
    """The shell command each job's tool call runs."""
    gates: dict[str, threading.Event] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    streaming: dict[str, threading.Event] = field(default_factory=dict)
    """Set once a job's first request has started streaming."""
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    def started(self, name: str) -> threading.Event:
        return self.streaming.setdefault(name, threading.Event())

    def calls_for(self, name: str) -> int:
        """How many requests the model got whose last user message is ``job NAME``."""
        return sum(1 for r in self.requests if r.get("job") == name)

    def start(self) -> None:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # the model-limits questions: nothing said
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                if not self.path.endswith("/chat/completions"):
                    # Ollama's limits question (POST /api/show): nothing said. Answered as a
                    # chat, it kept each replica's first run waiting for the probe's timeout.
                    self.do_GET()
                    return
                messages = body.get("messages", [])
                last = messages[-1] if messages else {}
                users = [m for m in messages if m.get("role") == "user"]
                words = str(users[-1].get("content", "")).split() if users else []
                job = words[1] if len(words) > 1 and words[0] == "job" else ""
                model.requests.append({"job": job, "last_role": last.get("role")})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                # A broken pipe: the replica died or stopped its run, and nothing listens.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._answer(job, words, last)

            def _answer(self, job: str, words: list[str], last: dict[str, Any]) -> None:
                if last.get("role") == "tool":
                    for piece in ("fini", "shed ", job):
                        self._send(_chunk({"content": piece}))
                    self._send(_chunk({}, "stop") + b"data: [DONE]\n\n")
                    return
                model.started(job).set()
                for piece in ("work", "ing ", "on ", job):
                    self._send(_chunk({"content": piece}))
                    if "slow" in words:
                        time.sleep(0.2)
                if "hold" in words:
                    gate = model.gate(job)
                    while not gate.wait(0.1):
                        self._send(b": waiting\n\n")  # a dead reader shows as a broken pipe
                call = {
                    "index": 0,
                    "id": f"call-{job}",
                    "type": "function",
                    "function": {
                        "name": "shell",
                        "arguments": json.dumps({"command": model.commands.get(job, "true")}),
                    },
                }
                self._send(_chunk({"tool_calls": [call]}))
                self._send(_chunk({}, "tool_calls") + b"data: [DONE]\n\n")

            def _send(self, data: bytes) -> None:
                self.wfile.write(data)
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        for gate in self.gates.values():
            gate.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass
class Replica:
    """``plait serve`` in a process of its own, on the fleet's store."""

    name: str
    store: str
    model_url: str
    workdir: Path
    lease: float = 3.0
    drain_grace: float = 1.0
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.workdir / f"{self.name}.log", "wb")  # noqa: SIM115 - the process's
        env = {
            **os.environ,
            "OPENAI_BASE_URL": self.model_url,
            "OPENAI_API_KEY": "sk-fleet",
            "PLAIT_HOME": str(self.workdir / f"home-{self.name}"),
        }
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "plait.cli", "--store", self.store, "serve"),
                *("--host", "127.0.0.1", "--port", str(self.port), "--replica-id", self.name),
                *("--api-key", f"tester:{KEY}", "--model", "openai:fleet-1", "--builtin-tools"),
                *("--approval-default", "allow", "--lease", str(self.lease)),
                *("--drain-grace", str(self.drain_grace), "--log-level", "warning"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.workdir,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.log()
            try:
                if httpx.get(f"{self.url}/sessions", headers=AUTH, timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"replica {self.name} did not start:\n{self.log()}")

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=AUTH, timeout=60)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def log(self) -> str:
        path = self.workdir / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(20)


@dataclass
class Event:
    id: str
    event: str
    data: dict[str, Any]


class Observer:
    """A replica's event stream of one session, read in a thread into :attr:`events`."""

    def __init__(self, replica: Replica, session_id: str) -> None:
        self.replica = replica
        self.events: list[Event] = []
        self.ended = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._read, args=(session_id,), daemon=True)
        self._open = threading.Event()
        self._thread.start()
        assert self._open.wait(30), f"no stream from {replica.name}"

    def _read(self, session_id: str) -> None:
        url = f"{self.replica.url}/sessions/{session_id}/events"
        try:
            with httpx.stream("GET", url, headers=AUTH, timeout=httpx.Timeout(60, read=None)) as r:
                self._open.set()
                kind, ident, data = "", "", ""
                for line in r.iter_lines():
                    if self._stop:
                        return
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("id: "):
                        ident = line[4:]
                    elif line.startswith("data: "):
                        data = line[6:]
                    elif line == "" and kind:
                        self.events.append(Event(ident, kind, json.loads(data)))
                        kind, ident, data = "", "", ""
        except httpx.HTTPError:
            pass
        finally:
            self._open.set()
            self.ended.set()

    def named(self, name: str) -> list[Event]:
        return [e for e in self.events if e.event == name]

    def wait_for(self, check: Callable[[list[Event]], bool], timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check(self.events):
                return
            time.sleep(0.05)
        shown = [(e.event, e.id) for e in self.events]
        raise AssertionError(f"observer on {self.replica.name} never saw it; it saw {shown}")

    def close(self) -> None:
        self._stop = True


def run_ended(run_id: str) -> Callable[[list[Event]], bool]:
    return lambda events: any(
        e.event == "run_end" and e.data.get("run_id") == run_id for e in events
    )


@dataclass
class Fleet:
    """The replicas of one test, started together and stopped whatever happens."""

    replicas: list[Replica]

    def __iter__(self) -> Iterator[Replica]:
        return iter(self.replicas)

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()

    def wait_peers(self, timeout: float = 60.0) -> None:
        """Wait until every replica lists every other as alive (so it forwards to them)."""
        names = {r.name for r in self.replicas}
        for replica in self.replicas:
            with replica.api() as api:

                def sees_all(api: httpx.Client = api) -> bool:
                    rows = api.get("/replicas").json()["replicas"]
                    return {r["replica_id"] for r in rows if r["alive"]} >= names

                wait_until(sees_all, timeout, f"{replica.name} seeing the fleet")


def wait_until(check: Callable[[], bool], timeout: float = 60.0, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} never happened")


__all__ = [
    "AUTH",
    "Event",
    "FakeModel",
    "Fleet",
    "Observer",
    "Replica",
    "free_port",
    "run_ended",
    "signal",
    "wait_until",
]
