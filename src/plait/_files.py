"""Writing export files: where they go, what they may replace, and never half a file.

Shared by ``Session.export`` (HTML and Markdown) and the bundle writer.

An export replaces a regular file and nothing else: a FIFO (opening it would
block), a device node (as root, renaming over ``/dev/null`` replaces the
device), a socket or a folder at the target is refused. So is a symlink unless
the caller asks to follow it (then its target must be a regular file or
absent), since a link in a shared folder can point an export anywhere the
writer may write. The temporary file beside the target is created exclusively,
so a name planted there in advance is never followed either.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from plait._ids import id_slug
from plait.errors import InvalidArgumentError, shown

__all__ = [
    "check_export_target",
    "default_name",
    "export_target",
    "usable_path",
    "write_atomically",
]


def default_name(session_id: str) -> str:
    """The ``<id8>`` of seed 001's default export name ``plait-<id8>.<suffix>``.

    The first 8 characters of an id that is a safe file name already (a UUIDv7);
    any other id's whole :func:`~plait._ids.id_slug`, so an id such as ``../x`` or
    ``user/123`` never names a path outside the workspace, and two such ids never
    share a name.
    """
    slug = id_slug(session_id)
    return slug[:8].rstrip(".") if slug == session_id else slug


def usable_path(raw: object, given: object = None) -> str:
    """Return ``raw`` if the file system can name it: a non-empty string, no NUL, encodable.

    Args:
        raw: the path as text (``os.fspath`` of what the caller gave).
        given: what the caller gave, for the error (default ``raw``).

    Raises:
        InvalidArgumentError: not a string, empty, holding a NUL, or holding a
            lone surrogate the file system cannot encode.
    """
    given = raw if given is None else given
    if not isinstance(raw, str) or not raw or "\0" in raw:
        raise InvalidArgumentError(f"not a usable file path: {shown(given)}")
    try:
        os.fsencode(raw)
    except UnicodeEncodeError:  # a lone surrogate the file system cannot name
        raise InvalidArgumentError(
            f"not a usable file path (it cannot be encoded for the file system): {shown(given)}"
        ) from None
    return raw


def check_export_target(target: Path, *, follow_symlinks: bool = False) -> Path:
    """Return where an export to ``target`` writes; refuse what it must not replace.

    Args:
        target: the absolute path.
        follow_symlinks: write through a symlink at ``target`` to the file it
            names (which must itself be a regular file or absent).

    Returns:
        ``target``, or the file a followed symlink names.

    Raises:
        InvalidArgumentError: a folder, a FIFO, a device, a socket, or (unless
            followed) a symlink is at the target; ``follow_symlinks`` not a bool.
    """
    if not isinstance(follow_symlinks, bool):
        raise InvalidArgumentError(
            f"follow_symlinks is True or False, not {shown(follow_symlinks)}"
        )
    try:
        info = target.lstat()
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise InvalidArgumentError(f"cannot export to {target}: {exc.strerror}") from exc
    if stat.S_ISLNK(info.st_mode):
        if not follow_symlinks:
            raise InvalidArgumentError(
                f"{target} is a symlink; an export replaces only a regular file "
                "(ask to follow symlinks to write to the file it names)"
            )
        try:
            resolved = target.resolve(strict=False)
        except (OSError, RuntimeError) as exc:  # a loop of links
            raise InvalidArgumentError(f"cannot follow the symlink {target}: {exc}") from exc
        return check_export_target(resolved, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        raise InvalidArgumentError(f"{target} is a folder; give a file path")
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "a device"
        )
        raise InvalidArgumentError(f"{target} is {kind}; an export replaces only a regular file")
    return target


def export_target(
    path: str | os.PathLike[str] | None,
    workspace: str,
    session_id: str,
    suffix: str,
    *,
    follow_symlinks: bool = False,
) -> Path:
    """Resolve where an export goes.

    Args:
        path: the caller's path (relative paths are taken from the working
            directory), or None for ``plait-<id8>.<suffix>`` in the workspace
            (:func:`default_name`).
        workspace: the session's workspace.
        session_id: the session's id.
        suffix: the file ending, without the dot.
        follow_symlinks: a symlink at the target is written through, not refused.

    Returns:
        The absolute target path, in a folder that exists.

    Raises:
        InvalidArgumentError: the path is empty, holds a NUL or a lone
            surrogate, names something other than a regular file
            (:func:`check_export_target`), or lies in a folder that does not
            exist (an export creates no folders: a typo in a path must not
            leave a tree of them behind).
    """
    if path is None:
        target = Path(workspace, f"plait-{default_name(session_id)}.{suffix}")
    else:
        try:
            raw = os.fspath(path)
        except TypeError:
            raise InvalidArgumentError(f"not a usable file path: {shown(path)}") from None
        target = Path(usable_path(raw, path)).expanduser()
    target = Path(os.path.abspath(target))
    checked = check_export_target(target, follow_symlinks=follow_symlinks)
    if not checked.parent.is_dir():
        raise InvalidArgumentError(
            f"cannot export to {checked}: the folder {checked.parent} does not exist "
            "(an export creates no folders)"
        )
    return checked


def write_atomically(target: Path, text: str) -> str:
    """Write ``text`` (UTF-8) beside ``target`` and rename it into place.

    A reader never sees half a file, and a failed write leaves no temporary file.
    What is at ``target`` is checked again just before the rename: only a
    regular file (or nothing) is replaced.

    Returns:
        The absolute path written.

    Raises:
        InvalidArgumentError: something other than a regular file is at ``target``.
        OSError: its folder is gone (none is created) or cannot be written.
    """
    fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(text.encode("utf-8", "replace"))
        os.chmod(temp, 0o666 & ~_umask())  # mkstemp's 0600: give the mode a new file gets
        check_export_target(target)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return str(target)


def _umask() -> int:
    """The process's umask, read without changing it (``os.umask`` sets it for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
