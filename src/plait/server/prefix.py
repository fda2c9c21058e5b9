"""Ids on the server: ``/sessions/{session_id}/...`` takes the exact id, a prefix on request.

A path names a session by its exact id. A program that names its own sessions
(``1``, ``2026-12-05``) must never have a read or a write land in another session
whose id merely starts with it (``17``, ``2026-12-05-evening``), so a prefix is
resolved only where the caller asks for one: with ``?prefix=true`` (what the web
page does with an id typed in its address), or with the word ``latest`` (the most
recently active session; a session whose id is ``latest`` is itself).

Every router whose paths name a session has :func:`resolve_path_session` as a
dependency. It runs after the caller is authenticated (it depends on
:data:`~plait.server.state.Caller`, so nobody learns which ids exist without a
credential) and before the route reads its path parameters, and, when asked,
replaces the ``session_id`` path parameter with the full id
:func:`plait._prefix.resolve_session_id` finds. Routes, the event hub and the run
table therefore only ever see full ids (or an exact one that may not exist, which
the route answers 404).
The parameter comes percent-encoded (:mod:`plait.server.paths`, so an id may hold a
``/``); it is decoded here, once.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from plait._prefix import LATEST, resolve_session_id
from plait.errors import AmbiguousSessionIdError
from plait.server.errors import ApiError
from plait.server.paths import session_path_id
from plait.server.state import Caller, server_state

__all__ = ["resolve_path_session"]

_FULL = 36


_PREFIX_HELP = (
    "Resolve the path's session id as a unique prefix of an id (any case). Without it "
    "the path names the exact id; `latest` always names the most recently active session."
)


async def resolve_path_session(
    request: Request,
    who: Caller,
    prefix: Annotated[bool, Query(description=_PREFIX_HELP)] = False,
) -> None:
    """Put the full session id in place of the prefix (or ``latest``) the path gave.

    Only when asked: with ``prefix`` true, or for the word ``latest``. Otherwise,
    and for a full-length id, the id is left as it is (its route answers for it,
    404 when there is none), so the common case costs nothing and no write lands
    in a session it did not name.

    Args:
        request: the request whose ``session_id`` path parameter is resolved.
        who: the authenticated caller (resolving needs a credential).
        prefix: the ``?prefix=`` query parameter.

    Raises:
        ApiError: 404 ``ambiguous_session_id`` (``details.candidates`` names the
            matches) when the prefix is shared; 404 ``session_not_found`` when nothing matches.
    """
    params = request.path_params
    encoded = params.get("session_id")
    if not isinstance(encoded, str):
        return
    given = params["session_id"] = session_path_id(encoded)
    asked = prefix or given.strip().lower() == LATEST
    if not asked or len(given) == _FULL:
        return
    try:
        state = server_state(request)
        scope = state.all_workspaces
        params["session_id"] = await state.call(
            lambda: resolve_session_id(state.client, given, all_workspaces=scope)
        )
    except AmbiguousSessionIdError as exc:
        raise ApiError(
            404, "ambiguous_session_id", str(exc), {"candidates": list(exc.candidates)}
        ) from exc
