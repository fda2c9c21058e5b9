"""What a Client shows: the seed verbs, one way each; the host's machinery stays behind it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import plait
from plait import Client, Session
from plait.errors import SessionNotFoundError
from plait.session import SessionHost

# The seed verbs (D410): seed 001's session / sessions / session_stats, seed 003's open,
# exists, snapshot and ancestry, close for `with`, and the attributes store, workspace and
# host (the machinery servers and adapters share).
CLIENT_MEMBERS = {
    "ancestry", "close", "exists", "host", "open", "session", "session_stats", "sessions",
    "snapshot", "store", "workspace",
}
SESSIONS_MEMBERS = {
    "create", "delete", "erase", "history_of", "latest", "list", "new", "open",
    "open_elsewhere", "prune_checkpoints", "retain", "search", "stamp",
}


def _public(obj: object) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    with Client(tmp_path, store=":memory:") as c:
        yield c


def test_a_client_shows_fifteen_members_or_fewer(client: Client) -> None:
    assert len(_public(client)) <= 15
    assert _public(client) == CLIENT_MEMBERS
    assert _public(client.sessions) == SESSIONS_MEMBERS


def test_no_member_of_a_client_is_the_hosts_machinery(client: Client) -> None:
    # What a client and its host both name is the store and the workspace, the same objects.
    shared = _public(client) & _public(client.host)
    assert shared == {"store", "workspace"}
    assert client.store is client.host.store and client.workspace == client.host.workspace
    for internal in ("handle", "lookup", "exclusive_runs", "idle_locks", "holds_lock", "locked",
                     "forget", "make_current", "release_idle", "set_writer_lock",
                     "close_sandboxes", "runs", "store_calls", "memos", "get", "current",
                     "new_session", "create_session"):
        assert not hasattr(client, internal), internal
    assert not isinstance(client, SessionHost)


def test_the_top_level_names_are_what_a_user_of_the_handle_needs() -> None:
    assert len(plait.__all__) <= 6
    assert {"Client", "Session"} <= set(plait.__all__)


def test_sessions_are_made_and_found_one_way_each(client: Client) -> None:
    empty = client.sessions.new()
    assert client.session is empty and not empty.transcript.stored
    made = client.sessions.create([{"role": "user", "content": "hi"}], title="made")
    assert made.transcript.stored and client.session is empty  # create does not switch
    assert client.open(made.id) is made and client.session is empty
    assert client.sessions.open(made.id) is made and client.session is made
    with pytest.raises(SessionNotFoundError):
        client.sessions.open("0190c0de-0000-7000-8000-000000000000")
    # Handles belong to the client's host: the same one handle per id.
    assert client.host.get(made.id) is made


def test_seed_000_constructors_take_a_client_or_its_host(client: Client) -> None:
    by_client = Session.from_user_message("hello", client=client)
    by_host = Session.from_agent_prompt("be brief", client=client.host)
    assert client.exists(by_client.id) and client.exists(by_host.id)
    assert client.open(by_client.id) is by_client
