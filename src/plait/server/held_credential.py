"""Long-lived event streams that last only as long as the credential that opened them.

A request is authenticated when it arrives; an event stream may stay open for hours
after. Both streams a caller can hold open (``GET /sessions/{id}/events`` and a run's
own stream, ``POST .../runs`` or ``.../resume`` with ``stream: true``) pass their bytes
through :func:`while_credential_holds`, so a durable bearer token that expires or is
revoked ends them the same way (a run outlives its own stream's ending, D264).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Literal

from plait.auth import Authenticated
from plait.server.state import ServerState

__all__ = ["credential_ended", "while_credential_holds"]


def credential_ended(reason: Literal["expired", "revoked"]) -> bytes:
    """The ``credential_ended`` event that closes a stream whose token stopped holding.

    It has no id, so a reconnect resumes where the data stopped.

    Args:
        reason: Why the token no longer holds.

    Returns:
        The event's bytes.
    """
    said = "the bearer token expired" if reason == "expired" else "the bearer token was revoked"
    data = json.dumps({"reason": reason, "message": f"{said}; sign in again to follow"})
    return f"event: credential_ended\ndata: {data}\n\n".encode()


async def while_credential_holds(
    state: ServerState, who: Authenticated, stream: AsyncGenerator[bytes, None]
) -> AsyncGenerator[bytes, None]:
    """``stream`` for as long as the durable token that opened it stays live.

    Before each chunk (the stream sends a keep-alive at least every ``ping_interval``),
    the token's expiry is compared with the clock, and at most every ``ping_interval``
    the store is asked again whether the token is live (a revocation). A static key is
    configuration, fixed for the server's life: it is not asked again. Either ending
    closes ``stream`` (which releases its subscription) after a ``credential_ended``.

    Args:
        state: The server's state (its clock interval and its bearer store).
        who: The caller that opened the stream.
        stream: The stream's bytes.

    Returns:
        The bytes of ``stream``, cut at the credential's end.
    """
    token = who.session
    if who.method != "durable_session" or token is None:
        async with contextlib.aclosing(stream) as inner:
            async for chunk in inner:
                yield chunk
        return
    bearer, expires = token.id, token.expires_at
    checked = time.monotonic()
    async with contextlib.aclosing(stream) as inner:
        async for chunk in inner:
            if datetime.now(UTC) >= expires:
                yield credential_ended("expired")
                return
            if time.monotonic() - checked >= state.ping_interval:
                live = await state.call(lambda: state.bearers.get(bearer))
                checked = time.monotonic()
                if live is None:
                    yield credential_ended("expired" if datetime.now(UTC) >= expires else "revoked")
                    return
            yield chunk
