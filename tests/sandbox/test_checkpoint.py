"""Workspace checkpoints: what they cost, and that a restore gives back every byte."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import sys
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from plait.errors import InvalidArgumentError, PlaitError, WorkspaceTooDeepError
from plait.sandbox import CheckpointStore, FileChange
from plait.sandbox._fstree import remove_tree
from plait.sandbox.checkpoint import MAX_DEPTH


def _snapshot(folder: Path) -> dict[str, object]:
    """Everything a person could tell apart in a folder: contents, link targets, modes."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(folder))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                seen[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                seen[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
    return seen


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "pkg" / "a.py").write_text("print('a')\n")
    (ws / "src" / "b.bin").write_bytes(bytes(range(256)) * 64)
    (ws / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (ws / "run.sh").chmod(0o755)
    (ws / "empty").mkdir()
    os.symlink("src/pkg/a.py", ws / "link")
    os.symlink("/nowhere/at/all", ws / "dangling")
    (ws / "caf\u00e9 \u2603.txt").write_text("unicode name")
    return ws


def test_restore_gives_back_every_byte_link_and_mode(tree: Path, tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp")
    before = _snapshot(tree)
    first = store.checkpoint(tree)
    # A stretch of work: edits, deletions, new files, a file turned into a folder and back.
    (tree / "src" / "pkg" / "a.py").write_text("changed")
    (tree / "src" / "b.bin").unlink()
    (tree / "run.sh").chmod(0o644)
    (tree / "new").mkdir()
    (tree / "new" / "n.txt").write_text("new")
    (tree / "empty").rmdir()
    (tree / "empty").write_text("now a file")
    (tree / "link").unlink()
    os.symlink("run.sh", tree / "link")
    second = store.checkpoint(tree)
    assert second != first
    store.restore(tree, first)
    assert _snapshot(tree) == before
    store.restore(tree, second)
    assert (tree / "empty").read_text() == "now a file" and not (tree / "src" / "b.bin").exists()
    assert os.readlink(tree / "link") == "run.sh"


def test_a_restore_into_a_new_folder_is_a_copy(tree: Path, tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(tree)
    copy = tmp_path / "fork"
    store.restore(copy, cid)
    assert _snapshot(copy) == _snapshot(tree)
    (copy / "run.sh").write_text("the fork's own")
    assert (tree / "run.sh").read_text() == "#!/bin/sh\necho hi\n"


def test_an_unchanged_tree_costs_nothing_and_one_change_costs_that_file(
    tree: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "cp")
    first = store.checkpoint(tree)
    after_first = store.written
    assert after_first >= (tree / "src" / "b.bin").stat().st_size
    assert store.checkpoint(tree) == first and store.written == after_first
    (tree / "src" / "pkg" / "a.py").write_text("print('b')\n")
    store.checkpoint(tree)
    cost = store.written - after_first
    # The file's 11 bytes and the three trees on its path (root, src, pkg): no copy of b.bin.
    assert 11 < cost < 2000
    # A second instance (a new process) finds the same objects and writes nothing new.
    again = CheckpointStore(tmp_path / "cp")
    assert again.checkpoint(tree) == store.checkpoint(tree) and again.written == 0


def test_diff_names_what_a_stretch_changed(tree: Path, tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp")
    a = store.checkpoint(tree)
    (tree / "src" / "pkg" / "a.py").write_text("changed")
    (tree / "src" / "pkg" / "c.py").write_text("new")
    (tree / "dangling").unlink()
    (tree / "empty").rmdir()
    b = store.checkpoint(tree)
    assert store.diff(a, a) == ()
    assert store.diff(a, b) == (
        FileChange("dangling", "removed", "symlink"),
        FileChange("empty", "removed", "folder"),
        FileChange("src/pkg/a.py", "modified", "file"),
        FileChange("src/pkg/c.py", "added", "file"),
    )
    assert [c.change for c in store.diff(b, a)] == ["added", "added", "modified", "removed"]


def test_restore_never_follows_a_link_out_of_the_folder(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("f")
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(ws)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("precious")
    os.symlink(outside, ws / "out")  # made after the checkpoint: removed by the restore
    store.restore(ws, cid)
    assert not (ws / "out").exists() and not (ws / "out").is_symlink()
    assert (outside / "precious.txt").read_text() == "precious"


def test_special_files_are_not_recorded_and_bad_ids_change_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "pipe")
    (ws / "f.txt").write_text("f")
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(ws)
    assert set(store.files(cid)) == {"f.txt"}
    with pytest.raises(InvalidArgumentError):
        store.restore(ws, "0" * 64)
    with pytest.raises(InvalidArgumentError):
        store.restore(ws, "../../etc/passwd")
    with pytest.raises(InvalidArgumentError):
        store.checkpoint(ws / "f.txt")
    assert (ws / "f.txt").read_text() == "f" and (ws / "pipe").exists()


def test_prune_keeps_what_live_checkpoints_need(tree: Path, tmp_path: Path) -> None:
    store = CheckpointStore.beside(tmp_path / "plait.db")
    assert store.folder == tmp_path / "plait.db.checkpoints"
    old = store.checkpoint(tree)
    (tree / "src" / "b.bin").write_bytes(b"replaced")
    new = store.checkpoint(tree)
    assert store.prune(keep=[new]) > 0
    fresh = tmp_path / "fresh"
    store.restore(fresh, new)
    assert (fresh / "src" / "b.bin").read_bytes() == b"replaced"
    with pytest.raises(InvalidArgumentError):
        store.restore(tmp_path / "gone", old)


def test_a_restore_missing_an_object_changes_nothing(tree: Path, tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(tree)
    (tree / "src" / "pkg" / "a.py").write_text("later")
    store.checkpoint(tree)
    blob = next(ref for kind, ref in store.files(cid).values() if kind == "file")
    store.objects.delete(blob)
    before = _snapshot(tree)
    with pytest.raises(InvalidArgumentError, match="lacks 1 objects"):
        store.restore(tree, cid)
    assert _snapshot(tree) == before


class TableObjects:
    """Objects as a store's blob table would hold them: one ``digest -> bytes`` row each."""

    def __init__(self) -> None:
        self.rows: dict[str, bytes] = {}
        self.used: dict[str, float] = {}

    def has(self, digest: str) -> bool:
        return digest in self.rows

    def missing(self, digests: Collection[str]) -> set[str]:
        return {d for d in digests if d not in self.rows}

    def put(self, digest: str, data: bytes) -> None:
        self.rows.setdefault(digest, data)

    def put_file(self, digest: str, source: BinaryIO) -> int:
        if digest in self.rows:
            return 0
        self.rows[digest] = source.read()
        return len(self.rows[digest])

    def get(self, digest: str) -> bytes:
        if digest not in self.rows:
            raise InvalidArgumentError(f"no checkpoint object {digest}")
        return self.rows[digest]

    def open(self, digest: str) -> io.BytesIO:
        return io.BytesIO(self.get(digest))

    def digests(self) -> Iterator[str]:
        return iter(list(self.rows))

    def touch(self, digest: str) -> None:
        self.used[digest] = time.time()

    def written_since(self, cutoff: float) -> set[str]:
        return {d for d, t in self.used.items() if t >= cutoff and d in self.rows}

    def delete(self, digest: str) -> None:
        self.rows.pop(digest, None)


def test_the_objects_can_live_in_a_blob_table(tree: Path, tmp_path: Path) -> None:
    table = TableObjects()
    store = CheckpointStore(tmp_path / "cp", objects=table)
    before = _snapshot(tree)
    cid = store.checkpoint(tree)
    assert hashlib.sha256(table.rows[cid]).hexdigest() == cid
    assert not (tmp_path / "cp" / "objects").exists()  # only the stat cache is a file
    (tree / "run.sh").write_text("changed")
    store.restore(tree, cid)
    assert _snapshot(tree) == before


def test_prune_spares_what_was_used_within_the_grace(tree: Path, tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(tree)
    # Nothing references it yet (its tool call is still running): recent use keeps it.
    assert store.prune(keep=[], grace=3600) == 0
    assert store.prune(keep=[], grace=0, dry_run=True) > 0
    store.restore(tmp_path / "whole", cid)
    assert _snapshot(tmp_path / "whole") == _snapshot(tree)
    assert store.prune(keep=[], grace=0) > 0
    assert list(store.objects.digests()) == []
    with pytest.raises(InvalidArgumentError):
        store.prune(keep=[], grace=-1)


def test_a_checkpoint_after_a_prune_stores_again_what_its_cache_remembered(
    tree: Path, tmp_path: Path
) -> None:
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(tree)
    store.prune(keep=[], grace=0)
    # The stat cache still knows every file's digest; the objects are gone.
    assert store.checkpoint(tree) == cid
    store.restore(tmp_path / "again", cid)
    assert _snapshot(tmp_path / "again") == _snapshot(tree)


@pytest.mark.parametrize("name", ["../escape.txt", "..", "a/b", "", "."])
def test_a_hostile_tree_cannot_write_outside_the_folder(tmp_path: Path, name: str) -> None:
    """A tree object from a shared store names only entries of its own folder."""
    store = CheckpointStore(tmp_path / "cp")
    blob = b"planted"
    store.objects.put(hashlib.sha256(blob).hexdigest(), blob)
    tree = json.dumps({"v": 1, "entries": [[name, "f", 0o644, hashlib.sha256(blob).hexdigest()]]},
                      separators=(",", ":")).encode()
    digest = hashlib.sha256(tree).hexdigest()
    store.objects.put(digest, tree)
    ws = tmp_path / "deep" / "ws"
    ws.mkdir(parents=True)
    (ws / "mine.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError, match="names"):
        store.restore(ws, digest)
    assert not (tmp_path / "deep" / "escape.txt").exists()
    assert [p.name for p in ws.iterdir()] == ["mine.txt"]


def test_a_folder_left_without_write_permission_is_restored_into(tmp_path: Path) -> None:
    """A tool may leave a folder read-only; its owner restores into it all the same.

    As root permissions never stop a restore; this matters as a user (the module is run
    again as one by ``test_walk_races.py``).
    """
    ws = tmp_path / "ws"
    (ws / "ro").mkdir(parents=True)
    (ws / "ro" / "f.txt").write_text("one")
    (ws / "ro").chmod(0o500)
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(ws)
    (ws / "ro").chmod(0o700)
    (ws / "ro" / "f.txt").write_text("two")
    (ws / "ro" / "new.txt").write_text("new")
    (ws / "ro").chmod(0o500)
    try:
        store.restore(ws, cid)
        assert sorted(p.name for p in (ws / "ro").iterdir()) == ["f.txt"]
        assert (ws / "ro" / "f.txt").read_text() == "one"
        assert stat.S_IMODE((ws / "ro").stat().st_mode) == 0o500
    finally:
        (ws / "ro").chmod(0o700)


def _forged(store: CheckpointStore, entries: list[list[object]]) -> str:
    """A tree object made by hand (an old checkpoint, another store's, a forgery)."""
    data = json.dumps({"v": 1, "entries": entries}, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    store.objects.put(digest, data)
    return digest


def test_set_id_bits_are_never_recorded_nor_re_created(tmp_path: Path) -> None:
    """As root, a tool's 6755 file is a set-uid root program: a restore must not remake it."""
    ws = tmp_path / "ws"
    (ws / "bin").mkdir(parents=True)
    (ws / "bin" / "tool").write_bytes(b"\x7fELF...")
    (ws / "bin" / "tool").chmod(0o6755)
    (ws / "bin").chmod(0o2775)
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(ws)
    store.restore(tmp_path / "again", cid)
    again = tmp_path / "again"
    assert stat.S_IMODE((again / "bin" / "tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((again / "bin").stat().st_mode) == 0o775
    # A tree that does carry the bits (recorded before, or forged) restores without them.
    blob = b"#!/bin/sh\nid\n"
    store.objects.put(hashlib.sha256(blob).hexdigest(), blob)
    forged = _forged(store, [["su", "f", 0o6755, hashlib.sha256(blob).hexdigest()]])
    store.restore(tmp_path / "forged", forged)
    assert stat.S_IMODE((tmp_path / "forged" / "su").stat().st_mode) == 0o755


_X = hashlib.sha256(b"x").hexdigest()


@pytest.mark.parametrize(
    "entry",
    [["null", "c", 0o666, "1:3"], ["x", "f", -1, _X], ["x", "f", 0o17777, _X],
     ["x", "f", "755", _X], ["x", "d"], "x"],
)
def test_a_tree_naming_a_device_or_a_bad_mode_is_refused(
    tmp_path: Path, entry: list[object]
) -> None:
    store = CheckpointStore(tmp_path / "cp")
    store.objects.put(_X, b"x")
    digest = _forged(store, [entry])
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mine.txt").write_text("mine")
    with pytest.raises(InvalidArgumentError):
        store.restore(ws, digest)
    assert [p.name for p in ws.iterdir()] == ["mine.txt"]


def _deep(top: Path, depth: int, name: str = "d") -> Path:
    """A chain of ``depth`` folders below ``top`` (made by descriptor: no path grows long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
        with open(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("leaf")
    finally:
        os.close(fd)
    return top


@pytest.fixture
def shallow_stack(tmp_path: Path) -> Iterator[None]:
    """Python's recursion limit well below the trees' depth: a recursive walk would fail.

    The deep trees go afterwards: a later test walking the shared temporary folder
    recursively (``Path.rglob``) would fail on them.
    """
    was = sys.getrecursionlimit()
    sys.setrecursionlimit(250)
    try:
        yield
    finally:
        sys.setrecursionlimit(was)
        for child in list(tmp_path.iterdir()):
            if child.is_dir() and not child.is_symlink():
                remove_tree(child)


def test_a_tree_deeper_than_the_stack_is_recorded_restored_and_compared(
    tmp_path: Path, shallow_stack: None
) -> None:
    (tmp_path / "ws").mkdir()
    ws = _deep(tmp_path / "ws", 400)
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(ws)
    leaf = "/".join(["d"] * 400) + "/leaf.txt"
    assert store.files(cid)[leaf][0] == "file"
    (tmp_path / "empty").mkdir()
    empty = store.checkpoint(tmp_path / "empty")
    assert len(store.diff(empty, cid)) == 401 and len(store.diff(cid, empty)) == 401
    store.restore(tmp_path / "again", cid)
    assert (tmp_path / "again" / leaf).read_text() == "leaf"
    store.restore(tmp_path / "again", empty)  # removes the whole chain
    assert list((tmp_path / "again").iterdir()) == []
    assert store.prune([cid, empty]) == 0


def test_a_tree_deeper_than_the_limit_is_refused_with_a_typed_error(
    tmp_path: Path, shallow_stack: None
) -> None:
    (tmp_path / "ws").mkdir()
    ws = _deep(tmp_path / "ws", MAX_DEPTH + 600)
    store = CheckpointStore(tmp_path / "cp")
    with pytest.raises(WorkspaceTooDeepError) as refused:
        store.checkpoint(ws)
    assert isinstance(refused.value, PlaitError) and refused.value.limit == MAX_DEPTH
    # A stored tree that deep (forged: plait does not record one) is not restored either.
    child = _forged(store, [])
    for _ in range(MAX_DEPTH + 5):
        child = _forged(store, [["d", "d", 0o755, child]])
    target = tmp_path / "target"
    target.mkdir()
    (target / "mine.txt").write_text("mine")
    with pytest.raises(WorkspaceTooDeepError):
        store.restore(target, child)
    assert [p.name for p in target.iterdir()] == ["mine.txt"]


def test_a_stat_cache_that_cannot_be_written_leaves_no_temporary_file(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from plait.sandbox import checkpoint as module

    class FullDisk:
        """``json`` as the module uses it, except that writing a file fails (ENOSPC)."""

        def __getattr__(self, name: str) -> object:
            return getattr(json, name)

        @staticmethod
        def dump(*args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    store = CheckpointStore(tmp_path / "cp")
    monkeypatch.setattr(module, "json", FullDisk())
    first = store.checkpoint(tree)  # the objects are written; only the cache is not
    monkeypatch.undo()
    leftovers = [p.name for p in (tmp_path / "cp").rglob(".tmp-*")]
    assert leftovers == []
    assert store.checkpoint(tree) == first  # and the checkpoint is whole
    store.restore(tmp_path / "back", first)
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == sorted(
        p.name for p in tree.iterdir()
    )
