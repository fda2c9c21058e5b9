"""``plait db ...``: the store itself: where it is, its schema, its health.

``migrate``, ``check``, ``reindex``, ``prune-checkpoints``, ``retain`` and ``rotate-key``
work on a SQLite file and on a ``postgresql://`` URL; ``path`` names the SQLite file,
``recover`` copies what a damaged one still holds, and ``keygen`` prints a new encryption
key. An encrypted store is opened with ``$PLAIT_ENCRYPTION_KEY`` (D320).
"""

from __future__ import annotations

import json
import os
from contextlib import closing
from pathlib import Path

import click

from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    check_store_file,
    for_store,
    pass_settings,
    store_file,
)
from plait.cli._terminal import safe
from plait.client import Client
from plait.errors import InvalidArgumentError, SchemaOutdatedError, StoreCorruptError
from plait.session.checkpoints import PRUNE_GRACE, unheld
from plait.session.retention import Retained, parse_age
from plait.store import Problem, SQLiteStore, Store, new_encryption_key, salvage
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
@click.option(
    "--deep",
    is_flag=True,
    help="Also check every session row's layout, settings and scratchpad history.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the problems and hints as JSON.")
@pass_settings
def check(settings: Settings, deep: bool, as_json: bool) -> None:
    """Check the store: the database's own check, then every session's rows.

    Prints "ok", or each problem (by session and record) and what can save the
    rest, and exits with status 1. The plain check decodes every session row and
    every record (payload, meta, token tally); --deep also checks each row's
    layout, settings and scratchpad history. Does not
    migrate: an outdated schema is reported with the command that upgrades it.
    """
    postgres = _is_postgres(settings)
    where = settings.store if postgres else str(store_file(settings))
    notes: list[str] = []
    # Nothing there, or a file that was never a database: said as that, never "damaged".
    check_store_file(settings, create=False)
    try:
        store = _open(settings, auto_migrate=False)
    except StoreCorruptError as exc:
        problems = [Problem(f"the store cannot be opened: {exc}", engine=True)]
    else:
        where = store.location
        problems = store.check(deep=deep)
        if not problems:  # ids are read from records, which must read first
            notes = _unheld_notes(store)
    hints = [
        for_store(h, settings) for h in repair_hints(problems, where, postgres=postgres, deep=deep)
    ]
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": where,
                    "deep": deep,
                    "ok": not problems,
                    "problems": [p.to_json() for p in problems],
                    "hints": hints,
                    "notes": notes,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    elif not problems:
        click.echo("ok")
        for note in notes:
            click.echo(f"note: {safe(note)}")
    else:
        for problem in problems:
            click.echo(safe(str(problem)))
        for hint in hints:
            click.echo(f"hint: {safe(hint)}")
        raise click.ClickException(f"{len(problems)} problem(s) in {safe(where)}")
    if problems:
        click.get_current_context().exit(1)


def _unheld_notes(store: Store) -> list[str]:
    """What ``db check`` says of checkpoint ids sessions name but the store does not hold.

    Not damage (the records read): ids a bundle brought from another store, or forged.
    A restore to them fails; pruning ignores them.
    """
    found = unheld(store)
    by_session: dict[str, int] = {}
    for sessions in found.values():
        for session_id in sessions:
            by_session[session_id] = by_session.get(session_id, 0) + 1
    return [
        f"session {sid}: {n} workspace checkpoint id(s) this store does not hold (brought "
        "by an import, or forged): their files cannot be restored; pruning ignores them"
        for sid, n in sorted(by_session.items())
    ]


@db_group.command("recover", context_settings=CONTEXT_SETTINGS)
@click.argument("output", metavar="NEW_FILE", type=click.Path(dir_okay=False, path_type=Path))
@pass_settings
def recover(settings: Settings, output: Path) -> None:
    """Copy every row of a damaged store that can still be read into NEW_FILE.

    The damaged file is only read. Prints what was copied and what could not be
    read; then `plait --store NEW_FILE db check --deep` names each session with
    records missing. SQLite only: a PostgreSQL database is restored from a backup.
    """
    if _is_postgres(settings):
        raise click.UsageError("recover copies a SQLite file; restore PostgreSQL from a backup")
    done = salvage(store_file(settings), output)
    click.echo(
        f"copied {done.sessions} session row(s) and {done.records} record(s) to {done.target}"
    )
    if done.lost_sessions or done.lost_records or done.lost_tables:
        lost = [f"{done.lost_records} record(s)", f"{done.lost_sessions} session key(s)"]
        lost += [f"the table {t}" for t in done.lost_tables]
        click.echo(f"could not read: {', '.join(lost)}")
    click.echo(f"next: plait --store {done.target} db check --deep")


def repair_hints(problems: list[Problem], where: str, *, postgres: bool, deep: bool) -> list[str]:
    """What can save the rest of a store with these problems, one step a line."""
    if not problems:
        return []
    hints: list[str] = []
    damaged = any(p.engine or "cannot be read" in p.what for p in problems)
    if damaged and postgres:
        hints.append(
            "the server reports damaged storage: restore the database from a backup "
            "(pg_dump or point-in-time recovery); the server's log names the relation"
        )
    elif damaged:
        hints.append(f"copy {where} (with its -wal file) aside before changing anything")
        hints.append(
            "`plait db recover recovered.db` copies every row that can still "
            "be read into a new file (so does `sqlite3 FILE .recover`, in a sqlite3 shell "
            "built with the dbpage table); then `plait --store recovered.db db check --deep`"
        )
        hints.append(f"or restore {where} from a backup")
    first: dict[str, Problem] = {}
    for p in problems:
        if p.session_id is not None:
            first.setdefault(p.session_id, p)
    for sid, p in first.items():
        if p.kept:
            hints.append(
                f"`plait sessions fork {sid} --at {p.kept}` keeps the first {p.kept} "
                "message(s) of that session, all readable, in a new session"
            )
    if first:
        hints.append(
            "`plait sessions rm ID --yes` removes a damaged session once nothing more is "
            "wanted from it (its branches keep the records they share)"
        )
    if not deep:
        hints.append("`plait db check --deep` also checks each session row's layout and settings")
    return hints


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
    check_store_file(settings, create=False)  # a store that is not there has nothing to prune
    store = _open(settings, auto_migrate=False)
    done = Client(".", store=store).sessions.prune_checkpoints(dry_run=dry_run, grace=grace)
    verb = "would remove" if done.dry_run else "removed"
    click.echo(
        f"{verb} {done.removed} checkpoint object(s); "
        f"{done.referenced} checkpoint(s) still referenced"
        + (f", {done.unheld} of them not held by this store (ignored)" if done.unheld else "")
    )


@db_group.command("retain", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Remove sessions idle for longer than this: 30d, 12h, 90m, 45s, 2w.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed; change nothing.")
@click.option(
    "--vacuum",
    is_flag=True,
    help="Also rewrite the store where only that gives space back (an older SQLite file: "
    "VACUUM; PostgreSQL: VACUUM FULL, which locks each table while it runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_settings
def retain(settings: Settings, older_than: str, dry_run: bool, vacuum: bool, as_json: bool) -> None:
    """Remove every session idle for longer than AGE, in every workspace, and give the space back.

    A session is idle since its last write. Each one is erased with its hidden heads
    and the workspace checkpoints no kept session needs; a record a kept session
    reads (a fork's shared prefix) stays, so every kept session still resumes. A
    session with a run in progress or held open for writing by another process is
    kept, and named.
    """
    age = parse_age(older_than, "--older-than")  # checked before the store is opened
    check_store_file(settings, create=False)  # a store that is not there has nothing to remove
    store = _open(settings, auto_migrate=False)
    with Client(".", store=store) as client:
        done = client.sessions.retain(age, dry_run=dry_run, all_workspaces=True, vacuum=vacuum)
    if as_json:
        click.echo(json.dumps({"store": store.location, **done.to_dict()}, indent=2))
        return
    for line in retained_lines(done, postgres=_is_postgres(settings)):
        click.echo(safe(line))


def retained_lines(done: Retained, *, postgres: bool) -> list[str]:
    """What a retention did, in a few lines for a person."""
    since = done.cutoff.strftime("%Y-%m-%d %H:%M:%S UTC")
    verb = "would remove" if done.dry_run else "removed"
    heads = f" and {done.hidden_heads} hidden head(s)" if done.hidden_heads else ""
    lines = [
        f"{verb} {len(done.sessions)} session(s) idle since before {since}{heads}: "
        f"{done.records} record(s) ({_size(done.record_bytes)} of text), "
        f"{done.checkpoint_objects} checkpoint object(s)"
    ]
    lines.extend(f"  {session_id}" for session_id in done.sessions)
    if done.skipped:
        lines.append(f"kept {len(done.skipped)} idle session(s) in use (a run, or a writer):")
        lines.extend(f"  {session_id}" for session_id in done.skipped)
    if done.dry_run:
        lines.append("nothing changed (dry run)")
    elif done.bytes_after is not None and done.reclaimed != "nothing":
        now = _size(done.bytes_after)
        if postgres:
            lines.append(
                f"{done.reclaimed}: the deleted rows' space is reusable by later writes; "
                f"the tables hold {now}, {_size(done.bytes_freed)} less (PostgreSQL gives "
                "back only empty pages at a table's end unless --vacuum)"
            )
        else:
            free = f", {_size(done.free_bytes)} free inside it" if done.free_bytes else ""
            lines.append(
                f"gave back {_size(done.bytes_freed)} ({done.reclaimed}): "
                f"the store is {now}{free}"
            )
            if done.free_bytes and done.reclaimed == "free pages kept for reuse":
                lines.append(
                    "this older store file cannot shrink without a rewrite: "
                    "`plait db retain --vacuum` does it once"
                )
    return lines


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    if n < 1024:
        return f"{n} bytes"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@db_group.command("reindex", context_settings=CONTEXT_SETTINGS)
@pass_settings
def reindex(settings: Settings) -> None:
    """Rebuild the full-text index of every session's messages from the records.

    The index is kept in step with the records (on SQLite, brought up to them by each
    search); a rebuild is for an index a repair or an old backup left out of step
    (searches then miss or show stale text). Every record is read again, in one
    transaction.
    """
    check_store_file(settings, create=False)  # a store that is not there has nothing to index
    store = _open(settings, auto_migrate=False)
    store.reindex()
    click.echo(f"rebuilt the full-text index of {store.location}")


@db_group.command("keygen", context_settings=CONTEXT_SETTINGS)
def keygen() -> None:
    """Print a new encryption key (32 random bytes, URL-safe base64).

    A store opened with it in $PLAIT_ENCRYPTION_KEY while it is new (empty) keeps every
    session's content encrypted; keep the key apart from the store: without it nothing
    in the store can be read.
    """
    click.echo(new_encryption_key())


@db_group.command("rotate-key", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--new-key-env",
    default="PLAIT_NEW_ENCRYPTION_KEY",
    show_default=True,
    metavar="NAME",
    help="The environment variable that holds the new key (never given on the command line).",
)
@pass_settings
def rotate_key(settings: Settings, new_key_env: str) -> None:
    """Wrap the store's data keys by a new master key; no record is rewritten.

    The store is opened with the current key ($PLAIT_ENCRYPTION_KEY); afterwards it
    opens only with the new one.
    """
    new = os.environ.get(new_key_env)
    if not new:
        raise InvalidArgumentError(
            f"set ${new_key_env} to the new key (`plait db keygen` makes one)"
        )
    check_store_file(settings, create=False)
    store = _open(settings, auto_migrate=False)
    count = store.rotate_key(new)
    click.echo(
        f"re-wrapped {count} session key(s) of {store.location}; "
        "from now on open it with the new key"
    )
