"""Running the application under uvicorn so that it stops at once, streams and all.

uvicorn stops in order: it closes its listening sockets, waits for every open
response to finish, then runs the application's shutdown. An event stream is a
response that never finishes by itself, so with a web page open uvicorn waited
its whole graceful timeout and then cancelled the stream's task mid-write
(logging a ``CancelledError`` traceback). :class:`StoppingServer` ends every
event stream first (each observer gets the end of its stream, as when its
session is deleted; a page reconnects with ``Last-Event-ID`` and loses
nothing), so there is nothing left to wait for.

The server's store calls run on a worker thread while the event loop computes (D202).
Each time a store call comes back from the network, the worker waits for the GIL; by
default a busy thread gives it up only after 5 ms, and a store call makes several round
trips, so the calls of every session queue behind those waits. ``plait serve`` shortens
the interval to :data:`SWITCH_INTERVAL` (measured with ``make loadtest`` on PostgreSQL:
about 1.8 times the runs per second).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, Final

import uvicorn

from plait.server.protocol import serve_config

__all__ = ["GRACE_SECONDS", "SWITCH_INTERVAL", "StoppingServer", "serve_app"]

SWITCH_INTERVAL: Final = 0.0005
"""Seconds a thread holding the GIL keeps it while another waits (Python's default: 0.005)."""

GRACE_SECONDS: Final = 1
"""How long a request still being answered (not a stream) may take once stopping begins."""


class StoppingServer(uvicorn.Server):
    """A uvicorn server that calls ``end_streams`` as its shutdown begins.

    Args:
        config: uvicorn's configuration.
        end_streams: ends every open event stream (``Hub.end_streams``).
    """

    def __init__(self, config: uvicorn.Config, end_streams: Callable[[], None]) -> None:
        super().__init__(config)
        self._end_streams = end_streams

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End the event streams, then shut down as uvicorn does."""
        self._end_streams()
        await super().shutdown(sockets)


def serve_app(app: Any, *, host: str, port: int, log_level: str, **limits: Any) -> None:
    """Serve ``app`` (made by :func:`plait.server.create_app`) until SIGINT or SIGTERM.

    ``limits`` are :func:`plait.server.protocol.serve_config`'s connection limits
    (``header_timeout``, ``idle_timeout``, ``max_connections``).
    """
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
    config = serve_config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=GRACE_SECONDS,
        **limits,
    )
    # Once stopped, uvicorn raises the signal that stopped it again, under the handler it
    # found. For Ctrl-C that is a KeyboardInterrupt after an orderly stop, which click would
    # report as "Aborted!" with exit status 1; for SIGTERM the default handler would end the
    # process there, before the caller closes its store (its queued announcements, its
    # locks). Both return here instead, and the caller's clean-up runs.
    previous = _on_sigterm(_raise_stopped)
    try:
        with contextlib.suppress(KeyboardInterrupt, _Stopped):
            StoppingServer(config, app.state.plait.hub.end_streams).run()
    finally:
        _on_sigterm(previous)


class _Stopped(Exception):
    """The SIGTERM uvicorn raises again once it has stopped."""


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped


def _on_sigterm(handler: Any) -> Any:
    """Set SIGTERM's handler where signals can be set (the main thread); the previous one."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler if handler is not None else signal.SIG_DFL)
