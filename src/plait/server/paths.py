"""Session ids in URL paths: ``/sessions/{session_id}/...`` for any id, ``/`` included.

A session id may hold any printable character (``user/123``, ``tenant:acme:chat-9``),
so a client puts it in a path percent-encoded, as ``encodeURIComponent`` does:
``/sessions/user%2F123/history``. An ASGI server decodes the path before the
application routes it, and the decoded ``/sessions/user/123/history`` would match
no route (or the wrong one). :class:`SessionIdPaths`, the outermost middleware,
routes on the raw path instead: it puts the id segment into ``scope["path"]``
percent-encoded again (``quote(id, safe="")``: no ``/`` left in it), so the
``{session_id}`` path parameter is always the encoded segment, and
:func:`session_path_id` decodes it exactly once. Paths that name no session are
left as they are.

:func:`session_url` is the other direction, for the URLs the server hands out.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SessionIdPaths", "session_path_id", "session_url"]

_LEAD = "/sessions/"


def session_url(session_id: str, *rest: str) -> str:
    """``/sessions/<id, percent-encoded>/<rest>``: the path of a session's route."""
    return "/".join(["/sessions", quote(session_id, safe=""), *rest])


def session_path_id(param: str) -> str:
    """The session id a ``{session_id}`` path parameter carries (decoded once)."""
    return unquote(param, errors="replace")


def _encoded(segment: str) -> str:
    return quote(segment, safe="")


def routed_path(path: str, raw_path: bytes | None, root_path: str = "") -> str:
    """The path to route: the session id segment kept percent-encoded.

    Args:
        path: the decoded path (``scope["path"]``).
        raw_path: the path as it came on the wire (``scope["raw_path"]``), if the
            server gives it; its query string, if any, is ignored.
        root_path: the prefix the application is mounted at (``scope["root_path"]``).

    Returns:
        ``path`` with the segment after ``/sessions/`` encoded, or ``path`` itself
        when it names no session.
    """
    lead = root_path + _LEAD if root_path and path.startswith(root_path + _LEAD) else _LEAD
    if not path.startswith(lead) or len(path) == len(lead):
        return path
    if raw_path is not None:
        raw = raw_path.decode("latin-1").split("?", 1)[0]
        if raw.startswith(lead):
            segment, slash, rest = raw[len(lead) :].partition("/")
            tail = slash + unquote(rest, errors="replace")
            # The id comes from the wire; the route after it must be the decoded path's.
            if segment and path.endswith(tail):
                return lead + _encoded(unquote(segment, errors="replace")) + tail
    # No raw path: the decoded one is all there is (an id with a "/" cannot be told apart).
    segment, slash, rest = path[len(lead) :].partition("/")
    return lead + _encoded(segment) + slash + rest


class SessionIdPaths:
    """ASGI middleware: route ``/sessions/{session_id}/...`` on the raw, encoded id.

    Args:
        app: the application it wraps.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one ASGI connection scope."""
        if scope["type"] in ("http", "websocket"):
            path = scope.get("path", "")
            routed = routed_path(path, scope.get("raw_path"), scope.get("root_path", "") or "")
            if routed != path:
                scope = dict(scope, path=routed)
        await self._app(scope, receive, send)
