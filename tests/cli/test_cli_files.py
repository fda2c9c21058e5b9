"""``plait sessions diff-files`` and ``fork --workspace``: the files a conversation changed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from plait import Client, Session
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall

from ._helpers import Run, assert_clean_error, conversation


def _worked(api: Client, box: Path) -> Session:
    box.mkdir()
    (box / "keep.txt").write_text("original\n")
    s = api.sessions.create([{"role": "system", "content": "s"}]).to("local", spec=str(box))
    script = ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "write_file", {"path": "a.txt", "content": "1\n"}),),
              finish_reason="tool_calls"),
        Reply(tool_calls=(ToolCall("c2", "shell", {"command": "rm keep.txt; echo 2 > a.txt"}),),
              finish_reason="tool_calls"),
        Reply("done"),
    ])
    asyncio.run(s.prompt("go", provider=script))
    return s


def test_diff_files_shows_what_a_stretch_changed(run: Run, api: Client, tmp_path: Path) -> None:
    s = _worked(api, tmp_path / "box")
    # messages: system, user, assistant(c1), tool(c1), assistant(c2), tool(c2), assistant
    first = run("sessions", "diff-files", s.id, "2", "4")
    assert first.exit_code == 0, first.output
    assert first.stdout == "+ a.txt\n"
    whole = run("sessions", "diff-files", s.id, "0", "7", "--json")
    assert json.loads(whole.stdout) == [
        {"path": "a.txt", "change": "added", "kind": "file"},
        {"path": "keep.txt", "change": "removed", "kind": "file"},
    ]
    assert run("sessions", "diff-files", s.id, "4", "4").stdout == "no change\n"
    # Past the last message there is nothing to compare with: refused, not the end's files.
    assert_clean_error(
        run("sessions", "diff-files", s.id, "0", "99"), "b=99 but the session has only 7"
    )
    assert_clean_error(run("sessions", "diff-files", s.id, "8", "2"), "a=8")


def test_diff_files_without_checkpoints_is_a_clean_error(run: Run, api: Client) -> None:
    s = conversation(api)
    assert_clean_error(run("sessions", "diff-files", s.id, "0", "2"), "recorded its workspace")


def test_fork_with_a_workspace_gets_the_files_at_n(run: Run, api: Client, tmp_path: Path) -> None:
    s = _worked(api, tmp_path / "box")
    mine = tmp_path / "mine"
    result = run("sessions", "fork", s.id, "--at", "4", "--workspace", str(mine))
    assert result.exit_code == 0, result.output
    branch = api.open(result.stdout.strip())
    assert branch.transcript.length == 4 and branch.workspace.tool_context().root == mine.resolve()
    assert {p.name: p.read_text() for p in mine.iterdir()} == {
        "a.txt": "1\n", "keep.txt": "original\n"}
    assert (tmp_path / "box" / "a.txt").read_text() == "2\n"  # the parent's are untouched


def test_fork_into_the_session_s_own_folder_is_refused(
    run: Run, api: Client, tmp_path: Path
) -> None:
    s = _worked(api, tmp_path / "box")
    before = {p.name: p.read_text() for p in (tmp_path / "box").iterdir()}
    for args in (["--at", "4"], []):
        for folder in (tmp_path / "box", tmp_path, tmp_path / "box" / "sub"):
            result = run("sessions", "fork", s.id, *args, "--workspace", str(folder))
            assert_clean_error(result, "overlaps this session's own folder")
    assert {p.name: p.read_text() for p in (tmp_path / "box").iterdir()} == before
    assert [i.id for i in api.sessions.list()] == [s.id]  # no branch was made


def test_rewind_with_files_and_its_undo(run: Run, api: Client, tmp_path: Path) -> None:
    s = _worked(api, tmp_path / "box")
    box = tmp_path / "box"
    back = run("sessions", "rewind", s.id, "4", "--files")
    assert back.exit_code == 0, back.output
    assert "rewound" in back.stdout and f"files restored in {box.resolve()}" in back.stdout
    assert "--undo --files" in back.stdout
    assert (box / "a.txt").read_text() == "1\n" and (box / "keep.txt").exists()
    undone = run("sessions", "rewind", s.id, "--undo", "--files")
    assert undone.exit_code == 0, undone.output
    assert (box / "a.txt").read_text() == "2\n" and not (box / "keep.txt").exists()
    plain = conversation(api)
    assert_clean_error(run("sessions", "rewind", plain.id, "2", "--files"),
                       "recorded its workspace")
