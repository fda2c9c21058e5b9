"""Tool-call approvals routed to the live controller (seed 003 ``route_permission``; D104-D106).

A run started through the API gets an ``on_approval`` from :func:`approver`.
Before each tool call it reads the session's controller:

* none attached: the server's ``approval_default`` answers (``allow``, the
  behaviour before approvals existed, unless the operator chose ``deny``);
* one attached: the request is recorded with
  :meth:`plait.live.LiveClients.route_permission` (the
  ``live_session_permission_route`` event: the controller owns it), an
  ``approval_requested`` event goes out on the session's event stream, and
  the run waits for ``POST /sessions/{id}/approvals/{call_id}`` from the
  controller, at most ``approval_timeout`` seconds; no answer in time denies.

Every outcome appends ``live_session_permission_decision`` (``{request_id,
call_id, run_id, tool, approve, reason, client_id}``; ``reason`` is
``controller``, ``timeout``, or ``cancelled`` when the run stopped while
waiting) and publishes
``approval_resolved``. A denied call gives the model the denied tool result.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Final

from plait._runtypes import Approval
from plait.errors import NotControllerError, PlaitError
from plait.records import JSONValue, ToolCall
from plait.server.state import PendingApproval, ServerState
from plait.session import Session

__all__ = ["DECISION_EVENT", "approver", "resolve"]

DECISION_EVENT: Final = "live_session_permission_decision"
"""The transcript event of an answered (or timed-out) approval."""

_log = logging.getLogger("plait.server")


def _decide(
    state: ServerState,
    session: Session,
    pending: PendingApproval,
    approve: bool,
    reason: str,
    client_id: str | None,
) -> None:
    data: dict[str, JSONValue] = {
        "request_id": pending.request_id,
        "call_id": pending.call_id,
        "run_id": pending.run_id,
        "tool": pending.tool,
        "approve": approve,
        "reason": reason,
        "client_id": client_id,
    }
    try:
        session.log_event(DECISION_EVENT, data)
    except PlaitError:  # the decision stands even if the session can no longer record it
        _log.warning("session %s: could not record the approval of %s", session.id, pending.call_id)
    state.hub.poke(session.id)
    state.hub.publish(session.id, "approval_resolved", data)


def approver(state: ServerState, session: Session, run_id: str) -> Approval:
    """The ``on_approval`` of a run started through the API on ``session``."""

    async def approve(call: ToolCall) -> bool:
        controller = state.live.controller_id(session)
        if controller is None:
            return state.approval_default == "allow"
        key = (session.id, call.id)
        if key in state.approvals:  # a provider that reuses a call id: refuse the second
            return False
        request: dict[str, JSONValue] = {
            "id": call.id,
            "tool": call.name,
            "arguments": dict(call.arguments),
            "run_id": run_id,
        }
        try:
            route = state.live.route_permission(
                session,
                controller,
                request,
                metadata={"timeout_seconds": state.approval_timeout},
            )
        except NotControllerError:  # control changed between the two reads: fail closed
            return False
        future: asyncio.Future[tuple[bool, str, str | None]] = (
            asyncio.get_running_loop().create_future()
        )
        pending = PendingApproval(
            session_id=session.id,
            call_id=call.id,
            run_id=run_id,
            tool=call.name,
            arguments=dict(call.arguments),
            controller_id=controller,
            request_id=route.request_id,
            requested_at=datetime.now(UTC),
            timeout=state.approval_timeout,
            future=future,
        )
        state.approvals[key] = pending
        state.hub.poke(session.id)  # the route's record goes out before the request
        state.hub.publish(session.id, "approval_requested", pending.to_json())
        try:
            try:
                answer, reason, by = await asyncio.wait_for(future, state.approval_timeout)
            except TimeoutError:
                answer, reason, by = False, "timeout", None
        except asyncio.CancelledError:  # the run was cancelled (or passed its own timeout)
            state.approvals.pop(key, None)
            _decide(state, session, pending, False, "cancelled", None)
            raise
        finally:
            state.approvals.pop(key, None)
        _decide(state, session, pending, answer, reason, by)
        return answer

    return approve


def resolve(pending: PendingApproval, approve: bool, client_id: str) -> bool:
    """Answer a pending approval; False when it was already answered or gave up."""
    if pending.future.done():
        return False
    pending.future.set_result((approve, "controller", client_id))
    return True
