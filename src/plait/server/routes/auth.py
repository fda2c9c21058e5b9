"""``/auth``: who a credential is, and durable bearer sessions (seed 003)."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request

from plait.server import schemas as s
from plait.server.errors import ApiError
from plait.server.state import Caller, server_state

__all__ = ["router"]

router = APIRouter(tags=["auth"])


@router.get("/auth/whoami", response_model=s.WhoAmIOut, summary="Who am I")
async def whoami(who: Caller) -> s.WhoAmIOut:
    """The principal the credential stands for, and how it was checked."""
    return s.WhoAmIOut(
        principal=who.principal,
        method=who.method,
        scopes=list(who.scopes),
        expires_at=who.session.expires_at.isoformat() if who.session is not None else None,
    )


@router.post(
    "/auth/sessions", response_model=s.AuthSessionOut, status_code=201, summary="Mint a token"
)
async def create_bearer(request: Request, body: s.AuthSessionIn, who: Caller) -> s.AuthSessionOut:
    """Mint a durable bearer session; only a static API key may (else 403 ``forbidden``).

    The token is in ``id`` here and never again: the store keeps its hash only.
    """
    if who.method != "static_key":
        raise ApiError(403, "forbidden", "only a static API key may mint bearer sessions")
    state = server_state(request)
    made = await state.call(
        lambda: state.bearers.create(
            body.principal,
            ttl=timedelta(seconds=body.ttl_seconds),
            attributes=body.attributes,
            scopes=body.scopes,
        )
    )
    return s.AuthSessionOut.model_validate(made.to_dict(include_id=True))


@router.delete("/auth/sessions/current", response_model=s.OkOut, summary="Revoke this token")
async def expire_bearer(request: Request, who: Caller) -> s.OkOut:
    """Expire the durable bearer session this request authenticated with (409 for a static key)."""
    if who.session is None:
        raise ApiError(409, "nothing_to_do", "a static API key cannot be revoked over HTTP")
    state, token = server_state(request), who.session.id
    await state.call(lambda: state.bearers.expire(token))
    return s.OkOut()
