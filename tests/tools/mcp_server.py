"""A small MCP server for the tests, written with the SDK's own server (FastMCP's successor).

``python mcp_server.py`` serves it over stdio; ``python mcp_server.py --http PORT``
over streamable HTTP on 127.0.0.1.
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("plait-test")


class Sum(BaseModel):
    total: int
    terms: list[int]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def total(terms: list[int]) -> Sum:
    """Sum a list of integers (a structured result)."""
    return Sum(total=sum(terms), terms=terms)


@server.tool()
def fail(reason: str) -> str:
    """Always fails, saying why."""
    raise ValueError(f"failed on purpose: {reason}")


@server.tool()
def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "slept"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The server's process id (which process answered)."""
    return os.getpid()


@server.tool()
def die() -> str:
    """End the server's process in the middle of the call."""
    print("dying now", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
