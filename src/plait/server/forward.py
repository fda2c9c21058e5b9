"""A session's writes go to the replica that runs it (D256).

While a run is in progress, its replica holds the session's writer lock: another
replica could not append a steer, an approval's answer, a live client's attach or
heartbeat, an injected message. So every request that may write (any method but
``GET``, ``HEAD`` and ``OPTIONS``) to ``/sessions/{id}/...`` on a replica that
does not run that session's run, while another live replica that peers can reach
does, is sent to that replica as it came (the caller's credential included), and
that replica's answer is the answer. A forwarded request carries
:data:`~plait.server.fleet.FORWARDED_BY` and is never forwarded again: the replica
it reaches answers it itself, so two replicas that disagree about who runs a
session cannot send a request back and forth.

A replica with no live peer (one process, on SQLite or not) forwards nothing and
makes no store call for it.
"""

from __future__ import annotations

import logging
from typing import Final

import httpx
from fastapi import Request
from fastapi.responses import Response

from plait.server.errors import ApiError
from plait.server.fleet import FORWARDED_BY
from plait.server.state import Caller, server_state

__all__ = ["Forwarded", "forward_writes"]

_READS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_HOP_HEADERS: Final = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "upgrade"}
)
FORWARD_TIMEOUT: Final = 60.0
"""Seconds a forwarded request may take (a cancel waits for its run to stop)."""

_log = logging.getLogger("plait.server")


class Forwarded(Exception):
    """The answer another replica gave to a request this replica forwarded."""

    def __init__(self, response: Response) -> None:
        super().__init__("forwarded")
        self.response = response


async def forward_writes(request: Request, who: Caller) -> None:
    """Send a write to the replica that runs the session, if another one does.

    A dependency of every ``/sessions/{id}`` router, after the id is resolved.

    Raises:
        Forwarded: the other replica's answer (the application returns it as is).
        ApiError: 502 ``replica_unreachable`` when that replica did not answer.
    """
    if request.method in _READS or request.headers.get(FORWARDED_BY):
        return
    state = server_state(request)
    fleet = state.fleet
    session_id = request.path_params.get("session_id")
    if not fleet.forwards or not isinstance(session_id, str) or state.run_here(session_id):
        return
    runner = await state.call(lambda: fleet.runner(session_id))
    if runner is None or runner.replica_url is None:
        return
    body = await request.body()
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
    headers[FORWARDED_BY] = fleet.replica_id
    raw = request.scope.get("raw_path")  # as sent: an id holding "/" stays one segment
    path = raw.decode("latin-1") if isinstance(raw, bytes) else request.url.path
    target = runner.replica_url + path
    if request.url.query:
        target += "?" + request.url.query
    try:
        answer = await state.peers().request(
            request.method, target, content=body, headers=headers, timeout=FORWARD_TIMEOUT
        )
    except httpx.HTTPError as exc:
        _log.warning("could not forward %s %s to %s: %s", request.method, target, runner, exc)
        raise ApiError(
            502,
            "replica_unreachable",
            f"session {session_id} is run by replica {runner.replica_id}, "
            f"which did not answer: {exc}",
        ) from exc
    kept = {
        k: v
        for k, v in answer.headers.items()
        if k.lower() not in _HOP_HEADERS and k.lower() != "content-encoding"
    }
    raise Forwarded(Response(answer.content, status_code=answer.status_code, headers=kept))
