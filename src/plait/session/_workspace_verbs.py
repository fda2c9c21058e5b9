"""The session's settings, workspace and sandbox verbs, as one face of :class:`Session`.

:class:`WorkspaceVerbs` is a base of :class:`~plait.session.Session`: each verb is a
short delegation to :mod:`plait.session.settings` or :mod:`plait.session.binding`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from plait.errors import InvalidArgumentError
from plait.providers import ModelSettings
from plait.records import JSONValue
from plait.sandbox import FileChange, Sandbox, SandboxPolicy
from plait.session import binding, checkpoints, runs, settings
from plait.session._values import RootResult, check_count, folder_path
from plait.tools import ToolContext

if TYPE_CHECKING:
    from typing import Self

    from plait.session._head import Head

__all__ = ["WorkspaceVerbs"]


class WorkspaceVerbs:
    """Settings, metadata, workspace roots and the sandbox of a session."""

    __slots__ = ()
    _head: Head

    # -- the sandbox ------------------------------------------------------------------------

    def to(
        self,
        backend: str,
        spec: str | None = None,
        *,
        policy: SandboxPolicy | Mapping[str, JSONValue] | None = None,
    ) -> Self:
        """Set where this session's tools run; opens nothing; returns the session.

        Args:
            backend: ``local`` (a folder, no isolation: trusted use only) or ``isolated``
                (namespaces: the workspace and roots by mount mode, nothing else).
            spec: an existing folder (never deleted); without it, a managed temporary
                folder is made when the sandbox opens and deleted when it closes.
            policy: what tool calls may do beyond the workspace (network, writable
                roots, environment passed through, limits); default: nothing.

        Raises:
            InvalidArgumentError: an unknown backend or a bad policy.
        """
        binding.retarget(self._head, backend, spec, policy)
        return self

    def workspace_checkpoint(self, context: ToolContext | None = None) -> str | None:
        """Checkpoint the workspace's files now; returns the id (None: checkpoints are off).

        Args:
            context: the tool context whose workspace to record (default: the session's).
        """
        if context is not None and not isinstance(context, ToolContext):
            kind = type(context).__name__
            raise InvalidArgumentError(f"context must be a ToolContext, not {kind}")
        folder = (context or self.tool_context()).root
        return checkpoints.take(self._head, folder)

    def restore_workspace(self, at: int, folder: str | os.PathLike[str] | None = None) -> str:
        """Bring the files back as they were after the first ``at`` messages; returns the folder.

        Args:
            at: how many messages, counted as :meth:`fork_at` counts them.
            folder: where to put them (made if missing; what it held is replaced);
                default: the session's own workspace.

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

    def diff_files(self, a: int, b: int) -> tuple[FileChange, ...]:
        """What changed on disk between message ``a`` and message ``b`` (counted as for fork_at).

        Raises:
            NothingToDoError: no tool call of the session recorded its workspace.
        """
        check_count(a, "a")
        check_count(b, "b")
        row = self._head.fresh()
        records = self._head.store.read(row, row.layout.view_start, row.layout.end_seq)
        return checkpoints.diff_files(self._head, records, a, b)

    def use_workspace_checkpoints(self, on: bool) -> None:
        """Turn workspace checkpoints around file-changing tool calls on (default) or off."""
        if not isinstance(on, bool):
            raise InvalidArgumentError(f"checkpoints are on (True) or off (False), not {on!r}")
        settings.set_settings(self._head, workspace_checkpoints=None if on else False)

    @property
    def sandbox_policy(self) -> SandboxPolicy:
        """The policy the sandbox target states (the default policy when none is set)."""
        return binding.target_policy(self.settings)

    @property
    def sandbox_backend(self) -> str | None:
        """The backend this session targets, or None."""
        return binding.target_backend(self.settings)

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox handle this session holds now, or None (handles open on demand)."""
        return self._head.sandbox

    def require_sandbox(self) -> Sandbox:
        """Return the current handle, opening one on the target if there is none.

        Raises:
            NoSandboxError: no target and no handle. SandboxClosedError: a closed handle.
        """
        return binding.require(self._head)

    def with_sandbox(self, handle: Sandbox) -> Self:
        """Bind an open sandbox handle to this session (taking a reference); returns it."""
        binding.bind(self._head, handle)
        return self

    def close_sandbox(self) -> None:
        """Release this session's handle; the sandbox closes when no session holds it."""
        binding.close(self._head)

    def tool_context(self) -> ToolContext:
        """Where tools run: the sandbox folder (a managed local one if no target) and roots."""
        return binding.tool_context(self._head)

    def __enter__(self) -> Self:
        self.require_sandbox()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_sandbox()

    # -- settings and workspace -------------------------------------------------------------

    @property
    def settings(self) -> dict[str, JSONValue]:
        """Session settings (inherited by branches)."""
        return self._head.settings()

    def set_settings(self, **settings_: JSONValue) -> None:
        """Store session settings that branches inherit; a value of None removes the key."""
        settings.set_settings(self._head, **settings_)

    @property
    def model_settings(self) -> ModelSettings:
        """The model settings the session keeps (a run's settings are laid over them)."""
        return runs.stored_model_settings(self.settings)

    def set_model_settings(
        self, model_settings: ModelSettings | Mapping[str, JSONValue] | None
    ) -> None:
        """Replace the model settings the session keeps (None: keep none).

        Raises:
            UnknownOptionError: a key that is not a setting.
            InvalidArgumentError: a bad value.
        """
        found = ModelSettings.from_json(model_settings) if model_settings is not None else None
        value = found.to_json() if found is not None else {}
        settings.set_settings(self._head, **{runs.MODEL_SETTINGS: value or None})

    @property
    def metadata(self) -> dict[str, JSONValue]:
        """The session's stored metadata: settings, provenance, close status (a copy)."""
        return dict(self._head.fresh().metadata) if self._head.row is not None else {}

    def set_metadata(self, key: str, value: JSONValue) -> None:
        """Store one top-level metadata value (None removes it); branches do not inherit it.

        Raises:
            InvalidArgumentError: a blank key, ``settings``, or a value that is not JSON.
        """
        settings.set_metadata(self._head, key, value)

    @property
    def self_compaction_choice(self) -> bool | None:
        """The session's own choice: True, False, or None to follow the configuration."""
        return settings.self_compaction(self.settings)[0]

    @property
    def self_compaction(self) -> bool:
        """Whether self-compaction is in force: the choice, else ``PLAIT_SELF_COMPACTION``."""
        return settings.self_compaction(self.settings)[1]

    def use_self_compaction(self, choice: bool | None) -> None:
        """Choose whether this session may compact itself; None follows the configuration."""
        if choice is not None and not isinstance(choice, bool):
            raise InvalidArgumentError(f"self-compaction is True, False or None, not {choice!r}")
        settings.set_settings(self._head, self_compaction=choice)

    @property
    def workspace_anchor(self) -> str | None:
        """The folder tools treat as the workspace root (seed 003), or None."""
        return settings.workspace_anchor(self.settings)

    def set_workspace_anchor(self, anchor: str | None) -> bool:
        """Replace the workspace anchor (None clears it); returns True (seed 003)."""
        if anchor is not None and (not isinstance(anchor, str) or not anchor):
            raise InvalidArgumentError("workspace_anchor must be a non-empty string or None")
        settings.set_settings(self._head, workspace_anchor=anchor)
        return True

    @property
    def workspace_policy(self) -> dict[str, JSONValue]:
        """The workspace defaults, with ``default_mount_mode`` filled in (seed 003)."""
        return settings.workspace_policy(self.settings)

    def set_workspace_policy(self, policy: Mapping[str, JSONValue]) -> bool:
        """Update the workspace defaults (merged into the current ones); returns True."""
        settings.set_workspace_policy(self._head, policy)
        return True

    def add_root(
        self, root: str, *, mount_mode: str | None = None, mounted_at: str | None = None
    ) -> RootResult:
        """Mount another folder into the session's workspace (seed 003's ``add_root``).

        Returns ``ok=False`` with the reason for a missing folder or a name already mounted.
        """
        return settings.add_root(self._head, root, mount_mode, mounted_at)

    def remove_root(self, root: str) -> RootResult:
        """Unmount a root, named by its path or by where it is mounted (seed 003)."""
        return settings.remove_root(self._head, root)

    def list_roots(self) -> dict[str, JSONValue]:
        """``{primary, additional}``: the workspace root and the mounted roots (seed 003)."""
        return settings.list_roots(self._head, self.settings)
