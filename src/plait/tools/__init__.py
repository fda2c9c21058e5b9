"""Tools an agent can call: typed Python functions with JSON schemas, run in a sandbox.

A tool never crashes a run on bad input: a wrong argument, a path that would
leave the sandbox, a write to a read-only root or a command that times out all
come back as a *failed* :class:`ToolOutcome` the model can read. ``@tool``
builds a tool from a typed function through pydantic (:mod:`plait.tools.typed`);
:class:`~plait.tools.mcp.MCPServer` offers the tools of a Model Context
Protocol server (the ``[mcp]`` extra) as a :class:`Toolset` a run opens.
"""

from plait.tools.base import (
    Offered,
    Tool,
    ToolContext,
    ToolError,
    ToolOutcome,
    Toolset,
    open_tools,
    tool,
)
from plait.tools.builtin import BUILTIN_TOOLS, list_files, read_file, shell, write_file
from plait.tools.mcp import MCPServer

__all__ = [
    "BUILTIN_TOOLS",
    "MCPServer",
    "Offered",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolOutcome",
    "Toolset",
    "list_files",
    "open_tools",
    "read_file",
    "shell",
    "tool",
    "write_file",
]
