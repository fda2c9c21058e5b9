"""Tools an agent can call: typed Python functions with JSON schemas, run in a sandbox.

A tool never crashes a run on bad input: a wrong argument, a path that would
leave the sandbox, a write to a read-only root or a command that times out all
come back as a *failed* :class:`ToolOutcome` the model can read.
"""

from plait.tools.base import Tool, ToolContext, ToolError, ToolOutcome, tool
from plait.tools.builtin import BUILTIN_TOOLS, list_files, read_file, shell, write_file

__all__ = [
    "BUILTIN_TOOLS",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "list_files",
    "read_file",
    "shell",
    "tool",
    "write_file",
]
