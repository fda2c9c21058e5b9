"""Starting the test MCP server (``mcp_server.py``): its stdio command line, or over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

SERVER = Path(__file__).with_name("mcp_server.py")
STDIO = [sys.executable, str(SERVER)]
"""The command line that serves it over stdio."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_http() -> tuple[subprocess.Popen[bytes], str]:
    """Start it over streamable HTTP on a free port; the process and its URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # a guard against a server that never comes up
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the test MCP server did not start") from None
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}/mcp"
