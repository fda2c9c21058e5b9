"""The ``plait`` command: thin click commands grouped by noun.

``plait sessions ...`` (``sessions.py``) lists, shows, draws, branches,
renames and deletes sessions; ``plait db ...`` (``db.py``) looks after the
SQLite file; ``plait demo`` (``demo.py``) is the agent run behind ``make demo``
(the embedded model, no key); ``plait import`` (``interop.py``) makes a session from a
transcript file; ``plait chat`` (``chat.py``) and ``plait run`` (``run.py``) talk to a model;
``plait tools`` (``tools.py``) lists the tools a run would offer.
Every command takes ``-h``; the root options choose the store
and the workspace; every :class:`plait.errors.PlaitError` ends the command
with a one-line message and exit code 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from plait.cli._common import CONTEXT_SETTINGS, PlaitGroup, Settings
from plait.cli.chat import chat_command
from plait.cli.compaction import compact_command, uncompact_command
from plait.cli.context import context_command
from plait.cli.db import db_group
from plait.cli.demo import demo_command
from plait.cli.export import export_command, stats_command
from plait.cli.interop import import_command
from plait.cli.run import run_command
from plait.cli.serve import serve_command
from plait.cli.sessions import sessions_group
from plait.cli.token import token_group
from plait.cli.tools import tools_command

__all__ = ["cli", "main"]


@click.group(cls=PlaitGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="plait", prog_name="plait")
@click.option(
    "--store",
    envvar="PLAIT_STORE",
    show_envvar=True,
    metavar="PATH_OR_URL",
    help=(
        "The store: a SQLite file, a sqlite:///path URL, or :memory:. "
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


cli.add_command(sessions_group)
cli.add_command(db_group)
cli.add_command(demo_command)
cli.add_command(export_command)
cli.add_command(stats_command)
cli.add_command(import_command)
cli.add_command(compact_command)
cli.add_command(uncompact_command)
cli.add_command(serve_command)
cli.add_command(context_command)
cli.add_command(chat_command)
cli.add_command(run_command)
cli.add_command(token_group)
cli.add_command(tools_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the plait command.

    Args:
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    cli.main(args=list(argv) if argv is not None else None, prog_name="plait")
