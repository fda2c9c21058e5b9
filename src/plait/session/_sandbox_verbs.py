"""The session's sandbox verbs, as one face of :class:`Session`.

:class:`SandboxVerbs` is a base of :class:`~plait.session.Session`: where its tools
run (seed 000's ``to``) and the sandbox handle it holds, each verb a short
delegation to :mod:`plait.session.binding`. The files themselves are
``session.workspace``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from plait.records import JSONValue
from plait.sandbox import Sandbox, SandboxPolicy
from plait.session import binding

if TYPE_CHECKING:
    from typing import Self

    from plait.session._head import Head

__all__ = ["SandboxVerbs"]


class SandboxVerbs:
    """The sandbox target and the sandbox handle of a session."""

    __slots__ = ()
    _head: Head

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

        Returns:
            The session.

        Raises:
            InvalidArgumentError: an unknown backend or a bad policy.
        """
        binding.retarget(self._head, backend, spec, policy)
        return self

    @property
    def sandbox_backend(self) -> str | None:
        """The backend this session targets, or None."""
        return binding.target_backend(self._head.settings())

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox handle this session holds now, or None (handles open on demand)."""
        return self._head.sandbox

    def require_sandbox(self) -> Sandbox:
        """Return the current handle, opening one on the target if there is none.

        Returns:
            The open sandbox handle.

        Raises:
            NoSandboxError: no target and no handle. SandboxClosedError: a closed handle.
        """
        return binding.require(self._head)

    def with_sandbox(self, handle: Sandbox) -> Self:
        """Bind an open sandbox handle to this session (taking a reference).

        Args:
            handle: an open sandbox.

        Returns:
            The session.

        Raises:
            InvalidArgumentError: ``handle`` is not a sandbox. SandboxClosedError: it is closed.
        """
        binding.bind(self._head, handle)
        return self

    def close_sandbox(self) -> None:
        """Release this session's handle; the sandbox closes when no session holds it."""
        binding.close(self._head)

    def __enter__(self) -> Self:
        self.require_sandbox()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_sandbox()
