"""Durable bearer sessions and actor chains (seed 003).

Two things a service in front of plait needs to know about its callers:

* **Durable bearer sessions** (seed 003 "Durable orchestrator sessions"): an
  opaque bearer token that records who is calling and until when.
  :meth:`DurableSessions.create` returns the raw token once; the store keeps only
  its SHA-256, so a dump or a backup of the database holds no credential.
  :meth:`~DurableSessions.get` and :meth:`~DurableSessions.touch` return None for
  an unknown or expired token, which a server maps straight to HTTP 401;
  ``touch`` moves ``last_seen_at`` and never ``expires_at``; ``expire`` revokes.
  :func:`authenticate` tries static API keys first (in constant time), then
  durable sessions (decisions D60-D63).
* **Actor chains** (RFC 8693 ``{sub, act}``) per agent session: the host binds
  the originating principal when a session is entered (:func:`bind_principal`,
  :func:`entered`), child agent sessions push their own actor
  (:func:`push_actor`), another principal acting on the session is its
  current ``act`` (:func:`act_on`), and :func:`actor_chain` and the session's snapshot
  (``actor_chain``, ``metadata["actor_chain"]``) expose it.
  :func:`actor_chain_validate_scope_attenuation` checks that scopes never grow
  from parent to child (decisions D64-D66).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any, Final, Literal

from plait._checks import check_int
from plait._time import from_micros, to_micros
from plait.errors import (
    AuthError,
    InvalidArgumentError,
    ScopeViolationError,
    SessionNotFoundError,
    UnknownOptionError,
)
from plait.records import JSONValue, dumps
from plait.run import as_current
from plait.run import current_id as run_current_id
from plait.session import Session, SessionHost
from plait.store.base import BearerRow, Store

__all__ = [
    "ACTOR_CHAIN_KEY",
    "SCOPE_ATTENUATION_EVENT",
    "Authenticated",
    "DurableSession",
    "DurableSessions",
    "ScopeAttenuationResult",
    "ScopeViolation",
    "PRINCIPAL_ACTOR_KIND",
    "act_on",
    "actor_chain",
    "actor_chain_validate_scope_attenuation",
    "authenticate",
    "bind_principal",
    "chain_links",
    "check_token_entropy",
    "current_session",
    "entered",
    "new_token",
    "push_actor",
    "token_hash",
]

TOKEN_BYTES: Final = 32
"""Random bytes in a token plait mints (``secrets.token_urlsafe``): 256 bits."""
MIN_TOKEN_BITS: Final = 128
"""The least estimated entropy a caller-given token must carry."""
MIN_TOKEN_LENGTH: Final = 32
MAX_TOKEN_LENGTH: Final = 512
ACTOR_CHAIN_KEY: Final = "actor_chain"
"""Where a session keeps its chain: ``metadata["actor_chain"]`` (the snapshot shows it)."""
PRINCIPAL_ACTOR_KIND: Final = "principal"
"""The ``kind`` of an actor entry :func:`act_on` pushes: a principal, not a child agent."""
SCOPE_ATTENUATION_EVENT: Final = "identity.scope_attenuation"
"""The name of the denied trust record an alerting validation writes to the transcript."""
POLICIES: Final = ("non_increasing", "off")
_OPTION_KEYS: Final = ("policy", "raise", "raise_", "alert", "trace_id")
_MAX_DEPTH: Final = 64
_TOKEN_CHARS: Final = re.compile(r"[A-Za-z0-9\-._~+/=]+")
_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)

# -- tokens -----------------------------------------------------------------------------


def new_token() -> str:
    """Return a new bearer token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    """Return the one-way handle the store keeps for a token: its SHA-256, in hex.

    Safe to log and to show an operator: it cannot be turned back into the token.
    """
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _entropy_bits(token: str) -> float:
    """Estimate a token's entropy: its length times log2 of the alphabet its classes span.

    A heuristic that catches mistakes (a constant, a short or repetitive string, a
    UUID), not a proof of randomness: :func:`check_token_entropy` adds the other rules.
    """
    alphabet = 0
    if any(c.islower() for c in token):
        alphabet += 26
    if any(c.isupper() for c in token):
        alphabet += 26
    if any(c.isdigit() for c in token):
        alphabet += 10
    if any(not c.isalnum() for c in token):
        alphabet += 7
    return len(token) * math.log2(max(alphabet, 2))


def _shannon_per_char(token: str) -> float:
    n = len(token)
    return -sum(c / n * math.log2(c / n) for c in Counter(token).values())


def check_token_entropy(token: object) -> str:
    """Check that a caller-given bearer token is high-entropy; return it.

    Seed 003: caller-supplied session ids must be high entropy. A token must be
    32 to 512 characters from the base64 / URL-safe alphabet; not a UUID (an
    identifier, not a secret: a UUIDv7 holds only 74 random bits); not a repeated
    or sequential pattern; at least 2.5 bits of Shannon entropy per character; and at least 128
    bits by its length and the character classes it uses. ``secrets.token_hex(16)``
    and ``secrets.token_urlsafe(32)`` pass. A heuristic: it refuses mistakes, and
    cannot prove a token random.

    Raises:
        InvalidArgumentError: the token is not a string or fails one of the rules.
    """
    if not isinstance(token, str):
        raise InvalidArgumentError("a bearer token must be a string")
    if not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH:
        raise InvalidArgumentError(
            f"a caller-given bearer token must be {MIN_TOKEN_LENGTH} to {MAX_TOKEN_LENGTH} "
            f"characters (got {len(token)}); omit id to let plait mint one"
        )
    if not _TOKEN_CHARS.fullmatch(token):
        raise InvalidArgumentError("a bearer token may use only letters, digits and - . _ ~ + / =")
    if _UUID.fullmatch(token):
        raise InvalidArgumentError(
            "a UUID is an identifier, not a secret; use secrets.token_urlsafe(32) "
            "or omit id to let plait mint a token"
        )
    periodic = (token + token).find(token, 1) < len(token)
    steps = sum(abs(ord(a) - ord(b)) == 1 for a, b in pairwise(token))
    sequential = steps * 2 > len(token)  # "abcdef...", "9876..."
    per_char = _shannon_per_char(token)
    bits = _entropy_bits(token)
    if periodic or sequential or per_char < 2.5 or bits < MIN_TOKEN_BITS:
        raise InvalidArgumentError(
            "the bearer token is low-entropy (repetitive, or too few distinct characters "
            "for its length); omit id to let plait mint one"
        )
    return token


def _plausible(token: object) -> bool:
    """Whether a presented token is worth a store lookup (anything else is simply unknown)."""
    return isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_LENGTH


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


# -- actor chains -----------------------------------------------------------------------

_current: ContextVar[Session | None] = ContextVar("plait_current_session", default=None)


def current_session() -> Session | None:
    """The innermost session entered (:func:`entered`) in this context, or None."""
    return _current.get()


def _entry(value: object, depth: int) -> dict[str, JSONValue]:
    if not isinstance(value, Mapping):
        raise InvalidArgumentError("an actor chain entry must be a mapping with 'sub'")
    sub = value.get("sub")
    if not isinstance(sub, str) or not sub.strip():
        raise InvalidArgumentError("every actor chain entry needs a non-blank 'sub'")
    if depth > _MAX_DEPTH:
        raise InvalidArgumentError(f"an actor chain may nest at most {_MAX_DEPTH} actors")
    return dict(value)


def chain_links(chain: Mapping[str, Any]) -> list[dict[str, JSONValue]]:
    """Return a chain's entries from parent to child: the principal, then each actor.

    RFC 8693 nests prior actors inside the current one (the outermost ``act`` is
    the current actor), so the innermost ``act`` is the first actor.

    Raises:
        InvalidArgumentError: an entry is not a mapping with a non-blank ``sub``.
    """
    root = _entry(chain, 0)
    actors: list[dict[str, JSONValue]] = []
    act = root.get("act")
    while act is not None:
        entry = _entry(act, len(actors) + 1)
        actors.append(entry)
        act = entry.get("act")
    return [root, *reversed(actors)]


def _entry_scopes(entry: Mapping[str, Any]) -> frozenset[str] | None:
    """The scopes an entry claims (``scopes`` list and/or ``scope`` string), or None."""
    if "scopes" not in entry and "scope" not in entry:
        return None
    found: set[str] = set()
    if "scopes" in entry:
        found.update(_scope_list(entry["scopes"], f"actor {entry.get('sub')!r}"))
    if "scope" in entry:
        if not isinstance(entry["scope"], str):
            raise InvalidArgumentError("'scope' must be a space-separated string")
        found.update(entry["scope"].split())
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class ScopeViolation:
    """A child actor that claims scopes its parent does not hold."""

    index: int
    """The child's place in the chain, parent to child (0 is the principal)."""
    actor: str
    """The child's ``sub``."""
    parent: str
    """The ``sub`` of the nearest ancestor that states its scopes."""
    added: tuple[str, ...]
    """The scopes the child claims beyond its parent's, sorted."""
    scopes: tuple[str, ...]
    """Every scope the child claims, sorted."""
    parent_scopes: tuple[str, ...]
    """The parent's scopes, sorted."""

    def to_dict(self) -> dict[str, JSONValue]:
        """The violation as JSON values (seed 003's typed violation dict)."""
        return {
            "type": "scope_escalation",
            "index": self.index,
            "actor": self.actor,
            "parent": self.parent,
            "added": list(self.added),
            "scopes": list(self.scopes),
            "parent_scopes": list(self.parent_scopes),
        }


@dataclass(frozen=True, slots=True)
class ScopeAttenuationResult:
    """What :func:`actor_chain_validate_scope_attenuation` found."""

    ok: bool
    """True when no child claims more than its parent (or the policy is ``off``)."""
    policy: str
    violations: tuple[ScopeViolation, ...] = ()
    trace_id: str | None = None
    alerted: bool = False
    """Whether a denied ``identity.scope_attenuation`` trust record was written."""

    def to_dict(self) -> dict[str, JSONValue]:
        """The result as JSON values: ``{ok, policy, violations, trace_id, alerted}``."""
        return {
            "ok": self.ok,
            "policy": self.policy,
            "violations": [v.to_dict() for v in self.violations],
            "trace_id": self.trace_id,
            "alerted": self.alerted,
        }


def _violations(chain: Mapping[str, Any]) -> tuple[ScopeViolation, ...]:
    links = chain_links(chain)
    found: list[ScopeViolation] = []
    held: frozenset[str] | None = None  # None: unrestricted (no ancestor stated scopes)
    holder = ""
    for i, entry in enumerate(links):
        claimed = _entry_scopes(entry)
        sub = str(entry["sub"])
        if claimed is None:  # states nothing: inherits its parent's scopes
            continue
        if held is not None and not claimed <= held:
            found.append(
                ScopeViolation(
                    index=i,
                    actor=sub,
                    parent=holder,
                    added=tuple(sorted(claimed - held)),
                    scopes=tuple(sorted(claimed)),
                    parent_scopes=tuple(sorted(held)),
                )
            )
            continue  # judge its children against the parent's scopes, not its claim
        held, holder = claimed, sub
    return tuple(found)


def _options(verb: str, opts: Mapping[str, Any] | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for source in (opts or {}, extra):
        if not isinstance(source, Mapping):
            raise InvalidArgumentError(f"{verb}: options must be a mapping")
        merged.update(source)
    unknown = [str(k) for k in merged if k not in _OPTION_KEYS]
    if unknown:
        raise UnknownOptionError(verb, unknown, [k for k in _OPTION_KEYS if k != "raise_"])
    return merged


def actor_chain_validate_scope_attenuation(
    chain: Mapping[str, Any],
    opts: Mapping[str, Any] | None = None,
    *,
    session: Session | None = None,
    **options: Any,
) -> ScopeAttenuationResult:
    """Check that scopes never grow from parent to child along an actor chain (seed 003).

    Entries may state ``scopes: [...]`` or an OAuth-style ``scope: "a b"``; an
    entry that states neither inherits its parent's. Under the default policy
    ``non_increasing`` every stated set must be a subset of the nearest
    ancestor's stated set; ``off`` checks nothing.

    Args:
        chain: an RFC 8693 ``{sub, act}`` chain.
        opts: seed 003's options: ``policy``, ``raise`` (default True),
            ``alert`` (default False), ``trace_id``. They may also be given as
            keywords (``raise_=False``, since ``raise`` is a Python keyword).
        session: where an alert writes its trust record (required with ``alert``).
        **options: the same options as keywords.

    Returns:
        The result; with ``raise`` False it carries the typed violations.

    Raises:
        ScopeViolationError: a violation, unless ``raise`` is False (an alert is
            written first).
        UnknownOptionError: an option seed 003 does not list.
        InvalidArgumentError: a malformed chain, an unknown policy, or
            ``alert`` without a ``session``.
    """
    given = _options("actor_chain_validate_scope_attenuation", opts, options)
    policy = given.get("policy", "non_increasing")
    if policy not in POLICIES:
        raise InvalidArgumentError(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    should_raise = given.get("raise", given.get("raise_", True))
    alert = given.get("alert", False)
    trace_id = given.get("trace_id")
    if not isinstance(should_raise, bool) or not isinstance(alert, bool):
        raise InvalidArgumentError("raise and alert must be booleans")
    if trace_id is not None and not isinstance(trace_id, str):
        raise InvalidArgumentError("trace_id must be a string")
    if alert and session is None:
        raise InvalidArgumentError("alert=True needs the session to write the trust record to")
    found = _violations(chain) if policy != "off" else ()
    if policy == "off":
        chain_links(chain)  # still refuse a malformed chain
    result = ScopeAttenuationResult(
        ok=not found, policy=str(policy), violations=found, trace_id=trace_id
    )
    if found and alert and session is not None:
        session.log_event(
            SCOPE_ATTENUATION_EVENT,
            {
                "kind": "trust_record",
                "decision": "denied",
                "policy": str(policy),
                "trace_id": trace_id,
                "metadata": {
                    ACTOR_CHAIN_KEY: dict(chain),
                    "actor_chain_alert": {
                        "violations": [v.to_dict() for v in found],
                        "trace_id": trace_id,
                    },
                },
            },
        )
        result = replace(result, alerted=True)
    if found and should_raise:
        worst = found[0]
        raise ScopeViolationError(
            found,
            f"actor {worst.actor!r} claims scope(s) {', '.join(worst.added)} that "
            f"{worst.parent!r} does not hold ({len(found)} violation(s))",
        )
    return result


def _write_chain(session: Session, chain: Mapping[str, JSONValue]) -> None:
    """Store the chain in the session's metadata (one compare-and-set write).

    A top-level metadata key, because seed 003's snapshot shows the chain there.
    """
    session.set_metadata(ACTOR_CHAIN_KEY, dict(chain))


def actor_chain(
    session: Session | str | None = None, *, host: SessionHost | None = None
) -> dict[str, JSONValue] | None:
    """Return a session's RFC 8693 ``{sub, act}`` chain, or None (seed 003 ``actor_chain``).

    Args:
        session: the session, or its id (with ``host``); None reads the current
            one: the innermost :func:`entered` session, else (with ``host``) the
            session a run is driving (``plait.current_id()``).
        host: the client to look an id up in.

    Returns:
        The chain (a copy), or None when no principal is bound, the id is
        unknown, or there is no current session.

    Raises:
        InvalidArgumentError: an id without a ``host``.
    """
    target: Session | None
    if isinstance(session, Session):
        target = session
    else:
        sid = session
        target = _current.get() if sid is None else None
        if target is None and sid is None and host is not None:
            sid = run_current_id()
        if target is None and sid is not None:
            if host is None:
                raise InvalidArgumentError("actor_chain(id) needs host= to look the id up in")
            try:
                target = host.get(sid)
            except SessionNotFoundError:
                return None
    if target is None or not target.stored:
        return None
    try:
        chain = target.metadata.get(ACTOR_CHAIN_KEY)
    except SessionNotFoundError:
        return None
    return dict(chain) if isinstance(chain, Mapping) else None


def _session_arg(value: object, what: str) -> Session:
    """``value`` if it is a session handle; a plait error instead of an AttributeError later."""
    if not isinstance(value, Session):
        raise InvalidArgumentError(f"{what} must be a Session, not {type(value).__name__}")
    return value


def bind_principal(
    session: Session,
    principal: str,
    *,
    scopes: Iterable[str] | str | None = None,
    replace_existing: bool = False,
) -> dict[str, JSONValue]:
    """Bind the originating principal to a session: the root of its actor chain.

    Binding the same principal (and scopes) again changes nothing.

    Args:
        session: the session being entered.
        principal: who the work is done for (a durable session's ``principal``).
        scopes: the scopes granted to the principal (stated only when given).
        replace_existing: allow replacing a different principal already bound.

    Returns:
        The chain stored.

    Raises:
        AuthError: another principal (or other scopes) is bound already.
        InvalidArgumentError: a blank principal or malformed scopes.
    """
    _session_arg(session, "session")
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidArgumentError("a principal must be a non-blank string")
    chain: dict[str, JSONValue] = {"sub": principal}
    if scopes is not None:
        chain["scopes"] = list(_scope_list(scopes, "scopes"))
    existing = actor_chain(session)
    if existing is not None and not replace_existing:
        if existing == chain:
            return existing
        raise AuthError(
            f"session {session.id!r} is bound to principal {existing.get('sub')!r}; "
            "pass replace_existing=True to rebind it"
        )
    _write_chain(session, chain)
    return chain


def push_actor(
    child: Session,
    actor: str,
    *,
    parent: Session | None = None,
    scopes: Iterable[str] | str | None = None,
    validate: bool = True,
) -> dict[str, JSONValue]:
    """Give a child agent session its parent's chain with its own actor pushed on top.

    The new actor becomes the outermost ``act`` (RFC 8693: the current actor);
    the parent's actors nest inside it.

    Args:
        child: the child session.
        actor: the child's deterministic actor name (``sub`` of the new entry).
        parent: the session whose chain it extends; default the child's first
            lineage parent.
        scopes: the scopes the child acts with (stated only when given).
        validate: refuse a chain whose scopes grow (default True).

    Returns:
        The child's chain, as stored.

    Raises:
        AuthError: no parent, or the parent has no principal bound; the child
            has a different chain already.
        ScopeViolationError: ``validate`` and the child claims more than its parent.
    """
    _session_arg(child, "child")
    if parent is not None:
        _session_arg(parent, "parent")
    if not isinstance(actor, str) or not actor.strip():
        raise InvalidArgumentError("an actor name must be a non-blank string")
    if parent is None:
        parents = child.parent_session_ids
        if not parents:
            raise AuthError(f"session {child.id!r} has no parent to take an actor chain from")
        parent = child.host.get(parents[0])
    base = actor_chain(parent)
    if base is None:
        raise AuthError(f"session {parent.id!r} has no principal bound (bind_principal first)")
    entry: dict[str, JSONValue] = {"sub": actor}
    if scopes is not None:
        entry["scopes"] = list(_scope_list(scopes, "scopes"))
    if "act" in base:
        entry["act"] = base["act"]
    chain = {k: v for k, v in base.items() if k != "act"}
    chain["act"] = entry
    if validate:
        actor_chain_validate_scope_attenuation(chain)
    existing = actor_chain(child)
    if existing is not None:
        if existing == chain:
            return existing
        raise AuthError(f"session {child.id!r} already has an actor chain")
    _write_chain(child, chain)
    return chain


def act_on(
    session: Session, principal: str, *, scopes: Iterable[str] | str | None = None
) -> dict[str, JSONValue]:
    """Record that ``principal`` is the one acting on a session now (RFC 8693 ``act``).

    The host's entry for a principal that is not a child agent: a service where
    one principal runs a session another principal created (decisions D101).

    * No chain yet: the principal is bound as the session's root
      (:func:`bind_principal`, with ``scopes``).
    * The chain's current actor (its outermost ``act``, else its ``sub``) is
      the principal: nothing is pushed.
    * Else ``{"sub": principal, "kind": "principal"}`` becomes the outermost
      ``act``, with the chain's actors nested inside it. It states no scopes,
      so it inherits its parent's and never widens them.

    A ``kind: "principal"`` entry already on top (the previous caller) is
    replaced, not nested: the chain names who acts now, not every caller
    since the session began (a host that wants that history records it; the
    HTTP service writes an ``identity.actor_chain`` event).

    Returns:
        The chain stored (unchanged chains are not written again).

    Raises:
        InvalidArgumentError: a blank principal or malformed scopes.
    """
    _session_arg(session, "session")
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidArgumentError("a principal must be a non-blank string")
    existing = actor_chain(session)
    if existing is None:
        return bind_principal(session, principal, scopes=scopes)
    base = dict(existing)
    top = base.get("act")
    if isinstance(top, Mapping) and top.get("kind") == PRINCIPAL_ACTOR_KIND:
        base.pop("act")
        if top.get("act") is not None:
            base["act"] = top["act"]
    current = base.get("act")
    acting = current.get("sub") if isinstance(current, Mapping) else base.get("sub")
    chain: dict[str, JSONValue] = base
    if acting != principal:
        entry: dict[str, JSONValue] = {"sub": principal, "kind": PRINCIPAL_ACTOR_KIND}
        if "act" in base:
            entry["act"] = base["act"]
        chain = {k: v for k, v in base.items() if k != "act"}
        chain["act"] = entry
    chain_links(chain)  # refuse a malformed chain before writing it
    if chain != existing:
        _write_chain(session, chain)
    return chain


@contextmanager
def entered(
    session: Session,
    principal: str | None = None,
    *,
    scopes: Iterable[str] | str | None = None,
) -> Iterator[Session]:
    """Enter a session for the current context (thread or task); bind its principal.

    Inside, :func:`current_session`, ``plait.current_id()`` and :func:`actor_chain`
    with no argument name this session; entries nest and each restores the previous one on exit.

    Args:
        session: the session entered.
        principal: bind this principal first (see :func:`bind_principal`).
        scopes: the principal's scopes.
    """
    if principal is not None:
        bind_principal(session, principal, scopes=scopes)
    token = _current.set(session)
    # Seed 003's current_id() is "the innermost active session": entering one makes
    # plait.current_id() name it too, as a run does for the session it drives.
    try:
        with as_current(session.id):
            yield session
    finally:
        _current.reset(token)
