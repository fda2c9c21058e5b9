"""A write leaves no lock behind: only a run in progress holds its session (D94).

:class:`ReleaseIdleLocks` is a plain ASGI middleware: once a request that may write
(any method but ``GET``, ``HEAD`` and ``OPTIONS``) answers, the locks the server's
client holds for no run are let go, before the answer's head reaches the client, so
a client that reads the answer can open the session from another process at once.
It touches nothing of the body, so streamed answers (a run, an event stream) pass
through as the application sends them. A failure to let go is logged, and the request
keeps its own answer: what it wrote is written, and the next write tries again (D227).
"""

from __future__ import annotations

import logging
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from plait.server.state import ServerState

__all__ = ["ReleaseIdleLocks"]

_READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_log = logging.getLogger("plait.server")


class ReleaseIdleLocks:
    """Release the server's idle writer locks as each write request answers.

    Args:
        app: the application inside.
        state: the server's state (its client holds the locks).
    """

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the request; let go of idle locks before its answer starts, or after it fails."""
        if scope["type"] != "http" or scope["method"] in _READS:
            await self.app(scope, receive, send)
            return
        pending = True

        async def let_go() -> None:
            nonlocal pending
            pending = False
            if not self.state.client.host.idle_locks:
                return
            try:
                await self.state.call(self.state.client.host.release_idle)
            except Exception:  # the request's own answer stands; the next write tries again
                _log.exception("could not give up the idle writer locks")

        async def answer(message: Message) -> None:
            if pending and message["type"] == "http.response.start":
                await let_go()
            await send(message)

        try:
            await self.app(scope, receive, answer)
        finally:
            if pending:  # it failed before it answered
                await let_go()
