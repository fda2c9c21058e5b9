"""Workspaces that branch with the conversation: checkpoints around file-changing tool calls."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import NothingToDoError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall


def _write(cid: str, path: str, content: str) -> Reply:
    call = ToolCall(cid, "write_file", {"path": path, "content": content})
    return Reply(tool_calls=(call,), finish_reason="tool_calls")


def _session(client: Client, box: Path) -> Session:
    box.mkdir(exist_ok=True)
    (box / "keep.txt").write_text("original\n")
    return client.sessions.create([{"role": "system", "content": "s"}]).to("local", spec=str(box))


SHELL = "echo second > a.txt; rm keep.txt"


def _two_writes(s: Session) -> None:
    provider = ScriptedProvider([
        _write("c1", "a.txt", "first\n"),
        Reply(tool_calls=(ToolCall("c2", "shell", {"command": SHELL}),),
              finish_reason="tool_calls"),
        Reply(tool_calls=(ToolCall("c3", "read_file", {"path": "a.txt"}),),
              finish_reason="tool_calls"),
        Reply("done"),
    ])
    asyncio.run(s.prompt("write twice", provider=provider))


def test_file_changing_calls_record_checkpoints_read_only_ones_do_not(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path / "box")
    _two_writes(s)
    tools = [r for r in s.transcript.records if r.kind == "tool"]
    assert [("workspace" in r.meta) for r in tools] == [True, True, False]
    first, second = (r.meta["workspace"] for r in tools[:2])
    assert first["after"] == second["before"]  # nothing changed between the two calls
    assert first["before"] != first["after"] != second["after"]


def test_restore_brings_the_files_back_byte_for_byte(client: Client, tmp_path: Path) -> None:
    box = tmp_path / "box"
    s = _session(client, box)
    _two_writes(s)
    assert (box / "a.txt").read_text() == "second\n" and not (box / "keep.txt").exists()
    # messages: system, user, assistant(c1), tool(c1), assistant(c2), tool(c2), ...
    s.workspace.restore(4)  # after the first write's result
    assert (box / "a.txt").read_text() == "first\n"
    assert (box / "keep.txt").read_text() == "original\n"
    s.workspace.restore(2)  # before any tool ran
    assert sorted(p.name for p in box.iterdir()) == ["keep.txt"]
    changes = {(c.path, c.change) for c in s.workspace.diff(2, 6)}
    assert changes == {("a.txt", "added"), ("keep.txt", "removed")}


def test_fork_at_gets_its_own_copy_and_leaves_the_parent_alone(
    client: Client, tmp_path: Path
) -> None:
    box = tmp_path / "box"
    s = _session(client, box)
    _two_writes(s)
    mine = tmp_path / "branch"
    branch = s.fork_at(4, workspace=mine)
    assert (mine / "a.txt").read_text() == "first\n" and (mine / "keep.txt").exists()
    assert (box / "a.txt").read_text() == "second\n"  # the parent's files are untouched
    assert branch.workspace.tool_context().root == mine.resolve()
    asyncio.run(branch.prompt("again", provider=ScriptedProvider(
        [_write("c9", "b.txt", "branch only\n"), Reply("ok")])))
    assert (mine / "b.txt").exists() and not (box / "b.txt").exists()


def test_fork_with_a_workspace_copies_the_files_as_they_are(
    client: Client, tmp_path: Path
) -> None:
    box = tmp_path / "box"
    s = _session(client, box)
    (box / "notes.md").write_bytes(b"\x00binary\xff")
    branch = s.fork(workspace=tmp_path / "copy")
    assert (tmp_path / "copy" / "notes.md").read_bytes() == b"\x00binary\xff"
    assert branch.sandbox_backend == "local"


def test_checkpoints_can_be_turned_off(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path / "box")
    s.workspace.use_checkpoints(False)
    asyncio.run(s.prompt("w", provider=ScriptedProvider([_write("c1", "x", "y"), Reply("ok")])))
    assert all("workspace" not in r.meta for r in s.transcript.records)
    with pytest.raises(NothingToDoError):
        s.workspace.restore(1)
