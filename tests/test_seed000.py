"""Seed 000 "Session Basics", steps 1-4, exactly as the seed writes them."""

from __future__ import annotations

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError


def test_step1_agent_and_user_sessions_make_different_chunk_kinds() -> None:
    agent = Session.from_agent_prompt("You are a concise assistant.")
    user = Session.from_user_message("List files in the sandbox.")
    assert agent.chunk_table.rows[-1].kind == "system"
    assert user.chunk_table.rows[-1].kind == "user"
    assert user.chunk_table.rows[-1].payload["content"] == "List files in the sandbox."


def test_step2_chunk_table_is_a_time_ordered_table_of_structured_rows() -> None:
    user = Session.from_user_message("List files in the sandbox.")
    rows = [(i, row.kind, row.payload) for i, row in enumerate(user.chunk_table.rows)]
    assert rows == [(0, "user", {"content": "List files in the sandbox."})]
    assert f"{0} {rows[0][1]} {rows[0][2]}" == "0 user {'content': 'List files in the sandbox.'}"
    # Later rows keep their structure: tool calls and tool results are not flattened.
    user.inject(
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "list_files", "arguments": {"path": "."}}]}
    )
    user.inject(
        {"role": "tool", "content": "a.txt", "tool_call_id": "c1", "tool_name": "list_files"}
    )
    kinds = [r.kind for r in user.chunk_table.rows]
    assert kinds == ["user", "assistant", "tool"]
    assert user.chunk_table.rows[1].payload["tool_calls"][0]["name"] == "list_files"
    assert user.chunk_table.rows[2].payload["tool_call_id"] == "c1"
    created = [r.created_at for r in user.chunk_table.rows]
    assert created == sorted(created)


def test_step3_fork_copies_rows_and_records_its_parent() -> None:
    user = Session.from_user_message("List files in the sandbox.")
    forked = user.fork()
    assert forked.chunk_table.rows == user.chunk_table.rows
    assert forked.parent_session_ids == (user.id,)
    assert forked.lineage_operator == "Session.fork"


def test_step4_detach_copies_rows_and_starts_a_new_root() -> None:
    user = Session.from_user_message("List files in the sandbox.")
    forked = user.fork()
    detached = forked.detach()
    assert detached.chunk_table.rows == forked.chunk_table.rows
    assert detached.parent_session_ids == ()
    assert detached.lineage_operator == "Session.detach"
    assert detached.transcript.ancestry().root_id == detached.id


def test_exercise2_two_forks_each_name_the_same_parent() -> None:
    user = Session.from_user_message("hello")
    a, b = user.fork(), user.fork()
    assert a.parent_session_ids == b.parent_session_ids == (user.id,)
    assert a.id != b.id
    assert set(user.transcript.ancestry().child_ids) == {a.id, b.id}


def test_branches_do_not_affect_each_other(client: Client) -> None:
    base = Session.from_user_message("start", client=client)
    branch = base.fork()
    base.inject({"role": "assistant", "content": "on base"})
    branch.inject({"role": "assistant", "content": "on branch"})
    assert [r.payload["content"] for r in base.chunk_table.rows] == ["start", "on base"]
    assert [r.payload["content"] for r in branch.chunk_table.rows] == ["start", "on branch"]
    # The shared first row is the same stored row in both.
    assert base.chunk_table.rows[0].id == branch.chunk_table.rows[0].id


def test_seed_constructors_store_in_the_given_client(client: Client) -> None:
    s = Session.from_agent_prompt("sys", client=client)
    assert client.exists(s.id)
    assert client.open(s.id) is s


def test_merge_has_every_parent_and_joins_the_branches(client: Client) -> None:
    base = Session.from_user_message("task", client=client)
    a = base.fork()
    b = base.fork()
    a.inject({"role": "assistant", "content": "idea A"})
    b.inject({"role": "assistant", "content": "idea B"})
    b.inject({"role": "user", "content": "more B"})
    merged = a.merge(b)
    assert merged.parent_session_ids == (a.id, b.id)
    assert merged.lineage_operator == "Session.merge"
    # a's transcript, then what b added past the prefix it shares with a.
    assert [r.payload["content"] for r in merged.chunk_table.rows] == [
        "task", "idea A", "idea B", "more B"]
    assert set(client.ancestry(b.id).child_ids) == {merged.id}  # type: ignore[union-attr]
    # Merging never changes the parents.
    assert a.transcript.length == 2 and b.transcript.length == 3
    with pytest.raises(InvalidArgumentError):
        a.merge()
    with pytest.raises(InvalidArgumentError):
        a.merge("not a session")  # type: ignore[arg-type]
