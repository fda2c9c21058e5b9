"""Durable bearer sessions (seed 003): a principal, scopes and an expiry under a token's hash."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from plait._checks import check_int
from plait._time import from_micros, to_micros
from plait.auth._tokens import _plausible, check_token_entropy, new_token, token_hash
from plait.errors import (
    InvalidArgumentError,
)
from plait.records import JSONValue, dumps
from plait.store.base import BearerRow, Store

__all__ = ["DurableSession", "DurableSessions"]


# -- durable sessions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DurableSession:
    """A durable bearer session (seed 003's record shape, plus ``scopes`` and ``handle``).

    ``id`` is the bearer token: it is in API results (the caller gave it or
    :meth:`DurableSessions.create` minted it) but never stored, and never shown
    by ``repr``.
    """

    id: str = field(repr=False)
    """The opaque bearer token. Never persisted in raw form; kept out of ``repr``."""
    principal: str
    """Stable user, tenant, service, or client identity."""
    created_at: datetime
    """Creation time (UTC)."""
    last_seen_at: datetime
    """Last successful touch / authentication (UTC)."""
    expires_at: datetime
    """Absolute expiration time (UTC)."""
    attributes: Mapping[str, JSONValue] = field(default_factory=dict)
    """Small caller-owned metadata such as role, tenant, or client labels."""
    scopes: tuple[str, ...] = ()
    """The scopes granted: the root of the actor chains this session binds."""
    handle: str = ""
    """The stored one-way handle (:func:`token_hash`): safe to log."""

    @classmethod
    def _from_row(cls, token: str, row: BearerRow) -> DurableSession:
        return cls(
            id=token,
            principal=row.principal,
            created_at=from_micros(row.created_at_us),
            last_seen_at=from_micros(row.last_seen_at_us),
            expires_at=from_micros(row.expires_at_us),
            attributes=dict(row.attributes),
            scopes=tuple(row.scopes),
            handle=row.token_hash,
        )

    def to_dict(self, *, include_id: bool = False) -> dict[str, JSONValue]:
        """Return the record as JSON values (RFC 3339 times); the token only if asked."""
        out: dict[str, JSONValue] = {}
        if include_id:
            out["id"] = self.id
        out.update(
            principal=self.principal,
            created_at=self.created_at.isoformat(),
            last_seen_at=self.last_seen_at.isoformat(),
            expires_at=self.expires_at.isoformat(),
            attributes=dict(self.attributes),
            scopes=list(self.scopes),
            handle=self.handle,
        )
        return out


def _utc(moment: object, name: str) -> datetime:
    if not isinstance(moment, datetime):
        raise InvalidArgumentError(f"{name} must be a datetime")
    if moment.tzinfo is None:
        raise InvalidArgumentError(f"{name} must be timezone-aware")
    return moment.astimezone(UTC)


def _scope_list(scopes: object, what: str) -> tuple[str, ...]:
    """Accept a list of scope strings or an OAuth-style space-separated string."""
    if scopes is None:
        return ()
    if isinstance(scopes, str):
        return tuple(dict.fromkeys(scopes.split()))
    if isinstance(scopes, Iterable) and not isinstance(scopes, Mapping | bytes):
        out: list[str] = []
        for s in scopes:
            if not isinstance(s, str) or not s or s != s.strip() or " " in s:
                raise InvalidArgumentError(f"{what}: each scope must be a non-blank word")
            out.append(s)
        return tuple(dict.fromkeys(out))
    raise InvalidArgumentError(f"{what}: scopes must be a list of strings or a string")


class DurableSessions:
    """Durable bearer sessions kept in a store (seed 003 ``create/get/touch/expire``).

    Args:
        store: the store to keep them in (every plait store has the table).
        clock: returns "now" (timezone-aware); tests pass a fake one.
    """

    def __init__(self, store: Store, *, clock: Callable[[], datetime] | None = None) -> None:
        self._store = store
        self._clock = clock or (lambda: datetime.now(UTC))

    def _now(self, now: datetime | None) -> int:
        return to_micros(_utc(now if now is not None else self._clock(), "now"))

    def create(
        self,
        principal: str,
        *,
        expires_at: datetime | None = None,
        ttl: timedelta | None = None,
        id: str | None = None,
        created_at: datetime | None = None,
        attributes: Mapping[str, JSONValue] | None = None,
        scopes: Iterable[str] | str | None = None,
    ) -> DurableSession:
        """Create a durable session and return it with its raw token (the only time).

        Args:
            principal: the stable identity the token stands for (non-blank).
            expires_at: the absolute expiry (timezone-aware); or give ``ttl``.
            ttl: the lifetime from ``created_at`` instead of ``expires_at``.
            id: a caller-chosen token; must pass :func:`check_token_entropy`.
                Omit it to get a fresh 256-bit token.
            created_at: the creation time (default: now).
            attributes: small caller-owned metadata (a JSON object).
            scopes: the scopes granted (a list, or a space-separated string).

        Returns:
            The session; ``.id`` is the bearer token to hand to the client.

        Raises:
            InvalidArgumentError: a blank principal, neither or both of
                ``expires_at`` and ``ttl``, an expiry not after creation, a
                low-entropy ``id``, attributes that are not a JSON object, or a
                token that is already in use.
        """
        if not isinstance(principal, str) or not principal.strip():
            raise InvalidArgumentError("a durable session needs a non-blank principal")
        token = check_token_entropy(id) if id is not None else new_token()
        created = self._now(created_at)
        if (expires_at is None) == (ttl is None):
            raise InvalidArgumentError("give exactly one of expires_at and ttl")
        if ttl is not None:
            if not isinstance(ttl, timedelta):
                raise InvalidArgumentError("ttl must be a timedelta")
            expires = created + ttl // timedelta(microseconds=1)
        else:
            expires = to_micros(_utc(expires_at, "expires_at"))
        if expires <= created:
            raise InvalidArgumentError("expires_at must be after created_at")
        check_int(expires, "expires_at in microseconds since the epoch", lo=created)
        attrs = dict(attributes or {})
        try:
            dumps(attrs)
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"attributes must be a JSON object: {exc}") from exc
        row = BearerRow(
            token_hash=token_hash(token),
            principal=principal,
            scopes=_scope_list(scopes, "scopes"),
            attributes=attrs,
            created_at_us=created,
            last_seen_at_us=created,
            expires_at_us=expires,
        )
        if not self._store.bearer_insert(row):
            raise InvalidArgumentError("that bearer token is already in use; choose another")
        return DurableSession._from_row(token, row)

    def _live(self, token: str, row: BearerRow | None) -> DurableSession | None:
        # The row was found by its hash; compare again in constant time (defence in depth).
        if row is None or not hmac.compare_digest(row.token_hash, token_hash(token)):
            return None
        return DurableSession._from_row(token, row)

    def get(self, token: str, *, now: datetime | None = None) -> DurableSession | None:
        """Return the session of a token, or None when unknown or expired (no touch)."""
        if not _plausible(token):
            return None
        row = self._store.bearer_get(token_hash(token))
        if row is None or row.expires_at_us <= self._now(now):
            return None
        return self._live(token, row)

    def touch(self, token: str, now: datetime | None = None) -> DurableSession | None:
        """Record a successful use: move ``last_seen_at`` to now; never ``expires_at``.

        Returns:
            The touched session, or None when unknown or expired (an expired
            session is rejected without extending its lifetime).
        """
        if not _plausible(token):
            return None
        return self._live(token, self._store.bearer_touch(token_hash(token), self._now(now)))

    def expire(self, token: str, now: datetime | None = None) -> bool:
        """Revoke a session now; returns whether it was live (False: unknown or expired)."""
        if not _plausible(token):
            return False
        return self._store.bearer_expire(token_hash(token), self._now(now))

    def purge(self, expired_before: datetime | None = None) -> int:
        """Delete sessions that expired before this time (default now); return how many."""
        return self._store.bearer_purge(self._now(expired_before))
