"""``GET /sessions/{id}/events``: a session's events as Server-Sent Events, for observers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from plait.server.prefix import resolve_path_session
from plait.server.routes.runs import stream_events
from plait.server.sse import parse_event_mark
from plait.server.state import Caller, server_state

__all__ = ["router"]

# A prefix of a session id, or "latest", names the session (after authentication).
router = APIRouter(tags=["events"], dependencies=[Depends(resolve_path_session)])


@router.get(
    "/sessions/{session_id}/events",
    summary="Follow a session (SSE)",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "text/event-stream: record, text_delta, tool_call_delta, usage, "
            "finish, tool_start, tool_end, iteration_end, run_start, run_end.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    },
)
async def session_events(
    request: Request,
    session_id: str,
    who: Caller,
    after: Annotated[int | None, Query(ge=-1, le=2**31)] = None,
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
) -> StreamingResponse:
    """Stream the session's events as they happen.

    ``record`` events carry the record and have its ``seq`` as id; other
    events' ids are ``<seq>.<n>``; both end with ``~<head>``. Reconnect with
    ``Last-Event-ID`` (or ``?after=SEQ``; ``-1`` replays everything in view) to get
    every record after it first: nothing is lost across a reconnect. A ``head``
    event (``{"keep": K, "end_seq": E}``) says the session's head moved (a rewind,
    its undo, a pop): records from position K on are replaced by those that follow.
    """
    state = server_state(request)
    since: int | None
    head: str | None
    if after is not None:
        since, head = after, None
    else:
        since, head = parse_event_mark(last_event_id)
    backlog, sub = await state.hub.open(session_id, since, head)
    return StreamingResponse(
        stream_events(state, session_id, backlog, sub),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
