"""Writing export files: where they go, and never half a file.

Shared by ``Session.export`` / ``export_markdown`` and the bundle writer.
"""

from __future__ import annotations

import os
from pathlib import Path

from plait.errors import InvalidArgumentError

__all__ = ["export_target", "write_atomically"]


def export_target(
    path: str | os.PathLike[str] | None, workspace: str, session_id: str, suffix: str
) -> Path:
    """Resolve where an export goes.

    Args:
        path: the caller's path (relative paths are taken from the working
            directory), or None for ``plait-<id8>.<suffix>`` in the workspace.
        workspace: the session's workspace.
        session_id: the session's id.
        suffix: the file ending, without the dot.

    Returns:
        The absolute target path (its folder may not exist yet).

    Raises:
        InvalidArgumentError: the path is empty, holds a NUL, or is a folder.
    """
    if path is None:
        target = Path(workspace, f"plait-{session_id[:8]}.{suffix}")
    else:
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw or "\0" in raw:
            raise InvalidArgumentError(f"not a usable file path: {path!r}")
        target = Path(raw).expanduser()
    target = Path(os.path.abspath(target))
    if target.is_dir():
        raise InvalidArgumentError(f"{target} is a folder; give a file path")
    return target


def write_atomically(target: Path, text: str) -> str:
    """Write ``text`` (UTF-8) beside ``target`` and rename it into place.

    A reader never sees half a file, and a failed write leaves no temporary file.

    Returns:
        The absolute path written.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        temp.write_bytes(text.encode("utf-8", "replace"))
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return str(target)
