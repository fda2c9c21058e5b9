"""``/sessions/{id}/clients``: live clients (seed 003).

Attach, takeover, heartbeat, release, and the controller's prompt injection and
permission routing. A client id belongs to the principal that attached it
(``metadata["principal"]``, set by the server): any other principal that names
it is 403 ``client_not_owned`` (decisions D102).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from plait.server import schemas as s
from plait.server.forward import forward_writes
from plait.server.prefix import resolve_path_session
from plait.server.state import Caller, Writer, server_state, writer

__all__ = ["router"]

# A prefix of a session id, or "latest", names the session (after authentication).
router = APIRouter(
    tags=["live clients"], dependencies=[Depends(resolve_path_session), Depends(forward_writes)],
)


def _change(change: Any) -> s.LiveChangeOut:
    return s.LiveChangeOut(**change.to_dict())


@router.get("/sessions/{session_id}/clients", response_model=s.ClientsOut, summary="Clients")
async def list_clients(request: Request, session_id: str, who: Caller) -> s.ClientsOut:
    """The attached clients, in the order they attached, and the controller."""
    state = server_state(request)
    clients = await state.call(lambda: state.live.live_clients(state.session(session_id)))
    return s.ClientsOut(
        session_id=session_id,
        controller_id=next((c.client_id for c in clients if c.mode == "controller"), None),
        clients=[s.LiveClientOut.model_validate(c.to_dict()) for c in clients],
    )


@router.post("/sessions/{session_id}/clients", response_model=s.LiveChangeOut, summary="Attach")
async def attach_client(
    request: Request, session_id: str, body: s.AttachIn, who: Caller
) -> s.LiveChangeOut:
    """Attach as observer or controller; a second controller needs ``takeover`` (else 409).

    Any credential may attach an observer (seed 003: observers attach, heartbeat,
    release and read); a controller needs a credential that may write.
    """
    if body.mode == "controller":
        await writer(who)
    state = server_state(request)

    def attach() -> Any:
        session = state.session(session_id)
        state.check_owner(session, body.client_id, who)
        return state.live.attach(
            session,
            body.client_id,
            mode=body.mode,
            takeover=body.takeover,
            metadata=state.owned_metadata(body.metadata, who),
        )

    change = await state.call(attach)
    await state.hub.refresh(session_id)
    return _change(change)


@router.post(
    "/sessions/{session_id}/clients/{client_id}/takeover",
    response_model=s.LiveChangeOut,
    summary="Take control",
)
async def takeover_client(
    request: Request, session_id: str, client_id: str, body: s.TakeoverIn, who: Writer
) -> s.LiveChangeOut:
    """Attach ``client_id`` as the controller, demoting the old one to observer."""
    state = server_state(request)

    def takeover() -> Any:
        session = state.session(session_id)
        state.check_owner(session, client_id, who)
        return state.live.takeover(
            session, client_id, metadata=state.owned_metadata(body.metadata, who)
        )

    change = await state.call(takeover)
    await state.hub.refresh(session_id)
    return _change(change)


@router.post(
    "/sessions/{session_id}/clients/{client_id}/heartbeat",
    response_model=s.LiveChangeOut,
    summary="Heartbeat",
)
async def heartbeat_client(
    request: Request, session_id: str, client_id: str, body: s.HeartbeatIn, who: Caller
) -> s.LiveChangeOut:
    """Refresh the client's last-seen marker (and its metadata, if given); 404 if not attached."""
    state = server_state(request)
    opts: dict[str, Any] = {}
    if body.metadata is not None:
        opts["metadata"] = state.owned_metadata(body.metadata, who)

    def heartbeat() -> Any:
        session = state.session(session_id)
        state.check_owner(session, client_id, who)
        return state.live.heartbeat(session, client_id, opts)

    change = await state.call(heartbeat)
    await state.hub.refresh(session_id)
    return _change(change)


@router.post(
    "/sessions/{session_id}/clients/{client_id}/release",
    response_model=s.LiveChangeOut,
    summary="Release (detach)",
)
async def release_client(
    request: Request, session_id: str, client_id: str, body: s.ReleaseIn, who: Caller
) -> s.LiveChangeOut:
    """Detach the client (seed 003 ``detach``); a controller lets go of control."""
    state = server_state(request)
    opts: dict[str, Any] = {}
    if body.reason is not None:
        opts["reason"] = body.reason
    if body.metadata is not None:
        opts["metadata"] = body.metadata

    def release() -> Any:
        session = state.session(session_id)
        state.check_owner(session, client_id, who)
        return state.live.release_client(session, client_id, opts)

    change = await state.call(release)
    await state.hub.refresh(session_id)
    return _change(change)


@router.post(
    "/sessions/{session_id}/clients/{client_id}/inject",
    response_model=s.OkOut,
    summary="Inject a prompt (controller only)",
)
async def inject_prompt(
    request: Request, session_id: str, client_id: str, body: s.ClientInjectIn, who: Writer
) -> s.OkOut:
    """Append a user prompt from the active controller; anyone else gets 403 ``not_controller``.

    While a run is in progress it is 409 ``session_busy``: steer the run instead.
    """
    state = server_state(request)

    def inject() -> None:
        session = state.session(session_id)
        state.check_owner(session, client_id, who)
        state.check_no_run(session)
        state.live.client_inject_prompt(session, client_id, body.content, metadata=body.metadata)

    await state.call(inject)
    await state.hub.refresh(session_id)
    return s.OkOut()


@router.post(
    "/sessions/{session_id}/clients/{client_id}/permissions",
    response_model=s.PermissionOut,
    summary="Route a permission request (controller only)",
)
async def route_permission(
    request: Request, session_id: str, client_id: str, body: s.PermissionIn, who: Writer
) -> s.PermissionOut:
    """Record that the active controller owns routing for a permission request (else 403)."""
    state = server_state(request)

    def route_it() -> Any:
        session = state.session(session_id)
        state.check_owner(session, client_id, who)
        return state.live.route_permission(
            session, client_id, body.request, metadata=body.metadata
        )

    route = await state.call(route_it)
    await state.hub.refresh(session_id)
    return s.PermissionOut(**route.to_dict())
