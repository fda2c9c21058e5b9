"""The ``local`` backend: tools run on this machine, in a folder. It does not isolate."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.sandbox import _fileops
from plait.sandbox._fstree import remove_tree
from plait.sandbox.base import Mount, Sandbox, register_backend, workspace_folder
from plait.sandbox.policy import SandboxPolicy, tool_environment
from plait.sandbox.process import CommandResult, run_argv

__all__ = ["LocalBackend", "apply_file_op", "run_here"]


async def run_here(
    root: Path, policy: SandboxPolicy, command: str, *, timeout: float
) -> CommandResult:
    """Run ``command`` with ``/bin/sh`` in ``root`` on this machine, unconfined.

    The environment is :func:`~plait.sandbox.tool_environment`'s (nothing of
    plait's own), the output is cut at the policy's limit, and the process
    tree (its group, its descendants and whoever holds its output pipe) is
    killed when it times out or the caller is cancelled.
    """
    return await run_argv(
        ["/bin/sh", "-c", command],
        cwd=root,
        env=tool_environment(policy, home=tempfile.gettempdir()),
        timeout=timeout,
        output_limit=policy.limits.output_bytes,
    )


async def apply_file_op(request: Mapping[str, Any]) -> dict[str, Any]:
    """Do one file operation in this process, on the request's real ``path``."""
    return await asyncio.to_thread(_fileops.apply, dict(request))


class LocalBackend:
    """Sandboxes that are folders on this machine, for trusted use only.

    **This backend does not isolate.** A shell command runs as the user
    running plait, with the whole machine, the network and every "read-only"
    root within its reach; only the file tools honour mount modes (by checking
    paths), and of the :class:`~plait.sandbox.SandboxPolicy` only the
    environment (nothing of plait's own), the output limit and the timeout
    apply. Use ``isolated`` for anything a model may do unsupervised.

    ``spec`` names an existing folder, used as it is and never deleted. Without
    one, the backend creates a temporary workspace and deletes it when the
    sandbox closes (seed 000's troubleshooting: do not use a folder you care
    about as a managed workspace; a folder you name is never touched on close).
    """

    name = "local"
    isolates = False

    def open(self, spec: str | None, policy: SandboxPolicy | None = None) -> Sandbox:
        """Open a sandbox on ``spec`` (a folder) or on a new managed temporary folder.

        Raises:
            InvalidArgumentError: ``spec`` is not an existing folder.
        """
        root, managed = workspace_folder(self.name, spec)
        return Sandbox(self, root, managed=managed, policy=policy)

    def close(self, sandbox: Sandbox) -> None:
        """Delete the workspace if (and only if) this backend created it."""
        if sandbox.managed:
            # Iterative and never through a link: a tree any depth deep goes too.
            with contextlib.suppress(OSError):
                remove_tree(sandbox.root)

    async def run(
        self,
        sandbox: Sandbox,
        command: str,
        *,
        timeout: float,
        mounts: Sequence[Mount] = (),
        read_only: bool = False,
    ) -> CommandResult:
        """Run ``command`` with :func:`run_here`; mounts and ``read_only`` are not enforced."""
        return await run_here(sandbox.root, sandbox.policy, command, timeout=timeout)

    async def file_op(
        self,
        sandbox: Sandbox,
        request: Mapping[str, Any],
        *,
        mounts: Sequence[Mount] = (),
        read_only: bool = False,
    ) -> dict[str, Any]:
        """Do the operation in this process, on the real path the tool resolved."""
        return await apply_file_op(request)


register_backend(LocalBackend())
