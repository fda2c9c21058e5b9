"""What one server holds, and the request dependencies every route uses.

The state: the client, its live clients and bearer sessions, the event hub, the
runs in progress. The dependencies: the authenticated caller, and the writer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Final, Literal, TypeAlias, TypeVar

import httpx
from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from plait.auth import Authenticated, DurableSessions, authenticate
from plait.client import Client
from plait.errors import NotControllerError, SessionBusyError, SessionNotFoundError
from plait.live import LiveClient, LiveClients
from plait.providers import Provider
from plait.records import JSONValue
from plait.run import Run
from plait.server.errors import ApiError, ClientNotOwnedError
from plait.server.fleet import Fleet
from plait.server.presence import DEFAULT_GRACE, Presence
from plait.server.sse import Hub
from plait.session import Session
from plait.tools import Tool

__all__ = [
    "APPROVAL_DEFAULTS",
    "CALLER_KEY",
    "GONE",
    "OWNER_KEY",
    "WRITE_SCOPE",
    "ApprovalDefault",
    "Caller",
    "PendingApproval",
    "ProviderSource",
    "ServerState",
    "Writer",
    "caller",
    "server_state",
    "writer",
]

WRITE_SCOPE = "write"
"""The scope a durable bearer session needs to change anything (when it names scopes)."""

CALLER_KEY: Final = "plait.caller"
"""Where the request's scope state keeps the caller the guard authenticated."""

OWNER_KEY: Final = "principal"
"""The key of a live client's metadata that names the principal that attached it (D102)."""
GONE: Final = "gone"
"""The ``reason`` of a release made because no event stream showed the client any more."""

ApprovalDefault: TypeAlias = Literal["allow", "deny"]
"""What a tool call gets when no controller is attached to answer it."""
APPROVAL_DEFAULTS: Final = ("allow", "deny")

ProviderSource: TypeAlias = "Provider | str | Callable[[], Provider] | None"
"""A provider, a model spec, a factory called once per run, or None (the session's own)."""

_log = logging.getLogger("plait.server")

_T = TypeVar("_T")


@dataclass(eq=False)
class PendingApproval:
    """A tool call of a run waiting for the controller's answer (D104)."""

    session_id: str
    call_id: str
    run_id: str
    tool: str
    arguments: dict[str, JSONValue]
    controller_id: str
    """The controller the request was routed to (any later controller may answer)."""
    request_id: str
    """The ``request_id`` of the ``live_session_permission_route`` event."""
    requested_at: datetime
    timeout: float
    future: asyncio.Future[tuple[bool, str, str | None]]
    """Resolved with ``(approve, reason, client_id)`` once the decision is recorded."""
    route_seq: int = -1
    """The transcript position of the route event (a decision counts only after it)."""


@dataclass(eq=False)
class ServerState:
    """Everything one application instance shares between requests."""

    client: Client
    api_keys: Mapping[str, str]
    provider: Any
    tools: tuple[Tool, ...]
    live: LiveClients
    bearers: DurableSessions
    hub: Hub
    ping_interval: float
    owns_client: bool
    approval_timeout: float = 60.0
    """Seconds a tool call waits for the controller's answer before it is denied."""
    approval_default: ApprovalDefault = "deny"
    """What a tool call gets when no controller is attached (``deny``: nobody asked)."""
    follows: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    """The task following each run this server started or took over, by run id; the run
    itself is on the client's board (``client.host.runs``), the fleet's in the store's registry."""
    approvals: dict[tuple[str, str], PendingApproval] = field(default_factory=dict)
    """Tool calls waiting for an answer, by ``(session_id, call_id)``."""
    presence_grace: float = DEFAULT_GRACE
    """Seconds a live client named on event streams may have none open before it is released."""
    presence: Presence = field(init=False)
    """The live clients' open event streams (see :mod:`plait.server.presence`)."""
    fleet: Fleet = field(init=False)
    """This replica's place among the servers on the store (see :mod:`plait.server.fleet`)."""
    handed_over: set[str] = field(default_factory=set)
    """The runs this replica stopped to hand them to another as it stopped (by run id)."""
    all_workspaces: bool = False
    """Whether the server's scope is every workspace of the store (lists, ``latest``)."""
    drain_grace: float = 10.0
    """Seconds a stopping replica lets its runs finish before it hands them over."""

    _peers: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    _counting: set[asyncio.Task[None]] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self.presence = Presence(self.presence_grace, self._release_gone, self._count_streams)
        self.fleet = Fleet(self.client.store)

    def _count_streams(self, session_id: str, client_id: str, count: int) -> None:
        """Tell the fleet how many streams naming the client are open here (in the background)."""
        if not self.fleet.enabled:
            return
        fleet = self.fleet

        async def write() -> None:
            try:
                await self.call(lambda: fleet.streams(session_id, client_id, count))
            except Exception:  # presence elsewhere is a courtesy: a failure keeps the old count
                _log.exception("could not record the streams of live client %s", client_id)

        task = asyncio.get_running_loop().create_task(write())
        self._counting.add(task)
        task.add_done_callback(self._counting.discard)

    def peers(self) -> httpx.AsyncClient:
        """The HTTP client that forwards requests to other replicas (made on first use)."""
        if self._peers is None:
            self._peers = httpx.AsyncClient(timeout=30.0)
        return self._peers

    async def close_peers(self) -> None:
        """Close the connections to other replicas."""
        if self._peers is not None:
            await self._peers.aclose()
            self._peers = None

    async def _release_gone(self, session_id: str, client_id: str, principal: str) -> None:
        """Release a live client no stream shows any more, if it is still that principal's."""

        def release() -> bool:
            try:
                session = self.session(session_id)
            except SessionNotFoundError:
                return False
            found = self.live_client(session, client_id)
            if found is None or found.metadata.get(OWNER_KEY) != principal:
                return False  # released meanwhile, or attached again by someone else
            if self.fleet.present_elsewhere(session_id, client_id):
                return False  # its stream moved to another replica: it is still there
            try:
                self.live.release_client(session, client_id, reason=GONE)
            finally:
                self.client.host.release_idle()  # no request's answer lets go of this write's lock
            return True

        if await self.call(release):
            await self.hub.refresh(session_id)

    async def call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn``, which calls the store, on the client's store worker, off the loop (D202).

        Raises:
            asyncio.CancelledError: the request was cancelled; raised once ``fn`` ended.
        """
        return await self.client.host.store_calls.run(fn)

    async def authenticate(self, bearer: str | None) -> Authenticated | None:
        """Who ``bearer`` stands for: a static key, checked here, else a durable session.

        Only a durable session is a store call (made on the store worker).
        """
        found = authenticate(bearer, static_keys=self.api_keys)
        if found is not None or bearer is None:
            return found
        return await self.call(
            lambda: authenticate(bearer, static_keys=self.api_keys, sessions=self.bearers)
        )

    def provider_for_run(self) -> Provider | str | None:
        """The provider a new run uses (a factory is called once per run)."""
        source = self.provider
        if source is None or isinstance(source, str):
            return source
        if callable(source) and not hasattr(source, "stream"):
            made: Provider = source()
            return made
        chosen: Provider = source
        return chosen

    def session(self, session_id: str) -> Session:
        """A handle on a stored session.

        Raises:
            SessionNotFoundError: unknown, unreadable, or not a session id.
        """
        return self.client.host.get(session_id)

    def check_driver(
        self, session: Session, client_id: str | None, who: Authenticated | None = None
    ) -> None:
        """Refuse a write that drives the conversation from anyone but the controller.

        With a controller attached, only it (named by ``client_id``, and spoken
        for by the principal that attached it) may run, steer, resume or inject;
        with none, any credential that may write may.

        Raises:
            NotControllerError: someone else asked (HTTP 403).
            ClientNotOwnedError: ``client_id`` belongs to another principal (HTTP 403).
        """
        if client_id is not None and who is not None:
            self.check_owner(session, client_id, who)
        controller = self.live.controller_id(session)
        if controller is not None and client_id != controller:
            raise NotControllerError(session.id, client_id or "(none)", controller)

    def run_here(self, session_id: str) -> Run | None:
        """The run this server drives on the session now, or None."""
        run = self.client.host.runs.get(session_id)
        return run if run is not None and run.id in self.follows else None

    def check_no_run(self, session: Session) -> None:
        """Refuse a message appended beside a run in progress on the session.

        Raises:
            SessionBusyError: a run is in progress (HTTP 409 ``session_busy``).
        """
        if session.live.running:
            raise SessionBusyError(session.id)

    def live_client(self, session: Session, client_id: str) -> LiveClient | None:
        """The attached client with this id, or None."""
        return next((c for c in self.live.live_clients(session) if c.client_id == client_id), None)

    def check_owner(self, session: Session, client_id: str, who: Authenticated) -> None:
        """Refuse to let a principal speak for a live client another principal attached.

        A client id that is not attached passes (the verb itself answers: an
        attach creates it, a heartbeat is 404). A client attached without an
        owner (by a process using ``plait.live`` directly) belongs to no HTTP caller.

        Raises:
            ClientNotOwnedError: the client is attached, and not by ``who`` (HTTP 403).
        """
        found = self.live_client(session, client_id)
        if found is None:
            return
        owner = found.metadata.get(OWNER_KEY)
        if owner != who.principal:
            raise ClientNotOwnedError(
                session.id, client_id, owner if isinstance(owner, str) else None
            )

    @staticmethod
    def owned_metadata(metadata: Mapping[str, Any] | None, who: Authenticated) -> dict[str, Any]:
        """A client's metadata with its owner (``principal``) set to the caller's principal."""
        out = dict(metadata or {})
        out[OWNER_KEY] = who.principal
        return out


def server_state(request: Request) -> ServerState:
    """The state of the application serving ``request``."""
    state: ServerState = request.app.state.plait
    return state


bearer_scheme = HTTPBearer(
    auto_error=False,
    description="A static API key (PLAIT_API_KEYS, --api-key) or a durable bearer session.",
)


async def caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> Authenticated:
    """Authenticate the request: static API keys first, then durable bearer sessions.

    Raises:
        ApiError: 401 ``unauthorized`` for a missing, unknown or expired credential.
    """
    checked = request.scope.get("state", {}).get(CALLER_KEY)
    if isinstance(checked, Authenticated):  # the guard checked it before the body was read
        return checked
    state = server_state(request)
    token = credentials.credentials if credentials is not None else None
    found = await state.authenticate(f"Bearer {token}") if token else None
    if found is None:
        raise ApiError(401, "unauthorized", "a valid bearer credential is required")
    return found


Caller = Annotated[Authenticated, Depends(caller)]
"""The authenticated caller of a route (every API route takes it)."""


async def writer(who: Caller) -> Authenticated:
    """The caller of a route that changes something: it must be allowed to write.

    A durable bearer session that names scopes needs :data:`WRITE_SCOPE`; a
    static key and a session without scopes may write.

    Raises:
        ApiError: 403 ``read_only_credential``.
    """
    if who.method == "durable_session" and who.scopes and WRITE_SCOPE not in who.scopes:
        raise ApiError(
            403,
            "read_only_credential",
            f"this credential may only read (its scopes lack {WRITE_SCOPE!r})",
        )
    return who


Writer = Annotated[Authenticated, Depends(writer)]
"""The authenticated caller of a route that writes."""


def parse_api_keys(value: str | Iterable[str] | Mapping[str, str] | None) -> dict[str, str]:
    """Return ``{key: principal}`` from a mapping, keys, or ``PLAIT_API_KEYS`` text.

    Text is comma- or whitespace-separated; an entry ``principal:key`` names
    its principal, a bare key is principal ``api-key``.
    """
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    entries: Sequence[str] = (
        value.replace(",", " ").split() if isinstance(value, str) else [str(v) for v in value]
    )
    out: dict[str, str] = {}
    for entry in entries:
        principal, sep, key = entry.partition(":")
        if sep and principal and key:
            out[key] = principal
        elif entry:
            out[entry] = "api-key"
    return out
