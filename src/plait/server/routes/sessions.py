"""``/sessions``: list, create or open, read, history, records, lineage, fork, rename, close."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from plait._prefix import Described, describe
from plait._time import from_micros
from plait.client import SessionInfo, conversations
from plait.errors import SessionNotFoundError
from plait.records import Message, Record
from plait.render import lineage_svg
from plait.server import schemas as s
from plait.server.forward import forward_writes
from plait.server.identity import bind_child, bind_creator, check_child
from plait.server.prefix import resolve_path_session
from plait.server.routes import manage
from plait.server.sse import head_mark, record_json
from plait.server.state import Caller, ServerState, Writer, server_state
from plait.session import Session
from plait.session.counting import shown_length, shown_lengths
from plait.store.base import SessionRow

__all__ = ["router", "session_out"]

# A prefix of a session id, or "latest", names the session (after authentication).
router = APIRouter(
    tags=["sessions"], dependencies=[Depends(resolve_path_session), Depends(forward_writes)],
)

MAX_RECORDS = 1000
SVG_NS = "http://www.w3.org/2000/svg"


def _state(request: Request) -> ServerState:
    return server_state(request)


def session_out(
    state: ServerState, row: SessionRow, described: Described | None = None
) -> s.SessionOut:
    """The list view of a stored session (with what a list tells it by, when described)."""
    info = described.info if described is not None else SessionInfo.from_row(row)
    return s.SessionOut(
        id=info.id,
        title=info.title,
        created_at=info.created_at.isoformat(),
        updated_at=info.updated_at.isoformat(),
        length=info.length,
        workspace=info.workspace,
        parent_session_ids=list(info.parent_session_ids),
        lineage_operator=info.lineage_operator,
        status=row.status,
        running=state.client.host.runs.running(row.id),
        short_id=described.short if described is not None else None,
        first_prompt=described.first_prompt if described is not None else None,
        source=described.source if described is not None else None,
    )


def _detail(state: ServerState, session: Session) -> s.SessionDetail:
    snap = session.transcript.snapshot()
    if snap is None:
        raise SessionNotFoundError(session.id)
    row = state.client.host.lookup(session.id)
    live = state.live.snapshot_fields(session)
    # One session: its first prompt and source, not a short id (that would scan the store).
    info = SessionInfo.from_row(row, shown_length(state.client.store, row))
    described = describe(state.client, [info], short_ids=False)[0]
    base = session_out(state, row, described)
    clients: Any = live["live_clients"]
    controller = live["live_controller_id"]
    return s.SessionDetail(
        **base.model_dump(),
        version=snap.version,
        system_prompt=snap.system_prompt,
        tool_format=snap.tool_format,
        actor_chain=dict(snap.actor_chain) if snap.actor_chain is not None else None,
        scratchpad=dict(snap.scratchpad) if snap.scratchpad is not None else None,
        scratchpad_version=snap.scratchpad_version,
        parent_id=snap.parent_id,
        child_ids=list(snap.child_ids),
        branched_at_event_index=snap.branched_at_event_index,
        metadata=dict(snap.metadata),
        end_seq=row.layout.end_seq,
        live_clients=[s.LiveClientOut(**c) for c in clients],
        live_controller_id=controller if isinstance(controller, str) else None,
    )


def message_out(message: Message) -> s.MessageOut:
    """A message as the API returns it."""
    return s.MessageOut(
        role=message.role,
        text=message.text,
        tool_calls=[c.to_json() for c in message.tool_calls],
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        ok=message.ok,
        images=message.images,
        seq=message.seq,
    )


@router.get("/sessions", response_model=s.SessionListOut, summary="List sessions")
async def list_sessions(
    request: Request,
    who: Caller,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    all_workspaces: bool = False,
    q: Annotated[str | None, Query(min_length=1, max_length=1000)] = None,
) -> s.SessionListOut:
    """Stored sessions, most recently active first: the server's scope, or every workspace.

    A server's scope is its configuration (``plait serve --workspace``, else every
    workspace), never the folder its process started in. With ``q``, a full-text
    search of every message in that scope: up to ``limit`` hits, newest first, and
    the sessions they are in.
    """
    state = _state(request)
    ws = None if all_workspaces or state.all_workspaces else state.client.workspace

    def listed() -> s.SessionListOut:
        store = state.client.store
        if q is not None:
            return _searched(state, q, limit, ws is None)
        rows = conversations(store, ws, limit)
        lengths = shown_lengths(store, rows)
        infos = [SessionInfo.from_row(r, n) for r, n in zip(rows, lengths, strict=True)]
        described = describe(state.client, infos)
        return s.SessionListOut(
            sessions=[session_out(state, r, d) for r, d in zip(rows, described, strict=True)]
        )

    return await state.call(listed)


def _searched(state: ServerState, q: str, limit: int, everywhere: bool) -> s.SessionListOut:
    store = state.client.store
    found = state.client.sessions.search(q, limit=limit, all_workspaces=everywhere)
    rows = [r for r in (store.get(i) for i in dict.fromkeys(h.session_id for h in found)) if r]
    lengths = shown_lengths(store, rows)
    infos = [SessionInfo.from_row(r, n) for r, n in zip(rows, lengths, strict=True)]
    described = describe(state.client, infos)
    hits = [
        s.SearchHitOut(
            session_id=h.session_id,
            title=h.title,
            position=h.position,
            message=h.message,
            role=h.role,
            snippet=h.snippet,
            created_at=from_micros(h.created_at_us).isoformat(),
        )
        for h in found
    ]
    sessions = [session_out(state, r, d) for r, d in zip(rows, described, strict=True)]
    return s.SessionListOut(sessions=sessions, hits=hits)


@router.post(
    "/sessions",
    response_model=s.SessionDetail,
    status_code=201,
    summary="Create or open a session",
    responses={200: {"model": s.SessionDetail, "description": "The session already existed."}},
)
async def create_session(
    request: Request, response: Response, body: s.CreateSessionIn, who: Writer
) -> s.SessionDetail:
    """Open a session by id, creating it when unknown (seed 003's idempotent ``open``).

    With ``messages`` the session is new and holds them (all or nothing); an id
    already taken is 409 ``session_exists``. An existing session answers 200; a new
    workspace anchor or policy for it is refused (403) but from its live controller.
    """
    state = _state(request)
    client = state.client

    def opened() -> tuple[Session, bool]:
        existed = body.id is not None and client.exists(body.id)
        if body.messages is not None:
            made = client.sessions.create(body.messages, session_id=body.id, title=body.title)
            existed = False
            session = made
            if body.workspace_anchor is not None or body.workspace_policy is not None:
                session = client.open(
                    made.id,
                    workspace_anchor=body.workspace_anchor,
                    workspace_policy=body.workspace_policy,
                )
        else:
            current = client.open(body.id) if existed else None
            if current is not None and _moves_workspace(current, body):
                # What a controller's runs see: only it may move it (as it alone may run).
                state.check_driver(current, body.client_id, who)
            session = client.open(
                body.id,
                workspace_anchor=body.workspace_anchor,
                workspace_policy=body.workspace_policy,
            )
            if not session.transcript.stored:
                session.settings.set()
            if body.title is not None and session.title != body.title.strip():
                session.rename(body.title)
        bind_creator(session, who)
        return session, existed

    session, existed = await state.call(opened)
    await state.hub.refresh(session.id)
    if existed:
        response.status_code = 200
    return await state.call(lambda: _detail(state, session))


def _moves_workspace(session: Session, body: s.CreateSessionIn) -> bool:
    """Whether re-opening ``session`` with ``body`` changes its workspace anchor or policy."""
    anchor, policy = body.workspace_anchor, body.workspace_policy
    if anchor is not None and anchor != session.workspace.anchor:
        return True
    current = session.workspace.policy
    return policy is not None and {**current, **policy} != current


@router.get("/sessions/{session_id}", response_model=s.SessionDetail, summary="Open a session")
async def get_session(request: Request, session_id: str, who: Caller) -> s.SessionDetail:
    """One session: its snapshot fields (not the transcript), lineage and live clients."""
    state = _state(request)
    return await state.call(lambda: _detail(state, state.session(session_id)))


@router.patch("/sessions/{session_id}", response_model=s.SessionDetail, summary="Rename")
async def rename_session(
    request: Request, session_id: str, body: s.RenameIn, who: Writer
) -> s.SessionDetail:
    """Give the session a title (trimmed)."""
    state = _state(request)

    def renamed() -> Session:
        session = state.session(session_id)
        session.rename(body.title)
        return session

    session = await state.call(renamed)
    await state.hub.refresh(session_id)
    return await state.call(lambda: _detail(state, session))


def _model_settings_out(session: Session) -> s.ModelSettingsOut:
    kept = session.settings.model_settings.to_json()
    return s.ModelSettingsOut(session_id=session.id, model_settings=kept)


@router.get(
    "/sessions/{session_id}/model-settings",
    response_model=s.ModelSettingsOut,
    summary="Model settings",
)
async def get_model_settings(
    request: Request, session_id: str, who: Caller
) -> s.ModelSettingsOut:
    """The model settings the session keeps; each run's own are laid over them."""
    state = _state(request)
    return await state.call(lambda: _model_settings_out(state.session(session_id)))


@router.put(
    "/sessions/{session_id}/model-settings",
    response_model=s.ModelSettingsOut,
    summary="Set model settings",
)
async def put_model_settings(
    request: Request, session_id: str, body: s.ModelSettingsIn, who: Writer
) -> s.ModelSettingsOut:
    """Replace the model settings the session keeps (null or {}: keep none); 422 if invalid.

    With a live controller attached only it may (``client_id``), else 403: they are what its
    runs send.
    """
    state = _state(request)

    def changed() -> s.ModelSettingsOut:
        session = state.session(session_id)
        state.check_driver(session, body.client_id, who)
        session.settings.set_model_settings(body.model_settings)
        return _model_settings_out(session)

    out = await state.call(changed)
    await state.hub.refresh(session_id)
    return out


@router.get("/sessions/{session_id}/history", response_model=s.MessagesOut, summary="History")
async def get_history(
    request: Request, session_id: str, who: Caller, full: bool = False
) -> s.MessagesOut:
    """What the model works with, or with ``full=true`` every message as written."""
    state = _state(request)

    def shown() -> s.MessagesOut:
        messages = state.session(session_id).history(full=full)
        return s.MessagesOut(
            session_id=session_id, full=full, messages=[message_out(m) for m in messages]
        )

    return await state.call(shown)


@router.get("/sessions/{session_id}/records", response_model=s.RecordsOut, summary="Records")
async def get_records(
    request: Request,
    session_id: str,
    who: Caller,
    after: Annotated[int, Query(ge=-1, le=2**31)] = -1,
    limit: Annotated[int, Query(ge=1, le=MAX_RECORDS)] = 200,
) -> s.RecordsOut:
    """The records in view with a seq greater than ``after``, oldest first (events included)."""
    state = _state(request)

    def read() -> s.RecordsOut:
        row = state.client.host.lookup(session_id)
        lo = max(after + 1, row.layout.view_start)
        hi = min(row.layout.end_seq, lo + limit)
        records = state.client.store.read(row, lo, hi) if lo < hi else []
        return s.RecordsOut(
            session_id=session_id,
            records=[s.RecordOut.model_validate(record_json(r)) for r in records],
            end_seq=row.layout.end_seq,
            head=head_mark(row),
        )

    return await state.call(read)


@router.post(
    "/sessions/{session_id}/messages", response_model=s.RecordsOut, summary="Inject messages"
)
async def inject_messages(
    request: Request, session_id: str, body: s.MessagesIn, who: Writer
) -> s.RecordsOut:
    """Append messages (seed 003 ``inject``), all or nothing; a missing role is 422.

    With a live controller attached only it may inject (``client_id``), else 403.
    While a run is in progress it is 409 ``session_busy`` (a message between a reply's
    tool calls and their results is one no provider accepts): steer the run instead.
    """
    state = _state(request)

    def injected() -> list[Record]:
        session = state.session(session_id)
        state.check_driver(session, body.client_id, who)
        state.check_no_run(session)
        return session.transcript.inject_many(body.messages)

    added = await state.call(injected)
    await state.hub.refresh(session_id)
    end = await state.call(lambda: state.client.host.lookup(session_id).layout.end_seq)
    return s.RecordsOut(
        session_id=session_id,
        records=[s.RecordOut.model_validate(record_json(r)) for r in added],
        end_seq=end,
    )


@router.post(
    "/sessions/{session_id}/fork",
    response_model=s.SessionDetail,
    status_code=201,
    summary="Fork",
)
async def fork_session(
    request: Request, session_id: str, body: s.ForkIn, who: Writer
) -> s.SessionDetail:
    """Branch the whole transcript into a new session (copy-on-write: one row).

    The branch is bound to the caller's principal; an agent principal's branch
    pushes the agent onto the parent's actor chain, and one that claims scopes
    the parent does not hold is refused (403 ``scope_violation``, nothing made).
    """
    state = _state(request)

    def forked() -> Session:
        parent = state.session(session_id)
        check_child(parent, who)
        branch = parent.fork(dst=body.dst)
        bind_child(parent, branch, who)
        return branch

    branch = await state.call(forked)
    await state.hub.refresh(session_id)
    return await state.call(lambda: _detail(state, branch))


@router.post(
    "/sessions/{session_id}/fork_at",
    response_model=s.SessionDetail,
    status_code=201,
    summary="Fork at a message",
)
async def fork_at_session(
    request: Request, session_id: str, body: s.ForkAtIn, who: Writer
) -> s.SessionDetail:
    """Branch keeping the first ``keep_first`` messages (seed 003 ``fork_at``).

    Its actor chain is made as for ``fork``.
    """
    state = _state(request)

    def forked() -> Session:
        parent = state.session(session_id)
        check_child(parent, who)
        branch = parent.fork_at(body.keep_first, dst=body.dst)
        bind_child(parent, branch, who)
        return branch

    branch = await state.call(forked)
    await state.hub.refresh(session_id)
    return await state.call(lambda: _detail(state, branch))


@router.post("/sessions/{session_id}/close", response_model=s.SessionDetail, summary="Close")
async def close_session(
    request: Request, session_id: str, body: s.CloseIn, who: Writer
) -> s.SessionDetail:
    """Close the session, recording ``agent_session_closed`` with the status.

    With a live controller attached only it may close (``client_id``), else 403.
    """
    state = _state(request)
    status: Any = body.status

    def closed() -> Session:
        session = state.session(session_id)
        state.check_driver(session, body.client_id, who)
        session.close(status)
        return session

    session = await state.call(closed)
    await state.hub.refresh(session_id)
    return await state.call(lambda: _detail(state, session))


@router.get("/sessions/{session_id}/lineage", response_model=s.LineageOut, summary="Lineage")
async def get_lineage(request: Request, session_id: str, who: Caller) -> s.LineageOut:
    """The session with its ancestors and descendants, and an SVG drawing of them."""
    state = _state(request)

    def drawn() -> tuple[SessionRow, Any]:
        row = state.client.host.lookup(session_id)
        return row, state.client.host.handle(row).transcript.lineage()

    row, boxes = await state.call(drawn)
    out: list[s.LineageBoxOut] = []
    for box in boxes:
        out.append(
            s.LineageBoxOut(
                id=box.id,
                title=box.title,
                operator=box.operator,
                parent_ids=list(box.parent_ids),
                messages=box.messages,
                deleted=box.deleted,
            )
        )
    svg = lineage_svg(boxes, mark=row.id)
    if svg and "xmlns=" not in svg.split(">", 1)[0]:
        # A standalone SVG document needs its namespace, or a parser makes it unknown
        # XML whose text is shown run together instead of the drawing.
        svg = svg.replace("<svg ", f'<svg xmlns="{SVG_NS}" ', 1)
    return s.LineageOut(session_id=row.id, boxes=out, svg=svg)


router.include_router(manage.router)
