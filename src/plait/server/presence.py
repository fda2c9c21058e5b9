"""Live clients present by their open event streams: one that is gone gives up its place.

A web page attaches as a session's controller and follows the session on an event stream
that names its client id (``GET /sessions/{id}/events?client_id=...``). A page that dies
without saying so (a killed tab, a closed laptop, a lost network) would stay attached for
good: every tool call of a run waits for its answer and is denied, and no one else may
run until someone takes over. So a client whose streams have all been closed for
``grace`` seconds is released (a ``detach`` with reason ``gone``), unless one opened again
meanwhile (a reconnect). A client that never names itself on a stream is never released
here: presence is what the client showed, not a lease it must renew (decisions D231).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

__all__ = ["DEFAULT_GRACE", "Presence"]

DEFAULT_GRACE: Final = 30.0
"""Seconds a client may be without an open stream before it is released (a reconnect)."""

_log = logging.getLogger("plait.server")

Key = tuple[str, str, str]
"""``(session_id, client_id, principal)``: who showed itself on the streams."""


class Presence:
    """Count each live client's open event streams; release one gone from all of them.

    Args:
        grace: seconds without an open stream before ``release`` is called.
        release: what releases ``(session_id, client_id, principal)``: it checks the
            client is still attached and still that principal's (and that no other
            replica has a stream naming it), and gives up its place.
        counted: told ``(session_id, client_id, open streams)`` at each change, so the
            other replicas of a fleet know the client is present here.
    """

    def __init__(
        self,
        grace: float,
        release: Callable[[str, str, str], Awaitable[None]],
        counted: Callable[[str, str, int], None] | None = None,
    ) -> None:
        self._grace = grace
        self._release = release
        self._counted = counted
        self._open: dict[Key, int] = {}
        self._pending: dict[Key, asyncio.Task[None]] = {}
        self._closed = False

    def joined(self, session_id: str, client_id: str, principal: str) -> None:
        """A stream naming the client opened: it is present (a pending release is called off)."""
        key = (session_id, client_id, principal)
        self._open[key] = self._open.get(key, 0) + 1
        if self._counted is not None:
            self._counted(session_id, client_id, self._open[key])
        pending = self._pending.pop(key, None)
        if pending is not None:
            pending.cancel()

    def left(self, session_id: str, client_id: str, principal: str) -> None:
        """A stream naming the client closed: with none left open, release it after the grace."""
        key = (session_id, client_id, principal)
        left = self._open.get(key, 0) - 1
        if self._counted is not None:
            self._counted(session_id, client_id, max(left, 0))
        if left > 0:
            self._open[key] = left
            return
        self._open.pop(key, None)
        if not self._closed and key not in self._pending:
            self._pending[key] = asyncio.get_running_loop().create_task(self._gone(key))

    def close(self) -> None:
        """Call off every pending release, and make none from now on.

        The server is stopping: its streams end too, and a client that follows the
        session again after a restart is present again.
        """
        self._closed = True
        for task in self._pending.values():
            task.cancel()
        self._pending.clear()

    async def _gone(self, key: Key) -> None:
        try:
            await asyncio.sleep(self._grace)
            if key in self._open:
                return
            await self._release(*key)
        except asyncio.CancelledError:
            raise
        except Exception:  # a store failure: the client stays, as if it had not left
            _log.exception("releasing live client %s of session %s failed", key[1], key[0])
        finally:
            if self._pending.get(key) is asyncio.current_task():
                self._pending.pop(key, None)
