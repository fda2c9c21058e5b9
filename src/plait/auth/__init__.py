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

One module per concern: ``_tokens`` (minting and hashing tokens), ``_durable``
(:class:`DurableSessions`), ``_authenticate`` (:func:`authenticate`) and ``_chains``
(actor chains and scope attenuation).
"""

from __future__ import annotations

from plait.auth._authenticate import (
    Authenticated,
    authenticate,
)
from plait.auth._chains import (
    ACTOR_CHAIN_KEY,
    PRINCIPAL_ACTOR_KIND,
    SCOPE_ATTENUATION_EVENT,
    ScopeAttenuationResult,
    ScopeViolation,
    act_on,
    actor_chain,
    actor_chain_validate_scope_attenuation,
    bind_principal,
    chain_links,
    current_session,
    entered,
    push_actor,
)
from plait.auth._durable import (
    DurableSession,
    DurableSessions,
)
from plait.auth._tokens import (
    check_token_entropy,
    new_token,
    token_hash,
)

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
