"""The Backend protocol and the Sandbox handle."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Protocol, runtime_checkable

from plait.errors import InvalidArgumentError, SandboxClosedError

__all__ = ["Backend", "Sandbox", "backend_named", "register_backend"]


@runtime_checkable
class Backend(Protocol):
    """A place tools can run: it opens and closes sandboxes."""

    @property
    def name(self) -> str:
        """The name sessions target it by (``local``, ...)."""
        ...

    def open(self, spec: str | None) -> Sandbox:
        """Open a sandbox; ``spec`` is backend-specific (for ``local``: a folder)."""
        ...

    def close(self, sandbox: Sandbox) -> None:
        """Release what the sandbox holds (a managed workspace is deleted, nothing else)."""
        ...


class Sandbox:
    """An open, reference-counted handle on one sandbox.

    Args:
        backend: the backend that opened it.
        root: the folder tools see as their workspace.
        managed: whether the backend created ``root`` (and so deletes it on close).
    """

    def __init__(self, backend: Backend, root: Path, *, managed: bool) -> None:
        self.backend = backend
        """The backend that opened the sandbox (``sandbox.backend.name``)."""
        self.root = root
        """The folder tools see as their workspace."""
        self.managed = managed
        """Whether plait created :attr:`root` (only then is it deleted on close)."""
        self._refcount = 1
        self._closed = False
        self._lock = threading.Lock()

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
            self.backend.close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"refcount={self._refcount}"
        return f"<Sandbox {self.backend.name} {self.root} {state}>"


_backends: dict[str, Backend] = {}


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
