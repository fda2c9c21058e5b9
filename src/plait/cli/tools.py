"""``plait tools``: the tools a run would offer, and their schemas; ``--mcp`` for runs.

The selection is ``plait run``'s: the built-in four, or ``--tools a,b`` of them,
or none with ``--no-tools``; then every ``--mcp`` server's tools, and with
``--session`` the servers that session's ``mcp_servers`` setting names (when the
built-ins are not chosen by hand, as a run adds them). Listing an MCP server
starts it (or connects to it), asks for its tools, and stops it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import click
from rich.table import Table

from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    console,
    echo_json,
    open_client,
    pass_settings,
)
from plait.cli._turns import run_options, session_for, tools_from
from plait.errors import InvalidArgumentError
from plait.records import JSONValue
from plait.session import Session
from plait.tools import BUILTIN_TOOLS, MCPServer, Offered, Tool, Toolset
from plait.tools.base import duplicate_names
from plait.tools.mcp import servers_from_settings

__all__ = ["mcp_option", "mcp_servers_from", "offered_tools", "tools_command"]


def mcp_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--mcp COMMAND_OR_URL`` (repeatable): an MCP server whose tools this run offers."""
    return click.option(
        "--mcp",
        "mcp_targets",
        metavar="COMMAND_OR_URL",
        multiple=True,
        help="Offer an MCP server's tools: a command line (stdio) or an http(s):// URL "
        "(streamable HTTP). Repeatable.",
    )(func)


def mcp_servers_from(targets: Sequence[str]) -> list[MCPServer]:
    """The servers ``--mcp`` names (checked before anything is made).

    Raises:
        click.BadParameter: an empty command line or a bad URL.
    """
    try:
        return [MCPServer(t) for t in targets]
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc), param_hint="--mcp") from exc


def offered_tools(
    chosen: list[Tool] | None, servers: Sequence[MCPServer], session: Session | None
) -> list[Offered] | None:
    """What a run offers: ``chosen`` (None: the built-ins and the session's servers) + servers.

    None when nothing differs from a run's own default (the session adds its servers).
    """
    if not servers:
        return None if chosen is None else list(chosen)
    offered: list[Offered] = list(BUILTIN_TOOLS if chosen is None else chosen)
    if chosen is None and session is not None and session.transcript.stored:
        offered.extend(servers_from_settings(session.settings))
    offered.extend(servers)
    return offered


async def _listed(offered: Sequence[Offered]) -> list[tuple[Tool, str]]:
    """The tools ``offered`` gives, with where each comes from (each server opened, closed)."""
    rows: list[tuple[Tool, str]] = []
    for item in offered:
        if isinstance(item, Toolset):
            async with item.open() as tools:
                rows.extend((t, f"mcp: {_label(item, t)}") for t in tools)
        else:
            rows.append((item, "built-in" if item in BUILTIN_TOOLS else "given"))
    twice = duplicate_names(t.name for t, _ in rows)
    if twice:  # a run would refuse them too
        raise InvalidArgumentError(f"tool names must be unique: {', '.join(twice)}")
    return rows


def _label(toolset: Toolset, tool: Tool) -> str:
    prefixed = isinstance(toolset, MCPServer) and toolset.prefix and "__" in tool.name
    return tool.name.split("__", 1)[0] if prefixed else toolset.name


@click.command("tools", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--session",
    "session_id",
    metavar="ID",
    help="Add the MCP servers this stored session's settings name.",
)
@click.option("--json", "as_json", is_flag=True, help="Print each tool's JSON schema.")
@mcp_option
@run_options
@pass_settings
def tools_command(
    settings: Settings,
    session_id: str | None,
    as_json: bool,
    mcp_targets: tuple[str, ...],
    settings_pairs: tuple[tuple[str, str], ...],
    no_tools: bool,
    tool_names: str | None,
) -> None:
    """List the tools a run would offer the model (`--json`: with their schemas).

    The same options choose them as for `plait run`: `--no-tools`, `--tools
    read_file,list_files`, `--mcp COMMAND_OR_URL` (repeatable). MCP tools are
    named `<server>__<tool>`; listing them starts each server and stops it again.
    """
    if settings_pairs:
        raise click.UsageError("-o sets model settings; plait tools lists tools only")
    chosen = tools_from(no_tools, tool_names)
    servers = mcp_servers_from(mcp_targets)
    session: Session | None = None
    if session_id is not None:
        session = session_for(open_client(settings), session_id, False)
    offered: list[Offered] = list(BUILTIN_TOOLS if chosen is None else chosen)
    if chosen is None and session is not None and session.transcript.stored:
        offered.extend(servers_from_settings(session.settings))
    listed = asyncio.run(_listed([*offered, *servers]))
    if as_json:
        rows: list[JSONValue] = []
        for t, source in listed:
            rows.append({**t.spec(), "source": source})
        echo_json(rows)
        return
    out = console()
    if not listed:
        out.print("no tools: the model is offered none")
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    for column in ("name", "from", "description"):
        table.add_column(column, overflow="fold")
    for t, source in listed:
        table.add_row(t.name, source, t.description.split("\n")[0])
    out.print(table)
