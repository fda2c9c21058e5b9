"""Who a session is for: the caller's principal in the session's actor chain (seed 003).

Seed 003: "Hosts bind the originating principal at session entry, and child
agent sessions push their own deterministic actor name onto the chain." The
service is that host (decisions D100-D103):

* a session created (or first opened) through the API is bound to the
  caller's principal (:func:`bind_creator`);
* a run started through the API runs inside :func:`plait.auth.entered`, after
  :func:`plait.auth.act_on` has recorded the caller as the acting principal
  (:func:`enter_run`; a change is also an ``identity.actor_chain`` event), so
  ``plait.current_id()`` and ``plait.auth.actor_chain()`` name the session and
  the caller inside the run and its tools;
* a fork made by an *agent principal* (a durable bearer session whose
  attributes say ``"agent": true``) pushes the agent as an actor on the
  parent's chain, scope attenuation checked before anything is written
  (:func:`check_child`, :func:`bind_child`); a fork by anyone else is a new
  session bound to its creator (forks do not inherit chains, D64).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Final

from plait.auth import (
    Authenticated,
    act_on,
    actor_chain,
    actor_chain_validate_scope_attenuation,
    bind_principal,
    entered,
    push_actor,
)
from plait.records import JSONValue
from plait.session import Session

__all__ = [
    "ACTOR_CHAIN_EVENT",
    "AGENT_ATTRIBUTE",
    "bind_child",
    "bind_creator",
    "check_child",
    "act_for",
    "enter_run",
    "is_agent",
]

ACTOR_CHAIN_EVENT: Final = "identity.actor_chain"
"""The transcript event written when a run's entry changes the session's chain (who acts)."""
AGENT_ATTRIBUTE: Final = "agent"
"""A durable bearer session with ``attributes["agent"] is True`` is an agent principal."""


def _scopes(who: Authenticated) -> list[str] | None:
    """The scopes a chain entry states for the caller: none for an unscoped credential."""
    return list(who.scopes) if who.scopes else None


def is_agent(who: Authenticated) -> bool:
    """Whether the caller is an agent principal (a durable session marked ``agent: true``)."""
    return who.session is not None and who.session.attributes.get(AGENT_ATTRIBUTE) is True


def bind_creator(session: Session, who: Authenticated) -> dict[str, JSONValue] | None:
    """Bind the caller as the session's principal unless one is bound already.

    Returns:
        The session's chain afterwards (None if the session is not stored).
    """
    if not session.transcript.stored:
        return None
    found = actor_chain(session)
    if found is not None:
        return found
    return bind_principal(session, who.principal, scopes=_scopes(who))


def _child_chain(parent: Session, who: Authenticated) -> dict[str, JSONValue] | None:
    """The chain an agent's child of ``parent`` would get (push_actor's rule), or None."""
    if not is_agent(who):
        return None
    base = actor_chain(parent)
    if base is None:
        return None
    entry: dict[str, JSONValue] = {"sub": who.principal}
    scopes = _scopes(who)
    if scopes is not None:
        entry["scopes"] = list(scopes)
    if "act" in base:
        entry["act"] = base["act"]
    chain = {k: v for k, v in base.items() if k != "act"}
    chain["act"] = entry
    return chain


def check_child(parent: Session, who: Authenticated) -> None:
    """Refuse, before a fork is made, a child whose agent claims more than its parent holds.

    Raises:
        ScopeViolationError: the agent's scopes widen the parent's chain (HTTP 403
            ``scope_violation``); nothing is written.
    """
    chain = _child_chain(parent, who)
    if chain is not None:
        actor_chain_validate_scope_attenuation(chain)


def bind_child(parent: Session, child: Session, who: Authenticated) -> dict[str, JSONValue] | None:
    """Give a fork its chain: the agent pushed on the parent's chain, else the creator bound.

    Returns:
        The child's chain.

    Raises:
        ScopeViolationError: the agent's scopes widen the parent's chain.
    """
    if _child_chain(parent, who) is not None:
        return push_actor(child, who.principal, parent=parent, scopes=_scopes(who))
    return bind_creator(child, who)


def enter_run(session: Session, who: Authenticated) -> AbstractContextManager[Session]:
    """Record the caller as the acting principal and enter the session for a run.

    A run made inside the returned context copies it into its task, so its
    tools and callbacks see ``plait.current_id()`` and ``actor_chain()``.
    """
    act_for(session, who)
    return entered(session)


def act_for(session: Session, who: Authenticated) -> None:
    """Record the caller as the acting principal of the session's next run (store calls).

    When that changes a bound chain (another principal acts now), an
    ``identity.actor_chain`` event ``{principal, actor_chain, previous}``
    records it: the chain names who acts now, the transcript keeps who did.
    """
    before = actor_chain(session)
    after = act_on(session, who.principal, scopes=_scopes(who))
    if before is not None and after != before:  # a first binding is the chain itself
        session.transcript.log_event(
            ACTOR_CHAIN_EVENT,
            {"principal": who.principal, "actor_chain": after, "previous": before},
        )
