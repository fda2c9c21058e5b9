"""Which sandbox a session's tools run in: its stored target and the handle it holds.

A session stores a target (``to("local", spec)``; branches inherit it) and opens a
reference-counted :class:`~plait.sandbox.Sandbox` handle on it when tools need
one (seed 000 steps 5-7). A branch made while a handle is open shares it.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

from plait.errors import InvalidArgumentError, NoSandboxError, SandboxClosedError
from plait.records import JSONValue
from plait.sandbox import Sandbox, SandboxPolicy, backend_named
from plait.session.settings import list_roots, set_settings
from plait.tools import ToolContext

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = [
    "bind",
    "close",
    "require",
    "retarget",
    "share",
    "target_backend",
    "target_policy",
    "tool_context",
]


def target_backend(settings: Mapping[str, JSONValue]) -> str | None:
    """The backend a session's settings target, or None."""
    target = settings.get("sandbox")
    if isinstance(target, Mapping) and isinstance(target.get("backend"), str):
        return str(target["backend"])
    return None


def retarget(
    head: Head,
    backend: str,
    spec: str | None,
    policy: SandboxPolicy | Mapping[str, JSONValue] | None,
) -> None:
    """Store a new target (a handle held is released first: the branch gets its own)."""
    backend_named(backend)
    if spec is not None and not isinstance(spec, str):
        raise InvalidArgumentError("spec must be a string (for local: a folder path)")
    target: dict[str, JSONValue] = {"backend": backend, "spec": spec}
    if policy is not None:
        target["policy"] = SandboxPolicy.from_json(
            policy.to_json() if isinstance(policy, SandboxPolicy) else policy
        ).to_json()
    close(head)
    set_settings(head, sandbox=target)


def target_policy(settings: Mapping[str, JSONValue]) -> SandboxPolicy:
    """The sandbox policy a session's target states (the default policy if none)."""
    target = settings.get("sandbox")
    raw = target.get("policy") if isinstance(target, Mapping) else None
    return SandboxPolicy.from_json(raw) if isinstance(raw, Mapping) else SandboxPolicy()


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
    opened = backend_named(str(target["backend"])).open(
        spec if isinstance(spec, str) else None, target_policy(settings or head.settings())
    )
    return _hold(head, opened)


def _hold(head: Head, handle: Sandbox) -> Sandbox:
    """The head holds one reference to ``handle``, given back however the handle ends.

    ``close_sandbox`` gives it back; so does the handle's end (garbage collection) or
    the process's, so a managed temporary workspace nobody closed is still deleted.
    """
    head.sandbox = handle
    owner = head.owner()
    head.sandbox_release = weakref.finalize(owner, handle.release) if owner is not None else None
    return handle


def bind(head: Head, handle: Sandbox) -> None:
    """Hold ``handle`` (taking a reference), releasing the one held before."""
    if not isinstance(handle, Sandbox):
        raise InvalidArgumentError(f"with_sandbox takes a Sandbox, not {type(handle).__name__}")
    handle.acquire()
    close(head)
    _hold(head, handle)


def close(head: Head) -> None:
    """Release the handle held; the sandbox closes when no session holds it."""
    handle, head.sandbox = head.sandbox, None
    release, head.sandbox_release = head.sandbox_release, None
    if release is not None:
        release()  # a finalizer runs once: the reference is given back exactly once
    elif handle is not None:
        handle.release()


def share(head: Head, branch: Head) -> None:
    """A branch made while a handle is open shares it (seed 000 step 7)."""
    if head.sandbox is not None and not head.sandbox.closed and branch.sandbox is None:
        _hold(branch, head.sandbox.acquire())


def tool_context(head: Head) -> ToolContext:
    """Where a run's tools work: the sandbox folder plus the mounted roots.

    With no target and no handle, the session is targeted at a managed local
    sandbox first (the default backend).
    """
    settings = head.settings()
    if head.sandbox is None and target_backend(settings) is None:
        retarget(head, "local", None, None)
        settings = head.settings(head.require())
    sandbox = require(head, settings)
    return ToolContext.from_roots(sandbox, list_roots(head, settings))
