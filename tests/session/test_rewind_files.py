"""``rewind(n, files=True)``: the files go back with the conversation; an undo restores them."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError, NothingToDoError, StaleSessionError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall


def _write(cid: str, path: str, content: str) -> Reply:
    call = ToolCall(cid, "write_file", {"path": path, "content": content})
    return Reply(tool_calls=(call,), finish_reason="tool_calls")


def _run(s: Session, *replies: Reply) -> None:
    asyncio.run(s.prompt("go", provider=ScriptedProvider([*replies, Reply("done")])))


def _files(folder: Path) -> dict[str, object]:
    """Every path with its bytes (or link target) and mode: what a person could tell apart."""
    out: dict[str, object] = {}
    for dirpath, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(folder))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = (path.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def _worked(client: Client, box: Path) -> Session:
    box.mkdir()
    (box / "before.txt").write_text("there from the start\n")
    s = client.sessions.create([{"role": "system", "content": "s"}]).to("local", spec=str(box))
    # messages: system, user, assistant(c1), tool(c1), assistant(c2), tool(c2), assistant
    _run(s, _write("c1", "early.txt", "early\n"), _write("c2", "late.txt", "late\n"))
    return s


def test_files_after_the_cut_go_and_an_undo_brings_them_back(
    client: Client, tmp_path: Path
) -> None:
    box = tmp_path / "box"
    s = _worked(client, box)
    # Changed by hand after the last tool call: no tool record names this state.
    (box / "by-hand.bin").write_bytes(b"\x00\x01binary\xff")
    (box / "before.txt").chmod(0o600)
    os.symlink("late.txt", box / "link")
    everything = _files(box)
    hidden = s.transcript.rewind(4, files=True)
    assert s.transcript.length == 4 and hidden in s.transcript.hidden_heads()
    assert _files(box) == {
        "before.txt": (b"there from the start\n", 0o666 & ~_umask()),
        "early.txt": (b"early\n", 0o666 & ~_umask()),
    }
    s.transcript.undo_rewind(files=True)
    assert s.transcript.length == 7
    assert _files(box) == everything


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_cut_before_the_first_tool_call_gives_the_files_it_found(
    client: Client, tmp_path: Path
) -> None:
    box = tmp_path / "box"
    s = _worked(client, box)
    s.transcript.rewind(2, files=True)
    assert sorted(p.name for p in box.iterdir()) == ["before.txt"]
    # The rewound session names its own files: no tool record of it does.
    (box / "stray.txt").write_text("x")
    s.workspace.restore(2)
    assert sorted(p.name for p in box.iterdir()) == ["before.txt"]
    # It goes on from there; its new files are its own.
    _run(s, _write("c3", "other.txt", "another way\n"))
    assert sorted(p.name for p in box.iterdir()) == ["before.txt", "other.txt"]
    s.transcript.undo_rewind(files=True)
    assert sorted(p.name for p in box.iterdir()) == ["before.txt", "early.txt", "late.txt"]
    # An undo is undone the same way: the rewound branch's files come back too.
    s.transcript.undo_rewind(files=True)
    assert (box / "other.txt").read_text() == "another way\n"
    assert not (box / "late.txt").exists()


def test_a_rewind_without_files_leaves_the_folder_alone(client: Client, tmp_path: Path) -> None:
    box = tmp_path / "box"
    s = _worked(client, box)
    before = _files(box)
    s.transcript.rewind(2)
    assert _files(box) == before


def test_a_refused_rewind_writes_nothing(client: Client, tmp_path: Path) -> None:
    box = tmp_path / "box"
    s = _worked(client, box)
    (box / "late.txt").write_text("edited by hand\n")
    before, version = _files(box), s.live.version
    with pytest.raises(InvalidArgumentError):
        s.transcript.rewind(99, files=True)
    with pytest.raises(InvalidArgumentError):
        s.transcript.rewind(-1, files=True)
    with pytest.raises(InvalidArgumentError):
        s.transcript.rewind(2, files="yes")  # type: ignore[arg-type]
    with pytest.raises(NothingToDoError):
        s.transcript.rewind(s.transcript.length, files=True)  # nothing lies past the last message
    with pytest.raises(StaleSessionError):
        s.transcript.rewind(2, files=True, expect_version=version - 1)
    with pytest.raises(NothingToDoError):
        s.transcript.undo_rewind(files=True)  # no rewind to undo
    assert (s.live.version, s.transcript.length, _files(box)) == (version, 7, before)
    plain = client.sessions.create([{"role": "system", "content": "s"},
                                    {"role": "user", "content": "hi"}])
    plain.to("local", spec=str(tmp_path / "plain"))
    with pytest.raises(NothingToDoError, match="recorded its workspace"):
        plain.transcript.rewind(1, files=True)
    assert plain.transcript.length == 2


def test_pruning_keeps_what_a_hidden_head_names(client: Client, tmp_path: Path) -> None:
    box = tmp_path / "box"
    s = _worked(client, box)
    (box / "by-hand.txt").write_text("saved only by the rewind\n")
    everything = _files(box)
    s.transcript.rewind(2, files=True)
    client.sessions.prune_checkpoints(grace=0)
    s.transcript.undo_rewind(files=True)
    assert _files(box) == everything
