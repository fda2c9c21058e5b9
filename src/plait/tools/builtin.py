"""The built-in tools: shell, read_file, write_file, list_files, confined to the sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import os

from plait.tools.base import ToolContext, ToolError, ToolOutcome, run_blocking, tool

__all__ = ["BUILTIN_TOOLS", "list_files", "read_file", "shell", "write_file"]

_MAX_TIMEOUT = 600


@tool
async def shell(ctx: ToolContext, command: str, timeout: int = 60) -> ToolOutcome:
    """Run a shell command in the workspace; returns its exit code and output.

    The output (stdout and stderr together) is cut to the context's limit; a
    command still running after ``timeout`` seconds is killed.
    """
    if not 1 <= timeout <= _MAX_TIMEOUT:
        raise ToolError(f"timeout must be between 1 and {_MAX_TIMEOUT} seconds")
    proc = await asyncio.create_subprocess_shell(
        command,
        cwd=ctx.root,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # so a timeout kills the whole process group
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        await proc.wait()
        return ToolOutcome(False, f"timed out after {timeout} s (killed)")
    except asyncio.CancelledError:  # the run was stopped: the command must not outlive it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        raise
    text = out.decode("utf-8", "replace")
    code = proc.returncode
    return ToolOutcome(code == 0, f"exit code {code}\n{text}")


@tool
async def read_file(ctx: ToolContext, path: str, max_chars: int = 100_000) -> str:
    """Read a text file of the workspace (paths are relative to it)."""
    target = ctx.resolve(path)
    if not target.is_file():
        raise ToolError(f"{path!r} is not a file")
    text: str = await run_blocking(lambda: target.read_text("utf-8", errors="replace"))
    if len(text) > max_chars:
        return f"{text[:max_chars]}\n[... {len(text) - max_chars} more characters]"
    return text


@tool
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write a text file in the workspace, creating folders as needed."""
    target = ctx.resolve(path, write=True)
    if target.is_dir():
        raise ToolError(f"{path!r} is a folder")

    def write() -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, "utf-8")

    await run_blocking(write)
    return f"wrote {len(content)} characters to {path}"


@tool
async def list_files(ctx: ToolContext, path: str = ".") -> str:
    """List a folder of the workspace: one entry per line, folders end with '/'."""
    target = ctx.resolve(path)
    if not target.is_dir():
        raise ToolError(f"{path!r} is not a folder")
    names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in target.iterdir())
    if path in (".", "") and ctx.roots:
        names += [
            f"{r.mounted_at}/ (mounted{', read-only' if r.read_only else ''})" for r in ctx.roots
        ]
    return "\n".join(names) if names else "(empty)"


BUILTIN_TOOLS = (shell, read_file, write_file, list_files)
"""The tools every run offers unless told otherwise."""
