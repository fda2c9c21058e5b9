"""The file tools' operations, in one stdlib-only module both backends run.

The ``local`` backend calls :func:`apply` in a thread; the ``isolated`` backend
runs this file's source with the interpreter inside the sandbox, the request
as JSON on stdin and the reply as JSON on stdout, so the kernel's mounts decide
what the operation can reach. Nothing here imports plait.

Every open is non-blocking and checked with ``fstat``: a FIFO, a device or a
socket is refused instead of blocking or being written to.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

__all__ = ["apply"]

_OPEN_FLAGS = os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)


def _refuse_special(mode: int, path: str) -> None:
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path!r} is not a regular file")


def _read(path: str, max_chars: int) -> dict[str, Any]:
    fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    try:
        _refuse_special(os.fstat(fd).st_mode, path)
        os.set_blocking(fd, True)
        # Four bytes per character at most, one more to know whether there was more.
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_chars * 4 + 4)
            more = bool(f.read(1))
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    return {"text": text[:max_chars], "cut": max(0, len(text) - max_chars), "more": more}


def _write(path: str, content: str) -> dict[str, Any]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISDIR(st.st_mode):
            raise ValueError(f"{path!r} is a folder")
        _refuse_special(st.st_mode, path)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | _OPEN_FLAGS, 0o644)
    try:
        _refuse_special(os.fstat(fd).st_mode, path)
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        data = content.encode("utf-8")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return {"chars": len(content)}


def _list(path: str) -> dict[str, Any]:
    if not os.path.isdir(path):
        raise ValueError(f"{path!r} is not a folder")
    names = []
    with os.scandir(path) as entries:
        for entry in entries:
            names.append(entry.name + ("/" if entry.is_dir() else ""))
    return {"names": sorted(names)}


def apply(request: dict[str, Any]) -> dict[str, Any]:
    """Do one operation: ``{"op": "read"|"write"|"list", "path": ..., ...}``.

    Returns ``{"ok": true, ...}`` or ``{"ok": false, "error": reason}``; it never
    raises for a failure of the operation itself.
    """
    try:
        op, path = request["op"], request["path"]
        if op == "read":
            out = _read(path, int(request["max_chars"]))
        elif op == "write":
            out = _write(path, request["content"])
        elif op == "list":
            out = _list(path)
        else:
            raise ValueError(f"unknown operation {op!r}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return {"ok": False, "error": reason}
    return {"ok": True, **out}


if __name__ == "__main__":
    sys.stdout.write(json.dumps(apply(json.loads(sys.stdin.read()))))
