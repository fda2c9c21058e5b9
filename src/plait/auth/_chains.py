"""Actor chains (RFC 8693 ``{sub, act}``) per agent session, and scope attenuation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Final

from plait.auth._durable import _scope_list
from plait.errors import (
    AuthError,
    InvalidArgumentError,
    ScopeViolationError,
    SessionNotFoundError,
    UnknownOptionError,
)
from plait.records import JSONValue
from plait.run import as_current
from plait.run import current_id as run_current_id
from plait.session import Session, SessionHost, host_of
from plait.session.host import HostOwner, host_for

__all__ = [
    "ACTOR_CHAIN_KEY",
    "POLICIES",
    "PRINCIPAL_ACTOR_KIND",
    "SCOPE_ATTENUATION_EVENT",
    "ScopeAttenuationResult",
    "ScopeViolation",
    "act_on",
    "actor_chain",
    "actor_chain_validate_scope_attenuation",
    "bind_principal",
    "chain_links",
    "current_session",
    "entered",
    "push_actor",
]

ACTOR_CHAIN_KEY: Final = "actor_chain"
"""Where a session keeps its chain: ``metadata["actor_chain"]`` (the snapshot shows it)."""
PRINCIPAL_ACTOR_KIND: Final = "principal"
"""The ``kind`` of an actor entry :func:`act_on` pushes: a principal, not a child agent."""
SCOPE_ATTENUATION_EVENT: Final = "identity.scope_attenuation"
"""The name of the denied trust record an alerting validation writes to the transcript."""
POLICIES: Final = ("non_increasing", "off")
_OPTION_KEYS: Final = ("policy", "raise", "raise_", "alert", "trace_id")
_MAX_DEPTH: Final = 64

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
        session.transcript.log_event(
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
    session.settings.set_metadata(ACTOR_CHAIN_KEY, dict(chain))


def actor_chain(
    session: Session | str | None = None, *, host: SessionHost | HostOwner | None = None
) -> dict[str, JSONValue] | None:
    """Return a session's RFC 8693 ``{sub, act}`` chain, or None (seed 003 ``actor_chain``).

    Args:
        session: the session, or its id (with ``host``); None reads the current
            one: the innermost :func:`entered` session, else (with ``host``) the
            session a run is driving (``plait.current_id()``).
        host: the client (or its ``client.host``) to look an id up in.

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
                target = host_for(host).get(sid)
            except SessionNotFoundError:
                return None
    if target is None or not target.transcript.stored:
        return None
    try:
        chain = target.settings.metadata.get(ACTOR_CHAIN_KEY)
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
        parent = host_of(child).get(parents[0])
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
