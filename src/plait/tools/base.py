"""Tools from typed Python functions: the decorator, the schema, the call."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import inspect
import os
import posixpath
import typing
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plait.errors import (
    InvalidArgumentError,
    SandboxClosedError,
    SandboxUnavailableError,
    ToolError,
    ToolSchemaError,
    shown,
)
from plait.sandbox import CommandResult, Mount, Sandbox, SandboxPolicy, open_sandbox_at
from plait.sandbox.local import apply_file_op, run_here
from plait.tools.typed import describe, result_text

__all__ = [
    "ArgumentCheck",
    "Offered",
    "Resolved",
    "Root",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "Toolset",
    "open_tools",
    "tool",
]


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call returns to the model."""

    ok: bool
    """Whether the tool succeeded."""
    content: str
    """Its output (or the reason it failed), as the model will read it."""


@dataclass(frozen=True, slots=True)
class Root:
    """A folder mounted into the sandbox."""

    path: Path
    mounted_at: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where a tool's path lands: the real path, the path inside the workspace, its mode."""

    real: Path
    """The real path on this machine, symlinks followed."""
    at: str
    """The normalised path relative to the workspace (what the sandbox opens)."""
    read_only: bool
    """Whether the root it lands on is read-only."""


def _parts(path: str) -> tuple[str, ...]:
    norm = posixpath.normpath(path) if path else "."
    return () if norm == "." else tuple(norm.split("/"))


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _real(path: Path, shown: str) -> Path:
    try:
        return path.resolve()
    except RuntimeError as exc:  # Path.resolve's symlink loop (an OSError on newer Pythons)
        raise ToolError(f"{shown!r}: a symlink loop") from exc
    except OSError as exc:
        raise ToolError(f"{shown!r}: {exc.strerror or exc}") from exc


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool runs: the sandbox folder, the roots mounted beside it, the sandbox itself."""

    root: Path
    """The sandbox's folder (paths are relative to it)."""
    roots: tuple[Root, ...] = ()
    """Additional roots, reached as ``<mounted_at>/...``."""
    read_only: bool = False
    """Whether the primary root is read-only."""
    max_output: int = 30_000
    """Characters of output kept; longer output is cut and says so."""
    sandbox: Sandbox | None = None
    """The handle tools run through; None: the open handle on :attr:`root`, else this machine."""

    @classmethod
    def from_roots(
        cls,
        root: Path | Sandbox,
        listed: Mapping[str, Any] | None = None,
        *,
        read_only: bool = False,
    ) -> ToolContext:
        """Build a context from a sandbox (or its folder) and ``Session.list_roots()``."""
        extra = []
        for r in (listed or {}).get("additional", []):
            extra.append(
                Root(Path(r["path"]), str(r["mounted_at"]), r.get("mount_mode") == "read_only")
            )
        if isinstance(root, Sandbox):
            return cls(root=root.root, roots=tuple(extra), read_only=read_only, sandbox=root)
        return cls(root=root, roots=tuple(extra), read_only=read_only)

    def locate(self, path: str, *, write: bool = False) -> Resolved:
        """Map a tool's path to where it lands: normalised first, then its root picked.

        ``..`` is folded before the root is chosen, so ``x/../data/f`` is on the
        root mounted at ``data`` exactly as ``data/f`` is; symlinks are then
        followed and must stay inside that root; a write must not land on a
        read-only root, whichever name reaches it.

        Raises:
            ToolError: the path leaves the sandbox, loops, or ``write`` lands on a read-only root.
        """
        if not isinstance(path, str) or "\0" in path:
            raise ToolError(f"not a usable path: {path!r}")
        if os.path.isabs(path):
            raise ToolError(f"{path!r}: use a path relative to the workspace")
        parts = _parts(path)
        if parts[:1] == ("..",):
            raise ToolError(f"{path!r} is outside the sandbox")
        base, read_only, rest = self.root, self.read_only, parts
        best = 0
        for r in self.roots:
            at = _parts(r.mounted_at)
            if at and at[:1] != ("..",) and parts[: len(at)] == at and len(at) > best:
                base, read_only, rest, best = r.path, r.read_only, parts[len(at) :], len(at)
        real_base = _real(base, path)
        target = _real(real_base.joinpath(*rest), path)
        if not _inside(target, real_base):
            raise ToolError(f"{path!r} is outside the sandbox")
        if write:
            locked = [_real(r.path, r.mounted_at) for r in self.roots if r.read_only]
            if read_only or any(_inside(target, folder) for folder in locked):
                raise ToolError(f"{path!r} is on a read-only root")
        return Resolved(target, "/".join(parts) or ".", read_only)

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path :meth:`locate` maps ``path`` to.

        Raises:
            ToolError: as :meth:`locate`.
        """
        return self.locate(path, write=write).real

    def mounts(self) -> tuple[Mount, ...]:
        """The mounted roots as the sandbox binds them for one call."""
        return tuple(Mount(r.path, "/".join(_parts(r.mounted_at)), r.read_only) for r in self.roots)

    def _handle(self) -> Sandbox | None:
        return self.sandbox if self.sandbox is not None else open_sandbox_at(self.root)

    async def run(self, command: str, *, timeout: float) -> CommandResult:
        """Run a shell command through the sandbox (or, without one, here, unconfined)."""
        handle = self._handle()
        if handle is None:
            return await run_here(self.root, SandboxPolicy(), command, timeout=timeout)
        return await handle.run(
            command, timeout=timeout, mounts=self.mounts(), read_only=self.read_only
        )

    async def file_op(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Do one file operation through the sandbox (or, without one, here)."""
        handle = self._handle()
        if handle is None:
            return await apply_file_op(request)
        return await handle.file_op(request, mounts=self.mounts(), read_only=self.read_only)

    def clip(self, text: str) -> str:
        """Cut ``text`` to :attr:`max_output`, saying how much was cut."""
        if len(text) <= self.max_output:
            return text
        return f"{text[: self.max_output]}\n[... {len(text) - self.max_output} more characters cut]"


def _check(value: Any, schema: Mapping[str, Any]) -> bool:
    if "enum" in schema:
        return value in schema["enum"]
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list) and all(_check(v, schema["items"]) for v in value)
    return True


ToolFunc = Callable[..., Any]
ArgumentCheck = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""Validates a model's arguments and returns the keyword arguments to call with.

It raises :class:`ToolError` saying what is wrong (the model reads it)."""


def _shape_check(parameters: Mapping[str, Any]) -> ArgumentCheck:
    """The check of a hand-written object schema: its keys, and the types of simple values."""
    props: Mapping[str, Any] = parameters.get("properties", {})
    required = set(parameters.get("required", ()))
    closed = parameters.get("additionalProperties", True) is False

    def check(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        unknown = set(arguments) - set(props) if closed else set()
        missing = required - set(arguments)
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {sorted(missing)}")
            if unknown:
                parts.append(f"unknown {sorted(unknown)}")
            raise ToolError("; ".join(parts))
        for key, value in arguments.items():
            if key in props and not _check(value, props[key]):
                raise ToolError(f"{key!r} must be {props[key]}")
        return arguments

    return check


@dataclass(frozen=True)
class Tool:
    """A callable tool: its name, description, JSON schema and the function behind it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """The JSON schema of the arguments (an object schema)."""
    func: ToolFunc = field(repr=False)
    wants_context: bool = False
    """Whether ``func`` takes the :class:`ToolContext` as its first argument."""
    read_only: bool = False
    """Whether the tool changes no file (then no workspace checkpoint is taken around it)."""
    check: ArgumentCheck | None = field(default=None, repr=False, compare=False)
    """Validates the model's arguments (``@tool`` gives pydantic's); None: the schema's
    keys and simple types are checked."""
    idempotent: bool = False
    """Whether running a call twice does no more than running it once: a resume (or a
    replica taking a run over) runs again a call of this tool whose result was never
    written, where any other such call is recorded as interrupted and not run again."""

    def spec(self) -> dict[str, Any]:
        """The tool as providers send it: ``{name, description, parameters}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    async def call(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run the tool; any failure of its own is a failed outcome the model reads.

        Bad arguments, a :class:`ToolError` and any other exception the tool
        raises come back as ``ok=False``. Only what is not the tool's own ends
        the run: a cancellation, and a sandbox that is closed or unavailable.
        """
        if not isinstance(arguments, Mapping):
            return ToolOutcome(False, "arguments must be a JSON object")
        check = self.check if self.check is not None else _shape_check(self.parameters)
        try:
            kwargs = check(arguments)
        except ToolError as exc:
            return ToolOutcome(False, f"{self.name}: bad arguments: {exc}")
        try:
            args = (ctx,) if self.wants_context else ()
            result = self.func(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
        except ToolError as exc:
            return ToolOutcome(False, str(exc))
        except (SandboxClosedError, SandboxUnavailableError):
            raise
        except Exception as exc:  # the tool's own failure, whatever it is, is the model's to read
            return ToolOutcome(False, f"{self.name}: {type(exc).__name__}: {exc}")
        if isinstance(result, ToolOutcome):
            return ToolOutcome(result.ok, ctx.clip(result.content))
        return ToolOutcome(True, ctx.clip(result_text(result)))


class Toolset(abc.ABC):
    """Tools that exist while a connection is open (an MCP server's): each run opens it.

    A run enters :meth:`open` before its first model call and leaves it when it
    ends; a toolset already opened by its owner lends that connection instead.
    """

    name: str
    """What the toolset is called (in errors and listings)."""

    @abc.abstractmethod
    def open(self) -> contextlib.AbstractAsyncContextManager[Sequence[Tool]]:
        """Connect (or reuse an open connection) and give its tools; close what it opened.

        Raises:
            ToolServerError: the tools could not be reached.
        """


Offered = Tool | Toolset
"""What a run may be given as a tool: a :class:`Tool`, or a :class:`Toolset` of them."""


def duplicate_names(names: Iterable[str]) -> list[str]:
    """The names given more than once, sorted; one pass (a server may list 100,000 tools).

    Args:
        names: the tools' names.

    Returns:
        Each name that occurs twice or more, once, sorted.
    """
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        if name in seen:
            twice.add(name)
        seen.add(name)
    return sorted(twice)


@contextlib.asynccontextmanager
async def open_tools(offered: Iterable[Offered]) -> AsyncIterator[tuple[Tool, ...]]:
    """The tools ``offered`` gives, each toolset opened for the block.

    Raises:
        InvalidArgumentError: two tools share a name.
        ToolServerError: a toolset could not be opened.
    """
    async with contextlib.AsyncExitStack() as stack:
        tools: list[Tool] = []
        for item in offered:
            if isinstance(item, Toolset):
                tools.extend(await stack.enter_async_context(item.open()))
            else:
                tools.append(item)
        twice = duplicate_names(t.name for t in tools)
        if twice:
            raise InvalidArgumentError(f"tool names must be unique: {', '.join(twice)}")
        yield tuple(tools)


@typing.overload
def tool(
    func: ToolFunc, *, name: str | None = None, read_only: bool = False, idempotent: bool = False
) -> Tool: ...


@typing.overload
def tool(
    func: None = None,
    *,
    name: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
) -> Callable[[ToolFunc], Tool]: ...


def tool(
    func: ToolFunc | None = None,
    *,
    name: str | None = None,
    read_only: bool = False,
    idempotent: bool = False,
) -> Any:
    """Make a :class:`Tool` from a typed function (sync or async).

    pydantic reads the parameters' annotations (D195): str, int, float, bool,
    lists, dicts, tuples, ``Literal``, enums, optional values, dataclasses,
    TypedDicts and pydantic models, nested as deep as needed. Parameters
    without a default are required. ``Annotated[T, Field(description=...)]``
    or the docstring's ``Args:`` section describes an argument; the
    docstring's first paragraph is the tool's description. What the model
    sends is checked strictly (``"3"`` is not an int) and a bad argument is a
    failed result naming the field. A first parameter annotated
    :class:`ToolContext` receives the sandbox context. ``read_only=True`` says
    the tool changes no file; ``idempotent=True`` that a call run twice does no more
    than once, so a resume runs again a call of it whose result was never written.

    Raises:
        ToolSchemaError: a parameter without an annotation, or of a type JSON cannot carry.
        InvalidArgumentError: ``name`` that is not a non-empty string, or ``read_only`` or
            ``idempotent`` that is not a bool (a truthy ``"false"`` would make a resume
            run again a call that must not run twice).
    """
    for flag, value in (("read_only", read_only), ("idempotent", idempotent)):
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"tool {flag} must be True or False, not {shown(value)}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise InvalidArgumentError(f"a tool's name must be a non-empty string, not {shown(name)}")

    def build(f: ToolFunc) -> Tool:
        params = list(inspect.signature(f).parameters.values())
        try:
            first = typing.get_type_hints(f).get(params[0].name) if params else None
        except (NameError, TypeError) as exc:
            shown = f"tool {f.__name__}: its annotations cannot be read"
            raise ToolSchemaError(f"{shown}: {exc}") from exc
        wants_context = first is ToolContext
        described = describe(f, skip_first=wants_context)
        return Tool(
            name or f.__name__,
            described.description,
            described.parameters,
            f,
            wants_context,
            read_only,
            described.check,
            idempotent,
        )

    return build(func) if func is not None else build


async def run_blocking(func: Callable[[], Any]) -> Any:
    """Run blocking file work off the event loop."""
    return await asyncio.to_thread(func)
