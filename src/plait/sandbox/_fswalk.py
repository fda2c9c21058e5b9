"""The two walks of a workspace on the host: recording it into trees, restoring trees into it.

A workspace is written by whatever runs in it, and that may go on while plait walks
it: a tool can swap a folder (or a file) for a symlink between two steps of a walk.
A walk by path would then follow the link out of the workspace, on the host: read a
file from outside into a checkpoint or, restoring, remove, make, write and chmod
there. So neither walk names anything below the workspace's root by path. Each holds
the folder it is in by descriptor (:class:`~plait.sandbox._fstree.Cursor`) and acts
on names relative to it, never through a link: folders and files are opened with
``O_NOFOLLOW``, links read with ``readlinkat``, files written under a temporary name
and renamed in, modes set through descriptors. A name that became something else
since it was looked at is looked at again: a checkpoint records a link as a link, a
restore removes what is in its way (a link is removed, never followed).

Both walks are loops over an explicit stack, bounded by :data:`MAX_DEPTH`, with two
descriptors open at most. The tree format is ``checkpoint.py``'s.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from plait.errors import WorkspaceTooDeepError
from plait.sandbox._fstree import Cursor, open_file, remove_at
from plait.sandbox._objects import (
    Objects,
    SourceChangedError,
    copy_stream,
    hash_stream,
    snapshot,
)

__all__ = ["MAX_DEPTH", "MODE_BITS", "VERSION", "Scan", "record", "restore"]

MAX_DEPTH = 512
"""The deepest folder nesting a checkpoint records or a restore makes (git's own walks
stop near here too); deeper is :class:`~plait.errors.WorkspaceTooDeepError`."""

_SPOOL_IN_MEMORY = 8 << 20
"""Bytes of a file's snapshot kept in memory before it goes to a temporary file."""

MODE_BITS = 0o1777
"""The permission bits a checkpoint keeps and a restore sets: the sticky bit, never set-id."""

VERSION = 1
"""The version of the tree format (``{"v": 1, "entries": ...}``)."""

# A file whose mtime is this close to the scan that hashed it may change again within the
# same timestamp tick, so its cached digest is not trusted (git's "racy" entries).
_RACY_NS = 50_000_000
# What opening a folder by name says when the name became a link or a file.
_CHANGED = (errno.ELOOP, errno.ENOTDIR)
# What renaming a file onto a name says when a folder was put there.
_IN_THE_WAY = (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR)
_TEMP = ".plait-restore-"
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# A name that keeps changing kind as it is looked at (a tool swapping it in a loop) is
# looked at this many times, then left out (recording) or refused (restoring).
_TRIES = 3


def _encode(entries: list[list[Any]]) -> bytes:
    return json.dumps(
        {"v": VERSION, "entries": entries}, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8", "surrogateescape")


@dataclass(slots=True)
class Scan:
    """One walk of a workspace: the stat cache read and written, the objects it needs."""

    old: dict[str, list[int | str]]
    """The stat cache as the walk found it: ``path -> [size, mtime, ctime, ino, digest, scan]``."""
    started: int
    """When the walk started (ns): a file changed later than this is not trusted next time."""
    new: dict[str, list[int | str]] = field(default_factory=dict)
    """The stat cache as the walk leaves it."""
    trees: dict[str, bytes] = field(default_factory=dict)
    """Every tree of the workspace, by digest (stored if missing once the walk is done)."""
    cached: dict[str, str] = field(default_factory=dict)
    """Blobs taken from the stat cache (digest -> path): their presence is asked once."""
    written: int = 0
    """Bytes of blobs the walk stored."""


def _cached(seen: list[int | str] | None, st: os.stat_result) -> str | None:
    """The digest the stat cache gives a file, if its entry still describes it."""
    if (
        seen is not None
        and len(seen) == 6
        and seen[:4] == [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        and st.st_mtime_ns + _RACY_NS < int(seen[5])
    ):
        return str(seen[4])
    return None


# -- recording ----------------------------------------------------------------------------


@dataclass(slots=True)
class _Folder:
    """One folder of a checkpoint's walk: what it holds, how far through, what it records."""

    prefix: str
    names: list[str]
    name: str = ""
    mode: int = 0
    at: int = 0
    entries: list[list[Any]] = field(default_factory=list)


def record(root: Path, scan: Scan, objects: Objects, skip: tuple[int, int] | None) -> str:
    """Record every folder below ``root``, deepest first; returns the root tree's digest.

    Blobs missing from ``objects`` are stored as their files are read; trees are left
    in ``scan.trees`` for the caller to store.

    Args:
        root: the workspace (its last part is not followed).
        scan: the walk's stat caches and what it finds.
        objects: where blobs are stored.
        skip: the identity (device, inode) of a folder not to record (the
            checkpoints' own, kept inside the workspace).

    Raises:
        WorkspaceTooDeepError: folders nest more than :data:`MAX_DEPTH` deep.
        OSError: a file cannot be read, or a folder moved while it was walked.
    """
    with Cursor(root) as cur:
        stack = [_Folder("", sorted(os.listdir(cur.fd)))]
        while True:
            top = stack[-1]
            if top.at < len(top.names):
                name = top.names[top.at]
                top.at += 1
                if len(stack) >= MAX_DEPTH:
                    found = _look(cur, name, top.prefix + name, scan, objects, skip, root)
                else:
                    found = _look(cur, name, top.prefix + name, scan, objects, skip, None)
                if found is None:
                    continue
                kind, mode, ref = found
                if kind == "d":  # the cursor is in it now
                    names = sorted(os.listdir(cur.fd))
                    stack.append(_Folder(top.prefix + name + "/", names, name, mode))
                else:
                    top.entries.append([name, kind, mode, ref])
                continue
            # Every item is recorded: the folder's tree is complete, and its parent's next.
            data = _encode(top.entries)
            digest = hashlib.sha256(data).hexdigest()
            scan.trees[digest] = data
            stack.pop()
            if not stack:
                return digest
            cur.up()
            stack[-1].entries.append([top.name, "d", top.mode, digest])


def _look(
    cur: Cursor,
    name: str,
    rel: str,
    scan: Scan,
    objects: Objects,
    skip: tuple[int, int] | None,
    too_deep: Path | None,
) -> tuple[str, int, str] | None:
    """What ``name`` is, as a tree records it: ``(kind, mode, ref)``, None if nothing.

    For a folder the cursor has gone into it (its ``ref`` is the caller's to fill).
    ``too_deep`` is the workspace when a folder here would nest past the limit.
    """
    for _attempt in range(_TRIES):
        try:
            st = os.stat(name, dir_fd=cur.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None  # removed while we looked: not part of this checkpoint
        if stat.S_ISLNK(st.st_mode):
            try:
                return "l", 0, os.readlink(name, dir_fd=cur.fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno == errno.EINVAL:
                    continue  # no longer a link
                raise
        if stat.S_ISDIR(st.st_mode):
            if (st.st_dev, st.st_ino) == skip:
                return None  # the checkpoints themselves, kept inside the workspace
            if too_deep is not None:
                raise WorkspaceTooDeepError(f"the workspace {str(too_deep)!r}", MAX_DEPTH)
            try:
                st = cur.down(name)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in _CHANGED:
                    continue  # a link or a file put there since: recorded as what it is
                raise
            return "d", stat.S_IMODE(st.st_mode) & MODE_BITS, ""
        if stat.S_ISREG(st.st_mode):
            blob = _blob(cur.fd, name, rel, st, scan, objects)
            if blob is None:
                continue
            return "f", blob[1], blob[0]
        return None  # FIFOs, devices and sockets are not recorded
    return None  # it changed kind each time it was looked at: not part of this checkpoint


def _blob(
    dir_fd: int, name: str, rel: str, st: os.stat_result, scan: Scan, objects: Objects
) -> tuple[str, int] | None:
    """A file's digest and mode, its bytes stored if new; None if it is no longer a file."""
    seen = scan.old.get(rel)
    digest = _cached(seen, st)
    if digest is not None and seen is not None:
        scan.cached[digest] = rel
        scan.new[rel] = list(seen)
        return digest, stat.S_IMODE(st.st_mode) & MODE_BITS
    opened = open_file(name, dir_fd)
    if opened is None:
        return None
    fd, fst = opened
    with open(fd, "rb", buffering=0) as src:
        digest = hash_stream(src)
        src.seek(0)
        # put_file stores nothing (and reads nothing) when the object is there already.
        try:
            scan.written += objects.put_file(digest, src)
        except SourceChangedError:
            # Written to between the hash and the copy (a log a background process
            # appends to): store what one read of it saw, under that read's digest.
            src.seek(0)
            with tempfile.SpooledTemporaryFile(_SPOOL_IN_MEMORY) as spooled:
                spool = cast(BinaryIO, spooled)  # a binary file, typed as IO[bytes]
                digest = snapshot(src, spool)
                scan.written += objects.put_file(digest, spool)
    key: list[int | str] = [fst.st_size, fst.st_mtime_ns, fst.st_ctime_ns, fst.st_ino]
    scan.new[rel] = [*key, digest, scan.started]
    return digest, stat.S_IMODE(fst.st_mode) & MODE_BITS


# -- restoring ----------------------------------------------------------------------------


def restore(
    root: Path,
    digest: str,
    entries: Callable[[str], list[list[Any]]],
    objects: Objects,
    cache: dict[str, list[int | str]],
) -> None:
    """Make the folder ``root`` hold exactly tree ``digest``, through descriptors.

    Args:
        root: the folder (it exists; its last part is not followed).
        digest: the root tree.
        entries: a tree's checked entries, by digest.
        objects: where the blobs are.
        cache: the folder's stat cache (spares hashing files that did not change).

    Raises:
        OSError: something could not be made or removed, or a folder moved while
            it was restored (what was done stays done).
    """
    with Cursor(root) as cur:
        # One frame per folder on the way down: its path, the entries still to make and
        # the mode it gets once they are made (the root keeps its own).
        stack: list[tuple[str, Iterator[list[Any]], int]] = [
            ("", _clear(cur.fd, entries(digest)), 0)
        ]
        while stack:
            prefix, todo, mode = stack[-1]
            entry = next(todo, None)
            if entry is None:
                stack.pop()
                if stack:
                    cur.up(mode & MODE_BITS)
                continue
            name, kind, entry_mode, ref = entry
            if kind == "d":
                _folder(cur, name)
                stack.append((prefix + name + "/", _clear(cur.fd, entries(ref)), entry_mode))
            elif kind == "l":
                _link(cur.fd, name, ref)
            else:
                seen = cache.get(prefix + name)
                _file(cur.fd, name, ref, entry_mode & MODE_BITS, objects, seen)


def _clear(dir_fd: int, tree: list[list[Any]]) -> Iterator[list[Any]]:
    """Remove from the folder what ``tree`` does not keep; its entries, by name."""
    wanted = {e[0]: e for e in tree}
    for name in os.listdir(dir_fd):
        entry = wanted.get(name)
        if entry is not None and entry[1] in ("d", "f"):
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if (entry[1] == "d" and stat.S_ISDIR(st.st_mode)) or (
                entry[1] == "f" and stat.S_ISREG(st.st_mode)
            ):
                continue
        remove_at(dir_fd, name)
    return iter([wanted[name] for name in sorted(wanted)])


def _folder(cur: Cursor, name: str) -> None:
    """Make (or keep) the folder ``name`` and go into it."""
    for _attempt in range(_TRIES):
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=cur.fd)
        try:
            st = cur.down(name)
        except OSError as exc:
            if exc.errno not in (*_CHANGED, errno.ENOENT):
                raise
            remove_at(cur.fd, name)  # a link or a file put there since: removed, not followed
            continue
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o700 != 0o700:
            # Its entries are made first, its own mode set as the walk leaves it.
            os.fchmod(cur.fd, mode | 0o700)
        return
    raise OSError(f"{name!r} kept changing while plait restored it")


def _link(dir_fd: int, name: str, target: str) -> None:
    for _attempt in range(_TRIES):
        try:
            os.symlink(target, name, dir_fd=dir_fd)
            return
        except FileExistsError:
            remove_at(dir_fd, name)  # put there since the folder was cleared
    raise OSError(f"{name!r} kept changing while plait restored it")


def _file(
    dir_fd: int,
    name: str,
    digest: str,
    mode: int,
    objects: Objects,
    seen: list[int | str] | None,
) -> None:
    """Make ``name`` the blob ``digest`` with ``mode``; a file already equal keeps its bytes."""
    try:
        opened = open_file(name, dir_fd)
    except PermissionError:
        opened = None  # a file its owner may not read is written again
    if opened is not None:
        fd, st = opened
        try:
            if _same(fd, st, digest, seen):
                if stat.S_IMODE(st.st_mode) != mode:
                    os.fchmod(fd, mode)
                return
        finally:
            os.close(fd)
    _write(dir_fd, name, digest, mode, objects)


def _same(fd: int, st: os.stat_result, digest: str, seen: list[int | str] | None) -> bool:
    cached = _cached(seen, st)
    if cached is not None:
        return cached == digest
    with open(fd, "rb", buffering=0, closefd=False) as src:
        return hash_stream(src) == digest


def _write(dir_fd: int, name: str, digest: str, mode: int, objects: Objects) -> None:
    """Write the blob under a temporary name beside ``name``, then rename it in."""
    while True:
        tmp = _TEMP + secrets.token_hex(8)
        try:
            out = os.open(tmp, _NEW, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    try:
        try:
            with open(out, "wb", closefd=False) as dst, objects.open(digest) as src:
                copy_stream(src, dst)
            os.fchmod(out, mode)
        finally:
            os.close(out)
        for _attempt in range(_TRIES):
            try:
                os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                return
            except OSError as exc:
                if exc.errno not in _IN_THE_WAY:
                    raise
                remove_at(dir_fd, name)  # a folder put there since the folder was cleared
        raise OSError(f"{name!r} kept changing while plait restored it")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
