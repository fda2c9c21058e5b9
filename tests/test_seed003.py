"""Seed 003 "Sessions": the lifecycle verbs, lineage, scratchpad and fail-loud rules."""

from __future__ import annotations

import uuid

import pytest

from plait import Client
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    SessionExistsError,
    SessionNotFoundError,
    UnknownOptionError,
)
from plait.records import EventRecord


def test_open_without_id_mints_a_uuid7_and_stores_it(client: Client) -> None:
    s = client.open()
    parsed = uuid.UUID(s.id)
    assert parsed.version == 7
    assert client.exists(s.id)
    assert s.transcript.length == 0


def test_open_is_idempotent(client: Client) -> None:
    s = client.open("incident-debug")
    s.inject({"role": "user", "content": "Hello!"})
    again = client.open("incident-debug")
    assert again is s
    assert again.transcript.length == 1
    assert [m.text for m in again.history()] == ["Hello!"]


def test_open_takes_workspace_anchor_and_policy(client: Client) -> None:
    s = client.open("w", workspace_anchor="/srv/app",
                    workspace_policy={"default_mount_mode": "read_only"})
    assert s.settings == {"workspace_anchor": "/srv/app",
                          "workspace_policy": {"default_mount_mode": "read_only"}}
    with pytest.raises(UnknownOptionError):
        client.open("w2", workspace_policy={"mount": "rw"})
    with pytest.raises(InvalidArgumentError):
        client.open("w3", workspace_policy={"default_mount_mode": "sideways"})
    assert not client.exists("w2") and not client.exists("w3")


def test_ids_that_are_not_keys_are_rejected(client: Client) -> None:
    for bad in ["nul\x00byte", "new\nline", "", " padded ", "..", ".", "x" * 201, 42]:
        assert client.exists(bad) is False
        with pytest.raises(SessionNotFoundError):
            client.sessions.open(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            client.open(bad)  # type: ignore[arg-type]
    assert client.sessions.list() == []


def test_exists_is_safe_on_unknown_ids(client: Client) -> None:
    assert client.exists("nope") is False
    assert client.snapshot("nope") is None
    assert client.ancestry("nope") is None


def test_length_counts_messages_not_events(client: Client) -> None:
    s = client.open()
    s.transcript.inject_many(
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    )
    s.transcript.log_event("note", {"x": 1})
    assert s.transcript.length == 2
    assert len(s.transcript.records) == 3


def test_snapshot_has_seed_fields(client: Client) -> None:
    s = client.open()
    s.inject({"role": "system", "content": "be brief"})
    s.inject({"role": "user", "content": "hi"})
    s.scratchpad.set({"plan": ["a"]})
    child = s.fork_at(1)
    snap = s.transcript.snapshot()
    assert snap is not None
    assert snap.id == s.id
    assert snap.length == 2
    assert snap.system_prompt == "be brief"
    assert snap.tool_format == "native"
    assert snap.scratchpad == {"plan": ["a"]} and snap.scratchpad_version == 1
    assert snap.parent_id is None
    assert snap.child_ids == (child.id,)
    assert snap.branched_at_event_index is None
    assert snap.actor_chain is None
    assert [r.kind for r in snap.records] == ["system", "user"]
    assert snap.created_at.tzinfo is not None
    child_snap = client.snapshot(child.id)
    assert child_snap is not None
    assert child_snap.parent_id == s.id
    assert child_snap.branched_at_event_index == 1


def test_ancestry_walks_to_the_root(client: Client) -> None:
    s = client.open()
    harness_inject(s)
    branch = s.fork()
    replay = s.fork_at(1)
    grandchild = replay.fork()
    anc = grandchild.transcript.ancestry()
    assert anc.parent_id == replay.id
    assert anc.root_id == s.id
    assert replay.transcript.ancestry().root_id == s.id
    assert s.transcript.ancestry().child_ids == (branch.id, replay.id)
    assert s.transcript.ancestry().parent_id is None


def harness_inject(s: object) -> None:
    from plait import Session

    assert isinstance(s, Session)
    s.inject({"role": "user", "content": "Hello!"})
    s.inject({"role": "assistant", "content": "Hi there"})


def test_reset_wipes_history_and_keeps_id_title_and_lineage(client: Client) -> None:
    s = client.open()
    harness_inject(s)
    s.rename("kept")
    branch = s.fork()
    s.reset()
    assert s.transcript.length == 0
    assert s.history() == []
    assert s.title == "kept"
    assert client.exists(s.id)
    # Nothing stored was rewritten: the branch still has the full transcript.
    assert branch.transcript.length == 2
    assert [r.kind for r in s.transcript.records] == ["event"]
    event = s.transcript.records[0]
    assert isinstance(event, EventRecord) and event.name == "session_reset"
    s.inject({"role": "user", "content": "after"})
    assert [m.text for m in s.history()] == ["after"]


def test_fork_with_dst_and_taken_dst(client: Client) -> None:
    s = client.open("src")
    harness_inject(s)
    dst = s.fork(dst="my-branch")
    assert dst.id == "my-branch"
    assert dst.parent_session_ids == ("src",)
    with pytest.raises(SessionExistsError):
        s.fork(dst="my-branch")
    with pytest.raises(InvalidArgumentError):
        s.fork(dst="tab\tbed")


def test_fork_at_keeps_first_messages_and_records_branch_point(client: Client) -> None:
    s = client.open()
    s.transcript.inject_many([{"role": "user", "content": f"m{i}"} for i in range(6)])
    b = s.fork_at(2)
    assert [m.text for m in b.history()] == ["m0", "m1"]
    assert b.transcript.branched_at == 2
    assert b.lineage_operator == "Session.fork_at"
    assert s.transcript.length == 6
    empty = s.fork_at(0)
    assert empty.transcript.length == 0
    full = s.fork_at(6)
    assert full.transcript.length == 6
    with pytest.raises(InvalidArgumentError):
        s.fork_at(7)
    with pytest.raises(InvalidArgumentError):
        s.fork_at(-1)


def test_fork_at_counts_messages_across_events(client: Client) -> None:
    s = client.open()
    s.inject({"role": "user", "content": "m0"})
    s.transcript.log_event("e1")
    s.transcript.log_event("e2")
    s.inject({"role": "assistant", "content": "m1"})
    s.transcript.log_event("e3")
    s.inject({"role": "user", "content": "m2"})
    b = s.fork_at(2)
    assert [m.text for m in b.history()] == ["m0", "m1"]
    assert [r.kind for r in b.transcript.records] == ["user", "event", "event", "assistant"]


def test_trim_keeps_last_and_returns_kept_count(client: Client) -> None:
    s = client.open()
    s.transcript.inject_many([{"role": "user", "content": f"m{i}"} for i in range(10)])
    branch = s.fork()
    assert s.trim(3) == 3
    assert [m.text for m in s.history()] == ["m7", "m8", "m9"]
    assert s.transcript.length == 3
    assert s.trim(50) == 3  # fewer than asked: all kept
    assert s.trim(0) == 0
    assert s.transcript.length == 0
    assert branch.transcript.length == 10  # the branch's past is untouched
    with pytest.raises(InvalidArgumentError):
        s.trim(-1)
    with pytest.raises(InvalidArgumentError):
        s.trim(True)  # a bool is not a count


def test_inject_validates_messages_and_writes_nothing_on_error(client: Client) -> None:
    s = client.open()
    s.inject({"role": "user", "content": "ok"})
    before = s.live.version
    bad_messages: list[dict[str, object]] = [
        {"content": "no role"},
        {"role": "wizard", "content": "x"},
        {"role": "user", "content": "x", "colour": "red"},
        {"role": "tool", "content": "x"},  # no tool_call_id
        {"role": "assistant", "tool_calls": [{"name": "x"}]},  # no call id
        {"role": "assistant", "tool_calls": [{"id": "c", "name": "x", "arguments": "{bad"}]},
        {"role": "user", "content": 7},
        {"role": "user", "content": "x", "meta": {"f": object()}},
        {"role": "tool", "content": "x", "tool_call_id": "c", "ok": "yes"},
    ]
    for bad in bad_messages:
        with pytest.raises(InvalidMessageError):
            s.inject(bad)  # type: ignore[arg-type]
    # A batch with one bad message stores none of them.
    with pytest.raises(InvalidMessageError):
        s.transcript.inject_many([{"role": "user", "content": "fine"}, {"content": "no role"}])
    assert s.live.version == before
    assert s.transcript.length == 1


def test_inject_accepts_openai_shapes(client: Client) -> None:
    s = client.open()
    rec = s.inject({
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "shell", "arguments": '{"cmd": "ls"}'}}],
    })
    assert rec.payload["tool_calls"] == [{"id": "call_1", "name": "shell",
                                          "arguments": {"cmd": "ls"}}]
    tool = s.inject({"role": "tool", "tool_call_id": "call_1", "name": "shell",
                     "content": [{"type": "text", "text": "a.txt"},
                                 {"type": "image_url", "image_url": {"url": "data:..."}}]})
    msg = s.history()[-1]
    assert (msg.role, msg.tool_name, msg.text, msg.images, msg.ok) == (
        "tool", "shell", "a.txt", 1, True)
    assert tool.kind == "tool"


def test_inject_many_is_one_write(client: Client) -> None:
    s = client.open()
    v = s.live.version
    records = s.transcript.inject_many([{"role": "user", "content": str(i)} for i in range(50)])
    assert [r.seq for r in records] == list(range(50))
    assert s.live.version == v + 50  # the version counts rows changed and records appended
    with pytest.raises(InvalidArgumentError):
        s.transcript.inject_many([])


def test_close_records_an_event_and_blocks_transcript_writes(client: Client) -> None:
    from plait.errors import SessionClosedError

    s = client.open()
    harness_inject(s)
    s.close({"reason": "timeout"})
    assert s.transcript.closed
    last = s.transcript.records[-1]
    assert isinstance(last, EventRecord)
    assert last.name == "agent_session_closed"
    assert last.data == {"status": {"reason": "timeout"}}
    with pytest.raises(SessionClosedError):
        s.inject({"role": "user", "content": "more"})
    s.close("again")  # closing a closed session does nothing
    assert sum(1 for r in s.transcript.records if r.kind == "event") == 1
    # Still readable, forkable; a fork is open.
    assert s.transcript.length == 2
    f = s.fork()
    assert not f.transcript.closed
    f.inject({"role": "user", "content": "continues"})
    s.transcript.reopen()
    s.inject({"role": "user", "content": "back"})
    assert s.transcript.length == 3
    with pytest.raises(InvalidArgumentError):
        s.close(42)  # type: ignore[arg-type]


def test_scratchpad_is_versioned(client: Client) -> None:
    s = client.open()
    assert s.scratchpad() is None
    r1 = s.scratchpad.set({"todo": ["a"]}, source="agent", reason="plan",
                          metadata={"step": 1})
    assert (r1.ok, r1.version, r1.scratchpad) == (True, 1, {"todo": ["a"]})
    r2 = s.scratchpad.set({"todo": ["a", "b"]})
    assert r2.version == 2
    assert s.scratchpad() == {"todo": ["a", "b"]}
    r3 = s.scratchpad.clear(reason="done")
    assert (r3.ok, r3.version, r3.scratchpad) == (True, 3, None)
    assert s.scratchpad() is None
    hist = s.scratchpad.history()
    assert [(h.version, h.scratchpad, h.source, h.reason) for h in hist] == [
        (1, {"todo": ["a"]}, "agent", "plan"),
        (2, {"todo": ["a", "b"]}, None, None),
        (3, None, None, "done"),
    ]
    assert hist[0].metadata == {"step": 1}
    with pytest.raises(InvalidArgumentError):
        s.scratchpad.set(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        s.scratchpad.set({"x": object()})
    assert s.scratchpad.history()[-1].version == 3


def test_fork_inherits_scratchpad_and_settings_not_close_state(client: Client) -> None:
    s = client.open(workspace_anchor="/a")
    s.inject({"role": "user", "content": "x"})
    s.scratchpad.set({"k": 1})
    s.close("done")
    f = s.fork()
    assert f.scratchpad() == {"k": 1}
    assert f.settings == {"workspace_anchor": "/a"}
    assert not f.transcript.closed


def test_lifecycle_verbs_on_a_deleted_session_fail_loud(client: Client) -> None:
    s = client.open()
    harness_inject(s)
    client.sessions.delete(s.id)
    verbs = [
        lambda: s.reset(),
        lambda: s.fork(),
        lambda: s.fork_at(1),
        lambda: s.close(),
        lambda: s.trim(1),
        lambda: s.inject({"role": "user", "content": "x"}),
        lambda: s.transcript.length,
        lambda: s.history(),
    ]
    for verb in verbs:
        with pytest.raises(SessionNotFoundError):
            verb()
    assert not client.exists(s.id)
    assert s.transcript.snapshot() is None


def test_lifecycle_verbs_on_a_never_stored_session_fail_loud(client: Client) -> None:
    s = client.sessions.new()
    for verb in (s.reset, s.fork, lambda: s.fork_at(0), s.close, lambda: s.trim(0),
                 lambda: s.transcript.length, s.history):
        with pytest.raises(SessionNotFoundError):
            verb()
    assert not client.exists(s.id)


def test_workspace_anchor_and_policy_accessors(client: Client) -> None:
    s = client.open()
    assert s.workspace.anchor is None
    assert s.workspace.policy == {"default_mount_mode": "read_write"}
    assert s.workspace.set_anchor("/srv") is True
    assert s.workspace.anchor == "/srv"
    assert s.workspace.set_policy({"default_mount_mode": "read_only"}) is True
    assert s.workspace.policy == {"default_mount_mode": "read_only"}
    with pytest.raises(UnknownOptionError):
        s.workspace.set_policy({"colour": "blue"})
    with pytest.raises(InvalidArgumentError):
        s.workspace.set_anchor("")
    s.workspace.set_anchor(None)
    assert s.workspace.anchor is None
    assert s.fork().workspace.policy == {"default_mount_mode": "read_only"}


def test_sessions_sharing_an_id_share_a_transcript(client: Client) -> None:
    # Seed 003 "Interaction with workflows": two stages naming one session id.
    stage_one = client.open("stage-shared")
    stage_one.inject({"role": "user", "content": "from stage one"})
    other_client = Client(client.workspace, store=client.store)
    stage_two = other_client.open("stage-shared")
    assert [m.text for m in stage_two.history()] == ["from stage one"]


def test_roots_mount_with_the_policy_default_and_list(client: Client, tmp_path: object) -> None:
    from pathlib import Path

    base = Path(str(tmp_path))
    (base / "libs").mkdir()
    (base / "data").mkdir()
    s = client.open(workspace_policy={"default_mount_mode": "read_only"})
    added = s.workspace.add_root(str(base / "libs"))
    assert (added.ok, added.mounted_at, added.error) == (True, "libs", None)
    rw = s.workspace.add_root(str(base / "data"), mount_mode="read_write", mounted_at="d")
    assert rw.ok and rw.mounted_at == "d"
    roots = s.workspace.list_roots()
    assert roots["primary"] == s.workspace.name
    assert roots["additional"] == [
        {"path": str(base / "libs"), "mounted_at": "libs", "mount_mode": "read_only"},
        {"path": str(base / "data"), "mounted_at": "d", "mount_mode": "read_write"},
    ]
    missing = s.workspace.add_root(str(base / "nope"))
    assert not missing.ok and missing.error is not None
    clash = s.workspace.add_root(str(base / "data"), mounted_at="libs")
    assert not clash.ok
    with pytest.raises(InvalidArgumentError):
        s.workspace.add_root(str(base / "data"), mount_mode="sideways")
    assert s.workspace.remove_root("d").ok
    assert not s.workspace.remove_root("d").ok
    assert [r["mounted_at"] for r in s.workspace.list_roots()["additional"]] == ["libs"]  # type: ignore[index,union-attr]
    assert s.fork().workspace.list_roots()["additional"] == s.workspace.list_roots()["additional"]
    s.workspace.set_anchor("/srv/app")
    assert s.workspace.list_roots()["primary"] == "/srv/app"
