"""Tools from typed Python functions: the decorator, the schema, the call."""

from __future__ import annotations

import asyncio
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union, get_args, get_origin

from plait.errors import InvalidArgumentError, ToolError

__all__ = ["Tool", "ToolContext", "ToolError", "ToolOutcome", "tool"]


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
class ToolContext:
    """Where a tool runs: the sandbox folder and the roots mounted beside it."""

    root: Path
    """The sandbox's folder (paths are relative to it)."""
    roots: tuple[Root, ...] = ()
    """Additional roots, reached as ``<mounted_at>/...``."""
    read_only: bool = False
    """Whether the primary root is read-only."""
    max_output: int = 30_000
    """Characters of output kept; longer output is cut and says so."""

    @classmethod
    def from_roots(
        cls, root: Path, listed: Mapping[str, Any] | None = None, *, read_only: bool = False
    ) -> ToolContext:
        """Build a context from ``Session.list_roots()``'s ``additional`` entries."""
        extra = []
        for r in (listed or {}).get("additional", []):
            extra.append(
                Root(Path(r["path"]), str(r["mounted_at"]), r.get("mount_mode") == "read_only")
            )
        return cls(root=root, roots=tuple(extra), read_only=read_only)

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """Map a tool's path to a real path inside the sandbox or a mounted root.

        Raises:
            ToolError: the path leaves the sandbox, or ``write`` on a read-only root.
        """
        if not isinstance(path, str) or "\0" in path:
            raise ToolError(f"not a usable path: {path!r}")
        if os.path.isabs(path):
            raise ToolError(f"{path!r}: use a path relative to the workspace")
        first = Path(path).parts[0] if Path(path).parts else ""
        base, read_only = self.root, self.read_only
        rest = path
        for r in self.roots:
            if first == r.mounted_at:
                base, read_only = r.path, r.read_only
                rest = str(Path(*Path(path).parts[1:])) if len(Path(path).parts) > 1 else "."
                break
        real_base = base.resolve()
        target = (real_base / rest).resolve()  # follows symlinks: a link out is caught
        if target != real_base and real_base not in target.parents:
            raise ToolError(f"{path!r} is outside the sandbox")
        if write and read_only:
            raise ToolError(f"{path!r} is on a read-only root")
        return target

    def clip(self, text: str) -> str:
        """Cut ``text`` to :attr:`max_output`, saying how much was cut."""
        if len(text) <= self.max_output:
            return text
        return f"{text[: self.max_output]}\n[... {len(text) - self.max_output} more characters cut]"


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_of(annotation: Any) -> dict[str, Any]:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _schema_of(args[0])
    if origin in (list, tuple):
        (item,) = get_args(annotation)[:1] or (str,)
        return {"type": "array", "items": _schema_of(item)}
    if origin is typing.Literal:
        return {"enum": list(get_args(annotation))}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    raise InvalidArgumentError(f"a tool parameter cannot be typed {annotation!r}")


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

    def spec(self) -> dict[str, Any]:
        """The tool as providers send it: ``{name, description, parameters}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    async def call(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run the tool. Bad arguments and :class:`ToolError` give a failed outcome."""
        props: Mapping[str, Any] = self.parameters.get("properties", {})
        required = set(self.parameters.get("required", ()))
        if not isinstance(arguments, Mapping):
            return ToolOutcome(False, "arguments must be a JSON object")
        unknown = set(arguments) - set(props)
        missing = required - set(arguments)
        if unknown or missing:
            parts = []
            if missing:
                parts.append(f"missing {sorted(missing)}")
            if unknown:
                parts.append(f"unknown {sorted(unknown)}")
            return ToolOutcome(False, f"{self.name}: bad arguments: {'; '.join(parts)}")
        for key, value in arguments.items():
            if not _check(value, props[key]):
                return ToolOutcome(False, f"{self.name}: {key!r} must be {props[key]}")
        try:
            args = (ctx,) if self.wants_context else ()
            result = self.func(*args, **arguments)
            if inspect.isawaitable(result):
                result = await result
        except ToolError as exc:
            return ToolOutcome(False, str(exc))
        except (OSError, ValueError) as exc:
            return ToolOutcome(False, f"{self.name}: {exc}")
        if isinstance(result, ToolOutcome):
            return ToolOutcome(result.ok, ctx.clip(result.content))
        return ToolOutcome(True, ctx.clip(result if isinstance(result, str) else str(result)))


def tool(func: ToolFunc | None = None, *, name: str | None = None) -> Any:
    """Make a :class:`Tool` from a typed function (sync or async).

    The parameters' annotations give the JSON schema (str, int, float, bool,
    lists, Literal, optional values); parameters without a default are
    required; the docstring's first paragraph is the description. A first
    parameter annotated :class:`ToolContext` receives the sandbox context.

    Raises:
        InvalidArgumentError: a parameter without an annotation or of a type JSON cannot carry.
    """

    def build(f: ToolFunc) -> Tool:
        sig = inspect.signature(f)
        hints = typing.get_type_hints(f)
        params = list(sig.parameters.values())
        wants_context = bool(params) and hints.get(params[0].name) is ToolContext
        if wants_context:
            params = params[1:]
        props: dict[str, Any] = {}
        required: list[str] = []
        for p in params:
            if p.name not in hints:
                raise InvalidArgumentError(f"tool {f.__name__}: parameter {p.name!r} needs a type")
            props[p.name] = _schema_of(hints[p.name])
            if p.default is inspect.Parameter.empty:
                required.append(p.name)
        doc = inspect.getdoc(f) or ""
        schema = {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }
        return Tool(name or f.__name__, doc.split("\n\n")[0], schema, f, wants_context)

    return build(func) if func is not None else build


async def run_blocking(func: Callable[[], Any]) -> Any:
    """Run blocking file work off the event loop."""
    return await asyncio.to_thread(func)
