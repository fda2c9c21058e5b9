"""Durable bearer sessions, authentication and actor chains (issue 7, seed 003)."""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from plait import Client
from plait.auth import (
    SCOPE_ATTENUATION_EVENT,
    DurableSessions,
    actor_chain,
    actor_chain_validate_scope_attenuation,
    authenticate,
    bind_principal,
    chain_links,
    check_token_entropy,
    current_session,
    entered,
    push_actor,
    token_hash,
)
from plait.errors import (
    AuthError,
    InvalidArgumentError,
    ScopeViolationError,
    UnknownOptionError,
)
from plait.store import SQLiteStore, Store

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def durable(store: Store, clock: Clock) -> DurableSessions:
    return DurableSessions(store, clock=clock)


# -- durable sessions ---------------------------------------------------------------------


def test_create_returns_the_token_once_and_get_finds_it(durable: DurableSessions) -> None:
    made = durable.create(
        "user_123", ttl=timedelta(days=7), attributes={"role": "operator"}, scopes="read write"
    )
    assert len(made.id) >= 43
    assert made.id not in repr(made)  # a token never reaches a log through repr
    assert made.handle == token_hash(made.id) and made.id not in made.to_dict().values()
    assert made.to_dict(include_id=True)["id"] == made.id
    assert (made.principal, made.scopes) == ("user_123", ("read", "write"))
    assert made.created_at == made.last_seen_at == T0
    assert made.expires_at == T0 + timedelta(days=7)
    got = durable.get(made.id)
    assert got is not None and got == made
    # Each create mints a new token.
    assert durable.create("user_123", ttl=timedelta(hours=1)).id != made.id


def test_unknown_expired_or_malformed_tokens_are_none(
    durable: DurableSessions, clock: Clock
) -> None:
    made = durable.create("u", expires_at=T0 + timedelta(hours=1))
    for token in ("", "nope", secrets.token_urlsafe(32), "x" * 5000, made.id + "x"):
        assert durable.get(token) is None
        assert durable.touch(token) is None
        assert durable.expire(token) is False
    clock.now = T0 + timedelta(hours=1)  # expiry is exclusive: at expires_at it is gone
    assert durable.get(made.id) is None
    assert durable.touch(made.id) is None
    # Still stored (for audit) until purged, and never extended by the attempts.
    assert durable.get(made.id, now=T0 + timedelta(minutes=59)) is not None
    clock.now = T0 + timedelta(days=1)
    assert durable.purge() == 1
    assert durable.get(made.id, now=T0) is None


def test_touch_moves_last_seen_and_never_expires_at(
    durable: DurableSessions, clock: Clock
) -> None:
    made = durable.create("u", ttl=timedelta(hours=2))
    clock.now = T0 + timedelta(minutes=30)
    touched = durable.touch(made.id)
    assert touched is not None
    assert touched.last_seen_at == T0 + timedelta(minutes=30)
    assert touched.expires_at == made.expires_at
    # get does not touch; a touch "in the past" does not move last_seen back.
    clock.now = T0 + timedelta(minutes=90)
    got = durable.get(made.id)
    assert got is not None and got.last_seen_at == T0 + timedelta(minutes=30)
    again = durable.touch(made.id, T0 + timedelta(minutes=10))
    assert again is not None and again.last_seen_at == T0 + timedelta(minutes=30)
    assert again.expires_at == made.expires_at


def test_expire_revokes(durable: DurableSessions, clock: Clock) -> None:
    made = durable.create("u", ttl=timedelta(hours=2))
    clock.now = T0 + timedelta(minutes=5)
    assert durable.expire(made.id) is True
    assert durable.get(made.id) is None and durable.touch(made.id) is None
    assert durable.expire(made.id) is False


def test_caller_ids_must_be_high_entropy(durable: DurableSessions) -> None:
    for weak in (
        "a" * 43,
        "ab" * 22,
        "0123456789" * 4,
        "abcdefghijklmnopqrstuvwxyz012345",
        str(uuid.uuid4()),
        "short",
        "has spaces in it but is long enough to pass length",
    ):
        with pytest.raises(InvalidArgumentError):
            durable.create("u", ttl=timedelta(hours=1), id=weak)
    for strong in (secrets.token_hex(16), secrets.token_urlsafe(32), secrets.token_hex(32)):
        assert check_token_entropy(strong) == strong
        made = durable.create("u", ttl=timedelta(hours=1), id=strong)
        assert made.id == strong and durable.get(strong) is not None
    # A token already in use is refused, and the first session is untouched.
    with pytest.raises(InvalidArgumentError, match="already in use"):
        durable.create("someone else", ttl=timedelta(hours=1), id=strong)
    got = durable.get(strong)
    assert got is not None and got.principal == "u"


def test_create_fails_loud_on_bad_arguments(durable: DurableSessions) -> None:
    with pytest.raises(InvalidArgumentError):
        durable.create(" ", ttl=timedelta(hours=1))
    with pytest.raises(InvalidArgumentError):
        durable.create("u")  # no expiry at all
    with pytest.raises(InvalidArgumentError):
        durable.create("u", ttl=timedelta(hours=1), expires_at=T0 + timedelta(hours=1))
    with pytest.raises(InvalidArgumentError):
        durable.create("u", expires_at=T0 - timedelta(seconds=1))
    with pytest.raises(InvalidArgumentError):
        durable.create("u", expires_at=datetime(2030, 1, 1))  # naive
    with pytest.raises(InvalidArgumentError):
        durable.create("u", ttl=timedelta(hours=1), attributes={"x": object()})  # type: ignore[dict-item]


def _sqlite_dump(path: Path) -> str:
    with sqlite3.connect(path) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return "\n".join(
            repr(row) for t in tables for row in db.execute(f'SELECT * FROM "{t}"')
        )


def test_the_raw_token_is_in_no_stored_row_or_file_byte(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "plait.db"
    store = SQLiteStore(path)
    durable = DurableSessions(store, clock=clock)
    tokens = [
        durable.create("user_123", ttl=timedelta(days=1), attributes={"tenant": "acme"}).id,
        durable.create("svc", ttl=timedelta(days=1), id=secrets.token_hex(32)).id,
    ]
    assert durable.touch(tokens[0]) is not None
    dump = _sqlite_dump(path)
    store.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    for token in tokens:
        assert token not in dump and token.encode() not in raw
        assert token_hash(token) in dump  # what is kept instead: a one-way handle
    assert "user_123" in dump and "acme" in dump


def test_the_raw_token_is_in_no_stored_row_on_any_store(
    store: Store, durable: DurableSessions
) -> None:
    token = durable.create("user_123", ttl=timedelta(days=1)).id
    row = store.bearer_get(token_hash(token))
    assert row is not None and token not in repr(row)
    if store.location.startswith("postgresql://"):
        with store._conn("dump") as conn:  # type: ignore[attr-defined]
            rows = conn.execute("SELECT * FROM durable_sessions").fetchall()
        assert rows and token not in repr(rows)


# -- authenticate -------------------------------------------------------------------------


def test_static_keys_first_then_durable_sessions(
    durable: DurableSessions, clock: Clock
) -> None:
    key = secrets.token_urlsafe(32)
    made = durable.create("user_123", ttl=timedelta(hours=1), scopes=["read"])
    keys = {key: "ops-bot"}
    got = authenticate(f"Bearer {key}", static_keys=keys, sessions=durable)
    assert got is not None and (got.principal, got.method, got.session) == (
        "ops-bot", "static_key", None)
    assert authenticate(key, static_keys=[key]) is not None  # bare token, plain key list
    clock.now = T0 + timedelta(minutes=10)
    got = authenticate(f"bearer {made.id}", static_keys=keys, sessions=durable)
    assert got is not None and got.method == "durable_session"
    assert (got.principal, got.scopes) == ("user_123", ("read",))
    assert got.session is not None and got.session.last_seen_at == clock.now  # touched
    # A static key that equals a durable token is tried first.
    both = authenticate(made.id, static_keys={made.id: "shadow"}, sessions=durable)
    assert both is not None and both.method == "static_key"
    for bad in (None, "", "Basic abc", "Bearer", "Bearer a b", "Bearer " + "x" * 50):
        assert authenticate(bad, static_keys=keys, sessions=durable) is None
    assert authenticate(made.id, static_keys=keys) is None  # no session store given
    clock.now = T0 + timedelta(hours=1)
    assert authenticate(made.id, static_keys=keys, sessions=durable) is None  # expired
    stored = durable.get(made.id, now=T0)
    assert stored is not None and stored.expires_at == T0 + timedelta(hours=1)


# -- actor chains -------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Client]:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=tmp_path / "plait.db") as c:
        yield c


def test_bind_push_and_expose_the_chain(api: Client) -> None:
    parent = api.open()
    assert actor_chain(parent) is None and actor_chain() is None
    with entered(parent, "user_123", scopes="repo:read repo:write") as s:
        assert current_session() is s
        assert actor_chain() == {"sub": "user_123", "scopes": ["repo:read", "repo:write"]}
    assert current_session() is None
    # Binding the same principal again changes nothing; another one is refused.
    bind_principal(parent, "user_123", scopes=["repo:read", "repo:write"])
    with pytest.raises(AuthError):
        bind_principal(parent, "mallory")
    child = parent.fork()
    chain = push_actor(child, "agent:planner", scopes=["repo:read"])
    grandchild = child.fork()
    chain2 = push_actor(grandchild, "agent:coder")
    # RFC 8693: the outermost act is the current actor; prior actors nest inside it.
    assert chain2 == {
        "sub": "user_123",
        "scopes": ["repo:read", "repo:write"],
        "act": {"sub": "agent:coder", "act": {"sub": "agent:planner", "scopes": ["repo:read"]}},
    }
    assert [e["sub"] for e in chain_links(chain2)] == ["user_123", "agent:planner", "agent:coder"]
    assert actor_chain(child) == chain
    snap = grandchild.transcript.snapshot()
    assert snap is not None
    assert snap.actor_chain == chain2 and snap.metadata["actor_chain"] == chain2
    assert actor_chain(parent) == {"sub": "user_123", "scopes": ["repo:read", "repo:write"]}
    with entered(grandchild):
        assert actor_chain() == chain2
    # A root with no principal cannot lend a chain; a session with no parent needs one given.
    with pytest.raises(AuthError):
        push_actor(api.open(), "agent:x")
    with pytest.raises(AuthError):
        push_actor(api.open().fork(), "agent:x")


def test_push_refuses_a_scope_escalation(api: Client) -> None:
    parent = api.open()
    bind_principal(parent, "user_123", scopes=["read"])
    child = parent.fork()
    with pytest.raises(ScopeViolationError) as info:
        push_actor(child, "agent:greedy", scopes=["read", "admin"])
    assert actor_chain(child) is None  # nothing stored
    (v,) = info.value.violations
    assert v.added == ("admin",)  # type: ignore[attr-defined]
    # validate=False stores it (the caller takes responsibility).
    push_actor(child, "agent:greedy", scopes=["read", "admin"], validate=False)
    assert actor_chain(child) is not None


def test_scope_attenuation_raises_or_returns_typed_violations() -> None:
    ok_chain = {"sub": "u", "scope": "a b c", "act": {"sub": "x", "scopes": ["a"],
                                                       "act": {"sub": "w", "scope": "a b"}}}
    assert actor_chain_validate_scope_attenuation(ok_chain).ok
    bad = {"sub": "u", "scopes": ["a"], "act": {"sub": "child", "scope": "a admin"}}
    with pytest.raises(ScopeViolationError, match="admin"):
        actor_chain_validate_scope_attenuation(bad)
    with pytest.raises(AuthError):  # ScopeViolationError is an AuthError
        actor_chain_validate_scope_attenuation(bad, {"policy": "non_increasing"})
    result = actor_chain_validate_scope_attenuation(bad, {"raise": False, "trace_id": "t-1"})
    assert not result.ok and result.trace_id == "t-1" and not result.alerted
    (v,) = result.violations
    assert (v.index, v.actor, v.parent, v.added, v.scopes, v.parent_scopes) == (
        1, "child", "u", ("admin",), ("a", "admin"), ("a",))
    as_dict = result.to_dict()
    assert as_dict["violations"] == [v.to_dict()] and as_dict["ok"] is False
    assert actor_chain_validate_scope_attenuation(bad, raise_=False).violations == (v,)
    assert actor_chain_validate_scope_attenuation(bad, policy="off").ok
    # A middle actor that states nothing inherits; an escalation is judged against the
    # nearest ancestor that stated scopes, and later children against the parent's.
    deep = {"sub": "u", "scopes": ["a", "b"],
            "act": {"sub": "z", "scopes": ["a"],
                    "act": {"sub": "y", "scopes": ["a", "b", "c"], "act": {"sub": "x"}}}}
    found = actor_chain_validate_scope_attenuation(deep, raise_=False).violations
    assert [(f.actor, f.index, f.added) for f in found] == [("y", 2, ("c",))]
    with pytest.raises(UnknownOptionError):
        actor_chain_validate_scope_attenuation(ok_chain, {"strict": True})
    with pytest.raises(InvalidArgumentError):
        actor_chain_validate_scope_attenuation(ok_chain, policy="strictest")
    with pytest.raises(InvalidArgumentError):
        actor_chain_validate_scope_attenuation({"act": {"sub": "x"}})  # no sub
    with pytest.raises(InvalidArgumentError):
        actor_chain_validate_scope_attenuation(bad, alert=True)  # nowhere to write


def test_an_alert_writes_a_denied_trust_record(api: Client) -> None:
    s = api.open()
    bad = {"sub": "u", "scopes": ["a"], "act": {"sub": "child", "scopes": ["a", "b"]}}
    with pytest.raises(ScopeViolationError):
        actor_chain_validate_scope_attenuation(bad, {"alert": True, "trace_id": "tr"}, session=s)
    result = actor_chain_validate_scope_attenuation(
        bad, {"alert": True, "raise": False}, session=s
    )
    assert result.alerted
    events = [r for r in s.transcript.records if r.kind == "event"]
    assert [e.payload["name"] for e in events] == [SCOPE_ATTENUATION_EVENT] * 2
    data = events[0].payload["data"]
    assert data["decision"] == "denied" and data["trace_id"] == "tr"
    assert data["metadata"]["actor_chain"] == bad
    assert data["metadata"]["actor_chain_alert"]["violations"][0]["added"] == ["b"]
    # A chain that passes writes nothing.
    good = {"sub": "u", "scopes": ["a"]}
    assert actor_chain_validate_scope_attenuation(good, alert=True, session=s).alerted is False
    assert len([r for r in s.transcript.records if r.kind == "event"]) == 2


def test_entered_is_the_current_session_and_ids_need_a_host(api: Client) -> None:
    import plait

    outer, inner = api.open(), api.open()
    bind_principal(inner, "user_9")
    assert plait.current_id() is None
    with entered(outer, "user_1"):
        assert plait.current_id() == outer.id
        with entered(inner):
            assert plait.current_id() == inner.id and current_session() is inner
            assert actor_chain() == {"sub": "user_9"}
        assert plait.current_id() == outer.id and actor_chain() == {"sub": "user_1"}
    assert plait.current_id() is None and actor_chain() is None
    assert actor_chain(inner.id, host=api) == {"sub": "user_9"}
    assert actor_chain("no-such-session", host=api) is None
    with pytest.raises(InvalidArgumentError):
        actor_chain(inner.id)


def test_actor_chain_of_the_session_a_run_drives(api: Client) -> None:
    from plait.run import as_current

    s = api.open()
    bind_principal(s, "user_7")
    with as_current(s.id):  # what a run does for the session it drives
        assert actor_chain(host=api) == {"sub": "user_7"}
        assert actor_chain() is None  # without a host an id cannot be opened
