"""What a sandbox allows, as data: network, writable roots, environment, limits.

A :class:`SandboxPolicy` is a small frozen value. The ``isolated`` backend
enforces all of it; the ``local`` backend enforces only what a plain process
can (the environment, the output limit, the timeout) and says so. Its JSON
form (:meth:`SandboxPolicy.to_json`) is what a session stores beside its
sandbox target.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from plait.errors import InvalidArgumentError, UnknownOptionError

__all__ = ["Limits", "SandboxPolicy", "tool_environment"]

_GIB = 1 << 30
_MIB = 1 << 20

TOOL_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""The ``PATH`` every tool process gets (never the server's)."""

# Names that hold plait's own credentials or a model provider's: never passed to a
# tool, even when a policy names them, because a tool's output goes back to the model.
_SECRET_NAME = re.compile(
    r"^(PLAIT_.*|.*_API_KEYS?|.*_TOKEN|.*_SECRET(_.*)?|.*PASSWORD.*|AWS_.*|AZURE_.*|GOOGLE_.*"
    r"|ANTHROPIC_.*|OPENAI_.*|GEMINI_.*|MISTRAL_.*|GROQ_.*|XAI_.*|DEEPSEEK_.*|COHERE_.*)$",
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FIXED = frozenset({"PATH", "HOME", "TMPDIR", "LANG"})


def _positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value < 1 << 62:
        raise InvalidArgumentError(f"limit {name} must be a positive int, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one tool call's processes.

    Raises:
        InvalidArgumentError: a limit that is not a positive int.
    """

    memory_bytes: int = 4 * _GIB
    """Address space of each process (``RLIMIT_AS``; runtimes that reserve more, e.g. a JVM
    sized by the machine's memory, need a larger value)."""
    processes: int = 256
    """Processes and threads alive at once in the call (a fork bomb stops here)."""
    output_bytes: int = 4 * _MIB
    """Bytes of stdout+stderr read; past them the command is stopped and the output cut."""
    file_bytes: int = 1 * _GIB
    """The largest file a process may write (``RLIMIT_FSIZE``)."""

    def __post_init__(self) -> None:
        for name in ("memory_bytes", "processes", "output_bytes", "file_bytes"):
            _positive(name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """What tool calls in a sandbox may do beyond their workspace.

    The default allows nothing: no network, no writable folder but the
    workspace (and the roots mounted read-write), no variable of plait's own
    environment, and the default :class:`Limits`.

    Raises:
        InvalidArgumentError: a writable root that is not an absolute path, an
            environment name that is not one, or one that names a credential
            (``PLAIT_*``, ``*_API_KEY``, provider keys, ...).
    """

    network: bool = False
    """Whether tools may reach the network (loopback included)."""
    writable_roots: tuple[str, ...] = ()
    """Absolute folders outside the workspace that tools may write (e.g. a build cache)."""
    env: tuple[str, ...] = ()
    """Names of variables passed from plait's environment to the tool's (none by default)."""
    limits: Limits = field(default_factory=Limits)
    """Memory, processes, output and file size of each call."""

    def __post_init__(self) -> None:
        if not isinstance(self.network, bool):
            raise InvalidArgumentError(f"network must be true or false, not {self.network!r}")
        if not isinstance(self.limits, Limits):
            raise InvalidArgumentError("limits must be a Limits")
        for label, names in (("writable_roots", self.writable_roots), ("env", self.env)):
            if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
                raise InvalidArgumentError(f"{label} must be a tuple of strings")
        for root in self.writable_roots:
            if not os.path.isabs(root) or "\0" in root or os.path.normpath(root) == "/":
                raise InvalidArgumentError(f"writable root {root!r} must be an absolute folder")
        for name in self.env:
            if not _ENV_NAME.match(name):
                raise InvalidArgumentError(f"{name!r} is not an environment variable name")
            if _SECRET_NAME.match(name):
                raise InvalidArgumentError(
                    f"{name!r} looks like a credential; a tool's environment never carries one"
                )
            if name in _FIXED:
                raise InvalidArgumentError(f"{name!r} is set by plait for every tool")

    def to_json(self) -> dict[str, Any]:
        """The policy as JSON (what a session stores and ``list_roots`` can show)."""
        lim = self.limits
        return {
            "network": self.network,
            "writable_roots": list(self.writable_roots),
            "env": list(self.env),
            "limits": {
                "memory_bytes": lim.memory_bytes,
                "processes": lim.processes,
                "output_bytes": lim.output_bytes,
                "file_bytes": lim.file_bytes,
            },
        }

    @classmethod
    def from_json(cls, data: object) -> SandboxPolicy:
        """Read :meth:`to_json`'s form; missing keys take their defaults.

        Raises:
            UnknownOptionError: a key the policy does not have.
            InvalidArgumentError: a value of the wrong type or out of range.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise InvalidArgumentError("a sandbox policy must be a JSON object")
        keys = ["network", "writable_roots", "env", "limits"]
        unknown = set(data) - set(keys)
        if unknown:
            raise UnknownOptionError("sandbox policy", [str(k) for k in unknown], keys)
        limits = data.get("limits") or {}
        if not isinstance(limits, Mapping):
            raise InvalidArgumentError("limits must be a JSON object")
        names = ["memory_bytes", "processes", "output_bytes", "file_bytes"]
        bad = set(limits) - set(names)
        if bad:
            raise UnknownOptionError("sandbox limits", [str(k) for k in bad], names)
        roots, env = data.get("writable_roots", []), data.get("env", [])
        if not isinstance(roots, list | tuple) or not isinstance(env, list | tuple):
            raise InvalidArgumentError("writable_roots and env must be lists of strings")
        return cls(
            network=data.get("network", False),
            writable_roots=tuple(roots),
            env=tuple(env),
            limits=Limits(**dict(limits)),
        )


def tool_environment(policy: SandboxPolicy, *, home: str) -> dict[str, str]:
    """The environment of a tool process: the one place that decides it, for every backend.

    Nothing of plait's own environment passes except the names the policy
    lists (never a credential, see :class:`SandboxPolicy`); every tool gets a
    fixed ``PATH``, ``HOME`` (``home``), ``TMPDIR=/tmp`` and ``LANG=C.UTF-8``.
    """
    env = {"PATH": TOOL_PATH, "HOME": home, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    for name in policy.env:
        value = os.environ.get(name)
        if value is not None:
            env[name] = value
    return env
