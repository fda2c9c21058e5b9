"""``/sessions/{id}/approvals``: tool calls waiting for the live controller (D104-D106)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from plait.errors import NotControllerError, NothingToDoError
from plait.server import schemas as s
from plait.server.approvals import WaitingCall, record_decision, waiting_calls
from plait.server.errors import ApprovalNotFoundError
from plait.server.forward import forward_writes
from plait.server.prefix import resolve_path_session
from plait.server.state import Caller, Writer, server_state
from plait.session import Session

__all__ = ["router"]

# A prefix of a session id, or "latest", names the session (after authentication).
router = APIRouter(
    tags=["approvals"], dependencies=[Depends(resolve_path_session), Depends(forward_writes)],
)


@router.get(
    "/sessions/{session_id}/approvals", response_model=s.ApprovalsOut, summary="Pending approvals"
)
async def list_approvals(request: Request, session_id: str, who: Caller) -> s.ApprovalsOut:
    """The tool calls of the session's runs that wait for the controller.

    Read from the transcript, so every server process on the store lists them (D109).
    """
    state = server_state(request)
    pending = await state.call(lambda: waiting_calls(state, state.session(session_id)))
    for (sid, call_id), p in state.approvals.items():  # this process's own, in case
        if sid == session_id and call_id not in pending and not p.future.done():
            pending[call_id] = WaitingCall.of(p)
    return s.ApprovalsOut(
        session_id=session_id,
        approvals=[s.PendingApprovalOut.model_validate(p.to_json()) for p in pending.values()],
    )


@router.post(
    "/sessions/{session_id}/approvals/{call_id}",
    response_model=s.ApprovalOut,
    summary="Answer an approval (controller only)",
    responses={
        403: {
            "description": "Not the live controller (`not_controller`), another principal's "
            "client (`client_not_owned`), or a read-only credential (`read_only_credential`)."
        },
        404: {
            "description": "No such session (`session_not_found`), or no tool call waiting "
            "under that id (`approval_not_found`: never asked, answered, or timed out)."
        },
        409: {
            "description": "Answered a moment ago by another request (`nothing_to_do`), or "
            "another process kept the session's writer lock (`session_locked`)."
        },
    },
)
async def answer_approval(
    request: Request, session_id: str, call_id: str, body: s.ApprovalIn, who: Writer
) -> s.ApprovalOut:
    """Approve or deny a tool call a run is waiting on.

    Only the active controller may answer, named by ``client_id`` and spoken
    for by the principal that attached it: an observer or no client is 403
    ``not_controller``, another principal's client 403 ``client_not_owned``.
    No such call waiting (never asked, answered, or timed out) is 404
    ``approval_not_found``. Any server process on the store may answer: the
    decision is appended to the transcript, where the run's process finds it
    (D109); of two answers one is recorded, the other is 409 ``nothing_to_do``.
    """
    state = server_state(request)
    local = state.approvals.get((session_id, call_id))

    def checked() -> tuple[Session, WaitingCall, bool]:
        session = state.session(session_id)
        call = waiting_calls(state, session).get(call_id)
        if call is None and local is not None and not local.future.done():
            call = WaitingCall.of(local)
        if call is None:
            raise ApprovalNotFoundError(session_id, call_id)
        state.check_owner(session, body.client_id, who)
        controller = state.live.controller_id(session)
        if controller != body.client_id:
            raise NotControllerError(session_id, body.client_id, controller)
        return session, call, session.live.holds_lock

    session, call, held = await state.call(checked)
    try:
        _, mine = await record_decision(
            state, session, call, body.approve, "controller", body.client_id
        )
    finally:
        if local is None and not held:  # the run is elsewhere: let its process write again
            await state.call(session.live.release)
    if not mine:
        raise NothingToDoError(f"tool call {call_id!r} was answered already")
    if local is not None and not local.future.done():
        local.future.set_result((body.approve, "controller", body.client_id))
    return s.ApprovalOut(
        session_id=session_id,
        call_id=call_id,
        run_id=call.run_id,
        tool=call.tool,
        approve=body.approve,
        client_id=body.client_id,
    )
