"""Who is calling: static API keys first (constant time), then durable sessions."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from plait.auth._durable import DurableSession, DurableSessions
from plait.auth._tokens import _plausible
from plait.errors import (
    InvalidArgumentError,
)

__all__ = ["Authenticated", "authenticate"]


# -- authentication ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Authenticated:
    """Who a bearer credential stands for."""

    principal: str
    """The caller's identity: the static key's principal or the durable session's."""
    method: Literal["static_key", "durable_session"]
    """Which verifier accepted it."""
    scopes: tuple[str, ...] = ()
    """The scopes granted (a durable session's; empty for a static key)."""
    session: DurableSession | None = None
    """The touched durable session, or None for a static key."""


def _bearer_token(bearer: object) -> str | None:
    """Take the token out of ``"Bearer <token>"`` (or a bare token); None if malformed."""
    if not isinstance(bearer, str):
        return None
    text = bearer.strip()
    scheme, space, rest = text.partition(" ")
    if space:
        if scheme.lower() != "bearer":
            return None
        text = rest.strip()
    return text if text and " " not in text else None


def _static_keys(static_keys: object) -> list[tuple[str, str]]:
    """``(key, principal)`` pairs from a mapping or an iterable of keys, each checked.

    A single string is refused rather than iterated: its characters would each
    become a one-letter key.
    """
    if isinstance(static_keys, str | bytes | bytearray):
        raise InvalidArgumentError(
            "static_keys must be a list of keys or a {key: principal} mapping, not one string"
        )
    if isinstance(static_keys, Mapping):
        pairs = list(static_keys.items())
    elif isinstance(static_keys, Iterable):
        pairs = [(k, "api-key") for k in static_keys]
    else:
        raise InvalidArgumentError(
            f"static_keys must be a list of keys or a mapping, not {type(static_keys).__name__}"
        )
    for key, principal in pairs:
        if not isinstance(key, str) or not key:
            raise InvalidArgumentError("each static key must be a non-empty string")
        if not isinstance(principal, str) or not principal:
            raise InvalidArgumentError("each static key's principal must be a non-empty string")
    return pairs


def authenticate(
    bearer: str | None,
    *,
    static_keys: Mapping[str, str] | Iterable[str] = (),
    sessions: DurableSessions | None = None,
    now: datetime | None = None,
) -> Authenticated | None:
    """Authenticate a bearer credential: static API keys first, then durable sessions.

    Seed 003's composition: the configured static keys are tried first (every
    one of them, compared in constant time), then the durable sessions, whose
    successful use touches ``last_seen_at``. An expired session is rejected
    without extending its lifetime.

    Args:
        bearer: the ``Authorization`` header value (``"Bearer <token>"``) or the
            bare token; None or malformed is simply not authenticated.
        static_keys: ``{key: principal}``, or plain keys (principal ``api-key``).
        sessions: the durable sessions to try after the keys, if any.
        now: the time to judge expiry by (default: the sessions' clock).

    Returns:
        Who the credential stands for, or None (HTTP 401).

    Raises:
        InvalidArgumentError: ``static_keys`` is one string (not a list of
            keys), or holds a key or principal that is not a non-empty string;
            ``sessions`` is not :class:`DurableSessions`.
    """
    keys = _static_keys(static_keys)
    if sessions is not None and not isinstance(sessions, DurableSessions):
        raise InvalidArgumentError(
            f"sessions must be DurableSessions or None, not {type(sessions).__name__}"
        )
    token = _bearer_token(bearer)
    if token is None or not _plausible(token):
        return None
    presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
    matched: str | None = None
    for key, principal in keys:
        # Equal-length digests, and no early exit: the time taken says nothing of the keys.
        candidate = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        if hmac.compare_digest(presented, candidate) and matched is None:
            matched = principal
    if matched is not None:
        return Authenticated(principal=matched, method="static_key")
    if sessions is None:
        return None
    found = sessions.touch(token, now)
    if found is None:
        return None
    return Authenticated(
        principal=found.principal, method="durable_session", scopes=found.scopes, session=found
    )
