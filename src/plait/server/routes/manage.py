"""``/sessions/{id}/compact``, ``uncompact``, ``rewind``, ``context``, ``export``: the other verbs.

Compaction here is the model-free default (masking plus an extractive summary): the
server spends no model call on a button. ``dry_run`` is the preview the page shows
before it asks "fold these?". Export answers with the document itself, as an
attachment named by the whole id (never two sessions' exports under one name).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from plait._ids import id_slug
from plait.errors import InvalidArgumentError, NothingToDoError
from plait.server import schemas as s
from plait.server.state import Caller, Writer, server_state
from plait.session import Session

__all__ = ["router"]

# Included in the sessions router, whose dependency resolves id prefixes first.
router = APIRouter(tags=["sessions"])

_TYPES = {"html": "text/html; charset=utf-8", "md": "text/markdown; charset=utf-8"}


@router.post("/sessions/{session_id}/compact", response_model=s.CompactOut, summary="Compact")
async def compact_session(
    request: Request, session_id: str, body: s.CompactIn, who: Writer
) -> s.CompactOut:
    """Fold the older messages into a summary now (nothing is deleted).

    With ``dry_run``, say what would be folded and write nothing. 409 ``nothing_to_do``
    when nothing is worth folding. With a live controller attached only it may compact
    (``client_id``), else 403: what its runs see changes.
    """
    state = server_state(request)
    session = await state.call(lambda: state.session(session_id))
    if not body.dry_run:
        await state.call(lambda: state.check_driver(session, body.client_id, who))
    options: dict[str, object] = {}
    if body.keep_last is not None:
        options["keep_last"] = body.keep_last
    if body.dry_run:
        plan = await state.call(lambda: session.transcript.compact_preview(options))
        if plan is None:
            raise NothingToDoError("nothing worth folding")
        return s.CompactOut(
            session_id=session_id,
            dry_run=True,
            compressed=plan.compressed,
            kept=plan.kept_count,
            folds=[plan.folds_from, plan.folds_to],
            summary=None,
        )
    done = await session.compact(options)  # its store calls are made off the loop
    if done is None:
        raise NothingToDoError("nothing worth folding")
    await state.hub.refresh(session_id)
    return s.CompactOut(
        session_id=session_id,
        dry_run=False,
        compressed=done.compressed,
        kept=done.kept,
        folds=[done.folds_from, done.folds_to],
        summary=done.summary,
    )


@router.post("/sessions/{session_id}/rewind", response_model=s.RewindOut, summary="Rewind")
async def rewind_session(
    request: Request, session_id: str, body: s.RewindIn, who: Writer
) -> s.RewindOut:
    """Keep the first ``keep_first`` messages under the same id, or undo the newest rewind.

    Nothing is lost: what the session held stays in its lineage as a hidden head
    (``hidden_head``), which ``undo`` brings back. 422 when neither or both are given,
    409 ``nothing_to_do`` when nothing lies past that message or there is no rewind to
    undo. With a live controller attached only it may rewind (``client_id``), else 403.
    """
    if body.undo == (body.keep_first is not None):
        raise InvalidArgumentError("give keep_first, or undo: true")
    state = server_state(request)
    keep_first = body.keep_first

    def rewound() -> s.RewindOut:
        session = state.session(session_id)
        state.check_driver(session, body.client_id, who)
        transcript = session.transcript
        if keep_first is not None:
            hidden = transcript.rewind(keep_first)
        else:
            hidden = transcript.undo_rewind()
        return s.RewindOut(
            session_id=session.id,
            length=session.transcript.length,
            version=session.live.version,
            hidden_head=hidden,
        )

    out = await state.call(rewound)
    await state.hub.refresh(session_id)
    return out


@router.post("/sessions/{session_id}/uncompact", response_model=s.OkOut, summary="Uncompact")
async def uncompact_session(
    request: Request, session_id: str, who: Writer, body: s.UncompactIn | None = None
) -> s.OkOut:
    """Undo the newest compaction: what it folded shows again (409 when there is none).

    With a live controller attached only it may (``client_id``), else 403.
    """
    state = server_state(request)
    client_id = body.client_id if body is not None else None

    def uncompacted() -> None:
        session = state.session(session_id)
        state.check_driver(session, client_id, who)
        session.transcript.uncompact()

    await state.call(uncompacted)
    await state.hub.refresh(session_id)
    return s.OkOut(ok=True)


@router.get("/sessions/{session_id}/context", response_model=s.ContextOut, summary="Context")
async def session_context(request: Request, session_id: str, who: Caller) -> s.ContextOut:
    """How full the model's window is, by source; ``report`` is null before the first reply.

    The shares add up to ``used`` (the provider's count, when a reply gave one, can hold
    what no source accounts for: the ``Unattributed`` share).
    """
    state = server_state(request)
    report = await state.call(lambda: state.session(session_id).context())
    if report is None:
        return s.ContextOut(session_id=session_id, report=None)
    return s.ContextOut(
        session_id=session_id,
        report=s.ContextReportOut(
            window=report.window,
            used=report.used,
            free=report.free,
            fraction=report.fraction,
            from_provider=report.from_provider,
            measured_by=report.measured_by,
            partial=report.partial,
            shares=[s.ShareOut(name=x.name, tokens=x.tokens, items=x.items) for x in report.shares],
            window_source=report.window_source,
        ),
    )


@router.get(
    "/sessions/{session_id}/export",
    summary="Export",
    response_class=Response,
    responses={
        200: {
            "description": "The page (HTML, self-contained, runs no script) or Markdown.",
            "content": {"text/html": {}, "text/markdown": {}},
        }
    },
)
async def export_session(
    request: Request,
    session_id: str,
    who: Caller,
    format: Annotated[Literal["html", "md"], Query()] = "html",
) -> Response:
    """The session as the document ``plait export`` writes, as a download."""
    state = server_state(request)

    def exported() -> tuple[Session, bytes]:
        session = state.session(session_id)
        with tempfile.TemporaryDirectory(prefix="plait-export-") as folder:
            target = Path(folder) / f"page.{format}"
            if format == "html":
                session.export(target)
            else:
                session.export(target, format="markdown")
            return session, target.read_bytes()

    session, body = await state.call(exported)
    name = f"plait-{id_slug(session.id)}.{format}"
    return Response(
        body,
        media_type=_TYPES[format],
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Content-Type-Options": "nosniff",
        },
    )
