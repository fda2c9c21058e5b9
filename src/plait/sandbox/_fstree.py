"""Folder trees on the host side of a workspace, walked without recursion or symlinks.

A workspace is written by whatever runs in it, a model's shell included: its
folders may nest thousands deep (deeper than Python's recursion limit, or
than ``PATH_MAX`` as one path) and hold symlinks to anywhere. What plait does
to it from outside goes through here: every folder is opened relative to its
parent's descriptor with ``O_NOFOLLOW``, so a symlink is never followed, the
walk is a loop over an explicit stack, so no depth raises ``RecursionError``,
and at most two descriptors are open at a time (the way back up is ``..``,
checked to be the folder it came from).

The same holds for the walks that read and write a workspace (``_fswalk.py``,
through :class:`Cursor`): a folder the walk is in is held by its descriptor, so a
tool that swaps it, or a folder above it, for a symlink between two steps moves
nothing the walk does out of the workspace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

__all__ = [
    "Cursor",
    "make_folders",
    "open_file",
    "open_folder",
    "remove_at",
    "remove_made",
    "remove_tree",
]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in for a file must not stall the walk (it is then seen
# not to be a file); it changes nothing for a regular file.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_CHANGED = (errno.ELOOP, errno.ENOTDIR)
"""What opening a folder by name says when the name became a link or a file since."""


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


def open_file(name: str, dir_fd: int) -> tuple[int, os.stat_result] | None:
    """Open the regular file ``name`` in the folder ``dir_fd`` for reading, never via a link.

    Args:
        name: the file's name in that folder.
        dir_fd: the folder's descriptor.

    Returns:
        The open descriptor and its ``fstat``, or None when ``name`` is not a regular
        file now (missing, a symlink, a folder, a FIFO ...: whatever it became).

    Raises:
        OSError: it is a regular file that cannot be opened (no permission).
    """
    try:
        fd = os.open(name, _FILE, dir_fd=dir_fd)
    except (FileNotFoundError, IsADirectoryError):
        return None
    except OSError as exc:
        if exc.errno in (*_CHANGED, errno.ENXIO):  # a link, or a socket
            return None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


class Cursor:
    """The folder a walk is in, held by its descriptor: down by name, up by ``..``.

    Down opens a folder relative to the one held, with ``O_NOFOLLOW``; up opens
    ``..`` and checks that it is the folder the walk came down from (a folder
    moved while the walk was in it is an error, never a step elsewhere). Two
    descriptors are open at most, whatever the depth.

    Args:
        root: where the walk starts; the caller names it (it may be reached
            through a link above it), but its last part is not followed.
    """

    def __init__(self, root: Path | str) -> None:
        self.fd = open_folder(str(root))
        """The descriptor of the folder the walk is in."""
        st = os.fstat(self.fd)
        self._above: list[tuple[int, int]] = [(st.st_dev, st.st_ino)]

    def down(self, name: str) -> os.stat_result:
        """Go into the folder ``name``; returns its ``fstat``.

        Raises:
            OSError: ``name`` is missing, a symlink or not a folder (``ELOOP``,
                ``ENOTDIR``); the cursor stays where it was.
        """
        nxt = open_folder(name, self.fd)
        try:
            st = os.fstat(nxt)
        except BaseException:
            os.close(nxt)
            raise
        os.close(self.fd)
        self.fd = nxt
        self._above.append((st.st_dev, st.st_ino))
        return st

    def up(self, mode: int | None = None) -> None:
        """Go back to the folder above, giving the one left ``mode`` first when given.

        The mode is set last, through the descriptor, so that a folder restored
        without search permission is still left by its ``..``.

        Raises:
            OSError: the folder above is not the one the walk came down from.
        """
        above = open_folder("..", self.fd)
        st = os.fstat(above)
        if (st.st_dev, st.st_ino) != self._above[-2]:
            os.close(above)
            raise OSError("a folder moved while plait walked it")
        if mode is not None:
            try:
                os.fchmod(self.fd, mode)
            except BaseException:
                os.close(above)
                raise
        os.close(self.fd)
        self.fd = above
        self._above.pop()

    def close(self) -> None:
        """Close the descriptor held."""
        os.close(self.fd)

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        os.lstat(path)
    except FileNotFoundError:
        return
    # The folder holding it is the caller's to name (it may be reached through a link).
    top = os.open(str(path.parent), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        remove_at(top, path.name)
    finally:
        os.close(top)


def remove_at(dir_fd: int, name: str) -> None:
    """Remove ``name`` from the folder ``dir_fd`` holds, and everything below it.

    A symlink is removed, never followed; a folder becoming a link (or a link a
    folder) while it is looked at is removed as what it became.

    Args:
        dir_fd: the descriptor of the folder holding it.
        name: the name to remove there; a missing name is no error.

    Raises:
        OSError: something could not be removed, or a folder moved while it was
            being removed.
    """
    for _attempt in range(3):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:
                return
            except IsADirectoryError:
                continue  # a folder was put there since: remove that
            return
        try:
            cur, ident = _enter(name, dir_fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in _CHANGED:
                continue  # a link or a file was put there since: remove that
            raise
        _remove_open(dir_fd, name, cur, ident)
        return
    raise OSError(f"{name!r} kept changing while plait removed it")


def _list(fd: int) -> list[str]:
    """Remove what ``fd``'s folder holds but folders; returns the folders' names."""
    folders: list[str] = []
    with os.scandir(fd) as found:
        items = list(found)
    for item in items:
        if item.is_dir(follow_symlinks=False):
            folders.append(item.name)
        else:
            try:
                os.unlink(item.name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                folders.append(item.name)  # a folder put there since it was listed
    return folders


def _enter(name: str, parent: int) -> tuple[int, tuple[int, int]]:
    fd = open_folder(name, parent)
    st = os.fstat(fd)
    if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o700)
    return fd, (st.st_dev, st.st_ino)


def _remove_open(top: int, name: str, cur: int, ident: tuple[int, int]) -> None:
    # One frame per folder on the way down: its name, identity and folders still to remove.
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
                except OSError as exc:
                    if exc.errno not in _CHANGED:
                        raise
                    # A link or a file put there since it was listed: removed, not followed.
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(child, dir_fd=cur)
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
