"""``GET /sessions/{id}/events``: a session's events as Server-Sent Events, for observers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse

from plait.server.held_credential import while_credential_holds
from plait.server.prefix import resolve_path_session
from plait.server.routes.runs import SSE_EVENT, stream_events
from plait.server.sse import parse_event_mark
from plait.server.state import Caller, ServerState, server_state

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
            "finish, tool_start, tool_end, iteration_end, ended, run_start, run_end; "
            "credential_ended (expired or revoked) ends it.",
            "content": {"text/event-stream": {"schema": SSE_EVENT}},
        }
    },
)
async def session_events(
    request: Request,
    session_id: str,
    who: Caller,
    after: Annotated[int | None, Query(ge=-1, le=2**31)] = None,
    client_id: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
) -> StreamingResponse:
    """Stream the session's events as they happen.

    ``record`` events carry the record and have its ``seq`` as id; other
    events' ids are ``<seq>.<n>``; both end with ``~<head>``. Reconnect with
    ``Last-Event-ID`` (or ``?after=SEQ``; ``-1`` replays everything in view) to get
    every record after it first: nothing is lost across a reconnect. A ``head``
    event (``{"keep": K, "end_seq": E}``) says the session's head moved (a rewind,
    its undo, a pop): records from position K on are replaced by those that follow.

    A live client that names itself (``?client_id=``) is present while one of its
    streams is open: once none has been for the server's ``presence_grace`` (30 s by
    default), it is released (``detach``, reason ``gone``), so a page that died
    leaves no controller behind. A reconnect within the grace keeps its place.

    A stream opened with a durable bearer token lasts as long as the token: it is
    checked again at least every ``ping_interval`` seconds, and nothing is sent past its
    expiry. Expired or revoked, the stream ends with a ``credential_ended`` event
    (``{"reason": "expired" | "revoked"}``); a reconnect is then ``401``.
    """
    state = server_state(request)
    if client_id is not None:

        def owned() -> None:
            state.check_owner(state.session(session_id), client_id, who)

        await state.call(owned)
    since: int | None
    head: str | None
    if after is not None:
        since, head = after, None
    else:
        since, head = parse_event_mark(last_event_id)
    backlog, sub = await state.hub.open(session_id, since, head)
    stream = while_credential_holds(state, who, stream_events(state, session_id, backlog, sub))
    body = (
        stream
        if client_id is None
        else _present(state, session_id, client_id, who.principal, stream)
    )
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _present(
    state: ServerState,
    session_id: str,
    client_id: str,
    principal: str,
    stream: AsyncGenerator[bytes, None],
) -> AsyncIterator[bytes]:
    """``stream``, during which the client counts as present (see :mod:`plait.server.presence`)."""
    state.presence.joined(session_id, client_id, principal)
    try:
        async with contextlib.aclosing(stream) as inner:
            async for chunk in inner:
                yield chunk
    finally:
        state.presence.left(session_id, client_id, principal)
