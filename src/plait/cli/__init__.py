"""The ``plait`` command: thin click commands grouped by noun.

``plait sessions ...`` (``sessions.py``) lists, shows, draws, branches,
renames and deletes sessions; ``plait db ...`` (``db.py``) looks after the
SQLite file; ``plait demo`` (``demo.py``) is the agent run behind ``make demo``
(the embedded model, no key); ``plait import`` (``interop.py``) makes a session from a
transcript file; ``plait chat`` (``chat.py``) and ``plait run`` (``run.py``) talk to a model.
Every command takes ``-h``; the root options choose the store
and the workspace; every :class:`plait.errors.PlaitError` ends the command
with a one-line message and exit code 1.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import click

from plait.cli._common import CONTEXT_SETTINGS, PlaitGroup, Settings

__all__ = ["COMMANDS", "cli", "main"]

COMMANDS: Final[dict[str, tuple[str, str, str]]] = {
    "chat": (
        "plait.cli.chat",
        "chat_command",
        "Talk with an agent in the terminal; every turn is stored as it happens.",
    ),
    "compact": (
        "plait.cli.compaction",
        "compact_command",
        "Fold the older part of a session into a summary now (nothing is deleted).",
    ),
    "context": (
        "plait.cli.context",
        "context_command",
        "Show how full a session's context is, with a bar per source.",
    ),
    "db": (
        "plait.cli.db",
        "db_group",
        "Inspect and upgrade the store (a SQLite file or a PostgreSQL URL).",
    ),
    "demo": (
        "plait.cli.demo",
        "demo_command",
        "Run an agent on a session with the embedded model, then fork, merge and draw lineage.",
    ),
    "export": (
        "plait.cli.export",
        "export_command",
        "Write a session's conversation to a file; print the file's absolute path.",
    ),
    "import": (
        "plait.cli.interop",
        "import_command",
        "Create a session from a transcript FILE; print what was imported.",
    ),
    "run": (
        "plait.cli.run",
        "run_command",
        "Send TEXT to a session's model and run its tool calls until it is done.",
    ),
    "serve": (
        "plait.cli.serve",
        "serve_command",
        "Serve the sessions over HTTP: the API, SSE event streams and a web page.",
    ),
    "sessions": (
        "plait.cli.sessions",
        "sessions_group",
        "List, inspect, branch, rename and delete stored sessions.",
    ),
    "stats": (
        "plait.cli.export",
        "stats_command",
        "Show what sessions hold: entries, replies, tokens and the cached share.",
    ),
    "token": (
        "plait.cli.token",
        "token_group",
        "Durable bearer tokens for plait serve (only their hashes are stored).",
    ),
    "tools": (
        "plait.cli.tools",
        "tools_command",
        "List the tools a run would offer the model (`--json`: with their schemas).",
    ),
    "uncompact": (
        "plait.cli.compaction",
        "uncompact_command",
        "Undo a session's newest compaction: what it folded shows again.",
    ),
}
"""Each command: its module, its name there, and the first paragraph of its help.

A command's module is imported when the command runs (or its own help is asked
for): ``plait --help`` lists them from this table, so it loads no command and
none of the library behind them. ``tests/cli`` checks the table against the commands.
"""


class _LazyGroup(PlaitGroup):
    """The root group: commands loaded from :data:`COMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, sorted (as click lists them)."""
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported now if it was not yet."""
        found = self.commands.get(cmd_name)
        if found is None and cmd_name in COMMANDS:
            module, attr, _ = COMMANDS[cmd_name]
            found = getattr(importlib.import_module(module), attr)
            assert isinstance(found, click.Command)
            self.commands[cmd_name] = found
        return found

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands with their short help from the table (none is loaded)."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            if name in COMMANDS:
                # A bare command with that help shortens it as the real one would.
                stand_in = click.Command(name, help=COMMANDS[name][2])
                rows.append((name, stand_in.get_short_help_str(limit)))
            else:
                command = self.commands[name]
                if not command.hidden:
                    rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="plait", prog_name="plait")
@click.option(
    "--store",
    envvar="PLAIT_STORE",
    show_envvar=True,
    metavar="PATH_OR_URL",
    help=(
        "The store: a SQLite file, a sqlite:///path URL, :memory:, or a "
        "postgresql:// URL (the [postgres] extra). "
        "Default: the file in $PLAIT_HOME, else ~/.local/share/plait/plait.db."
    ),
)
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="The workspace whose sessions to use. Default: the working directory.",
)
@click.pass_context
def cli(ctx: click.Context, store: str | None, workspace: Path | None) -> None:
    """plait: durable, branchable sessions for LLM agents.

    Start with `plait demo`, then look around with `plait sessions list`.
    """
    ctx.obj = Settings.resolve(store, workspace)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the plait command.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    cli.main(args=list(argv) if argv is not None else None, prog_name="plait")
