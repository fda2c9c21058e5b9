"""One ``plait serve``-like replica in a process of its own, for the bus tests.

``python -m tests.server.bus_replica URL SCHEMA WORKSPACE GATE``: serves the app on
a free loopback port (printed on the first line of stdout) on a PostgreSQL store,
with a model that streams ``"first piece "`` and then waits until the file ``GATE``
exists before it streams the rest of its reply.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn

from plait import Client
from plait.providers import Finish, TextDelta
from plait.server import create_app
from plait.store.postgres import PostgresStore

KEY = "test-key-0123456789"


class FileGated:
    """A provider whose reply waits for a file (the test, in another process, makes it)."""

    name = model = "file-gated"

    def __init__(self, gate: Path) -> None:
        self.gate = gate

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield TextDelta("first piece ")
        while not self.gate.exists():
            await asyncio.sleep(0.01)
        yield TextDelta("and the rest")
        yield Finish("stop")


def main() -> None:
    url, schema, workspace, gate = sys.argv[1:5]
    store = PostgresStore(url, schema=schema)
    client = Client(Path(workspace), store=store)
    app = create_app(
        client, api_keys={KEY: "tester"}, provider=lambda: FileGated(Path(gate)),
        ping_interval=3600,
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        client.close()
        store.close()


if __name__ == "__main__":
    main()
