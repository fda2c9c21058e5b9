"""``/sessions/{id}/approvals``: tool calls waiting for the live controller (D104-D106)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from plait.errors import NotControllerError, NothingToDoError
from plait.server import schemas as s
from plait.server.approvals import resolve
from plait.server.errors import ApprovalNotFoundError
from plait.server.state import Caller, Writer, server_state

__all__ = ["router"]

router = APIRouter(tags=["approvals"])


@router.get(
    "/sessions/{session_id}/approvals", response_model=s.ApprovalsOut, summary="Pending approvals"
)
async def list_approvals(request: Request, session_id: str, who: Caller) -> s.ApprovalsOut:
    """The tool calls of this server's runs on the session that wait for the controller."""
    state = server_state(request)
    state.session(session_id)
    pending = [p for (sid, _), p in state.approvals.items() if sid == session_id]
    return s.ApprovalsOut(
        session_id=session_id,
        approvals=[s.PendingApprovalOut(**p.to_json()) for p in pending],
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
        409: {"description": "Answered a moment ago by another request (`nothing_to_do`)."},
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
    ``approval_not_found``.
    """
    state = server_state(request)
    session = state.session(session_id)
    pending = state.approvals.get((session_id, call_id))
    if pending is None:
        raise ApprovalNotFoundError(session_id, call_id)
    state.check_owner(session, body.client_id, who)
    controller = state.live.controller_id(session)
    if controller != body.client_id:
        raise NotControllerError(session_id, body.client_id, controller)
    if not resolve(pending, body.approve, body.client_id):
        raise NothingToDoError(f"tool call {call_id!r} was answered already")
    return s.ApprovalOut(
        session_id=session_id,
        call_id=call_id,
        run_id=pending.run_id,
        tool=pending.tool,
        approve=body.approve,
        client_id=body.client_id,
    )
