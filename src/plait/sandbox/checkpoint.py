"""Workspace checkpoints: a folder's files recorded content-addressed, restored byte for byte.

The format (one version, ``v: 1``) is git's idea in JSON:

* a **blob** is a file's bytes, named by their SHA-256;
* a **tree** is one folder: canonical JSON ``{"v": 1, "entries": [[name, kind, mode, ref],
  ...]}`` sorted by name, where ``kind`` is ``f`` (a file, ``ref`` its blob), ``l`` (a
  symlink, ``ref`` its target, never followed) or ``d`` (a folder, ``ref`` its tree), and
  ``mode`` the permission bits (never a set-uid or set-gid bit); it too is named by its
  SHA-256;
* a **checkpoint id** is the digest of the workspace's root tree.

Both kinds of object live in one :class:`Objects` space (a folder here; a store's blob
table can hold the same ``digest -> bytes`` pairs), so an unchanged file costs nothing, a
one-file change costs that file plus the trees on its path, and a checkpoint of an
unchanged tree writes nothing at all: its id, 64 characters, is the whole cost.

FIFOs, devices and sockets are not recorded, and set-uid and set-gid bits are neither
recorded nor, from a tree that has them (an older one, or one made by hand), re-created:
when plait runs as root a file a tool left with mode 6755 is owned by root, and a restore
must not make a set-uid root program of it. A stat cache (size, times, inode) spares
re-reading files that did not change; a file changed too recently for its timestamps to
tell is read again.

Every walk, of a folder or of stored trees, is a loop over an explicit stack: a folder
tree thousands deep raises no ``RecursionError``. A checkpoint of folders nested more
than :data:`MAX_DEPTH` deep is refused, and so is a restore of a tree that deep, with
:class:`~plait.errors.WorkspaceTooDeepError` (before anything is written).

The walks of the folder itself (``_fswalk.py``) go through held folder descriptors,
never by path and never through a symlink: whatever runs in the workspace may swap a
folder for a link to elsewhere while a checkpoint or a restore walks it, and neither
then reads, writes, removes nor changes the mode of anything outside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from plait.errors import InvalidArgumentError, WorkspaceTooDeepError
from plait.sandbox import _fswalk
from plait.sandbox._fswalk import MAX_DEPTH, VERSION, Scan
from plait.sandbox._objects import FolderObjects, Objects

_log = logging.getLogger("plait")

__all__ = ["MAX_DEPTH", "CheckpointStore", "FileChange", "FolderObjects", "Objects"]

_TREE_HEAD = b'{"v":1,"entries":'


@dataclass(frozen=True, slots=True)
class FileChange:
    """One path that differs between two checkpoints."""

    path: str
    """The path relative to the workspace (``/``-separated)."""
    change: Literal["added", "removed", "modified"]
    """What happened to it from the first checkpoint to the second."""
    kind: str
    """``file``, ``symlink`` or ``folder`` (the new kind when it changed kind)."""


_KINDS = {"f": "file", "l": "symlink", "d": "folder"}


class CheckpointStore:
    """Checkpoints of workspaces: :meth:`checkpoint`, :meth:`restore`, :meth:`diff`, :meth:`prune`.

    Args:
        folder: where the objects and the stat cache live (made if missing).
        objects: another object space (a store's blob table); default: ``folder``'s.
    """

    def __init__(self, folder: Path | str, objects: Objects | None = None) -> None:
        self.folder = Path(folder)
        """The checkpoint folder."""
        self.objects: Objects = objects or FolderObjects(self.folder)
        """Where blobs and trees are kept."""
        self.written = 0
        """Bytes of new objects written by this instance (what checkpoints cost on disk)."""
        self._caches: dict[str, dict[str, list[int | str]]] = {}

    @classmethod
    def beside(cls, store_file: Path | str) -> CheckpointStore:
        """The checkpoint store kept beside a store file: ``<file>.checkpoints/``."""
        path = Path(store_file)
        return cls(path.with_name(path.name + ".checkpoints"))

    # -- the stat cache -----------------------------------------------------------------

    def _cache_file(self, root: Path) -> Path:
        key = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
        return self.folder / "cache" / f"{key}.json"

    def _cache(self, root: Path) -> dict[str, list[int | str]]:
        key = str(root)
        if key not in self._caches:
            try:
                loaded = json.loads(self._cache_file(root).read_text("utf-8"))
                self._caches[key] = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                self._caches[key] = {}
        return self._caches[key]

    def _save_cache(self, root: Path, cache: dict[str, list[int | str]]) -> None:
        # Only speed depends on it: a write that fails (a full disk) leaves no temporary
        # file behind and costs the checkpoint nothing; the next one scans again.
        target = self._cache_file(root)
        tmp = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(cache, out, separators=(",", ":"))
            os.replace(tmp, target)
        except OSError as exc:
            _log.warning("checkpoint stat cache not saved: %s", exc)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    # -- checkpoint ---------------------------------------------------------------------

    def checkpoint(self, folder: Path | str) -> str:
        """Record ``folder``'s files and return the checkpoint id (a 64-character digest).

        The same tree always gives the same id and, the second time, writes nothing.
        Which objects are already stored is asked once for the whole tree (a database
        object space answers it with one query), and the root is marked as used, so
        that pruning spares a checkpoint taken while it runs (D148).

        Raises:
            InvalidArgumentError: ``folder`` is not an existing folder.
            WorkspaceTooDeepError: its folders nest more than :data:`MAX_DEPTH` deep.
            OSError: a file in it cannot be read, or a folder moved while this walked it.
        """
        root = Path(folder)
        if not root.is_dir() or root.is_symlink():
            raise InvalidArgumentError(f"{str(folder)!r} is not a folder to checkpoint")
        root = root.resolve()
        old = self._cache(root)
        for _attempt in range(2):
            scan = Scan(old, time.time_ns())
            digest = _fswalk.record(root, scan, self.objects, self._own())
            self.written += scan.written
            absent = self.objects.missing(scan.trees.keys() | scan.cached.keys())
            lost = absent & scan.cached.keys()
            if not lost:
                break
            # The stat cache named blobs the space no longer has (pruned): hash those
            # files again, as if never seen.
            old = {k: v for k, v in scan.new.items() if v[4] not in lost}
        for tree_digest in sorted(absent - lost):
            data = scan.trees[tree_digest]
            self.objects.put(tree_digest, data)
            self.written += len(data)
        self.objects.touch(digest)
        self._caches[str(root)] = scan.new
        if scan.new != self._cache(root):
            self._save_cache(root, scan.new)
        return digest

    def _own(self) -> tuple[int, int] | None:
        """The identity of the checkpoint folder (not recorded when kept in the workspace)."""
        try:
            st = os.stat(self.folder)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    # -- reading ------------------------------------------------------------------------

    def _entries(self, digest: str) -> list[list[Any]]:
        data = self.objects.get(digest)  # a missing object says so, not "malformed"
        try:
            tree = json.loads(data.decode("utf-8", "surrogateescape"))
        except ValueError:
            raise InvalidArgumentError(f"{digest} is not a checkpoint tree") from None
        if not isinstance(tree, dict) or tree.get("v") != VERSION:
            raise InvalidArgumentError(f"{digest} is not a checkpoint tree of version {VERSION}")
        entries = tree.get("entries")
        if not isinstance(entries, list):
            raise InvalidArgumentError(f"{digest} is not a checkpoint tree")
        for entry in entries:
            if not (isinstance(entry, list) and len(entry) == 4):
                raise InvalidArgumentError(f"checkpoint tree {digest} holds {entry!r}")
            name, kind, mode, ref = entry
            if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
                raise InvalidArgumentError(f"checkpoint tree {digest} names {name!r}")
            # Only files, links and folders: a tree naming anything else (a device) is refused.
            if kind not in _KINDS or not isinstance(ref, str):
                raise InvalidArgumentError(f"checkpoint tree {digest} holds {entry!r}")
            if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
                raise InvalidArgumentError(f"checkpoint tree {digest} gives {name!r} mode {mode!r}")
        return list(entries)

    def files(self, checkpoint_id: str) -> dict[str, tuple[str, str]]:
        """Every path of a checkpoint: ``path -> (kind, ref)`` (folders included).

        Raises:
            InvalidArgumentError: no checkpoint has that id.
        """
        out: dict[str, tuple[str, str]] = {}
        todo = [(checkpoint_id, "")]
        while todo:
            digest, prefix = todo.pop()
            for name, kind, _mode, ref in self._entries(digest):
                out[prefix + name] = (_KINDS[kind], ref)
                if kind == "d":
                    todo.append((ref, prefix + name + "/"))
        return out

    def diff(self, a: str, b: str) -> tuple[FileChange, ...]:
        """What changed from checkpoint ``a`` to checkpoint ``b``, path by path, sorted.

        Unchanged folders are skipped by their digest, so the cost is that of the change.

        Raises:
            InvalidArgumentError: either id is not a checkpoint.
        """
        changes: list[FileChange] = []
        # Two kinds of task, done from a stack (any depth, no recursion): ("below", a tree,
        # its path, added/removed) lists a whole tree; ("walk", left, right, path) compares.
        todo: list[tuple[str, str, str, str]] = [("walk", a, b, "")]

        def below(digest: str, prefix: str, change: str) -> None:
            todo.append(("below", digest, prefix, change))

        while todo:
            task, left, right, prefix = todo.pop()
            if task == "below":
                digest, at, how = left, right, prefix
                change: Literal["added", "removed"] = "added" if how == "added" else "removed"
                for name, kind, _mode, ref in self._entries(digest):
                    changes.append(FileChange(at + name, change, _KINDS[kind]))
                    if kind == "d":
                        below(ref, at + name + "/", how)
                continue
            if left == right:
                continue
            old = {e[0]: e for e in self._entries(left)}
            new = {e[0]: e for e in self._entries(right)}
            for name in sorted(old.keys() | new.keys()):
                path = prefix + name
                was, now = old.get(name), new.get(name)
                if was is None and now is not None:
                    changes.append(FileChange(path, "added", _KINDS[now[1]]))
                    if now[1] == "d":
                        below(now[3], path + "/", "added")
                elif now is None and was is not None:
                    changes.append(FileChange(path, "removed", _KINDS[was[1]]))
                    if was[1] == "d":
                        below(was[3], path + "/", "removed")
                elif was is not None and now is not None and was != now:
                    if was[1] == now[1] == "d":
                        if was[2] != now[2]:
                            changes.append(FileChange(path, "modified", "folder"))
                        todo.append(("walk", was[3], now[3], path + "/"))
                    elif "d" in (was[1], now[1]):
                        changes.append(FileChange(path, "modified", _KINDS[now[1]]))
                        if was[1] == "d":
                            below(was[3], path + "/", "removed")
                        else:
                            below(now[3], path + "/", "added")
                    else:
                        changes.append(FileChange(path, "modified", _KINDS[now[1]]))

        return tuple(sorted(changes, key=lambda c: c.path))

    # -- restore ------------------------------------------------------------------------

    def require(self, checkpoint_id: str) -> None:
        """Check that every object the checkpoint needs is stored (so a restore can be whole).

        Raises:
            InvalidArgumentError: it is not a checkpoint, or it lacks objects (pruned).
            WorkspaceTooDeepError: its folders nest more than :data:`MAX_DEPTH` deep.
        """
        needed, height = self._closure([checkpoint_id])
        if height > MAX_DEPTH:
            raise WorkspaceTooDeepError(f"checkpoint {checkpoint_id}", MAX_DEPTH)
        missing = self.objects.missing(needed)
        if missing:
            raise InvalidArgumentError(
                f"checkpoint {checkpoint_id} lacks {len(missing)} objects (pruned?)"
            )

    def restore(self, folder: Path | str, checkpoint_id: str) -> None:
        """Make ``folder`` hold exactly the checkpoint's files, byte for byte.

        Paths the checkpoint does not have are removed (a symlink is removed, never
        followed); files that differ are replaced atomically; an empty or missing
        folder becomes a copy of the checkpoint. Nothing outside ``folder`` is touched,
        even when what runs in it swaps a folder for a symlink while this walks it.

        Raises:
            InvalidArgumentError: ``checkpoint_id`` is not a checkpoint or lacks an
                object, or ``folder`` exists and is not a folder (nothing is changed).
            WorkspaceTooDeepError: the checkpoint's folders nest more than
                :data:`MAX_DEPTH` deep (nothing is changed).
            OSError: something in the folder could not be made or removed, or a folder
                moved while this walked it (what was done stays done).
        """
        root = Path(folder)
        # Every object must be there before anything changes: a restore is whole or nothing.
        self.require(checkpoint_id)
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise InvalidArgumentError(f"{str(folder)!r} is not a folder to restore into")
        root.mkdir(parents=True, exist_ok=True)
        root = root.resolve()
        _fswalk.restore(root, checkpoint_id, self._entries, self.objects, self._cache(root))

    # -- pruning ------------------------------------------------------------------------

    def reachable(self, checkpoint_ids: Iterable[str]) -> set[str]:
        """Every object the given checkpoints need.

        Raises:
            InvalidArgumentError: a tree of theirs is missing or malformed.
        """
        return self._closure(checkpoint_ids)[0]

    def _closure(self, checkpoint_ids: Iterable[str]) -> tuple[set[str], int]:
        """Every object the checkpoints need, and how deep their deepest folder nests.

        A stack, not recursion, and each tree read once however often it is shared.
        """
        seen: set[str] = set()
        below: dict[str, list[str]] = {}  # a tree read: the trees it holds
        height: dict[str, int] = {}  # a tree done: its folders' nesting, itself counted
        deepest = 0
        for checkpoint_id in checkpoint_ids:
            todo = [(checkpoint_id, False)]
            while todo:
                digest, done = todo.pop()
                if done:
                    height[digest] = 1 + max((height[t] for t in below[digest]), default=0)
                    continue
                if digest in below:
                    continue
                seen.add(digest)
                entries = self._entries(digest)
                below[digest] = [ref for _name, kind, _mode, ref in entries if kind == "d"]
                seen.update(ref for _name, kind, _mode, ref in entries if kind == "f")
                # Trees hold trees by their digest, so no tree holds itself: no cycle.
                todo.append((digest, True))
                todo.extend((t, False) for t in below[digest] if t not in below)
            deepest = max(deepest, height[checkpoint_id])
        return seen, deepest

    def _is_tree(self, digest: str) -> bool:
        """Whether an object reads as a tree (a file could too: it is then kept, no harm)."""
        try:
            with self.objects.open(digest) as src:
                head = src.read(len(_TREE_HEAD))
        except InvalidArgumentError:
            return False
        if head != _TREE_HEAD:
            return False
        try:
            self._entries(digest)
        except (InvalidArgumentError, KeyError, TypeError, ValueError):
            return False
        return True

    def prune(
        self,
        keep: Iterable[str],
        *,
        grace: float = 0.0,
        dry_run: bool = False,
        also: Collection[str] = (),
    ) -> int:
        """Delete every object no checkpoint in ``keep`` needs; returns how many (would) go.

        The caller passes the ids still referenced (by the sessions that exist). An
        object written or used within the last ``grace`` seconds, and everything such
        a tree reaches, is kept too: a checkpoint taken while this runs, not yet in
        any transcript, loses nothing.

        Args:
            keep: the checkpoint ids to keep whole.
            grace: seconds; objects used more recently are kept (0: none is).
            dry_run: count what would go, delete nothing.
            also: objects kept as they are (not trees): what others sharing the
                object space still need, such as a LangGraph checkpoint's values.

        Raises:
            InvalidArgumentError: a kept checkpoint is missing a tree, or ``grace`` is
                negative.
        """
        if not isinstance(grace, (int, float)) or isinstance(grace, bool) or grace < 0:
            raise InvalidArgumentError(f"grace is a number of seconds >= 0, not {grace!r}")
        needed = self.reachable(keep) | set(also)
        if grace:
            recent = self.objects.written_since(time.time() - grace)
            needed |= recent
            for digest in recent:
                if self._is_tree(digest):
                    needed |= self.reachable([digest])
        gone = 0
        for digest in list(self.objects.digests()):
            if digest not in needed:
                if not dry_run:
                    self.objects.delete(digest)
                gone += 1
        return gone


    def forget(
        self,
        gone: Iterable[str],
        keep: Iterable[str],
        *,
        grace: float = 0.0,
        dry_run: bool = False,
        also: Collection[str] = (),
    ) -> int:
        """Delete the objects the checkpoints ``gone`` need and no checkpoint in ``keep`` does.

        Unlike :meth:`prune`, it touches nothing but what ``gone`` reaches: an object of
        the space that no checkpoint names (another user of a store's object space keeps
        its own) stays. An object used within ``grace`` seconds stays, with what it reaches,
        and so do the objects in ``also`` (others' that a gone checkpoint's happen to equal).

        Returns:
            How many objects were (or in a dry run would be) deleted.

        Raises:
            InvalidArgumentError: ``grace`` is negative.
        """
        if not isinstance(grace, (int, float)) or isinstance(grace, bool) or grace < 0:
            raise InvalidArgumentError(f"grace is a number of seconds >= 0, not {grace!r}")
        candidates = self._reached(gone)
        if not candidates:
            return 0
        needed = self._reached(keep) | set(also)
        if grace:
            recent = self.objects.written_since(time.time() - grace)
            needed |= recent
            needed |= self._reached([d for d in recent if self._is_tree(d)])
        gone_now = sorted(candidates - needed)
        if not dry_run:
            for digest in gone_now:
                self.objects.delete(digest)
        return len(gone_now)

    def _reached(self, checkpoint_ids: Iterable[str]) -> set[str]:
        """What :meth:`reachable` finds of each checkpoint still whole (others are skipped)."""
        ids = list(checkpoint_ids)
        try:
            return self.reachable(ids)  # the common case: every one whole, one walk
        except InvalidArgumentError:
            pass
        found: set[str] = set()
        for checkpoint_id in ids:
            try:
                found |= self.reachable([checkpoint_id])
            except InvalidArgumentError:
                continue  # not held here, or not whole: nothing of it to keep or forget
        return found
