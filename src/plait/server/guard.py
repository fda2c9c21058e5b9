"""The gate every request passes before the application reads its body.

An ASGI middleware, outermost: for a route that needs a credential it
authenticates the ``Authorization`` header first, so a request without one is
401 before a byte of its body is read (never a 422 about a body nobody was
allowed to send); then it reads the body up to the server's limit, and a body
past it is 413 without reading the rest. What is read is handed to the
application as it came, so FastAPI parses it as usual.

Which routes need a credential is read from the routes themselves (those
that depend on :func:`plait.server.state.caller`), so a new route is guarded
by declaring its caller, not by a list kept here. A path no route serves
needs one too: without it a caller cannot tell which paths exist.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plait.server.errors import error_body
from plait.server.state import CALLER_KEY, ServerState, caller

__all__ = ["RequestGuard"]


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for sub in dependant.dependencies:
        yield from _dependants(sub)


def _needs_caller(route: APIRoute) -> bool:
    return any(d.call is caller for d in _dependants(route.dependant))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None


def _bearer(scope: Scope) -> str | None:
    """The ``Authorization`` header if it names the Bearer scheme (a bare token is not one)."""
    value = _header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    return value if scheme.lower() == "bearer" and token.strip() else None


class RequestGuard:
    """Authenticate before the body is read; refuse a body over ``max_body`` bytes.

    Args:
        app: the application to guard (the FastAPI app's middleware stack).
        fastapi_app: the FastAPI app; its own routes and ``routers`` say which
            requests need a credential.
        routers: the routers the app includes.
        state: the server's state (its keys and bearer sessions).
        max_body: the largest body accepted, in bytes.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        fastapi_app: FastAPI,
        routers: Sequence[APIRouter],
        state: ServerState,
        max_body: int,
    ) -> None:
        self._app = app
        self._fastapi = fastapi_app
        self._routers = tuple(routers)
        self._state = state
        self._max_body = max_body
        self._routes: list[tuple[BaseRoute, bool]] | None = None

    def _table(self) -> list[tuple[BaseRoute, bool]]:
        """Every route and whether it needs a credential (built on the first request)."""
        if self._routes is None:
            routes = [r for router in self._routers for r in router.routes]
            routes += self._fastapi.router.routes
            self._routes = [
                (r, isinstance(r, APIRoute) and _needs_caller(r))
                for r in routes
                if isinstance(r, APIRoute | Route | Mount)
            ]
        return self._routes

    def _guarded(self, scope: Scope) -> bool:
        """Whether the request goes to a route that needs a credential (or to none)."""
        for route, needs in self._table():
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return needs
        # No route answers it: a caller without a credential learns nothing about which exist.
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection scope."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if self._guarded(scope):
            found = await self._state.authenticate(_bearer(scope))
            if found is None:
                why = "a valid bearer credential is required"
                await _refuse(scope, receive, send, 401, "unauthorized", why)
                return
            scope.setdefault("state", {})[CALLER_KEY] = found
        declared = _header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self._max_body:
            await _too_large(scope, receive, send, self._max_body)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                messages.append(message)
                break
            size += len(message.get("body", b""))
            if size > self._max_body:
                await _too_large(scope, receive, send, self._max_body)
                return
            messages.append(message)
            if not message.get("more_body", False):
                break
        replay = iter(messages)

        async def replayed() -> Message:
            # The body as it came, then the connection's own messages (a disconnect).
            return next(replay, None) or await receive()

        await self._app(scope, replayed, send)


async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    await _refuse(
        scope,
        receive,
        send,
        413,
        "payload_too_large",
        f"the request body is larger than this server accepts ({limit} bytes)",
    )


async def _refuse(
    scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
) -> None:
    headers: dict[str, Any] = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    # The body was not read: the connection cannot carry another request after this one.
    headers["Connection"] = "close"
    response = JSONResponse(error_body(code, message), status_code=status, headers=headers)
    await response(scope, receive, send)
