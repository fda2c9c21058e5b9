"""How ``plait serve`` holds connections: a deadline for every request head, and a cap.

uvicorn closes a keep-alive connection that stays idle after a response, but
not one that never sends a request, nor one that sends its head a byte at a
time: each holds a file descriptor for as long as the peer likes, and a few
hundred exhaust a server's descriptors. :class:`GuardedH11Protocol` gives
every request head ``header_timeout`` seconds from its first byte (or from the
connection's start) and closes the connection when it is not complete by
then, and refuses connections past ``max_connections`` at once, so a flood
costs descriptors only for as long as the deadline.

:func:`serve_config` builds the uvicorn configuration with it.
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from plait.server import DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "GuardedH11Protocol",
    "default_max_connections",
    "serve_config",
]


def default_max_connections() -> int:
    """Half the process's file-descriptor limit: the rest stays for the store, logs and tools."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(8, soft // 2)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline and a connection cap.

    A subclass made by :func:`serve_config` sets the two class attributes.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    """Seconds from a request head's first byte (or the connection's start) to its end."""
    max_connections: int = 1024
    """Open connections past which a new one is closed at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Take the connection, or close it at once past the cap; start the head's clock."""
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.close()
            return
        self._watch_head()

    def data_received(self, data: bytes) -> None:
        """Feed the bytes to h11; the head's clock runs until the head is complete."""
        super().data_received(data)
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the head's clock with the connection."""
        self._stop_clock()
        super().connection_lost(exc)

    def _watch_head(self) -> None:
        if self.transport.is_closing():
            self._stop_clock()
        elif self.conn.their_state is h11.IDLE:  # waiting for (the rest of) a request head
            if self._head_deadline is None:  # from its first byte: trickling does not reset it
                self._head_deadline = self.loop.call_later(self.header_timeout, self._too_slow)
        else:
            self._stop_clock()

    def _stop_clock(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def on_response_complete(self) -> None:
        """After a response the keep-alive timer watches the idle connection, not this one."""
        self._stop_clock()
        super().on_response_complete()

    def _too_slow(self) -> None:
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def serve_config(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    idle_timeout: int = DEFAULT_IDLE_TIMEOUT,
    max_connections: int | None = None,
    log_level: str = "info",
    **options: Any,
) -> uvicorn.Config:
    """The uvicorn configuration ``plait serve`` runs ``app`` with.

    Args:
        app: the ASGI application (:func:`plait.server.create_app`).
        host: the address to listen on.
        port: the port.
        header_timeout: seconds a connection has to send each complete request head.
        idle_timeout: seconds an idle keep-alive connection is kept.
        max_connections: open connections past which new ones are closed at
            once (None: :func:`default_max_connections`). The listen backlog is
            half of it: the event loop accepts up to a backlog of connections
            at a time before any is closed, so together they stay within the
            descriptors a server has.
        log_level: uvicorn's log level.
        **options: anything else :class:`uvicorn.Config` takes.
    """
    limit = max_connections if max_connections is not None else default_max_connections()
    protocol = type(
        "PlaitH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout": float(header_timeout), "max_connections": int(limit)},
    )
    options.setdefault("backlog", max(16, limit // 2))
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        timeout_keep_alive=idle_timeout,
        log_level=log_level,
        **options,
    )
