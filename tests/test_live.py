"""Live clients: observers, the one controller, takeover (issue 7, seed 003)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import (
    ClientNotAttachedError,
    ControllerConflictError,
    InvalidArgumentError,
    NotControllerError,
    SessionClosedError,
    SessionNotFoundError,
    UnknownOptionError,
)
from plait.live import (
    DEFAULT_CACHE_SIZE,
    LIVE_CLIENT_EVENT,
    PERMISSION_ROUTE_EVENT,
    LiveClients,
)
from plait.records import Record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def events(s: Session, name: str = LIVE_CLIENT_EVENT) -> list[dict[str, object]]:
    return [dict(r.payload["data"]) for r in s.transcript.records
            if r.kind == "event" and r.payload["name"] == name]


def second_client(client: Client, tmp_path: Path) -> Client:
    """Another client on the same database through its own store connection."""
    if client.store.location == ":memory:":
        pytest.skip("an in-memory store has one connection")
    ws = tmp_path / "ws2"
    ws.mkdir(exist_ok=True)
    return Client(ws, store=client.store.location)


def test_seed_003_manage_clients(client: Client) -> None:
    live = LiveClients(client)
    s = client.open("incident-debug")
    portal = live.attach(s, "portal", {"mode": "observer"})
    assert (portal.action, portal.mode, portal.controller_id) == ("attach", "observer", None)
    tui = live.attach(s, "tui", {"mode": "controller"})
    assert (tui.mode, tui.controller_id) == ("controller", "tui")
    # A second controller must make takeover explicit.
    with pytest.raises(ControllerConflictError) as info:
        live.attach(s, "mobile", mode="controller")
    assert info.value.controller_id == "tui"
    assert live.controller_id(s) == "tui"
    mobile = live.takeover(s, "mobile", {"metadata": {"reason": "operator handoff"}})
    assert (mobile.action, mobile.controller_id, mobile.demoted_id) == (
        "takeover", "mobile", "tui")
    assert {c.client_id: c.mode for c in live.live_clients(s)} == {
        "portal": "observer", "tui": "observer", "mobile": "controller"}
    live.client_inject_prompt(s, "mobile", "continue from the failing test")
    gone = live.release_client(s, "mobile", {"reason": "client_exit"})
    assert gone.released_control and gone.controller_id is None and gone.mode is None
    assert [c.client_id for c in live.live_clients(s)] == ["portal", "tui"]
    # The transcript tells the whole story, with seed 003's event names.
    story = events(s)
    assert [(e["action"], e["client_id"]) for e in story] == [
        ("attach", "portal"), ("attach", "tui"), ("takeover", "mobile"), ("detach", "mobile")]
    assert story[2]["demoted_id"] == "tui"
    assert story[2]["metadata"] == {"reason": "operator handoff"}
    assert story[3]["reason"] == "client_exit" and story[3]["released_control"] is True
    prompt = [r for r in s.transcript.records if r.kind == "user"]
    assert len(prompt) == 1 and prompt[0].payload["content"] == "continue from the failing test"
    assert prompt[0].meta["live_session"] == {"client_id": "mobile"}
    assert [m.text for m in s.history()] == ["continue from the failing test"]
    assert s.transcript.length == 1  # live events are not messages


def test_attach_with_takeover_and_reattach(client: Client) -> None:
    live = LiveClients(client)
    s = client.open()
    live.attach(s, "a", mode="controller")
    b = live.attach(s, "b", mode="controller", takeover=True)
    assert (b.action, b.demoted_id, b.controller_id) == ("takeover", "a", "b")
    # The controller attaching again as observer gives up control.
    again = live.attach(s.id, "b", mode="observer")
    assert again.controller_id is None and live.controller_id(s.id) is None
    a = live.attach(s, "a", mode="controller")
    assert a.client is not None and a.client.attached_at <= a.client.last_seen_at


def test_only_the_controller_injects_or_routes(client: Client) -> None:
    live = LiveClients(client)
    s = client.open()
    live.attach(s, "portal")
    for who in ("portal", "stranger"):
        with pytest.raises(NotControllerError) as info:
            live.client_inject_prompt(s, who, "rm -rf /")
        assert info.value.controller_id is None
        with pytest.raises(NotControllerError):
            live.route_permission(s, who, {"id": "p1", "tool_name": "shell"})
    live.attach(s, "tui", mode="controller")
    with pytest.raises(NotControllerError) as info:
        live.client_inject_prompt(s, "portal", "hello")
    assert info.value.controller_id == "tui"
    assert not [r for r in s.transcript.records if r.kind == "user"]
    route = live.route_permission(s, "tui", {"id": "p1", "tool_name": "shell"},
                                  metadata={"ui": "modal"})
    assert (route.request_id, route.client_id, route.ok) == ("p1", "tui", True)
    (ev,) = events(s, PERMISSION_ROUTE_EVENT)
    assert ev == {"client_id": "tui", "request_id": "p1",
                  "request": {"id": "p1", "tool_name": "shell"}, "metadata": {"ui": "modal"}}
    unnamed = live.route_permission(s, "tui", {"tool_name": "write_file"})
    assert unnamed.request_id  # given a fresh id
    live.client_inject_prompt(s, "tui", "go on", metadata={"source": "keyboard"})
    last = s.transcript.records[-1]
    assert last.kind == "user"
    assert last.meta == {"source": "keyboard", "live_session": {"client_id": "tui"}}
    # The demoted controller is stopped at once.
    live.takeover(s, "mobile")
    with pytest.raises(NotControllerError):
        live.client_inject_prompt(s, "tui", "still me?")


def test_heartbeat_and_release(client: Client) -> None:
    clock = Clock()
    live = LiveClients(client, clock=clock)
    s = client.open()
    first = live.attach(s, "portal", metadata={"tab": 1})
    assert first.client is not None and first.client.last_seen_at == T0
    clock.now = T0 + timedelta(seconds=30)
    beat = live.heartbeat(s, "portal")
    assert beat.client is not None
    assert (beat.client.last_seen_at, beat.client.attached_at) == (clock.now, T0)
    assert beat.client.metadata == {"tab": 1}
    beat = live.heartbeat(s, "portal", {"metadata": {"tab": 2}})
    assert beat.client is not None and beat.client.metadata == {"tab": 2}
    assert live.live_clients(s)[0].last_seen_at == clock.now
    assert [e["action"] for e in events(s)] == ["attach", "heartbeat", "heartbeat"]
    assert events(s)[-1]["metadata"] == {"tab": 2}
    released = live.release_client(s, "portal")
    assert not released.released_control
    before = len(s.transcript.records)
    with pytest.raises(ClientNotAttachedError):
        live.heartbeat(s, "portal")
    with pytest.raises(ClientNotAttachedError):
        live.release_client(s, "portal")
    assert len(s.transcript.records) == before  # a refused verb writes nothing


def test_verbs_fail_loud(client: Client) -> None:
    live = LiveClients(client)
    s = client.open()
    with pytest.raises(UnknownOptionError):
        live.attach(s, "a", {"mode": "observer", "colour": "red"})
    with pytest.raises(InvalidArgumentError):
        live.attach(s, "a", mode="admin")
    with pytest.raises(InvalidArgumentError):
        live.attach(s, " a ")
    with pytest.raises(InvalidArgumentError):
        live.attach(s, "a", metadata=["not", "an", "object"])
    with pytest.raises(SessionNotFoundError):
        live.attach("no-such-session", "a")
    with pytest.raises(InvalidArgumentError):
        LiveClients(client, cache_size=0)
    s.close()
    with pytest.raises(SessionClosedError):
        live.attach(s, "a")
    assert live.live_clients(s) == []
    assert [e for e in events(s)] == []


def test_snapshot_fields(client: Client) -> None:
    live = LiveClients(client)
    s = client.open()
    live.attach(s, "portal")
    live.attach(s, "tui", mode="controller")
    fields = live.snapshot_fields(s)
    assert fields["live_controller_id"] == "tui"
    assert [c["client_id"] for c in fields["live_clients"]] == ["portal", "tui"]  # type: ignore[index,union-attr]
    snap = s.transcript.snapshot()
    assert snap is not None and snap.live_controller_id == "tui"
    assert [(c.client_id, c.mode) for c in snap.live_clients] == [
        ("portal", "observer"), ("tui", "controller")
    ]
    live.release_client(s, "tui")
    snap = s.transcript.snapshot()
    assert snap is not None and snap.live_controller_id is None
    assert [c.client_id for c in snap.live_clients] == ["portal"]


def test_two_connections_share_live_state(client: Client, tmp_path: Path) -> None:
    other = second_client(client, tmp_path)
    with other:
        mine, theirs = LiveClients(client), LiveClients(other)
        s = client.open()
        mine.attach(s, "tui", mode="controller")
        assert theirs.controller_id(s.id) == "tui"  # read (and cached) over there
        with pytest.raises(ControllerConflictError):
            theirs.attach(s.id, "mobile", mode="controller")
        s.live.release()  # one writer at a time: let the other connection write the event
        theirs.takeover(s.id, "mobile")
        other.open(s.id).live.release()
        # The cache over here follows the change (the stamp moved) ...
        assert mine.controller_id(s) == "mobile"
        # ... and the old controller is refused at once.
        with pytest.raises(NotControllerError):
            mine.client_inject_prompt(s, "tui", "mine?")
        assert [e["action"] for e in events(s)] == ["attach", "takeover"]


def test_another_process_sees_the_same_controller(tmp_path: Path) -> None:
    db = tmp_path / "plait.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as api:
        s = api.open()
        sid = s.id
    code = textwrap.dedent(f"""
        from plait import Client
        from plait.live import LiveClients
        with Client({str(ws)!r}, store={str(db)!r}) as api:
            LiveClients(api).attach({sid!r}, "remote-tui", mode="controller")
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    with Client(ws, store=db) as api:
        live = LiveClients(api)
        assert live.controller_id(sid) == "remote-tui"
        with pytest.raises(ControllerConflictError):
            live.attach(sid, "local", mode="controller")


def test_postgres_notifies_live_changes(client: Client, tmp_path: Path) -> None:
    if not client.store.location.startswith("postgresql://"):
        pytest.skip("LISTEN/NOTIFY is the PostgreSQL store's")
    s = client.open()
    feed = client.store.changes(timeout=5.0)  # type: ignore[attr-defined]
    other = second_client(client, tmp_path)
    with other:
        other.store.live_attach(  # below the session layer: only the live table changes
            __import__("plait.store.base", fromlist=["LiveClientRow"]).LiveClientRow(
                s.id, "remote", "observer", 1, 1, {}),
            takeover=False,
        )
    assert next(iter(feed)) == s.id


def test_the_cache_is_an_lru_with_a_cap(client: Client) -> None:
    assert DEFAULT_CACHE_SIZE == 128 and LiveClients(client).cache_size == 128
    live = LiveClients(client, cache_size=3)
    sessions = [client.open() for _ in range(5)]
    for s in sessions:
        live.live_clients(s)
    assert live.cached_session_ids() == tuple(s.id for s in sessions[2:])
    live.controller_id(sessions[2])  # used again: now the most recent
    live.live_clients(sessions[0])  # evicts the least recently used, sessions[3]
    assert live.cached_session_ids() == (sessions[4].id, sessions[2].id, sessions[0].id)


def _user_records(s: Session) -> list[Record]:
    return [r for r in s.transcript.records if r.kind == "user"]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Client]:
    ws = tmp_path / "wsx"
    ws.mkdir()
    with Client(ws, store=tmp_path / "x.db") as c:
        yield c


def test_injected_prompts_survive_replay(api: Client) -> None:
    live = LiveClients(api)
    s = api.open()
    live.attach(s, "tui", mode="controller")
    live.client_inject_prompt(s, "tui", "first")
    branch = s.fork()
    (rec,) = _user_records(branch)
    assert rec.meta["live_session"]["client_id"] == "tui"  # type: ignore[index]


def test_a_session_another_process_writes_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    from plait.errors import SessionLockedError

    db = tmp_path / "plait.db"
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as api:
        sid = api.open().id
    code = textwrap.dedent(f"""
        import sys, time
        from plait import Client
        with Client({str(ws)!r}, store={str(db)!r}) as api:
            api.open({sid!r}).inject({{"role": "user", "content": "mine"}})  # takes the lock
            print("ready", flush=True)
            sys.stdin.read()
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with Client(ws, store=db) as api:
            live = LiveClients(api)
            with pytest.raises(SessionLockedError):
                live.attach(sid, "tui", mode="controller")
            assert live.live_clients(sid) == []
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
