"""A file written to while a checkpoint stores it: the object is what one read saw, never a mix.

A checkpoint hashes a new file, then copies it into the object space under that hash.
A background process (a server appending to its log) may write between the two; the
copy must then not be stored under the first hash, or every later file whose bytes
are the first read's would restore as the longer one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

import plait.sandbox._fswalk as fswalk
from plait.sandbox import CheckpointStore, FolderObjects, Objects
from plait.session._objects import StoreObjects
from plait.store import SQLiteStore


@pytest.fixture(params=["folder", "store"])
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Objects]:
    if request.param == "folder":
        yield FolderObjects(tmp_path / "objects")
        return
    store = SQLiteStore(tmp_path / "plait.db")
    try:
        yield StoreObjects(store)
    finally:
        store.close()


def _appending_after_the_hash(log: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first hash of a file is followed, before its copy, by a line appended to ``log``."""
    real: Callable[[BinaryIO], str] = fswalk.hash_stream
    appended: list[int] = []

    def hash_then_append(src: BinaryIO) -> str:
        digest = real(src)
        if not appended:
            with open(log, "a") as out:
                appended.append(out.write("line 2\n"))
        return digest

    monkeypatch.setattr(fswalk, "hash_stream", hash_then_append)
    return appended


def test_a_file_appended_to_mid_checkpoint_is_stored_as_one_read_saw_it(
    objects: Objects, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    log = ws / "server.log"
    log.write_text("line 1\n")
    checkpoints = CheckpointStore(tmp_path / "cp", objects=objects)
    appended = _appending_after_the_hash(log, monkeypatch)
    first = checkpoints.checkpoint(ws)
    assert appended  # the race happened: the file grew between its hash and its copy
    monkeypatch.undo()

    # The restored log is one whole read of it (here, after the append).
    log.write_text("something else\n")
    checkpoints.restore(ws, first)
    assert log.read_text() == "line 1\nline 2\n"

    # A new file holding the first read's bytes restores as itself, not as the longer log.
    (ws / "copy.txt").write_text("line 1\n")
    second = checkpoints.checkpoint(ws)
    (ws / "copy.txt").write_text("changed\n")
    checkpoints.restore(ws, second)
    assert (ws / "copy.txt").read_text() == "line 1\n"
    assert log.read_text() == "line 1\nline 2\n"
