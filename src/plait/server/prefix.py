"""Ids people can type, on the server: ``/sessions/{session_id}/...`` takes a prefix or ``latest``.

Every router whose paths name a session has :func:`resolve_path_session` as a
dependency. It runs after the caller is authenticated (it depends on
:data:`~plait.server.state.Caller`, so nobody learns which ids exist without a
credential) and before the route reads its path parameters, and replaces the
``session_id`` path parameter with the full id :func:`plait._prefix.resolve_session_id`
finds. Routes, the event hub and the run table therefore only ever see full ids.
The parameter comes percent-encoded (:mod:`plait.server.paths`, so an id may hold a
``/``); it is decoded here, once.
"""

from __future__ import annotations

from fastapi import Request

from plait._prefix import resolve_session_id
from plait.errors import AmbiguousSessionIdError
from plait.server.errors import ApiError
from plait.server.paths import session_path_id
from plait.server.state import Caller, server_state

__all__ = ["resolve_path_session"]

_FULL = 36


async def resolve_path_session(request: Request, who: Caller) -> None:
    """Put the full session id in place of the prefix (or ``latest``) the path gave.

    A full-length id is left as it is (its route answers for it), so the common
    case costs nothing.

    Raises:
        ApiError: 404 ``ambiguous_session_id`` (``details.candidates`` names the
            matches) when the prefix is shared; 404 ``session_not_found`` when nothing matches.
    """
    params = request.path_params
    encoded = params.get("session_id")
    if not isinstance(encoded, str):
        return
    given = params["session_id"] = session_path_id(encoded)
    if len(given) == _FULL:
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
