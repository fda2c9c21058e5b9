"""The built-in tools: shell, read_file, write_file, list_files, run through the sandbox."""

from __future__ import annotations

from typing import Any

from plait.tools.base import ToolContext, ToolError, ToolOutcome, tool

__all__ = ["BUILTIN_TOOLS", "list_files", "read_file", "shell", "write_file"]

_MAX_TIMEOUT = 600
_MAX_CHARS = 10_000_000


@tool
async def shell(ctx: ToolContext, command: str, timeout: int = 60) -> ToolOutcome:
    """Run a shell command in the workspace; returns its exit code and output.

    The output (stdout and stderr together) is cut to the context's limit; a
    command still running after ``timeout`` seconds is killed with every
    process it started.
    """
    if not 1 <= timeout <= _MAX_TIMEOUT:
        raise ToolError(f"timeout must be between 1 and {_MAX_TIMEOUT} seconds")
    done = await ctx.run(command, timeout=timeout)
    text = done.output.decode("utf-8", "replace")
    if done.timed_out:
        return ToolOutcome(False, f"timed out after {timeout} s (killed)\n{text}")
    if done.output_limited:
        stopped = f"output passed {len(done.output)} bytes: the command was stopped"
        return ToolOutcome(False, f"{stopped}\n{text}")
    return ToolOutcome(done.exit_code == 0, f"exit code {done.exit_code}\n{text}")


async def _file_op(ctx: ToolContext, path: str, request: dict[str, Any]) -> dict[str, Any]:
    reply = await ctx.file_op(request)
    if not reply.get("ok"):
        raise ToolError(f"{path!r}: {reply.get('error', 'failed')}")
    return reply


@tool(read_only=True)
async def read_file(ctx: ToolContext, path: str, max_chars: int = 100_000) -> str:
    """Read a text file of the workspace (paths are relative to it)."""
    if not 1 <= max_chars <= _MAX_CHARS:
        raise ToolError(f"max_chars must be between 1 and {_MAX_CHARS:,}")
    where = ctx.locate(path)
    reply = await _file_op(
        ctx, path, {"op": "read", "path": str(where.real), "at": where.at, "max_chars": max_chars}
    )
    text = str(reply["text"])
    if reply.get("more"):
        return f"{text}\n[... more characters]"
    if reply.get("cut"):
        return f"{text}\n[... {reply['cut']} more characters]"
    return text


@tool
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a text file in the workspace, creating folders as needed."""
    where = ctx.locate(path, write=True)
    request = {"op": "write", "path": str(where.real), "at": where.at, "content": content}
    await _file_op(ctx, path, request)
    return f"wrote {len(content)} characters to {path}"


@tool(read_only=True)
async def list_files(ctx: ToolContext, path: str = ".") -> str:
    """List a folder of the workspace: one entry per line, folders end with '/'."""
    where = ctx.locate(path)
    reply = await _file_op(ctx, path, {"op": "list", "path": str(where.real), "at": where.at})
    names = [str(n) for n in reply["names"]]
    if where.at == "." and ctx.roots:
        shown = {r.mounted_at for r in ctx.roots}
        names = [n for n in names if n.rstrip("/") not in shown]
        names += [
            f"{r.mounted_at}/ (mounted{', read-only' if r.read_only else ''})" for r in ctx.roots
        ]
    return "\n".join(names) if names else "(empty)"


BUILTIN_TOOLS = (shell, read_file, write_file, list_files)
"""The tools every run offers unless told otherwise."""
