"""Seed 001 "Sessions": the stored-session collection, history views, titles, stamps."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait import Client
from plait.errors import SessionNotFoundError
from plait.records import Message, ToolCall
from plait.store import Store


def _exchange(session: object, n: int = 1) -> None:
    from plait import Session

    assert isinstance(session, Session)
    for i in range(n):
        session.inject({"role": "user", "content": f"q{i}"})
        session.inject({"role": "assistant", "content": f"a{i}"})


def test_client_is_a_context_manager_both_ways(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        _exchange(client.session)
        sid = client.session.id

    async def main() -> list[str]:
        async with Client(tmp_path, store=tmp_path / "p.db") as c:
            return [i.id for i in c.sessions.list()]

    assert asyncio.run(main()) == [sid]


def test_new_client_starts_with_an_empty_unstored_session(client: Client) -> None:
    s = client.session
    assert s.current
    assert not s.transcript.stored
    assert client.sessions.list() == []
    with pytest.raises(SessionNotFoundError):
        s.history()
    _exchange(s)
    assert s.transcript.stored
    assert [i.id for i in client.sessions.list()] == [s.id]
    assert s.path == client.store.location


def test_list_is_most_recent_first_with_a_positive_limit(client: Client) -> None:
    a, b, c = (client.sessions.new() for _ in range(3))
    for s in (a, b, c):
        _exchange(s)
    _exchange(a)  # a is now the most recently active
    infos = client.sessions.list()
    assert [i.id for i in infos] == [a.id, c.id, b.id]
    assert [i.id for i in client.sessions.list(limit=2)] == [a.id, c.id]
    info = infos[0]
    assert (info.title, info.length) == (None, 4)
    assert info.updated_at >= info.created_at
    for bad in (0, -1, 1.5, "3", True):
        with pytest.raises(ValueError):
            client.sessions.list(limit=bad)  # type: ignore[arg-type]


def test_list_is_per_workspace(store: Store, tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = Client(tmp_path / "one", store=store)
    two = Client(tmp_path / "two", store=store)
    _exchange(one.session)
    _exchange(two.session)
    assert [i.id for i in one.sessions.list()] == [one.session.id]
    assert {i.id for i in one.sessions.list(all_workspaces=True)} == {
        one.session.id, two.session.id}


def test_new_open_latest_switch_the_current_session(client: Client) -> None:
    assert client.sessions.latest() is None
    review = client.session
    _exchange(review)
    feature = client.sessions.new()
    assert feature.current and not review.current
    _exchange(feature)
    again = client.sessions.open(review.id)
    assert again is review  # one handle per session
    assert review.current
    _exchange(feature)
    latest = client.sessions.latest()
    assert latest is feature and feature.current
    # Handles stay valid after switching.
    assert review.transcript.length == 2 and feature.transcript.length == 4


def test_open_unknown_or_invalid_ids(client: Client) -> None:
    for bad in ("missing", "../x", "/abs/path", "a\x00b", "", " x"):
        with pytest.raises(SessionNotFoundError):
            client.sessions.open(bad)
    with pytest.raises(SessionNotFoundError):
        Client(client.workspace, store=client.store, resume="missing")


def test_client_resume_starts_on_a_stored_session(client: Client) -> None:
    _exchange(client.session)
    other = Client(client.workspace, store=client.store, resume=client.session.id)
    assert other.session.id == client.session.id
    assert other.session.transcript.length == 2


def test_history_views_and_message_fields(client: Client) -> None:
    s = client.session
    s.inject({"role": "system", "content": "sys"})
    s.inject({"role": "user", "content": "read it"})
    s.inject({"role": "assistant", "content": "",
              "tool_calls": [{"id": "c1", "name": "read", "arguments": {"p": "a"}}]})
    s.inject({"role": "tool", "tool_call_id": "c1", "tool_name": "read", "content": "boom",
              "ok": False})
    s.inject({"role": "assistant", "content": "it failed"})
    msgs = s.history()
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[1].tool_calls == (ToolCall("c1", "read", {"p": "a"}),)
    assert (msgs[2].tool_call_id, msgs[2].tool_name, msgs[2].ok) == ("c1", "read", False)
    assert msgs[0].images == 0
    assert all(isinstance(m, Message) for m in msgs)
    # Reconstructing what the agent did, as the seed does.
    failed = [m.tool_name for m in msgs if m.role == "tool" and not m.ok]
    assert failed == ["read"]


def test_history_with_summary_records(client: Client) -> None:
    s = client.session
    s.inject({"role": "system", "content": "sys"})
    for i in range(6):
        s.inject({"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"})
    # A compaction folded m0..m3 (positions 1..4) and kept m4, m5.
    s.inject({"role": "summary", "content": "S1", "folds": [1, 5]})
    s.inject({"role": "user", "content": "after"})
    assert [(m.role, m.text) for m in s.history()] == [
        ("summary", "S1"), ("user", "m4"), ("assistant", "m5"), ("user", "after")]
    full = s.history(full=True)
    assert [m.text for m in full] == ["m0", "m1", "m2", "m3", "m4", "m5", "S1", "after"]
    # A second compaction folds the first summary too; the newest wins.
    s.inject({"role": "summary", "content": "S2", "folds": [1, 9]})
    assert [m.text for m in s.history()] == ["S2"]
    assert [m.text for m in s.history(full=True)][-2:] == ["after", "S2"]
    # A fork of a compacted session forks as compacted.
    f = s.fork()
    assert [m.text for m in f.history()] == ["S2"]
    assert client.sessions.history_of(s.id, full=False) == s.history()


def test_history_of_reads_any_session_without_making_it_current(client: Client) -> None:
    s = client.session
    _exchange(s, 2)
    other = client.sessions.new()
    assert other.current
    msgs = client.sessions.history_of(s.id)
    assert [m.text for m in msgs] == ["q0", "a0", "q1", "a1"]
    assert other.current and not s.current
    assert client.sessions.history_of(s.id, workspace=client.workspace) == msgs
    with pytest.raises(SessionNotFoundError):
        client.sessions.history_of(s.id, workspace="/somewhere/else")
    with pytest.raises(SessionNotFoundError):
        client.sessions.history_of("../x")


def test_stamp_changes_exactly_when_the_session_changes(client: Client) -> None:
    s = client.session
    assert client.sessions.stamp(s.id) is None
    _exchange(s)
    first = client.sessions.stamp(s.id)
    assert first is not None
    s.history()
    s.transcript.snapshot()
    s.fork()  # forking reads the source; it does not change it
    assert client.sessions.stamp(s.id) == first
    s.inject({"role": "user", "content": "more"})
    second = client.sessions.stamp(s.id)
    assert second != first
    s.rename("t")
    assert client.sessions.stamp(s.id) not in {first, second}
    assert client.sessions.stamp("missing") is None
    assert client.sessions.stamp(s.id, workspace="/elsewhere") is None


def test_stamp_differs_for_a_recreated_id(client: Client) -> None:
    s = client.open("same")
    old = s.live.stamp()
    client.sessions.delete("same")
    again = client.open("same")
    assert again.live.stamp() != old


def test_rename_trims_and_rejects_blank_or_long(client: Client) -> None:
    s = client.session
    _exchange(s)
    assert s.rename("  Parser   refactor \n") == "Parser refactor"
    assert s.title == "Parser refactor"
    assert client.sessions.list()[0].title == "Parser refactor"
    for bad in ("", "   ", "x" * 201):
        with pytest.raises(ValueError):
            s.rename(bad)
    assert s.rename("x" * 200) == "x" * 200


def test_fork_of_an_empty_session_raises_not_found(client: Client) -> None:
    with pytest.raises(SessionNotFoundError):
        client.session.fork()


def test_fork_leaves_the_original_as_it_is(client: Client) -> None:
    base = client.session
    _exchange(base)
    a = base.fork()
    b = base.fork()
    a.inject({"role": "user", "content": "refactor with dataclasses"})
    b.inject({"role": "user", "content": "refactor with attrs"})
    assert [m.text for m in base.history()] == ["q0", "a0"]
    assert a.history()[-1].text == "refactor with dataclasses"
    assert b.history()[-1].text == "refactor with attrs"


def test_delete_keeps_branches_that_share_rows(client: Client) -> None:
    base = client.session
    _exchange(base, 3)
    child = base.fork()
    child.inject({"role": "user", "content": "child"})
    grandchild = child.fork_at(2)
    client.sessions.delete(base.id)
    assert not client.exists(base.id)
    assert [m.text for m in child.history()] == ["q0", "a0", "q1", "a1", "q2", "a2", "child"]
    assert [m.text for m in grandchild.history()] == ["q0", "a0"]
    # Its children now stop at the deleted parent.
    assert child.transcript.ancestry().root_id == child.id
    client.sessions.delete(child.id)
    assert [m.text for m in grandchild.history()] == ["q0", "a0"]
    client.sessions.delete(grandchild.id)
    assert client.sessions.list(all_workspaces=True) == []
    with pytest.raises(SessionNotFoundError):
        client.sessions.delete(grandchild.id)


def test_create_stores_messages_atomically_with_provenance(client: Client) -> None:
    from plait.errors import InvalidMessageError, SessionExistsError

    s = client.sessions.create(
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        session_id="imported-1",
        title="  From   codex ",
        lineage_operator="Session.import",
        metadata={"source": {"agent": "codex"}},
    )
    assert (s.id, s.title, s.lineage_operator, s.transcript.length) == (
        "imported-1", "From codex", "Session.import", 2)
    assert s.transcript.snapshot().metadata == {"source": {"agent": "codex"}}  # type: ignore[union-attr]
    assert not s.current
    with pytest.raises(InvalidMessageError):
        client.sessions.create([{"role": "user", "content": "ok"}, {"content": "no role"}],
                               session_id="imported-2")
    assert not client.exists("imported-2")
    with pytest.raises(SessionExistsError):
        client.sessions.create([], session_id="imported-1")
    empty = client.sessions.create()
    assert empty.transcript.length == 0 and client.exists(empty.id)
    s.inject({"role": "user", "content": "continues"})
    assert s.transcript.length == 3
