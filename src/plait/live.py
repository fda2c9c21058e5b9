"""Live clients: observers, the one controller, takeover (seed 003).

Live attach state belongs to the session, not to a UI. A session has any number
of **observers** and at most one **controller**. Observers attach, heartbeat,
release and read; only the active controller injects a user prompt
(:meth:`LiveClients.client_inject_prompt`) or claims a permission route
(:meth:`LiveClients.route_permission`); anyone else gets
:class:`~plait.errors.NotControllerError` (HTTP 403). A second controller needs
``takeover``, which demotes the old one to observer.

The state is kept in the store (table ``live_clients``), so every process on one
database sees the same clients, and the one-controller rule holds across them
(a unique index, and on PostgreSQL an advisory lock per session; each change is
also sent on the store's ``LISTEN/NOTIFY`` channel, see ``PostgresStore.changes``).
Each verb appends the transcript event seed 003 names: ``live_session_client``
for attach, takeover, release and heartbeat, ``live_session_permission_route``
for a route, and an injected prompt is an ordinary user message whose
``meta["live_session"]["client_id"]`` names the controller.

Seed 003's ``detach(id, client_id)`` is :meth:`LiveClients.release_client` here:
``Session.detach`` is seed 000's lineage verb (decisions D3).

A process keeps an LRU cache (128 sessions by default) of the live state it has
read; an entry is used only while the session's ``stamp`` is unchanged (every
live change appends an event, so it moves the stamp), and permission checks
always read the store (decisions D67-D69).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from plait._ids import new_id
from plait._time import from_micros, to_micros
from plait.errors import (
    ClientNotAttachedError,
    InvalidArgumentError,
    NotControllerError,
    SessionClosedError,
    UnknownOptionError,
)
from plait.records import JSONValue, dumps
from plait.session import Session, SessionHost
from plait.session.host import HostOwner, host_for
from plait.store.base import LiveClientRow

__all__ = [
    "DEFAULT_CACHE_SIZE",
    "LIVE_CLIENT_EVENT",
    "PERMISSION_ROUTE_EVENT",
    "LiveClient",
    "LiveClientChange",
    "LiveClients",
    "PermissionRoute",
]

LIVE_CLIENT_EVENT: Final = "live_session_client"
"""The transcript event of attach, takeover, release (detach) and heartbeat."""
PERMISSION_ROUTE_EVENT: Final = "live_session_permission_route"
"""The transcript event of a permission route claimed by the controller."""
DEFAULT_CACHE_SIZE: Final = 128
"""Sessions whose live state one :class:`LiveClients` keeps in memory (seed 003's LRU cap)."""
MODES: Final = ("observer", "controller")
_MAX_CLIENT_ID: Final = 200

Mode = Literal["observer", "controller"]
Action = Literal["attach", "takeover", "detach", "heartbeat"]


@dataclass(frozen=True, slots=True)
class LiveClient:
    """A client attached to a session."""

    session_id: str
    client_id: str
    mode: str
    """``observer`` or ``controller``."""
    attached_at: datetime
    last_seen_at: datetime
    """Its last attach, takeover or heartbeat."""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)

    @classmethod
    def _from_row(cls, row: LiveClientRow) -> LiveClient:
        return cls(
            session_id=row.session_id,
            client_id=row.client_id,
            mode=row.mode,
            attached_at=from_micros(row.attached_at_us),
            last_seen_at=from_micros(row.last_seen_at_us),
            metadata=dict(row.metadata),
        )

    def to_dict(self) -> dict[str, JSONValue]:
        """The client as JSON values (RFC 3339 times)."""
        return {
            "session_id": self.session_id,
            "client_id": self.client_id,
            "mode": self.mode,
            "attached_at": self.attached_at.isoformat(),
            "last_seen_at": self.last_seen_at.isoformat(),
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True, slots=True)
class LiveClientChange:
    """What attach, takeover, release or heartbeat did (seed 003's result dict)."""

    action: Action
    session_id: str
    client_id: str
    mode: str | None
    """The client's mode afterwards (None once released)."""
    controller_id: str | None
    """The session's controller afterwards (seed 003's ``live_controller_id``)."""
    demoted_id: str | None = None
    """The controller a takeover demoted to observer, if any."""
    released_control: bool = False
    """Whether a release let go of control (the client was the controller)."""
    client: LiveClient | None = None
    """The client as stored afterwards (None once released)."""
    event_seq: int = -1
    """The transcript position of the ``live_session_client`` event."""
    ok: bool = True

    def to_dict(self) -> dict[str, JSONValue]:
        """The result as JSON values."""
        return {
            "ok": self.ok,
            "action": self.action,
            "session_id": self.session_id,
            "client_id": self.client_id,
            "mode": self.mode,
            "controller_id": self.controller_id,
            "demoted_id": self.demoted_id,
            "released_control": self.released_control,
            "client": self.client.to_dict() if self.client is not None else None,
            "event_seq": self.event_seq,
        }


@dataclass(frozen=True, slots=True)
class PermissionRoute:
    """A permission request whose routing the active controller claimed."""

    session_id: str
    client_id: str
    request_id: str
    """The request's ``id`` (or ``request_id``), or a new id when it had none."""
    request: Mapping[str, JSONValue]
    event_seq: int
    """The transcript position of the ``live_session_permission_route`` event."""
    ok: bool = True

    def to_dict(self) -> dict[str, JSONValue]:
        """The route as JSON values."""
        return {
            "ok": self.ok,
            "session_id": self.session_id,
            "client_id": self.client_id,
            "request_id": self.request_id,
            "request": dict(self.request),
            "event_seq": self.event_seq,
        }


def _options(
    verb: str, opts: Mapping[str, Any] | None, extra: Mapping[str, Any], allowed: tuple[str, ...]
) -> dict[str, Any]:
    if opts is not None and not isinstance(opts, Mapping):
        raise InvalidArgumentError(f"{verb}: opts must be a mapping")
    merged = {**(opts or {}), **extra}
    unknown = [str(k) for k in merged if k not in allowed]
    if unknown:
        raise UnknownOptionError(verb, unknown, list(allowed))
    return merged


def _json_object(value: object, what: str) -> dict[str, JSONValue]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{what} must be a JSON object")
    out = dict(value)
    try:
        dumps(out)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{what} must be a JSON object: {exc}") from exc
    return out


def _check_client_id(client_id: object) -> str:
    if (
        not isinstance(client_id, str)
        or not client_id.strip()
        or client_id != client_id.strip()
        or len(client_id) > _MAX_CLIENT_ID
        or not client_id.isprintable()
    ):
        raise InvalidArgumentError(
            f"a client id must be a non-blank printable string of at most {_MAX_CLIENT_ID} "
            f"characters, not {client_id!r}"
        )
    return client_id


class LiveClients:
    """Live clients of the sessions of one host (a :class:`plait.Client`).

    Args:
        host: the client (or its ``client.host``) whose sessions the clients attach
            to; ids given as strings are opened through it.
        cache_size: how many sessions' live state to keep in memory (LRU; 128
            by default, as seed 003's cap).
        clock: returns "now" (timezone-aware); tests pass a fake one.
    """

    def __init__(
        self,
        host: SessionHost | HostOwner,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not isinstance(cache_size, int) or cache_size < 1:
            raise InvalidArgumentError(f"cache_size must be a positive int, not {cache_size!r}")
        self._host = host_for(host)
        self._cap = cache_size
        self._clock = clock or (lambda: datetime.now(UTC))
        self._cache: OrderedDict[str, tuple[str | None, tuple[LiveClient, ...]]] = OrderedDict()
        self._mutex = threading.Lock()

    # -- plumbing ---------------------------------------------------------------------

    @property
    def cache_size(self) -> int:
        """The LRU cap: at most this many sessions' live state is kept in memory."""
        return self._cap

    def cached_session_ids(self) -> tuple[str, ...]:
        """The sessions whose live state is cached, least recently used first."""
        with self._mutex:
            return tuple(self._cache)

    def _session(self, session: Session | str) -> Session:
        if isinstance(session, Session):
            return session
        return self._host.get(session)

    def _now(self) -> int:
        moment = self._clock()
        if moment.tzinfo is None:
            raise InvalidArgumentError("the clock must return timezone-aware datetimes")
        return to_micros(moment)

    def _writable(self, session: Session) -> None:
        """Refuse before changing live state what the transcript event could not record."""
        session.live.refresh()
        if session.transcript.closed:
            raise SessionClosedError(session.id)
        # Take the writer lock now (the event's write would take it a moment later): so no
        # other process can take it between the live change and its event.
        session.live.acquire()

    def _forget(self, session_id: str) -> None:
        with self._mutex:
            self._cache.pop(session_id, None)

    def _state(self, session: Session, *, fresh: bool = False) -> tuple[LiveClient, ...]:
        """The session's clients: from the cache while its stamp holds, else the store."""
        store = self._host.store
        sid = session.id
        stamp = store.stamp(sid)
        if not fresh:
            with self._mutex:
                cached = self._cache.get(sid)
                if cached is not None and cached[0] == stamp:
                    self._cache.move_to_end(sid)
                    return cached[1]
        state = tuple(LiveClient._from_row(r) for r in store.live_clients(sid))
        with self._mutex:
            self._cache[sid] = (stamp, state)
            self._cache.move_to_end(sid)
            while len(self._cache) > self._cap:
                self._cache.popitem(last=False)
        return state

    @staticmethod
    def _controller(state: tuple[LiveClient, ...]) -> str | None:
        return next((c.client_id for c in state if c.mode == "controller"), None)

    def _record(
        self,
        session: Session,
        action: Action,
        client_id: str,
        data: Mapping[str, JSONValue],
    ) -> int:
        try:
            event = session.transcript.log_event(
                LIVE_CLIENT_EVENT, {"action": action, "client_id": client_id, **data}
            )
        finally:
            self._forget(session.id)
        return event.seq

    # -- reading ----------------------------------------------------------------------

    def live_clients(self, session: Session | str) -> list[LiveClient]:
        """Return the attached clients, in the order they attached (seed 003 ``live_clients``).

        Raises:
            SessionNotFoundError: an unknown id.
        """
        return list(self._state(self._session(session)))

    def controller_id(self, session: Session | str) -> str | None:
        """Return the active controller's client id, or None (``live_controller_id``)."""
        return self._controller(self._state(self._session(session)))

    def snapshot_fields(self, session: Session | str) -> dict[str, JSONValue]:
        """Seed 003's snapshot additions: ``{live_clients, live_controller_id}``."""
        state = self._state(self._session(session))
        return {
            "live_clients": [c.to_dict() for c in state],
            "live_controller_id": self._controller(state),
        }

    # -- attach, takeover, release, heartbeat -------------------------------------------

    def attach(
        self,
        session: Session | str,
        client_id: str,
        opts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> LiveClientChange:
        """Attach a live client as observer or controller (seed 003 ``attach``).

        Attaching again updates the client's mode and metadata.

        Args:
            session: the session (or its id).
            client_id: the client's own id.
            opts: ``mode`` (``"observer"``, the default, or ``"controller"``),
                ``takeover`` (bool: replace a current controller), ``metadata``.
            **options: the same options as keywords.

        Raises:
            ControllerConflictError: a controller is attached and ``takeover`` is False.
            UnknownOptionError / InvalidArgumentError: bad options or client id.
            SessionNotFoundError, SessionClosedError, SessionLockedError: the
                session cannot record the event (nothing changed).
        """
        given = _options("attach", opts, options, ("mode", "takeover", "metadata"))
        mode = given.get("mode", "observer")
        if mode not in MODES:
            raise InvalidArgumentError(f"mode must be 'observer' or 'controller', not {mode!r}")
        takeover = given.get("takeover", False)
        if not isinstance(takeover, bool):
            raise InvalidArgumentError("takeover must be a bool")
        action: Action = "takeover" if takeover and mode == "controller" else "attach"
        return self._attach(session, client_id, mode, takeover, given.get("metadata"), action)

    def takeover(
        self,
        session: Session | str,
        client_id: str,
        opts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> LiveClientChange:
        """Attach ``client_id`` as the controller, demoting any prior one to observer.

        Args:
            session: the session (or its id).
            client_id: the new controller.
            opts: ``metadata`` (e.g. ``{"reason": "operator handoff"}``).
            **options: the same options as keywords.
        """
        given = _options("takeover", opts, options, ("metadata",))
        return self._attach(
            session, client_id, "controller", True, given.get("metadata"), "takeover"
        )

    def _attach(
        self,
        session: Session | str,
        client_id: str,
        mode: str,
        takeover: bool,
        metadata: object,
        action: Action,
    ) -> LiveClientChange:
        client_id = _check_client_id(client_id)
        meta = _json_object(metadata, "metadata")
        handle = self._session(session)
        self._writable(handle)
        now = self._now()
        stored, demoted = self._host.store.live_attach(
            LiveClientRow(handle.id, client_id, mode, now, now, meta), takeover=takeover
        )
        controller = client_id if mode == "controller" else None
        if controller is None:
            controller = self._controller(
                tuple(LiveClient._from_row(r) for r in self._host.store.live_clients(handle.id))
            )
        seq = self._record(
            handle,
            action,
            client_id,
            {
                "mode": mode,
                "controller_id": controller,
                "demoted_id": demoted,
                "metadata": meta,
            },
        )
        return LiveClientChange(
            action=action,
            session_id=handle.id,
            client_id=client_id,
            mode=mode,
            controller_id=controller,
            demoted_id=demoted,
            client=LiveClient._from_row(stored),
            event_seq=seq,
        )

    def release_client(
        self,
        session: Session | str,
        client_id: str,
        opts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> LiveClientChange:
        """Detach a live client; if it was the controller, control is released.

        Seed 003's ``detach(id, client_id, opts)`` (renamed: decisions D3).

        Args:
            session: the session (or its id).
            client_id: the client.
            opts: ``reason`` (e.g. ``"client_exit"``), ``metadata``.
            **options: the same options as keywords.

        Raises:
            ClientNotAttachedError: the client is not attached (nothing written).
        """
        given = _options("release_client", opts, options, ("reason", "metadata"))
        reason = given.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidArgumentError("reason must be a string")
        meta = _json_object(given.get("metadata"), "metadata")
        client_id = _check_client_id(client_id)
        handle = self._session(session)
        self._writable(handle)
        gone = self._host.store.live_release(handle.id, client_id)
        if gone is None:
            self._forget(handle.id)
            raise ClientNotAttachedError(handle.id, client_id)
        released = gone.mode == "controller"
        left = tuple(LiveClient._from_row(r) for r in self._host.store.live_clients(handle.id))
        controller = self._controller(left)
        data: dict[str, JSONValue] = {
            "mode": None,
            "previous_mode": gone.mode,
            "released_control": released,
            "controller_id": controller,
            "metadata": meta,
        }
        if reason is not None:
            data["reason"] = reason
        seq = self._record(handle, "detach", client_id, data)
        return LiveClientChange(
            action="detach",
            session_id=handle.id,
            client_id=client_id,
            mode=None,
            controller_id=controller,
            released_control=released,
            event_seq=seq,
        )

    def heartbeat(
        self,
        session: Session | str,
        client_id: str,
        opts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> LiveClientChange:
        """Refresh an attached client's last-seen marker and, if given, its metadata.

        Args:
            session: the session (or its id).
            client_id: the client.
            opts: ``metadata`` (replaces the client's metadata).
            **options: the same options as keywords.

        Raises:
            ClientNotAttachedError: the client is not attached (nothing written).
        """
        given = _options("heartbeat", opts, options, ("metadata",))
        meta = _json_object(given["metadata"], "metadata") if "metadata" in given else None
        client_id = _check_client_id(client_id)
        handle = self._session(session)
        self._writable(handle)
        row = self._host.store.live_heartbeat(handle.id, client_id, self._now(), meta)
        if row is None:
            self._forget(handle.id)
            raise ClientNotAttachedError(handle.id, client_id)
        controller = (
            client_id
            if row.mode == "controller"
            else self._controller(
                tuple(LiveClient._from_row(r) for r in self._host.store.live_clients(handle.id))
            )
        )
        data: dict[str, JSONValue] = {"mode": row.mode, "controller_id": controller}
        if meta is not None:
            data["metadata"] = meta
        seq = self._record(handle, "heartbeat", client_id, data)
        return LiveClientChange(
            action="heartbeat",
            session_id=handle.id,
            client_id=client_id,
            mode=row.mode,
            controller_id=controller,
            client=LiveClient._from_row(row),
            event_seq=seq,
        )

    # -- controller rights --------------------------------------------------------------

    def _require_controller(self, session: Session, client_id: str) -> None:
        # Always from the store, never the cache: a takeover in another process a moment
        # ago must stop the old controller at once.
        controller = self._controller(self._state(session, fresh=True))
        if controller != client_id:
            raise NotControllerError(session.id, client_id, controller)

    def client_inject_prompt(
        self,
        session: Session | str,
        client_id: str,
        content: str,
        opts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> None:
        """Append a user prompt, only when ``client_id`` is the active controller.

        The prompt is an ordinary user message whose ``meta["live_session"]
        ["client_id"]`` names the controller, so replay preserves who supplied it.

        Args:
            session: the session (or its id).
            client_id: the client injecting.
            content: the prompt text.
            opts: ``metadata`` (merged into the message's ``meta``).
            **options: the same options as keywords.

        Raises:
            NotControllerError: the client is not the active controller (HTTP 403).
            InvalidMessageError: the content is not a valid user message.
        """
        given = _options("client_inject_prompt", opts, options, ("metadata",))
        meta = _json_object(given.get("metadata"), "metadata")
        client_id = _check_client_id(client_id)
        handle = self._session(session)
        self._require_controller(handle, client_id)
        live = meta.get("live_session")
        live_meta = dict(live) if isinstance(live, Mapping) else {}
        live_meta["client_id"] = client_id
        meta["live_session"] = live_meta
        try:
            handle.inject({"role": "user", "content": content, "meta": meta})
        finally:
            self._forget(handle.id)

    def route_permission(
        self,
        session: Session | str,
        client_id: str,
        request: Mapping[str, JSONValue],
        opts: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> PermissionRoute:
        """Record that the active controller owns routing for a permission request.

        Args:
            session: the session (or its id).
            client_id: the controller.
            request: the permission request (a JSON object; its ``id`` or
                ``request_id`` names it, else a new id is given).
            opts: ``metadata`` (recorded with the route).
            **options: the same options as keywords.

        Raises:
            NotControllerError: the client is not the active controller (HTTP 403).
        """
        given = _options("route_permission", opts, options, ("metadata",))
        meta = _json_object(given.get("metadata"), "metadata")
        body = _json_object(request, "request")
        client_id = _check_client_id(client_id)
        handle = self._session(session)
        self._require_controller(handle, client_id)
        named = body.get("id", body.get("request_id"))
        request_id = named if isinstance(named, str) and named else new_id()
        try:
            event = handle.transcript.log_event(
                PERMISSION_ROUTE_EVENT,
                {
                    "client_id": client_id,
                    "request_id": request_id,
                    "request": body,
                    "metadata": meta,
                },
            )
        finally:
            self._forget(handle.id)
        return PermissionRoute(
            session_id=handle.id,
            client_id=client_id,
            request_id=request_id,
            request=body,
            event_seq=event.seq,
        )
