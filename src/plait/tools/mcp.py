"""Tools from Model Context Protocol servers, through the official ``mcp`` SDK (``[mcp]``).

An :class:`MCPServer` names a server: a command line (run as a subprocess,
spoken to over stdio) or an ``http(s)://`` URL (streamable HTTP). Given to a
run as a tool, it is a :class:`~plait.tools.Toolset`: the run connects when it
starts, offers the server's tools beside the others (named
``<server>__<tool>``, their schemas passed through as the server gives them),
forwards each call through the same approval path as any tool, and closes the
connection when it ends (D197). Whoever keeps ``async with server:`` open
lends that connection to the runs in between instead.

Nothing the server does ends a run: an error result, an exception, a call that
passes its timeout and a server that dies mid-call are each a failed tool
result the model reads. Only a server that cannot be started or listed fails
the run, with :class:`~plait.errors.ToolServerError`, before the model is asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shlex
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from plait.errors import InvalidArgumentError, MissingDependencyError, ToolError, ToolServerError
from plait.tools.base import Tool, ToolOutcome, Toolset

if TYPE_CHECKING:
    import mcp

__all__ = ["INSTALL", "MCP_SERVERS", "MCPServer", "servers_from_settings"]

INSTALL: Final = "pip install 'plait[mcp]'"
"""The command that installs what MCP servers need."""

MCP_SERVERS: Final = "mcp_servers"
"""The session settings key naming the MCP servers every run of the session offers."""

_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_MAX_NAME = 64  # the longest tool name OpenAI and Anthropic accept
_CONNECTION_CLOSED = -32000  # JSON-RPC's code for it, as the SDK raises it
_STDERR_TAIL = 300  # characters of a dead server's standard error quoted in the result


def _require_mcp() -> Any:
    try:
        import mcp
    except ImportError as exc:
        raise MissingDependencyError("tools from MCP servers", "mcp") from exc
    return mcp


def _slug(text: str) -> str:
    return _NAME_CHARS.sub("_", text).strip("_") or "mcp"


def _why(exc: BaseException) -> str:
    """One line for an exception, looking inside the groups anyio raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MCPServer(Toolset):
    """One MCP server whose tools a run offers: a command line (stdio) or a URL (HTTP).

    Args:
        target: ``http://`` or ``https://`` URL of a streamable-HTTP server, or a
            command line (a string split like a shell would, or the argv list).
        name: what its tools are prefixed with (``name__tool``); default: the
            name the server gives itself.
        prefix: False offers the server's tool names as they are.
        env: variables added to the server's environment (a stdio server otherwise
            gets only the SDK's safe defaults: no API key is passed on).
        cwd: the folder a stdio server starts in.
        headers: HTTP headers sent to a URL server (an ``Authorization`` header ...).
        timeout: seconds one tool call may take before it is a failed result.
        connect_timeout: seconds starting and listing the server may take.

    Raises:
        InvalidArgumentError: an empty command, a bad URL, or a timeout that is not positive.
    """

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        name: str | None = None,
        prefix: bool = True,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 30.0,
    ) -> None:
        self.url: str | None = None
        """The server's URL (a streamable-HTTP server), else None."""
        self.argv: tuple[str, ...] = ()
        """The command line (a stdio server), else empty."""
        if isinstance(target, str) and target.strip().lower().startswith(("http://", "https://")):
            self.url = target.strip()
            parts = urlsplit(self.url)
            if not parts.hostname:
                raise InvalidArgumentError(f"not a server URL: {target!r}")
            shown = parts.hostname
        else:
            try:
                argv = shlex.split(target) if isinstance(target, str) else [str(a) for a in target]
            except ValueError as exc:
                raise InvalidArgumentError(f"not a command line: {target!r}: {exc}") from exc
            if not argv or not argv[0]:
                raise InvalidArgumentError("an MCP server needs a command line or a URL")
            self.argv = tuple(argv)
            shown = Path(argv[-1]).stem if len(argv) > 1 else Path(argv[0]).name
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise InvalidArgumentError(f"an MCP server's name must be a non-empty string: {name!r}")
        if cwd is not None and not isinstance(cwd, str | Path):
            raise InvalidArgumentError(f"an MCP server's cwd must be a folder path: {cwd!r}")
        for label, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise InvalidArgumentError(f"{label} must be a positive number of seconds")
        self.name = _slug(name) if name else _slug(shown)
        self._named = name is not None
        self.prefix = prefix
        self.env = dict(env or {})
        self.cwd = cwd
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self._lock = threading.Lock()
        self._live: dict[asyncio.AbstractEventLoop, tuple[_Connection, int]] = {}

    def __repr__(self) -> str:
        where = self.url or shlex.join(self.argv)
        return f"MCPServer({where!r}, name={self.name!r})"

    @classmethod
    def from_json(cls, spec: Mapping[str, Any] | str) -> MCPServer:
        """A server from its settings form: a command line or URL, or an object.

        The object has ``command`` (a string or a list) or ``url``, and optionally
        ``name``, ``env``, ``cwd``, ``headers``, ``timeout``, ``connect_timeout``.

        Raises:
            InvalidArgumentError: a shape that names no server, or an unknown key.
        """
        if isinstance(spec, str):
            return cls(spec)
        if not isinstance(spec, Mapping):
            raise InvalidArgumentError(
                f"an MCP server is a command line, a URL or an object: {spec!r}"
            )
        known = {"command", "url", "name", "env", "cwd", "headers", "timeout", "connect_timeout"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise InvalidArgumentError(f"unknown MCP server keys: {', '.join(unknown)}")
        target = spec.get("url", spec.get("command"))
        if not isinstance(target, str | list) or ("url" in spec) == ("command" in spec):
            raise InvalidArgumentError("an MCP server object needs one of 'command' or 'url'")
        if isinstance(target, list) and not all(isinstance(a, str) for a in target):
            raise InvalidArgumentError("an MCP server's 'command' list must hold strings")
        options: dict[str, Any] = {k: spec[k] for k in known - {"command", "url"} if k in spec}
        for key in ("env", "headers"):
            value = options.get(key)
            if value is not None and not (
                isinstance(value, Mapping)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
            ):
                raise InvalidArgumentError(f"MCP server {key!r} must map names to strings")
        return cls(target, **options)

    # -- connections --------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        """Connect now and keep the connection until the block ends (runs inside borrow it)."""
        await self._acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._release()

    @contextlib.asynccontextmanager
    async def _opened(self) -> AsyncIterator[Sequence[Tool]]:
        connection = await self._acquire()
        try:
            yield connection.tools
        finally:
            await self._release()

    def open(self) -> contextlib.AbstractAsyncContextManager[Sequence[Tool]]:
        """Connect (or borrow this event loop's open connection) for a block; give the tools.

        Raises:
            ToolServerError: the server could not be started, reached or listed.
            MissingDependencyError: the mcp package is not installed.
        """
        return self._opened()

    async def list_tools(self) -> list[Tool]:
        """Connect, list the server's tools as plait tools, and close again (unless open)."""
        async with self.open() as tools:
            return list(tools)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The tools of the connection open in this event loop.

        Raises:
            ToolServerError: no connection is open here.
        """
        return self._connection().tools

    def _connection(self) -> _Connection:
        with self._lock:
            found = self._live.get(asyncio.get_running_loop())
        if found is None:
            raise ToolServerError(f"MCP server {self.name} is not connected here")
        return found[0]

    async def _acquire(self) -> _Connection:
        _require_mcp()
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._live.get(loop)
            if found is not None and found[0].alive:  # a dead one is replaced below
                self._live[loop] = (found[0], found[1] + 1)
                return found[0]
        connection = _Connection(self)
        await connection.start()
        spare: _Connection | None
        with self._lock:
            current = self._live.get(loop)
            if current is not None and current[0].alive:
                # Another task of this loop connected meanwhile: use its connection.
                self._live[loop] = (current[0], current[1] + 1)
                chosen, spare = current[0], connection
            else:
                # New, or in place of one whose server died: its users' calls reach this one.
                users = current[1] if current is not None else 0
                self._live[loop] = (connection, users + 1)
                chosen, spare = connection, current[0] if current is not None else None
        if spare is not None:
            await spare.close()
        return chosen

    async def _release(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            connection, users = self._live[loop]
            if users > 1:
                self._live[loop] = (connection, users - 1)
                return
            del self._live[loop]
        await connection.close()

    def label(self, connection: _Connection) -> str:
        """The name the connection's tools are prefixed with (given, else the server's own)."""
        if self._named or connection.server_name is None:
            return self.name
        return _slug(connection.server_name)

    def _tool_name(self, connection: _Connection, name: str) -> str:
        if not self.prefix:
            return name
        return f"{self.label(connection)}__{_slug(name)}"[:_MAX_NAME]

    def _as_tool(self, connection: _Connection, listed: mcp.Tool) -> Tool:
        remote = listed.name

        async def forward(**arguments: Any) -> ToolOutcome:
            return await self._connection().call(remote, arguments)

        hints = listed.annotations
        schema = dict(listed.input_schema) or {"type": "object", "properties": {}}
        return Tool(
            self._tool_name(connection, remote),
            listed.description or listed.title or remote,
            schema,
            forward,
            read_only=bool(hints is not None and hints.read_only_hint),
            # The server checks its own arguments (its error is a result the model reads).
            check=dict,
        )


class _Connection:
    """One open client session, held by a task of its own.

    The SDK's task group cancels the task that entered it when the transport
    breaks; entering it in a task of its own keeps that from reaching the run.
    """

    def __init__(self, server: MCPServer) -> None:
        self._server = server
        self.tools: tuple[Tool, ...] = ()
        self.server_name: str | None = None
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ended: str | None = None
        self._stderr: IO[str] | None = None

    @property
    def alive(self) -> bool:
        """Whether calls can still pass (the server has not ended, nor been closed)."""
        task = self._task
        return task is not None and not task.done() and not self._stop.is_set()

    @property
    def label(self) -> str:
        """The server's name as its tools are prefixed."""
        return self._server.label(self)

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._hold())
        try:
            async with asyncio.timeout(self._server.connect_timeout):
                await asyncio.shield(self._ready)
        except TimeoutError:
            tail = self._tail()
            await self.close(cancel=True)
            raise ToolServerError(
                f"MCP server {self.label} did not start within "
                f"{self._server.connect_timeout:g} s{tail}"
            ) from None
        except BaseException:  # it failed to start (ToolServerError), or the run was cancelled
            await self.close(cancel=True)
            raise

    def _transport(self) -> tuple[Any, contextlib.AsyncExitStack]:
        mcp = _require_mcp()
        stack = contextlib.AsyncExitStack()
        server = self._server
        if server.url is None:
            # Kept open for the connection's life (the server writes to it): closed by the stack.
            self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            stack.callback(self._stderr.close)
            params = mcp.StdioServerParameters(
                command=server.argv[0],
                args=list(server.argv[1:]),
                env=server.env or None,
                cwd=server.cwd,
            )
            from mcp.client.stdio import stdio_client

            return stdio_client(params, errlog=self._stderr), stack
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(server.url), stack

    async def _hold(self) -> None:
        mcp = _require_mcp()
        transport, stack = self._transport()
        server = self._server
        try:
            async with stack:
                if server.url is not None and server.headers:
                    import httpx2

                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(headers=server.headers)
                    )
                    from mcp.client.streamable_http import streamable_http_client

                    transport = streamable_http_client(server.url, http_client=http)
                client = await stack.enter_async_context(
                    mcp.Client(transport, read_timeout_seconds=server.connect_timeout)
                )
                self._client = client
                info = client.server_info
                self.server_name = info.name if info is not None and info.name else None
                listed: list[Any] = []
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                self.tools = tuple(server._as_tool(self, t) for t in listed)
                self._ready.set_result(None)
                await self._stop.wait()
        except asyncio.CancelledError:
            self._ended = "it was closed"
            if not self._ready.done():
                self._ready.cancel()
            raise
        except Exception as exc:  # the server or its transport failed: say so, end quietly
            self._ended = _why(exc)
            if not self._ready.done():
                self._ready.set_exception(
                    ToolServerError(f"MCP server {self.label} failed: {_why(exc)}{self._tail()}")
                )
        finally:
            self._client = None
            if not self._ended:
                self._ended = "it was closed"

    def _tail(self) -> str:
        if self._stderr is None or self._stderr.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0)
            lines = [ln.strip() for ln in self._stderr.read().splitlines() if ln.strip()]
            if lines:
                return f"; its last output: {' | '.join(lines[-2:])[-_STDERR_TAIL:]}"
        return ""

    def _gone(self, when: str) -> ToolError:
        return ToolError(f"MCP server {self.label} {when} ({self._ended}){self._tail()}")

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Forward one call; every way it can fail is a failed outcome."""
        task = self._task
        client = self._client
        if task is None or task.done() or client is None or self._stop.is_set():
            raise self._gone("is not running")
        timeout = self._server.timeout
        call = asyncio.ensure_future(
            client.call_tool(name, arguments, read_timeout_seconds=timeout)
        )
        try:
            done, _ = await asyncio.wait(
                {call, task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            call.cancel()
            raise
        if call not in done:
            call.cancel()
            await asyncio.wait({call})  # let the SDK forget the request before going on
            if task.done():
                raise self._gone(f"ended during the call to {name}")
            raise ToolError(f"MCP server {self.label}: {name} did not answer within {timeout:g} s")
        try:
            result = call.result()
        except Exception as exc:  # the SDK's error or the transport's: the model reads it
            closed = getattr(exc, "code", None) == _CONNECTION_CLOSED
            if closed and not self._ended:
                self._ended = "the connection closed"
                self._stop.set()  # nothing more can pass: let the holder end and clean up
            if closed or task.done():
                raise self._gone(f"ended during the call to {name}") from exc
            raise ToolError(f"MCP server {self.label}: {name} failed: {_why(exc)}") from exc
        return ToolOutcome(not result.is_error, _content(result))

    async def close(self, *, cancel: bool = False) -> None:
        """End the connection (``cancel``: without waiting for a start still under way)."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            if cancel:
                task.cancel()
            await asyncio.wait({task})  # the holder catches its own errors; a cancel of ours passes
        if self._stderr is not None and not self._stderr.closed:
            self._stderr.close()


def _content(result: Any) -> str:
    """A call's result as the model reads it: its text, else its structured content as JSON."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {block.mime_type}, {len(block.data)} base64 characters]")
        elif kind == "resource_link":
            parts.append(f"[resource: {block.uri}]")
        elif kind == "resource":
            inner = block.resource
            text = getattr(inner, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {inner.uri}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def servers_from_settings(settings: Mapping[str, Any]) -> list[MCPServer]:
    """The MCP servers a session's settings name under ``mcp_servers`` (none: empty).

    Raises:
        InvalidArgumentError: the setting is not a list of server specs.
    """
    raw = settings.get(MCP_SERVERS)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidArgumentError(f"the {MCP_SERVERS!r} setting must be a list of servers")
    return [MCPServer.from_json(spec) for spec in raw]
