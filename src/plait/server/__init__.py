"""The HTTP service: plait's sessions over HTTP, runs as Server-Sent Events, a web page.

``plait serve`` runs it; :func:`create_app` builds the ASGI application for any
server (uvicorn, hypercorn, a test client). It needs the ``[server]`` extra
(FastAPI, uvicorn); without it, :func:`create_app` raises
:class:`~plait.errors.MissingDependencyError` with the install command.

The pieces: ``app.py`` builds the application (auth, the error shape, the
OpenAPI document), ``routes/`` holds the endpoints grouped by noun
(``sessions``, ``runs``, ``live``, ``events``, ``auth``), ``sse.py`` fans a
session's events out to its observers, ``web.py`` and ``static/`` are the web
page. Why it is built this way: decisions D80-D89 in docs/decisions/.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Final

from plait.errors import MissingDependencyError

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = [
    "DEFAULT_HEADER_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_LEASE",
    "DEFAULT_MAX_BODY",
    "REQUIRED_MODULES",
    "create_app",
    "require_server_extra",
]

DEFAULT_LEASE: Final = 6.0
"""Seconds a server may go without a heartbeat before another on its store takes its runs over."""
DEFAULT_MAX_BODY: Final = 8 * 1024 * 1024
"""The largest request body a server accepts by default, in bytes (8 MiB)."""
DEFAULT_HEADER_TIMEOUT: Final = 10.0
"""Seconds a connection has to send a complete request head."""
DEFAULT_IDLE_TIMEOUT: Final = 5
"""Seconds an idle keep-alive connection is kept after a response (uvicorn's own default)."""

REQUIRED_MODULES = ("fastapi", "starlette", "uvicorn")
"""What the ``[server]`` extra brings; each is checked before the service is imported."""


def require_server_extra() -> None:
    """Check that the ``[server]`` extra is installed.

    Raises:
        MissingDependencyError: a module of the extra is missing; the message
            has the install command.
    """
    for name in REQUIRED_MODULES:
        if importlib.util.find_spec(name) is None:
            raise MissingDependencyError("the HTTP service (plait serve)", "server")


def create_app(client_or_store: Any = None, **options: Any) -> FastAPI:
    """Build the ASGI application; see :func:`plait.server.app.create_app` for the options.

    Raises:
        MissingDependencyError: the ``[server]`` extra is not installed.
    """
    require_server_extra()
    from plait.server.app import create_app as build

    return build(client_or_store, **options)
