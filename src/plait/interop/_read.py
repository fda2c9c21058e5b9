"""Reading an import source from disk: a regular file, with a size limit.

Every reader of ``plait.interop`` (``seed_from_jsonl``, ``read_bundle``,
``is_bundle_file``) opens its file through :func:`read_source` or
:func:`read_head`. Both refuse anything that is not a regular file (a FIFO
would block the open or the read forever, a device such as ``/dev/zero``
never ends), follow a symlink only to a regular file, and never read more
than :data:`MAX_SOURCE_BYTES`: a bigger file is refused before it is read,
so an import cannot run the process out of memory. Every refusal is an
:class:`~plait.errors.ImportFormatError` naming the file.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from plait._files import usable_path
from plait.errors import ImportFormatError, InvalidArgumentError, shown

__all__ = ["MAX_SOURCE_BYTES", "read_head", "read_source"]

MAX_SOURCE_BYTES: Final = 512 << 20
"""The largest file an import reads (512 MiB); a bigger one is refused, unread."""

_KINDS: Final = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _what(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _open(path: str | os.PathLike[str]) -> tuple[int, int, str]:
    """Open ``path`` for reading if it is a regular file: (fd, size, name).

    Raises:
        InvalidArgumentError: ``path`` is not a path the file system can name.
        ImportFormatError: anything else that stops it being read.
    """
    try:
        raw = os.fspath(path)
    except TypeError:
        raise InvalidArgumentError(f"a file to import is a path, not {shown(path)}") from None
    name = usable_path(os.fsdecode(raw) if isinstance(raw, bytes) else raw, path)
    try:
        # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; the mode is
        # checked on the open descriptor, so a file swapped in between cannot slip through.
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise ImportFormatError(name, None, f"cannot read the file: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ImportFormatError(
                name, None, f"cannot import {_what(info.st_mode)}: only a regular file is read"
            )
        if info.st_size > MAX_SOURCE_BYTES:
            raise ImportFormatError(
                name,
                None,
                f"the file is {info.st_size} bytes, more than the {MAX_SOURCE_BYTES} an "
                "import reads",
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size, name


def _read(fd: int, limit: int, expected: int = 0) -> bytes:
    """Up to ``limit`` bytes of ``fd``; a file of ``expected`` bytes is read in one piece.

    One read of the whole file allocates it once: pieces joined would hold it twice.
    """
    first = os.read(fd, min(expected + 1, limit)) if expected else b""
    if expected and (not first or len(first) >= limit):
        return first
    chunks: list[bytes] = [first] if first else []
    total = len(first)
    while total < limit:
        chunk = os.read(fd, min(1 << 20, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_source(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a file to import.

    Raises:
        ImportFormatError: the file cannot be opened, is not a regular file (a
            FIFO, a device, a socket, a folder), or is bigger than
            :data:`MAX_SOURCE_BYTES` (also when it grows past it while read).
    """
    fd, size, name = _open(path)
    try:
        try:
            data = _read(fd, MAX_SOURCE_BYTES + 1, size)
        except OSError as exc:
            raise ImportFormatError(
                name, None, f"cannot read the file: {exc.strerror or exc}"
            ) from exc
    finally:
        os.close(fd)
    if len(data) > MAX_SOURCE_BYTES:
        raise ImportFormatError(
            name, None, f"the file grew past the {MAX_SOURCE_BYTES} bytes an import reads"
        )
    return data


def read_head(path: str | os.PathLike[str], n: int) -> bytes | None:
    """The first ``n`` bytes of a regular file, or None if it is not one or cannot be read."""
    try:
        fd, _, _ = _open(path)
    except ImportFormatError:
        return None
    try:
        return _read(fd, n)
    except OSError:
        return None
    finally:
        os.close(fd)
