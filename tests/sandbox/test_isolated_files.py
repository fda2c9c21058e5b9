"""Workspace checkpoints of a session whose tools run confined: what the shell did comes back."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from plait import Client, Session
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from tests.sandbox.conftest import open_isolated


def _shell(cid: str, command: str) -> Reply:
    return Reply(tool_calls=(ToolCall(cid, "shell", {"command": command}),),
                 finish_reason="tool_calls")


FIRST = "printf '\\000\\377bin' > data.bin; mkdir -p sub; echo one > sub/one.txt"
# The second call breaks things: a file turned into a link out of the workspace, a removal.
SECOND = "rm sub/one.txt; ln -s /etc/hostname sub/one.txt; rm data.bin; echo late > late.txt"


def _work(client: Client, box: Path) -> Session:
    s = client.sessions.create([{"role": "system", "content": "s"}]).to("isolated", spec=str(box))
    with s:
        asyncio.run(s.prompt("go", provider=ScriptedProvider(
            [_shell("c1", FIRST), _shell("c2", SECOND), Reply("done")])))
    return s


def test_files_an_isolated_shell_changed_come_back_byte_for_byte(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    open_isolated(box).release()  # skips, saying why, where the backend cannot run
    (box / "keep.txt").write_text("original\n")
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = _work(client, box)
        assert os.path.islink(box / "sub" / "one.txt") and not (box / "data.bin").exists()
        # messages: system, user, assistant(c1), tool(c1), assistant(c2), tool(c2), assistant
        mine = tmp_path / "mine"
        branch = s.fork_at(4, workspace=mine)
        assert branch.sandbox_backend == "isolated"
        assert (mine / "data.bin").read_bytes() == b"\x00\xffbin"
        assert (mine / "sub" / "one.txt").read_text() == "one\n"
        assert not (mine / "late.txt").exists() and (mine / "keep.txt").exists()
        # The parent's folder is restored in place: the link is removed, never followed.
        hostname = Path("/etc/hostname").read_bytes() if Path("/etc/hostname").exists() else None
        s.workspace.restore(4)
        assert not os.path.islink(box / "sub" / "one.txt")
        assert (box / "sub" / "one.txt").read_text() == "one\n"
        if hostname is not None:
            assert Path("/etc/hostname").read_bytes() == hostname
        assert {c.path for c in s.workspace.diff(4, 6)} == {"data.bin", "late.txt", "sub/one.txt"}


def test_an_isolated_session_rewinds_its_files_and_undoes_it(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    open_isolated(box).release()  # skips, saying why, where the backend cannot run
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = _work(client, box)
        s.transcript.rewind(4, files=True)
        assert not (box / "late.txt").exists() and (box / "data.bin").read_bytes() == b"\x00\xffbin"
        assert not os.path.islink(box / "sub" / "one.txt")
        s.transcript.undo_rewind(files=True)
        assert (box / "late.txt").read_text() == "late\n" and not (box / "data.bin").exists()
        assert os.readlink(box / "sub" / "one.txt") == "/etc/hostname"
