"""Which sandbox a session's tools run in: its stored target and the handle it holds.

A session stores a target (``to("local", spec)``; branches inherit it) and opens a
reference-counted :class:`~plait.sandbox.Sandbox` handle on it when tools need
one (seed 000 steps 5-7). A branch made while a handle is open shares it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from plait.errors import InvalidArgumentError, NoSandboxError, SandboxClosedError
from plait.records import JSONValue
from plait.sandbox import Sandbox, backend_named
from plait.session.settings import list_roots, set_settings
from plait.tools import ToolContext

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["bind", "close", "require", "retarget", "share", "target_backend", "tool_context"]


def target_backend(settings: Mapping[str, JSONValue]) -> str | None:
    """The backend a session's settings target, or None."""
    target = settings.get("sandbox")
    if isinstance(target, Mapping) and isinstance(target.get("backend"), str):
        return str(target["backend"])
    return None


def retarget(head: Head, backend: str, spec: str | None) -> None:
    """Store a new target (a handle held is released first: the branch gets its own)."""
    backend_named(backend)
    if spec is not None and not isinstance(spec, str):
        raise InvalidArgumentError("spec must be a string (for local: a folder path)")
    close(head)
    set_settings(head, sandbox={"backend": backend, "spec": spec})


def require(head: Head, settings: Mapping[str, JSONValue] | None = None) -> Sandbox:
    """The handle held, or one opened on the stored target.

    Raises:
        NoSandboxError: no target and no handle ("no sandbox to take").
        SandboxClosedError: the session is bound to a closed handle.
    """
    if head.sandbox is not None:
        if head.sandbox.closed:
            raise SandboxClosedError("session sandbox is closed")
        return head.sandbox
    target = (settings if settings is not None else head.settings()).get("sandbox")
    if not isinstance(target, Mapping) or not isinstance(target.get("backend"), str):
        raise NoSandboxError("no sandbox to take")
    spec = target.get("spec")
    head.sandbox = backend_named(str(target["backend"])).open(
        spec if isinstance(spec, str) else None
    )
    return head.sandbox


def bind(head: Head, handle: Sandbox) -> None:
    """Hold ``handle`` (taking a reference), releasing the one held before."""
    if not isinstance(handle, Sandbox):
        raise InvalidArgumentError(f"with_sandbox takes a Sandbox, not {type(handle).__name__}")
    handle.acquire()
    close(head)
    head.sandbox = handle


def close(head: Head) -> None:
    """Release the handle held; the sandbox closes when no session holds it."""
    handle, head.sandbox = head.sandbox, None
    if handle is not None:
        handle.release()


def share(head: Head, branch: Head) -> None:
    """A branch made while a handle is open shares it (seed 000 step 7)."""
    if head.sandbox is not None and not head.sandbox.closed and branch.sandbox is None:
        branch.sandbox = head.sandbox.acquire()


def tool_context(head: Head) -> ToolContext:
    """Where a run's tools work: the sandbox folder plus the mounted roots.

    With no target and no handle, the session is targeted at a managed local
    sandbox first (the default backend).
    """
    settings = head.settings()
    if head.sandbox is None and target_backend(settings) is None:
        retarget(head, "local", None)
        settings = head.settings(head.require())
    sandbox = require(head, settings)
    return ToolContext.from_roots(sandbox.root, list_roots(head, settings))
