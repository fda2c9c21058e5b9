"""Tool-call approvals routed to the live controller (``route_permission``; D104-D106, D109).

A run started through the API gets an ``on_approval`` from :func:`approver`.
Before each tool call it reads the session's controller:

* none attached: the server's ``approval_default`` answers (``deny``: with
  nobody to ask, nothing runs, unless the operator chose ``allow``);
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

**The transcript is the shared medium (D109).** A call waits while its route
event has no decision event after it (and its timeout has not passed), so any
server process on the store lists it. A decision is appended with
compare-and-set on the session's head after checking, on that head, that no
decision for the call follows its route: of two answers one is recorded, the
other is 409. The run's replica keeps the session's writer lock while it waits
(D256): no other run, resume or append gets in between the question and its
answer, on one process or many. An answer sent to another replica is forwarded
to this one (:mod:`plait.server.forward`), which records it; the run also reads
the transcript for a decision besides its in-memory future, so one written by a
process that is not a server still counts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from plait.errors import NotControllerError, PlaitError, SessionLockedError, StaleSessionError
from plait.live import PERMISSION_ROUTE_EVENT
from plait.records import EventRecord, JSONValue, Record, ToolCall
from plait.run import Approval, Denied
from plait.server.state import PendingApproval, ServerState
from plait.session import Session
from plait.store.base import SessionRow

__all__ = [
    "DECISION_EVENT",
    "WaitingCall",
    "approver",
    "record_decision",
    "waiting_calls",
]

DECISION_EVENT: Final = "live_session_permission_decision"
"""The transcript event of an answered (or timed-out) approval."""

POLL_SECONDS: Final = 0.2
"""How often a waiting run reads the transcript for a decision written elsewhere."""
LOCK_WAIT_SECONDS: Final = 5.0
"""How long a decision (or a run going on) waits for another process to let go of the lock."""

_log = logging.getLogger("plait.server")


@dataclass(frozen=True, slots=True)
class WaitingCall:
    """A tool call the transcript shows waiting: a route event with no decision after it."""

    call_id: str
    run_id: str
    tool: str
    arguments: dict[str, JSONValue]
    controller_id: str
    request_id: str
    requested_at: datetime
    timeout: float
    seq: int
    """The transcript position of the route event."""

    def to_json(self) -> dict[str, JSONValue]:
        """As ``GET .../approvals`` shows it (the ``approval_requested`` fields)."""
        return {
            "call_id": self.call_id,
            "run_id": self.run_id,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "controller_id": self.controller_id,
            "request_id": self.request_id,
            "requested_at": self.requested_at.isoformat(),
            "timeout": self.timeout,
        }

    @classmethod
    def of(cls, pending: PendingApproval) -> WaitingCall:
        """The call an in-memory pending approval stands for."""
        return cls(
            call_id=pending.call_id,
            run_id=pending.run_id,
            tool=pending.tool,
            arguments=dict(pending.arguments),
            controller_id=pending.controller_id,
            request_id=pending.request_id,
            requested_at=pending.requested_at,
            timeout=pending.timeout,
            seq=pending.route_seq,
        )


def _route(record: EventRecord) -> WaitingCall | None:
    """The call a server's route event asks about (None for a route not made by a run)."""
    data = record.data
    request = data.get("request")
    meta = data.get("metadata")
    if not isinstance(request, dict):
        return None
    call_id, run_id, tool = request.get("id"), request.get("run_id"), request.get("tool")
    arguments = request.get("arguments")
    controller, request_id = data.get("client_id"), data.get("request_id")
    timeout = meta.get("timeout_seconds") if isinstance(meta, dict) else None
    if not (
        isinstance(call_id, str)
        and isinstance(run_id, str)
        and isinstance(tool, str)
        and isinstance(arguments, dict)
        and isinstance(controller, str)
        and isinstance(request_id, str)
        and isinstance(timeout, int | float)
        and not isinstance(timeout, bool)
    ):
        return None
    return WaitingCall(
        call_id=call_id,
        run_id=run_id,
        tool=tool,
        arguments=dict(arguments),
        controller_id=controller,
        request_id=request_id,
        requested_at=record.created_at,
        timeout=float(timeout),
        seq=record.seq,
    )


def _events(records: Sequence[Record]) -> list[EventRecord]:
    return [r for r in records if isinstance(r, EventRecord)]


def _read_after(state: ServerState, session_id: str, after: int) -> list[Record]:
    row: SessionRow = state.client.host.lookup(session_id)
    lo = max(after + 1, row.layout.view_start)
    if lo >= row.layout.end_seq:
        return []
    return state.client.store.read(row, lo, row.layout.end_seq)


def waiting_calls(state: ServerState, session: Session) -> dict[str, WaitingCall]:
    """The calls the session's transcript shows waiting, by call id (oldest first).

    A route event of a run with no decision for its call after it, whose timeout
    has not passed (a run whose process died stops being listed then).
    """
    out: dict[str, WaitingCall] = {}
    for event in _events(_read_after(state, session.id, -1)):
        if event.name == PERMISSION_ROUTE_EVENT:
            found = _route(event)
            if found is not None:
                out[found.call_id] = found
        elif event.name == DECISION_EVENT:
            call_id = event.data.get("call_id")
            if isinstance(call_id, str):
                out.pop(call_id, None)
    now = datetime.now(UTC)
    return {k: w for k, w in out.items() if w.requested_at + timedelta(seconds=w.timeout) > now}


def _decision_after(
    state: ServerState, session_id: str, call: WaitingCall
) -> dict[str, JSONValue] | None:
    for event in _events(_read_after(state, session_id, call.seq)):
        if event.name == DECISION_EVENT and event.data.get("call_id") == call.call_id:
            return dict(event.data)
    return None


def _append_decision(
    state: ServerState, session: Session, data: dict[str, JSONValue], call: WaitingCall
) -> tuple[dict[str, JSONValue], bool]:
    """Append the decision unless one follows the route.

    Returns the decision that stands and whether it is this one. Compare-and-set:
    the check and the append see one head.
    """
    while True:
        session.live.refresh()
        version = session.live.version
        existing = _decision_after(state, session.id, call)
        if existing is not None:
            return existing, False

        try:
            session.transcript.log_event(DECISION_EVENT, data, expect_version=version)
        except StaleSessionError:  # someone wrote between the check and the append: check again
            continue
        return data, True


async def _announce(state: ServerState, session_id: str, data: dict[str, JSONValue]) -> None:
    await state.hub.refresh(session_id)  # the decision's record goes out first
    state.hub.publish(session_id, "approval_resolved", data)


async def record_decision(
    state: ServerState,
    session: Session,
    call: WaitingCall,
    approve: bool,
    reason: str,
    client_id: str | None,
) -> tuple[dict[str, JSONValue], bool]:
    """Record a decision for a waiting call, unless one is recorded already.

    Returns the decision that stands and whether it is this one (then it is
    published as ``approval_resolved``).

    Raises:
        SessionLockedError: another process kept the writer lock for
            :data:`LOCK_WAIT_SECONDS` (HTTP 409 ``session_locked``).
    """
    data: dict[str, JSONValue] = {
        "request_id": call.request_id,
        "call_id": call.call_id,
        "run_id": call.run_id,
        "tool": call.tool,
        "approve": approve,
        "reason": reason,
        "client_id": client_id,
    }
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LOCK_WAIT_SECONDS
    while True:
        try:
            stands, mine = await state.call(lambda: _append_decision(state, session, data, call))
        except SessionLockedError:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.05)
            continue
        if mine:
            await _announce(state, session.id, data)
        return stands, mine


async def _cancelled(state: ServerState, session: Session, call: WaitingCall) -> None:
    data: dict[str, JSONValue] = {
        "request_id": call.request_id,
        "call_id": call.call_id,
        "run_id": call.run_id,
        "tool": call.tool,
        "approve": False,
        "reason": "cancelled",
        "client_id": None,
    }
    try:
        _, mine = await state.call(lambda: _append_decision(state, session, data, call))
    except PlaitError:  # the run stops either way
        _log.warning("session %s: could not record the approval of %s", session.id, call.call_id)
        return
    if mine:
        await _announce(state, session.id, data)


def approver(state: ServerState, session: Session, run_id: str) -> Approval:
    """The ``on_approval`` of a run started through the API on ``session``."""
    timed_out = Denied(
        f"no one answered the request to approve this tool call within "
        f"{state.approval_timeout:g} seconds, so it was not run"
    )

    async def wait(pending: PendingApproval, call: WaitingCall) -> bool | Denied:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + state.approval_timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                try:
                    stands, _ = await record_decision(state, session, call, False, "timeout", None)
                except PlaitError:  # the decision stands even if it cannot be recorded
                    _log.warning(
                        "session %s: could not record the approval of %s", session.id, call.call_id
                    )
                    return timed_out
                # Another server may have recorded an answer first: that one stands.
                if stands.get("approve") is True:
                    return True
                return timed_out if stands.get("reason") == "timeout" else False
            await asyncio.wait({pending.future}, timeout=min(POLL_SECONDS, left))
            if pending.future.done():  # answered here: the route recorded it
                return pending.future.result()[0]
            found = await state.call(lambda: _decision_after(state, session.id, call))
            if found is not None:  # answered through another server: recorded there
                await state.hub.refresh(session.id)
                state.hub.publish(session.id, "approval_resolved", found)
                return found.get("approve") is True

    async def approve(call: ToolCall) -> bool | Denied:
        controller = await state.call(lambda: state.live.controller_id(session))
        if controller is None:
            if state.approval_default == "allow":
                return True
            return Denied(
                "no one was connected to approve this tool call, and this server denies "
                "such calls (approval default: deny), so it was not run"
            )
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
            route = await state.call(
                lambda: state.live.route_permission(
                    session,
                    controller,
                    request,
                    metadata={"timeout_seconds": state.approval_timeout},
                )
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
            route_seq=route.event_seq,
        )
        waiting = WaitingCall.of(pending)
        state.approvals[key] = pending
        try:
            await state.hub.refresh(session.id)  # the route's record goes out before the request
            state.hub.publish(session.id, "approval_requested", waiting.to_json())
            answer = await wait(pending, waiting)
        except asyncio.CancelledError:  # the run was cancelled (or passed its own timeout)
            state.approvals.pop(key, None)
            await _cancelled(state, session, waiting)
            raise
        finally:
            state.approvals.pop(key, None)
        return answer

    return approve
