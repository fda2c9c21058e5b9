"""The application: :func:`create_app` builds it from a client (or a store).

Every API route requires a bearer credential (static API keys first, then
durable bearer sessions, :func:`plait.auth.authenticate`); the OpenAPI
document (``/openapi.json``, and its page ``/docs``), the web page
and its static files carry no data and need none. Every error is one JSON
shape (:mod:`plait.server.errors`).

Handlers are ``async`` and run on the server's one event loop, with the runs
they start and the event hub. Their store calls (a round trip each on
PostgreSQL) run on the client's store worker, one thread that makes them one at a
time in the order they came, so the session handles are never touched from two
threads and the loop serves others meanwhile (decisions D202).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from plait.auth import DurableSessions
from plait.client import Client
from plait.errors import InvalidArgumentError, PlaitError
from plait.live import LiveClients
from plait.providers import Provider
from plait.records import JSONValue
from plait.server import DEFAULT_LEASE, DEFAULT_MAX_BODY
from plait.server import schemas as s
from plait.server.errors import ApiError, error_body, status_and_code
from plait.server.feed import StoreFeed
from plait.server.fleet import Fleet
from plait.server.forward import Forwarded
from plait.server.guard import RequestGuard
from plait.server.letgo import ReleaseIdleLocks
from plait.server.paths import SessionIdPaths
from plait.server.presence import DEFAULT_GRACE
from plait.server.retaining import DEFAULT_RETAIN_EVERY, Retention, keep_retaining
from plait.server.routes import approvals, auth, events, fleet, live, runs, sessions
from plait.server.running import drain, keep_beating
from plait.server.sse import DEFAULT_MAX_QUEUE, Hub
from plait.server.state import APPROVAL_DEFAULTS, ApprovalDefault, ServerState, parse_api_keys
from plait.server.web import mount_web
from plait.store import Store
from plait.tools import Tool

__all__ = ["API_KEYS_ENV", "create_app"]

API_KEYS_ENV: Final = "PLAIT_API_KEYS"
"""Static API keys, comma- or space-separated; ``principal:key`` names a key's principal."""

_log = logging.getLogger("plait.server")

_ERRORS: Final = {
    "401": "No valid bearer credential (`unauthorized`).",
    "403": (
        "The credential or the live client may not do this (`not_controller`, "
        "`client_not_owned`, `read_only_credential`, `scope_violation`, ...)."
    ),
    "404": "No such session or client (`session_not_found`, `client_not_attached`, ...).",
    "409": "The session's state forbids it now (`session_busy`, `session_closed`, ...).",
    "413": "The request body is larger than the server accepts (`payload_too_large`).",
    "422": "The request is malformed (`invalid_request`, `invalid_argument`, ...).",
}
_RUN_ERRORS: Final = {
    "502": "The model provider or a tool server failed (`provider_error`, `tool_server_error`).",
    "503": "The provider or the store is unavailable (`missing_dependency`, `store_error`).",
}


def _version() -> str:
    try:
        return importlib.metadata.version("plait")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        return "0"


def _error_json(status: int, code: str, message: str, details: JSONValue = None) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(code, message, details), status_code=status, headers=headers)


def _validation_details(exc: RequestValidationError) -> JSONValue:
    out: list[JSONValue] = []
    for err in exc.errors():
        out.append(
            {
                "loc": [str(p) for p in err.get("loc", ())],
                "msg": str(err.get("msg", "")),
                "type": str(err.get("type", "")),
            }
        )
    return out


def _install_errors(app: FastAPI) -> None:
    async def validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _error_json(
            422, "invalid_request", "the request is malformed", _validation_details(exc)
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 400:  # a body that is not even JSON text: malformed, like any other
            return _error_json(422, "invalid_request", str(exc.detail))
        code = {
            401: "unauthorized",
            403: "forbidden",
            404: "not_found",
            405: "method_not_allowed",
        }.get(exc.status_code, "http_error")
        return _error_json(exc.status_code, code, str(exc.detail))

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return _error_json(exc.status, exc.code, exc.message, exc.details)

    async def plait_error(request: Request, exc: Exception) -> JSONResponse:
        status, code = status_and_code(exc)
        if status >= 500:
            _log.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
        return _error_json(status, code, str(exc))

    async def forwarded(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Forwarded)
        return exc.response

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return _error_json(500, "internal_error", "the server failed; see its log")

    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(Forwarded, forwarded)
    app.add_exception_handler(PlaitError, plait_error)
    app.add_exception_handler(Exception, unexpected)


def _openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document, with the one error shape on every operation."""

    def build() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        error = s.ErrorResponse.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in error.pop("$defs", {}).items():
            schemas[name] = definition
        schemas["ErrorResponse"] = error
        ref = {"$ref": "#/components/schemas/ErrorResponse"}
        for item in doc.get("paths", {}).values():
            for method, op in item.items():
                methods = {"get", "post", "put", "patch", "delete"}
                if not isinstance(op, dict) or method not in methods:
                    continue
                answers = op.setdefault("responses", {})
                extra = dict(_ERRORS)
                if "runs" in op.get("tags", ()):
                    extra.update(_RUN_ERRORS)
                for status, description in extra.items():
                    own = answers.get(status, {}).get("description")  # a route's own words
                    if own == "Validation Error":  # FastAPI's, not the route's
                        own = None
                    answers[status] = {
                        "description": own or description,
                        "content": {"application/json": {"schema": ref}},
                    }
        app.openapi_schema = doc
        return doc

    return build


def create_app(
    client_or_store: Client | Store | str | os.PathLike[str] | None = None,
    *,
    api_keys: str | Iterable[str] | Mapping[str, str] | None = None,
    provider: Provider | str | Callable[[], Provider] | None = None,
    tools: Iterable[Tool] = (),
    workspace: str | os.PathLike[str] = ".",
    ping_interval: float = 15.0,
    max_queue: int = DEFAULT_MAX_QUEUE,
    approval_timeout: float = 60.0,
    approval_default: ApprovalDefault = "deny",
    max_body: int = DEFAULT_MAX_BODY,
    presence_grace: float = DEFAULT_GRACE,
    replica_id: str | None = None,
    replica_url: str | None = None,
    lease: float = DEFAULT_LEASE,
    drain_grace: float = 10.0,
    all_workspaces: bool = False,
    retain_older_than: object = None,
    retain_every: object = DEFAULT_RETAIN_EVERY,
) -> FastAPI:
    """Build the HTTP service over a client's sessions.

    Args:
        client_or_store: a :class:`plait.Client`, or a store (a Store, a path,
            ``:memory:``; None: the default store) to open a client on.
        api_keys: static API keys (``{key: principal}``, keys, or text as in
            ``PLAIT_API_KEYS``). None reads ``PLAIT_API_KEYS``. Durable bearer
            sessions kept in the store are accepted after them.
        provider: the model runs use: a provider, a spec (``"openai:gpt-4o-mini"``),
            a factory called once per run, or None for each session's own
            (its ``model`` setting, else :func:`plait.providers.select_provider`).
        tools: the tools runs may call. None by default: a caller over HTTP
            gets no shell on the server unless the operator offers it.
        workspace: the workspace of a client opened here.
        ping_interval: seconds between keep-alive comments on an idle event
            stream (each also picks up records written by other processes).
        max_queue: events an observer may fall behind before it is cut off
            (it reconnects with ``Last-Event-ID`` and loses nothing).
        approval_timeout: seconds a run's tool call waits for the live
            controller's answer (``POST /sessions/{id}/approvals/{call_id}``)
            before it is denied.
        approval_default: what a tool call gets when no controller is
            attached: ``deny`` (the default: nobody asked, nothing runs) or
            ``allow`` (tools run unasked).
        max_body: the largest request body accepted, in bytes (8 MiB by
            default); a larger one is 413 ``payload_too_large``, unread.
        presence_grace: seconds a live client that named itself on event streams
            (``?client_id=``) may have none of them open before it is released, so
            a page that died controls no run (a reconnect within it keeps its place).
        replica_id: this server's id among the servers on its store (default: a new one).
        replica_url: where the other servers on the store reach this one, so a
            session's writes go to the server that runs it (``http://host:port``);
            None: they cannot, and a session this server runs takes writes only here.
        lease: seconds this server may go without a heartbeat in the store before
            another server on it takes its runs over.
        drain_grace: seconds a stopping server lets its runs finish before it hands
            them to another server (or, with none, leaves them for the next to start).
        all_workspaces: the server's scope is every workspace of the store (its
            list and ``latest``); else the client's workspace.
        retain_older_than: remove the sessions of the server's scope idle for longer
            than this (``30d``, a ``timedelta``, seconds), every ``retain_every``
            seconds (``client.sessions.retain``); None (the default): never.
        retain_every: seconds (or text such as ``6h``) between retention passes.

    Raises:
        InvalidArgumentError: a bad interval, queue size, timeout, default, body limit,
            lease, grace or retention.
    """
    if isinstance(ping_interval, bool) or not isinstance(ping_interval, int | float):
        raise InvalidArgumentError("ping_interval must be a number of seconds")
    if ping_interval <= 0:
        raise InvalidArgumentError("ping_interval must be positive")
    if not isinstance(max_queue, int) or max_queue < 1:
        raise InvalidArgumentError("max_queue must be a positive int")
    if (
        isinstance(approval_timeout, bool)
        or not isinstance(approval_timeout, int | float)
        or approval_timeout <= 0
    ):
        raise InvalidArgumentError("approval_timeout must be a positive number of seconds")
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise InvalidArgumentError("max_body must be a positive number of bytes")
    if (
        isinstance(presence_grace, bool)
        or not isinstance(presence_grace, int | float)
        or not 0 <= presence_grace < float("inf")
    ):
        raise InvalidArgumentError("presence_grace must be a number of seconds, 0 or more")
    if (
        isinstance(drain_grace, bool)
        or not isinstance(drain_grace, int | float)
        or not 0 <= drain_grace < float("inf")
    ):
        raise InvalidArgumentError("drain_grace must be a number of seconds, 0 or more")
    if replica_url is not None and not (
        isinstance(replica_url, str) and replica_url.startswith(("http://", "https://"))
    ):
        raise InvalidArgumentError(f"replica_url must be an http(s) URL, not {replica_url!r}")
    if approval_default not in APPROVAL_DEFAULTS:
        raise InvalidArgumentError(
            f"approval_default must be 'allow' or 'deny', not {approval_default!r}"
        )
    retention = (
        Retention(retain_older_than, retain_every) if retain_older_than is not None else None
    )
    if isinstance(client_or_store, Client):
        client, owns = client_or_store, False
    else:
        client, owns = Client(workspace, store=client_or_store), True
    # A server runs one run per session, many sessions at once (a Client alone runs one).
    client.host.exclusive_runs = False
    keys = parse_api_keys(api_keys if api_keys is not None else os.environ.get(API_KEYS_ENV))
    state = ServerState(
        client=client,
        api_keys=keys,
        provider=provider,
        tools=tuple(tools),
        live=LiveClients(client.host),
        bearers=DurableSessions(client.store),
        hub=Hub(client.host, max_queue=max_queue),
        ping_interval=float(ping_interval),
        owns_client=owns,
        approval_timeout=float(approval_timeout),
        approval_default=approval_default,
        presence_grace=float(presence_grace),
        drain_grace=float(drain_grace),
        all_workspaces=bool(all_workspaces),
    )
    state.fleet = Fleet(client.store, replica_id=replica_id, url=replica_url, lease=lease)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        feed = StoreFeed(client.store, state.hub, asyncio.get_running_loop())
        feed.start()
        # Serve once the fleet's events are heard: a client of this replica that opens
        # a stream at once would otherwise miss a run's first batches from another one.
        await asyncio.to_thread(feed.wait_listening, 5.0)
        state.fleet.restarted()  # an app started again serves again
        state.handed_over.clear()
        beating = asyncio.get_running_loop().create_task(keep_beating(state))
        retaining = (
            asyncio.get_running_loop().create_task(
                keep_retaining(client, retention, state.all_workspaces)
            )
            if retention is not None
            else None
        )
        try:
            yield
        finally:
            beating.cancel()
            if retaining is not None:
                retaining.cancel()
            await asyncio.to_thread(feed.stop)  # it waits for the feed's thread
            await drain(state)
            # Out before the process goes: `plait serve` ends by its SIGTERM again once
            # stopped, so what the store's bus still lingered on (a run_end) would be lost.
            await state.hub.announced()
            await state.close_peers()
            state.presence.close()
            state.hub.close_all()
            if state.owns_client:
                await asyncio.to_thread(client.close)

    app = FastAPI(
        title="plait",
        version=_version(),
        description=(
            "The session layer for LLM agents over HTTP: sessions, runs streamed as "
            "Server-Sent Events, live clients. Every error is "
            '`{"error": {"code", "message"}}` with a stable code.'
        ),
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        responses={},
    )
    app.state.plait = state

    _install_errors(app)
    routers = [m.router for m in (sessions, runs, approvals, events, live, auth, fleet)]
    for router in routers:
        app.include_router(router)
    mount_web(app)
    app.openapi = _openapi(app)  # type: ignore[method-assign]
    # Innermost of the three: it sees each request's answer as the routes give it.
    app.add_middleware(ReleaseIdleLocks, state=state)
    # Next to outermost: the credential is checked and the body bounded before anything reads it.
    app.add_middleware(
        RequestGuard, fastapi_app=app, routers=routers, state=state, max_body=max_body
    )
    # Outside even that: routes (and the guard's route table) match on the id as encoded,
    # so an id holding a "/" names one session.
    app.add_middleware(SessionIdPaths)
    return app
