"""The ``local`` backend: tools run on this machine, in a folder."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from plait.errors import InvalidArgumentError
from plait.sandbox.base import Sandbox, register_backend

__all__ = ["LocalBackend"]


class LocalBackend:
    """Sandboxes that are folders on this machine.

    ``spec`` names an existing folder, used as it is and never deleted. Without
    one, the backend creates a temporary workspace and deletes it when the
    sandbox closes (seed 000's troubleshooting: do not use a folder you care
    about as a managed workspace; a folder you name is never touched on close).
    """

    name = "local"

    def open(self, spec: str | None) -> Sandbox:
        """Open a sandbox on ``spec`` (a folder) or on a new managed temporary folder.

        Raises:
            InvalidArgumentError: ``spec`` is not an existing folder.
        """
        if spec is None:
            return Sandbox(self, Path(tempfile.mkdtemp(prefix="plait-sandbox-")), managed=True)
        root = Path(spec).expanduser()
        if not root.is_dir():
            raise InvalidArgumentError(f"local sandbox: {spec!r} is not an existing folder")
        return Sandbox(self, root.resolve(), managed=False)

    def close(self, sandbox: Sandbox) -> None:
        """Delete the workspace if (and only if) this backend created it."""
        if sandbox.managed:
            shutil.rmtree(sandbox.root, ignore_errors=True)


register_backend(LocalBackend())
