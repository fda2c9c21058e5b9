"""``plait db ...``: the store itself: where it is, its schema, its health.

``migrate``, ``check`` and ``prune-checkpoints`` work on a SQLite file and on a
``postgresql://`` URL; ``path`` names the SQLite file.
"""

from __future__ import annotations

from contextlib import closing

import click

from plait.cli._common import CONTEXT_SETTINGS, Settings, pass_settings, store_file
from plait.client import Client
from plait.errors import SchemaOutdatedError
from plait.session.checkpoints import PRUNE_GRACE
from plait.store import SQLiteStore
from plait.store.postgres import PostgresStore

__all__ = ["db_group"]


@click.group("db", context_settings=CONTEXT_SETTINGS)
def db_group() -> None:
    """Inspect and upgrade the store (a SQLite file or a PostgreSQL URL)."""


def _is_postgres(settings: Settings) -> bool:
    return settings.store.startswith(("postgresql://", "postgres://"))


def _open(settings: Settings, *, auto_migrate: bool) -> SQLiteStore | PostgresStore:
    """Open the settings' store, closed when the command ends."""
    store: SQLiteStore | PostgresStore
    if _is_postgres(settings):
        store = PostgresStore(settings.store, auto_migrate=auto_migrate)
    else:
        store = SQLiteStore(store_file(settings), auto_migrate=auto_migrate)
    click.get_current_context().with_resource(closing(store))
    return store


@db_group.command("path", context_settings=CONTEXT_SETTINGS)
@pass_settings
def path(settings: Settings) -> None:
    """Print the path of the store file the other commands use."""
    click.echo(str(store_file(settings).resolve()))


@db_group.command("migrate", context_settings=CONTEXT_SETTINGS)
@pass_settings
def migrate(settings: Settings) -> None:
    """Upgrade the store's schema to the one this plait writes (creating the file if needed).

    Prints the schema versions applied, or "up to date".
    """
    fresh = False if _is_postgres(settings) else not store_file(settings).exists()
    try:
        store = _open(settings, auto_migrate=False)
    except SchemaOutdatedError:
        # Opening with auto_migrate applies every pending migration, each in
        # its own transaction; the store does not say which ones it applied.
        store = _open(settings, auto_migrate=True)
        click.echo(f"migrated {store.location} to schema version {store.schema_version}")
        return
    # A new file is migrated as it is opened; anything still pending is applied here.
    applied = store.migrate()
    if fresh:
        click.echo(f"created {store.location} at schema version {store.schema_version}")
    elif applied:
        versions = ", ".join(map(str, applied))
        click.echo(
            f"applied schema version(s) {versions} to {store.location} "
            f"(now at {store.schema_version})"
        )
    else:
        click.echo(f"up to date (schema version {store.schema_version})")


@db_group.command("check", context_settings=CONTEXT_SETTINGS)
@pass_settings
def check(settings: Settings) -> None:
    """Check the store file's integrity: SQLite's own check, then every session's rows.

    Prints "ok", or each problem found and exits with status 1. Does not
    migrate: an outdated schema is reported with the command that upgrades it.
    """
    if not _is_postgres(settings):
        file = store_file(settings)
        if not file.exists():
            raise click.ClickException(f"no store at {file}")
    store = _open(settings, auto_migrate=False)
    problems = store.integrity_check()
    if not problems:
        click.echo("ok")
        return
    for problem in problems:
        click.echo(problem)
    raise click.ClickException(f"{len(problems)} problem(s) in {store.location}")


@db_group.command("prune-checkpoints", context_settings=CONTEXT_SETTINGS)
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=PRUNE_GRACE,
    show_default=True,
    help="Seconds: objects used more recently are kept (a tool call still running).",
)
@pass_settings
def prune_checkpoints(settings: Settings, dry_run: bool, grace: float) -> None:
    """Remove workspace checkpoint objects no live session or branch references.

    Every session of the store is read, in every workspace; a checkpoint any tool
    record still names stays, with everything it needs.
    """
    store = _open(settings, auto_migrate=False)
    done = Client(".", store=store).prune_checkpoints(dry_run=dry_run, grace=grace)
    verb = "would remove" if done.dry_run else "removed"
    click.echo(
        f"{verb} {done.removed} checkpoint object(s); "
        f"{done.referenced} checkpoint(s) still referenced"
    )
