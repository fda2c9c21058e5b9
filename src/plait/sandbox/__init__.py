"""Where tools run: backends, policies, the reference-counted sandbox handles, checkpoints.

A session holds a *target* (a backend name and an optional spec) and opens a
:class:`Sandbox` handle only when one is needed (seed 000): ``to("local")``
opens nothing; ``require_sandbox()`` or ``with session:`` does. Branches made
while a handle is open share it and bump its reference count; the handle closes
when the last holder lets go.

Two backends: ``local`` runs tools on this machine and does not isolate;
``isolated`` runs every tool call in its own namespaces (bubblewrap) under the
sandbox's :class:`SandboxPolicy`. :class:`CheckpointStore` records and restores
a workspace's files, content-addressed.
"""

from plait.sandbox._objects import SourceChangedError, verified_parts
from plait.sandbox.base import (
    Backend,
    Mount,
    Sandbox,
    backend_named,
    open_sandbox_at,
    register_backend,
)
from plait.sandbox.checkpoint import CheckpointStore, FileChange, FolderObjects, Objects
from plait.sandbox.isolated import IsolatedBackend
from plait.sandbox.local import LocalBackend
from plait.sandbox.policy import Limits, SandboxPolicy, tool_environment
from plait.sandbox.process import CommandResult

__all__ = [
    "Backend",
    "CheckpointStore",
    "CommandResult",
    "FileChange",
    "FolderObjects",
    "IsolatedBackend",
    "Limits",
    "LocalBackend",
    "Mount",
    "Objects",
    "Sandbox",
    "SandboxPolicy",
    "SourceChangedError",
    "backend_named",
    "open_sandbox_at",
    "register_backend",
    "tool_environment",
    "verified_parts",
]
