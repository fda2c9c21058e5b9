"""``/sessions/{id}/runs``: start a run (202, or its events as SSE), steer, cancel, resume."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from plait._ids import new_id
from plait._time import from_micros
from plait.errors import NothingToDoError
from plait.records import JSONValue
from plait.run import Run
from plait.server import schemas as s
from plait.server.approvals import approver
from plait.server.forward import forward_writes
from plait.server.held_credential import while_credential_holds
from plait.server.identity import act_for
from plait.server.paths import session_url
from plait.server.prefix import resolve_path_session
from plait.server.running import run_options, start_checked
from plait.server.sse import SseEvent, Subscriber
from plait.server.state import Caller, ServerState, Writer, server_state
from plait.session import Session
from plait.store import RunRow
from plait.views import ResumeInfo

__all__ = ["SSE_EVENT", "SSE_RESPONSE", "router", "stream_events"]

# A prefix of a session id, or "latest", names the session (after authentication).
router = APIRouter(
    tags=["runs"], dependencies=[Depends(resolve_path_session), Depends(forward_writes)],
)
_log = logging.getLogger("plait.server")

SSE_EVENT: dict[str, object] = {
    "type": "object",
    "description": "One event of the stream: its name, its id, its data (JSON text).",
    "properties": {
        "event": {"type": "string"},
        "id": {"type": "string"},
        "data": {"type": "string"},
        "retry": {"type": "integer"},
    },
}
"""One Server-Sent Event's schema (before OpenAPI 3.2 a stream's ``schema`` is its events')."""

SSE_RESPONSE: dict[int | str, dict[str, object]] = {
    200: {
        "description": "The run's events as text/event-stream (with stream=true); "
        "credential_ended (expired or revoked) ends it, not the run.",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    }
}


def _run_out(session_id: str, run_id: str) -> s.RunOut:
    return s.RunOut(
        session_id=session_id,
        run_id=run_id,
        running=True,
        events_url=session_url(session_id, "events"),
    )


async def _watched(state: ServerState, session_id: str, stream: bool) -> Subscriber | None:
    """Watch the session for a run about to start; with ``stream``, join its channel too.

    Joining brings the channel up to the store, as watching does: one read, not two.
    """
    if stream:
        return (await state.hub.open(session_id, None))[1]
    await state.hub.watch(session_id)
    return None


async def _started(
    state: ServerState,
    session_id: str,
    client_id: str | None,
    who: Writer,
    start: Callable[[Session, str], Run],
    options: dict[str, JSONValue],
) -> tuple[Session, str]:
    """Check the caller may drive the session, then start a run and launch it here.

    Returns:
        The session and the run's id.
    """
    run_id = new_id()

    def check(session: Session) -> None:
        state.check_driver(session, client_id, who)
        act_for(session, who)

    session = await start_checked(state, session_id, client_id, check, start, run_id, options)
    return session, run_id


async def stream_events(
    state: ServerState,
    session_id: str,
    backlog: list[SseEvent],
    sub: Subscriber,
    *,
    until_run: str | None = None,
) -> AsyncGenerator[bytes, None]:
    """The bytes of an event stream: the backlog, then live events until the channel ends.

    With ``until_run``, the stream ends after that run's ``run_end``. Every
    ``ping_interval`` seconds without an event it pokes the channel (records
    written by another process) and sends a comment line.
    """
    try:
        yield b"retry: 1000\n\n"
        for event in backlog:
            yield event.encode()
        while True:
            try:
                if sub.queue.empty():
                    # A deadline on this task, not wait_for's task of its own per wait.
                    async with asyncio.timeout(state.ping_interval):
                        first = await sub.queue.get()
                else:
                    first = sub.queue.get_nowait()
            except TimeoutError:
                state.hub.poke(session_id)
                yield b": ping\n\n"
                continue
            batch: list[SseEvent | None] = [first]
            while not sub.queue.empty():
                batch.append(sub.queue.get_nowait())
            chunks: list[bytes] = []
            ended = False
            for item in batch:
                if item is None:
                    ended = True
                    break
                chunks.append(item.encode())
                if (
                    until_run is not None
                    and item.event == "run_end"
                    and item.data.get("run_id") == until_run
                ):
                    ended = True
                    break
            if chunks:
                yield b"".join(chunks)
            if ended:
                return
    finally:
        state.hub.close(session_id, sub)


@router.post(
    "/sessions/{session_id}/runs",
    response_model=s.RunOut,
    status_code=202,
    summary="Start a run",
    responses=SSE_RESPONSE,
)
async def start_run(
    request: Request, session_id: str, body: s.RunIn, who: Writer
) -> JSONResponse | StreamingResponse:
    """Send ``text`` to the model and run it to the end in the background.

    Answers 202 with the run's id at once; its events go to every observer of
    ``GET /sessions/{id}/events``. With ``stream: true`` the answer is the
    run's own event stream, ending with its ``run_end`` (or, opened with a durable
    token that expires or is revoked meanwhile, with ``credential_ended``: the run
    goes on, followed by ``GET .../events``). The provider is the
    server's; only the live controller may run when one is attached (403).
    The run acts for the caller's principal (the session's actor chain), and
    its tool calls wait for the controller's approval when one is attached.
    """
    state = server_state(request)
    # Watched (and the run's own stream joined) before the run starts: it misses nothing.
    sub = await _watched(state, session_id, body.stream)
    provider = state.provider_for_run()
    try:
        session, run_id = await _started(
            state,
            session_id,
            body.client_id,
            who,
            lambda session, run_id: session.stream(
                body.text,
                provider=provider,
                tools=state.tools,
                on_approval=approver(state, session, run_id),
                timeout=body.timeout,
                max_steps=body.max_steps,
                model_settings=body.model_settings,
                run_id=run_id,
            ),
            run_options(
                max_steps=body.max_steps, timeout=body.timeout, model_settings=body.model_settings
            ),
        )
    except BaseException:
        if sub is not None:
            state.hub.close(session_id, sub)
        raise
    return _answer(state, session, run_id, sub, who)


async def _driven(
    state: ServerState, session_id: str, client_id: str | None, who: Writer
) -> Session:
    """The session, once the caller is known to be allowed to drive it."""

    def checked() -> Session:
        session = state.session(session_id)
        state.check_driver(session, client_id, who)
        return session

    return await state.call(checked)


def _answer(
    state: ServerState, session: Session, run_id: str, sub: Subscriber | None, who: Writer
) -> JSONResponse | StreamingResponse:
    if sub is None:
        return JSONResponse(_run_out(session.id, run_id).model_dump(), status_code=202)
    # The run goes on when its stream ends for a token's end: only the stream is the token's.
    events = stream_events(state, session.id, [], sub, until_run=run_id)
    return StreamingResponse(
        while_credential_holds(state, who, events),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Run-Id": run_id},
    )


@router.post(
    "/sessions/{session_id}/resume",
    response_model=s.RunOut,
    status_code=202,
    summary="Resume an interrupted run",
    responses=SSE_RESPONSE,
)
async def resume_run(
    request: Request, session_id: str, body: s.ResumeIn, who: Writer
) -> JSONResponse | StreamingResponse:
    """Pick up an interrupted request (seed 001 ``resume``); 409 ``nothing_to_do`` if none."""
    state = server_state(request)
    sub = await _watched(state, session_id, body.stream)
    provider = state.provider_for_run()
    try:
        session, run_id = await _started(
            state,
            session_id,
            body.client_id,
            who,
            lambda session, run_id: session.resume_stream(
                provider=provider,
                tools=state.tools,
                on_approval=approver(state, session, run_id),
                timeout=body.timeout,
                max_steps=body.max_steps,
                model_settings=body.model_settings,
                run_id=run_id,
            ),
            run_options(
                max_steps=body.max_steps, timeout=body.timeout, model_settings=body.model_settings
            ),
        )
    except BaseException:
        if sub is not None:
            state.hub.close(session_id, sub)
        raise
    return _answer(state, session, run_id, sub, who)


@router.get(
    "/sessions/{session_id}/runs/current", response_model=s.RunStateOut, summary="Run state"
)
async def run_state(request: Request, session_id: str, who: Caller) -> s.RunStateOut:
    """Whether a run is in progress, since when and on which replica, or how resume would go.

    A run in progress anywhere in the fleet counts, whichever replica answers.
    """
    state = server_state(request)

    def read() -> tuple[RunRow | None, ResumeInfo | None]:
        session = state.session(session_id)
        found = state.fleet.run_of(session_id)
        busy = found is not None or state.client.host.runs.running(session_id)
        return found, None if busy else session.resumable()

    found, info = await state.call(read)
    local = state.client.host.runs.get(session_id)
    resumable: dict[str, JSONValue] | None = None
    if info is not None:
        resumable = {
            "kind": info.kind,
            "description": info.description,
            "missing": [c.to_json() for c in info.missing],
        }
    run_id = found.run_id if found is not None else local.id if local is not None else None
    return s.RunStateOut(
        session_id=session_id,
        running=run_id is not None,
        run_id=run_id,
        replica_id=found.replica_id if found is not None else None,
        started_at=from_micros(found.started_at_us).isoformat() if found is not None else None,
        resumable=resumable,
    )


@router.post("/sessions/{session_id}/runs/current/steer", response_model=s.OkOut, summary="Steer")
async def steer_run(request: Request, session_id: str, body: s.SteerIn, who: Writer) -> s.OkOut:
    """Add a message to the run in progress before its next model call; 409 if none."""
    state = server_state(request)
    session = await _driven(state, session_id, body.client_id, who)
    session.steer(body.message)  # NothingToDoError (409) when no run is in progress
    return s.OkOut()


@router.delete(
    "/sessions/{session_id}/runs/current", response_model=s.OkOut, summary="Cancel the run"
)
async def cancel_run(
    request: Request,
    session_id: str,
    who: Writer,
    client_id: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="The live controller, when one is."),
    ] = None,
) -> s.OkOut:
    """Interrupt the run in progress; what it recorded stays valid (resume picks it up).

    With a live controller attached only it may cancel (``?client_id=``), else 403.
    """
    state = server_state(request)
    await _driven(state, session_id, client_id, who)
    run = state.run_here(session_id)
    following = state.follows.get(run.id) if run is not None else None
    if run is None or following is None:
        raise NothingToDoError(f"no run is in progress on session {session_id}")
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.shield(following)
    return s.OkOut()
