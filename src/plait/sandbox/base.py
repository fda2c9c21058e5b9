"""The Backend protocol, the Sandbox handle, and the mounts one tool call sees."""

from __future__ import annotations

import os
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from plait.errors import InvalidArgumentError, SandboxClosedError
from plait.sandbox.policy import SandboxPolicy
from plait.sandbox.process import CommandResult

__all__ = [
    "Backend",
    "Mount",
    "Sandbox",
    "backend_named",
    "open_sandbox_at",
    "register_backend",
    "workspace_folder",
]


@dataclass(frozen=True, slots=True)
class Mount:
    """A folder one tool call sees inside its workspace, read-only or read-write."""

    source: Path
    """The real folder."""
    at: str
    """Where it appears: a normalised path relative to the workspace (``data``, ``lib/x``)."""
    read_only: bool
    """Whether the call may change it (enforced by the kernel in ``isolated``)."""


@runtime_checkable
class Backend(Protocol):
    """A place tools can run: it opens and closes sandboxes."""

    @property
    def name(self) -> str:
        """The name sessions target it by (``local``, ...)."""
        ...

    @property
    def isolates(self) -> bool:
        """Whether the backend confines tools (``isolated``) or only runs them (``local``)."""
        ...

    def open(self, spec: str | None, policy: SandboxPolicy | None = None) -> Sandbox:
        """Open a sandbox; ``spec`` is backend-specific (for ``local``: a folder)."""
        ...

    def close(self, sandbox: Sandbox) -> None:
        """Release what the sandbox holds (a managed workspace is deleted, nothing else)."""
        ...

    async def run(
        self,
        sandbox: Sandbox,
        command: str,
        *,
        timeout: float,
        mounts: Sequence[Mount],
        read_only: bool,
    ) -> CommandResult:
        """Run a shell command in the workspace; it never outlives the call."""
        ...

    async def file_op(
        self,
        sandbox: Sandbox,
        request: Mapping[str, Any],
        *,
        mounts: Sequence[Mount],
        read_only: bool,
    ) -> dict[str, Any]:
        """Do one file operation (``plait.sandbox._fileops.apply``'s request and reply)."""
        ...


class Sandbox:
    """An open, reference-counted handle on one sandbox.

    Args:
        backend: the backend that opened it.
        root: the folder tools see as their workspace.
        managed: whether the backend created ``root`` (and so deletes it on close).
        policy: what tool calls may do beyond the workspace (default: nothing).
    """

    def __init__(
        self,
        backend: Backend,
        root: Path,
        *,
        managed: bool,
        policy: SandboxPolicy | None = None,
    ) -> None:
        self.backend = backend
        """The backend that opened the sandbox (``sandbox.backend.name``)."""
        self.root = root
        """The folder tools see as their workspace."""
        self.managed = managed
        """Whether plait created :attr:`root` (only then is it deleted on close)."""
        self.policy = policy or SandboxPolicy()
        """What tool calls may do beyond the workspace; the backend enforces it."""
        self._refcount = 1
        self._closed = False
        self._lock = threading.Lock()
        _open_handles.add(self)

    @property
    def refcount(self) -> int:
        """How many sessions hold this handle."""
        return self._refcount

    @property
    def closed(self) -> bool:
        """Whether the handle was closed (every holder released it)."""
        return self._closed

    def acquire(self) -> Sandbox:
        """Take one more reference (a branch sharing the handle); returns the handle.

        Raises:
            SandboxClosedError: the handle is already closed.
        """
        with self._lock:
            if self._closed:
                raise SandboxClosedError("session sandbox is closed")
            self._refcount += 1
        return self

    def release(self) -> None:
        """Drop one reference; the last one closes the sandbox through its backend."""
        with self._lock:
            if self._closed:
                return
            self._refcount -= 1
            last = self._refcount == 0
            if last:
                self._closed = True
        if last:
            _open_handles.discard(self)
            self.backend.close(self)

    async def run(
        self,
        command: str,
        *,
        timeout: float,
        mounts: Sequence[Mount] = (),
        read_only: bool = False,
    ) -> CommandResult:
        """Run a shell command in the workspace through the backend.

        Raises:
            SandboxClosedError: the handle is closed.
        """
        self._check_open()
        return await self.backend.run(
            self, command, timeout=timeout, mounts=mounts, read_only=read_only
        )

    async def file_op(
        self,
        request: Mapping[str, Any],
        *,
        mounts: Sequence[Mount] = (),
        read_only: bool = False,
    ) -> dict[str, Any]:
        """Do one file operation through the backend (its reply says ``ok`` or ``error``).

        Raises:
            SandboxClosedError: the handle is closed.
        """
        self._check_open()
        return await self.backend.file_op(self, request, mounts=mounts, read_only=read_only)

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosedError("session sandbox is closed")

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"refcount={self._refcount}"
        return f"<Sandbox {self.backend.name} {self.root} {state}>"


_backends: dict[str, Backend] = {}
_open_handles: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def open_sandbox_at(root: Path) -> Sandbox | None:
    """The open handle whose workspace is ``root``, an isolating one first; None if none.

    A tool context built from a bare folder finds its sandbox here, so the
    tools of a folder an ``isolated`` handle holds open always run isolated.
    """
    try:
        wanted = root.resolve()
    except (OSError, RuntimeError):
        return None
    found = [h for h in list(_open_handles) if not h.closed and h.root == wanted]
    found.sort(key=lambda h: not h.backend.isolates)
    return found[0] if found else None


def workspace_folder(backend: str, spec: str | None) -> tuple[Path, bool]:
    """The workspace of a new sandbox and whether plait created it (and may delete it).

    ``spec`` names an existing folder, used as it is and never deleted; without
    one a new temporary folder is made.

    Raises:
        InvalidArgumentError: ``spec`` is not an existing folder.
    """
    if spec is None:
        return Path(tempfile.mkdtemp(prefix="plait-sandbox-")).resolve(), True
    if not isinstance(spec, str) or "\0" in spec:
        raise InvalidArgumentError(f"{backend} sandbox: spec must be a folder path")
    root = Path(os.path.expanduser(spec))
    if not root.is_dir():
        raise InvalidArgumentError(f"{backend} sandbox: {spec!r} is not an existing folder")
    return root.resolve(), False


def register_backend(backend: Backend) -> None:
    """Make a backend available to ``session.to(name)``."""
    _backends[backend.name] = backend


def backend_named(name: object) -> Backend:
    """Return the registered backend called ``name``.

    Raises:
        InvalidArgumentError: no backend has that name.
    """
    if not isinstance(name, str) or name not in _backends:
        known = ", ".join(sorted(_backends))
        raise InvalidArgumentError(f"no sandbox backend {name!r} (known: {known})")
    return _backends[name]
