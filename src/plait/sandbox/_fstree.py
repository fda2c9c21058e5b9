"""Folder trees on the host side of a workspace, walked without recursion or symlinks.

A workspace is written by whatever runs in it, a model's shell included: its
folders may nest thousands deep (deeper than Python's recursion limit, or
than ``PATH_MAX`` as one path) and hold symlinks to anywhere. What plait does
to it from outside goes through here: every folder is opened relative to its
parent's descriptor with ``O_NOFOLLOW``, so a symlink is never followed, the
walk is a loop over an explicit stack, so no depth raises ``RecursionError``,
and at most two descriptors are open at a time (the way back up is ``..``,
checked to be the folder it came from).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

__all__ = ["make_folders", "open_folder", "remove_made", "remove_tree"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_folder(name: str, dir_fd: int | None = None) -> int:
    """Open a folder (never through a symlink at ``name``'s last part) and return its fd.

    Args:
        name: the folder, relative to ``dir_fd`` when given.
        dir_fd: the descriptor ``name`` is relative to.

    Returns:
        A descriptor of the folder, close-on-exec.

    Raises:
        OSError: it is missing, not a folder, or a symlink (``ELOOP``/``ENOTDIR``).
    """
    return os.open(name, _DIR, dir_fd=dir_fd)


def remove_tree(path: Path | str) -> None:
    """Remove ``path`` and everything below it; a symlink is removed, never followed.

    Folders a tool left without write or search permission are opened up first
    (the owner may always change their mode). Any depth is removed, with two
    descriptors open at most.

    Args:
        path: what to remove; a missing path is no error.

    Raises:
        OSError: something could not be removed (what was removed stays removed),
            or a folder moved while it was being removed.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        path.unlink()
        return
    # The folder holding it is the caller's to name (it may be reached through a link).
    top = os.open(str(path.parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _remove_below(top, path.name)
    finally:
        os.close(top)


def _list(fd: int) -> list[str]:
    """Remove what ``fd``'s folder holds but folders; returns the folders' names."""
    folders: list[str] = []
    with os.scandir(fd) as found:
        items = list(found)
    for item in items:
        if item.is_dir(follow_symlinks=False):
            folders.append(item.name)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.name, dir_fd=fd)
    return folders


def _enter(name: str, parent: int) -> tuple[int, tuple[int, int]]:
    fd = open_folder(name, parent)
    st = os.fstat(fd)
    if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o700)
    return fd, (st.st_dev, st.st_ino)


def _remove_below(top: int, name: str) -> None:
    # One frame per folder on the way down: its name, identity and folders still to remove.
    cur, ident = _enter(name, top)
    chain: list[tuple[str, tuple[int, int], list[str]]] = []
    try:
        chain.append((name, ident, _list(cur)))
        while chain:
            _name, _ident, pending = chain[-1]
            if pending:
                child = pending.pop()
                try:
                    nxt, ident = _enter(child, cur)
                except FileNotFoundError:
                    continue
                os.close(cur)
                cur = nxt
                chain.append((child, ident, _list(cur)))
                continue
            done, _, _ = chain.pop()
            if not chain:
                break
            up = open_folder("..", cur)
            st = os.fstat(up)
            if (st.st_dev, st.st_ino) != chain[-1][1]:
                os.close(up)
                raise OSError(f"a folder moved while it was being removed (above {done!r})")
            os.close(cur)
            cur = up
            os.rmdir(done, dir_fd=cur)
    finally:
        os.close(cur)
    os.rmdir(name, dir_fd=top)


def make_folders(root: Path | str, relative: str) -> list[str]:
    """Make the folders of ``relative`` below ``root``, never through a symlink.

    Each part is made (or opened) relative to its parent's descriptor with
    ``O_NOFOLLOW``: a symlink anywhere on the way (planted by whatever ran in
    the folder) stops it, so nothing is made outside ``root``.

    Args:
        root: the folder to make them in (it must exist).
        relative: a normalized relative path (no ``..``, not absolute).

    Returns:
        The folders made, outermost first, relative to ``root`` (for
        :func:`remove_made`).

    Raises:
        OSError: a part is a symlink or a file, or could not be made.
        ValueError: ``relative`` leaves ``root``.
    """
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if relative.startswith("/") or ".." in parts:
        raise ValueError(f"{relative!r} is not a path inside the folder")
    made: list[str] = []
    fd = open_folder(str(root))
    try:
        for index, part in enumerate(parts):
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                made.append("/".join(parts[: index + 1]))
            except FileExistsError:
                pass
            nxt = open_folder(part, fd)  # ELOOP or ENOTDIR if a link or a file is there
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    return made


def remove_made(root: Path | str, made: list[str]) -> None:
    """Remove the empty folders :func:`make_folders` made, innermost first, never via a link.

    A folder that is no longer empty, or a part that became a symlink, is left.

    Args:
        root: the folder they were made in.
        made: what :func:`make_folders` returned.
    """
    for rel in reversed(made):
        parent, _, name = rel.rpartition("/")
        try:
            fd = open_folder(str(root))
        except OSError:
            return
        try:
            for part in parent.split("/") if parent else []:
                nxt = open_folder(part, fd)
                os.close(fd)
                fd = nxt
            os.rmdir(name, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)
