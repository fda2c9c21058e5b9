"""A local HTTP server that replays recorded API streams, for the SDK adapters' tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Canned:
    """One response: a status, headers and a body (SSE text or JSON)."""

    body: str
    status: int = 200
    content_type: str = "text/event-stream"


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class ReplayServer:
    """Answers each request with the next canned response and records what it got."""

    url: str = ""
    responses: list[Canned] = field(default_factory=list)
    requests: list[Seen] = field(default_factory=list)
    routes: dict[tuple[str, str], Canned] = field(default_factory=dict)

    def queue(self, body: str, status: int = 200, content_type: str = "text/event-stream") -> None:
        self.responses.append(Canned(body, status, content_type))

    def route(self, method: str, path: str, answer: Any, status: int = 200) -> None:
        """Answer every ``method path`` request with ``answer`` as JSON (before the queue)."""
        self.routes[(method, path)] = Canned(json.dumps(answer), status, "application/json")


def sse(*events: tuple[str | None, Any]) -> str:
    """Render server-sent events: (event name or None, data) -> 'event: x\\ndata: {...}\\n\\n'."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out)


@pytest.fixture
def replay_server() -> Iterator[ReplayServer]:
    """A server on 127.0.0.1 and a random port, for one test."""
    state = ReplayServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.do_POST("GET")

        def do_POST(self, method: str = "POST") -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            state.requests.append(
                Seen(
                    method,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
            )
            missing = Canned(
                json.dumps({"error": {"message": "no canned response"}}), 500, "application/json"
            )
            if (method, self.path) in state.routes:
                canned = state.routes[(method, self.path)]
            elif method == "GET":
                canned = Canned(json.dumps({"error": "not found"}), 404, "application/json")
            elif state.responses:
                canned = state.responses.pop(0)
            else:
                canned = missing
            data = canned.body.encode()
            self.send_response(canned.status)
            self.send_header("content-type", canned.content_type)
            self.send_header("content-length", str(len(data)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
