"""``session.workspace``: the session's files.

:class:`SessionWorkspace` names the workspace the session belongs to, keeps its
anchor, policy and mounted roots (:mod:`~plait.session.settings`), says where tools
run (:mod:`~plait.session.binding`), and checkpoints, restores and compares the
files (:mod:`~plait.session.checkpoints`, D114).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from plait.errors import InvalidArgumentError
from plait.records import JSONLike, JSONValue
from plait.sandbox import FileChange, SandboxPolicy
from plait.session import binding, checkpoints, settings
from plait.session._part import Part
from plait.session._values import RootResult, check_count, folder_path
from plait.tools import ToolContext

__all__ = ["SessionWorkspace"]


class SessionWorkspace(Part):
    """The workspace's name, anchor, policy and roots, and checkpoints of its files.

    Reached as ``session.workspace``; made on each access, it holds only the handle.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The workspace the session belongs to (the key its client lists sessions by)."""
        row = self._head.row
        return row.workspace if row is not None else self._head.host.workspace

    # -- anchor, policy and roots -----------------------------------------------------------

    @property
    def anchor(self) -> str | None:
        """The folder tools treat as the workspace root (seed 003), or None."""
        return settings.workspace_anchor(self._head.settings())

    def set_anchor(self, anchor: str | None) -> bool:
        """Replace the workspace anchor (seed 003).

        Args:
            anchor: a folder, or None to clear it.

        Returns:
            True.

        Raises:
            InvalidArgumentError: ``anchor`` is neither a non-empty string nor None.
        """
        if anchor is not None and (not isinstance(anchor, str) or not anchor):
            raise InvalidArgumentError("workspace_anchor must be a non-empty string or None")
        settings.set_settings(self._head, workspace_anchor=anchor)
        return True

    @property
    def policy(self) -> dict[str, JSONValue]:
        """The workspace defaults, with ``default_mount_mode`` filled in (seed 003)."""
        return settings.workspace_policy(self._head.settings())

    def set_policy(self, policy: Mapping[str, JSONLike]) -> bool:
        """Update the workspace defaults, merged into the current ones (seed 003).

        Args:
            policy: the keys to change.

        Returns:
            True.

        Raises:
            InvalidArgumentError: an unknown key or a bad value.
        """
        settings.set_workspace_policy(self._head, policy)
        return True

    def add_root(
        self, root: str, *, mount_mode: str | None = None, mounted_at: str | None = None
    ) -> RootResult:
        """Mount another folder into the session's workspace (seed 003's ``add_root``).

        Args:
            root: the folder.
            mount_mode: ``ro`` or ``rw`` (default: the policy's).
            mounted_at: where tools see it (default: its name).

        Returns:
            ``ok=False`` with the reason for a missing folder or a name already mounted.
        """
        return settings.add_root(self._head, root, mount_mode, mounted_at)

    def remove_root(self, root: str) -> RootResult:
        """Unmount a root, named by its path or by where it is mounted (seed 003).

        Args:
            root: the folder's path or mount point.

        Returns:
            ``ok=False`` with the reason when no such root is mounted.
        """
        return settings.remove_root(self._head, root)

    def list_roots(self) -> dict[str, JSONValue]:
        """``{primary, additional}``: the workspace root and the mounted roots (seed 003)."""
        return settings.list_roots(self._head, self._head.settings())

    # -- where tools run --------------------------------------------------------------------

    @property
    def sandbox_policy(self) -> SandboxPolicy:
        """The policy the sandbox target states (the default policy when none is set)."""
        return binding.target_policy(self._head.settings())

    def tool_context(self) -> ToolContext:
        """Where tools run: the sandbox folder (a managed local one if no target) and roots.

        Raises:
            SandboxClosedError: the session is bound to a closed handle.
        """
        return binding.tool_context(self._head)

    # -- checkpoints of the files -----------------------------------------------------------

    def checkpoint(self, context: ToolContext | None = None) -> str | None:
        """Checkpoint the workspace's files now.

        Args:
            context: the tool context whose workspace to record (default: the session's).

        Returns:
            The checkpoint's id, or None when checkpoints are off.

        Raises:
            InvalidArgumentError: ``context`` is not a ToolContext.
        """
        if context is not None and not isinstance(context, ToolContext):
            kind = type(context).__name__
            raise InvalidArgumentError(f"context must be a ToolContext, not {kind}")
        folder = (context or self.tool_context()).root
        return checkpoints.take(self._head, folder)

    def restore(self, at: int, folder: str | os.PathLike[str] | None = None) -> str:
        """Bring the files back as they were after the first ``at`` messages.

        Args:
            at: how many messages, counted as :meth:`Session.fork_at` counts them.
            folder: where to put them (made if missing; what it held is replaced);
                default: the session's own workspace.

        Returns:
            The folder the files were put in.

        Raises:
            InvalidArgumentError: ``at`` is negative or past the transcript.
            NothingToDoError: no tool call of the session recorded its workspace.
        """
        check_count(at, "at")
        given = Path(folder_path(folder)) if folder is not None else None
        row = self._head.fresh()
        if at > row.layout.length:
            raise InvalidArgumentError(f"at={at} but the session has {row.layout.length} messages")
        records = self._head.store.read(row, row.layout.view_start, row.layout.end_seq)
        checkpoint = checkpoints.checkpoint_at(records, at)  # refuse before anything is written
        target = given if given is not None else self.tool_context().root
        checkpoints.checkpoints_of(self._head.store).restore(target, checkpoint)
        return str(target)

    def diff(self, a: int, b: int) -> tuple[FileChange, ...]:
        """What changed on disk between message ``a`` and message ``b``.

        Args:
            a: the earlier message count (as ``fork_at`` counts).
            b: the later one.

        Returns:
            The changed files.

        Raises:
            InvalidArgumentError: a negative count.
            NothingToDoError: no tool call of the session recorded its workspace.
        """
        check_count(a, "a")
        check_count(b, "b")
        row = self._head.fresh()
        records = self._head.store.read(row, row.layout.view_start, row.layout.end_seq)
        return checkpoints.diff_files(self._head, records, a, b)

    def use_checkpoints(self, on: bool) -> None:
        """Turn workspace checkpoints around file-changing tool calls on (default) or off.

        Args:
            on: True or False.

        Raises:
            InvalidArgumentError: ``on`` is not a bool.
        """
        if not isinstance(on, bool):
            raise InvalidArgumentError(f"checkpoints are on (True) or off (False), not {on!r}")
        settings.set_settings(self._head, workspace_checkpoints=None if on else False)
