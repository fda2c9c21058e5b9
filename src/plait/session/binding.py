"""Which sandbox a session's tools run in: its stored target and the handle it holds.

A session stores a target (``to("local", spec)``; branches inherit it) and opens a
reference-counted :class:`~plait.sandbox.Sandbox` handle on it when tools need
one (seed 000 steps 5-7). A branch made while a handle is open shares it.

The handle a session handle holds is its :class:`SandboxBinding`'s (reached as
``head.binding``); the functions here decide what to hold, and the binding holds it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from plait.errors import InvalidArgumentError, NoSandboxError, SandboxClosedError
from plait.records import JSONValue
from plait.sandbox import Sandbox, SandboxPolicy, backend_named
from plait.session.settings import list_roots, set_settings
from plait.tools import ToolContext

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = [
    "SandboxBinding",
    "bind",
    "close",
    "require",
    "retarget",
    "share",
    "target_backend",
    "target_policy",
    "tool_context",
]


class SandboxBinding:
    """The sandbox handle one session handle holds, and the one reference it owes back.

    The reference is given back once: by :meth:`close`, or when the session handle
    or the process goes, so a managed temporary workspace nobody closed is still
    deleted.

    Args:
        owner: the session handle, weakly (None once it is gone).
    """

    __slots__ = ("_handle", "_owner", "_release")

    def __init__(self, owner: Callable[[], object | None]) -> None:
        self._owner = owner
        self._handle: Sandbox | None = None
        self._release: weakref.finalize[Any, Any] | None = None

    @property
    def handle(self) -> Sandbox | None:
        """The sandbox handle held, or None (it may have been closed by another holder)."""
        return self._handle

    def hold(self, handle: Sandbox) -> Sandbox:
        """Hold a reference to ``handle`` taken already (one held before is given back).

        Returns:
            ``handle``.
        """
        self.close()
        self._handle = handle
        owner = self._owner()
        self._release = weakref.finalize(owner, handle.release) if owner is not None else None
        return handle

    def close(self) -> None:
        """Give back the reference held; the sandbox closes when no session holds it."""
        handle, self._handle = self._handle, None
        release, self._release = self._release, None
        if release is not None:
            release()  # a finalizer runs once: the reference is given back exactly once
        elif handle is not None:
            handle.release()


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
    held = head.binding.handle
    if held is not None:
        if held.closed:
            raise SandboxClosedError("session sandbox is closed")
        return held
    target = (settings if settings is not None else head.settings()).get("sandbox")
    if not isinstance(target, Mapping) or not isinstance(target.get("backend"), str):
        raise NoSandboxError("no sandbox to take")
    spec = target.get("spec")
    opened = backend_named(str(target["backend"])).open(
        spec if isinstance(spec, str) else None, target_policy(settings or head.settings())
    )
    return head.binding.hold(opened)


def bind(head: Head, handle: Sandbox) -> None:
    """Hold ``handle`` (taking a reference), releasing the one held before."""
    if not isinstance(handle, Sandbox):
        raise InvalidArgumentError(f"with_sandbox takes a Sandbox, not {type(handle).__name__}")
    head.binding.hold(handle.acquire())


def close(head: Head) -> None:
    """Release the handle held; the sandbox closes when no session holds it."""
    head.binding.close()


def share(head: Head, branch: Head) -> None:
    """A branch made while a handle is open shares it (seed 000 step 7)."""
    held = head.binding.handle
    if held is not None and not held.closed and branch.binding.handle is None:
        branch.binding.hold(held.acquire())


def tool_context(head: Head) -> ToolContext:
    """Where a run's tools work: the sandbox folder plus the mounted roots.

    With no target and no handle, the session is targeted at a managed local
    sandbox first (the default backend).
    """
    settings = head.settings()
    if head.binding.handle is None and target_backend(settings) is None:
        retarget(head, "local", None, None)
        settings = head.settings(head.require())
    sandbox = require(head, settings)
    return ToolContext.from_roots(sandbox, list_roots(head, settings))
