"""What every ``plait`` command shares: settings, error handling, output helpers.

Commands stay thin: they parse options, call the public API, and print. The
root group turns every :class:`plait.errors.PlaitError` into a one-line
``Error: ...`` on stderr with exit code 1, so no command needs its own
``try``.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

import click
from rich.console import Console

from plait._ids import is_session_id
from plait.cli._terminal import SafeConsole, safe
from plait.errors import PlaitError, StoreCorruptWarning

if TYPE_CHECKING:  # loaded by the commands that open a store, not by `plait --help`
    from plait._prefix import Described
    from plait.client import Client, SessionInfo
    from plait.records import JSONLike, JSONValue, Message, Record
    from plait.session import Session

__all__ = [
    "CONTEXT_SETTINGS",
    "PlaitGroup",
    "Settings",
    "age",
    "check_store_file",
    "checked_id",
    "console",
    "described_json",
    "echo_json",
    "for_store",
    "info_json",
    "local_time",
    "message_json",
    "open_client",
    "open_session",
    "pass_settings",
    "record_json",
    "short_operator",
    "sqlite_file",
    "store_file",
]

CONTEXT_SETTINGS: Final[dict[str, Any]] = {"help_option_names": ["-h", "--help"]}
"""Click context settings for every command: ``-h`` is ``--help`` everywhere."""


def checked_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An option naming a new session's id: one that can name no session is refused first."""
    if value is not None and not is_session_id(value):
        raise click.BadParameter(
            f"{value!r} is not a session id (1 to 200 printable characters, no white space "
            "at either end, not '.' or '..')",
            ctx,
            param,
        )
    return value


@dataclass(frozen=True, slots=True)
class Settings:
    """The root options, resolved, handed to every command."""

    store: str
    """The store to open: a path, a ``sqlite://`` URL, or ``:memory:``."""
    workspace: Path
    """The workspace folder whose sessions the commands see."""
    store_given: bool = False
    """Whether the store came from ``--store`` or ``$PLAIT_STORE`` (not the default file)."""
    workspace_given: bool = False
    """Whether ``--workspace`` was given (not the working directory)."""

    @classmethod
    def resolve(cls, store: str | None, workspace: Path | None) -> Settings:
        """Fill in the defaults of the root options.

        Args:
            store: ``--store`` (click already read ``$PLAIT_STORE`` into it), or None.
            workspace: ``--workspace``, or None for the working directory.

        Returns:
            Settings with the default store file from :func:`plait.store.default_path`
            (which honours ``$PLAIT_HOME``) when no store was named.
        """
        from plait.store import default_path

        chosen = store or None  # an empty $PLAIT_STORE means "not set", as in open_store
        return cls(
            store=chosen if chosen is not None else str(default_path()),
            workspace=workspace if workspace is not None else Path.cwd(),
            store_given=chosen is not None,
            workspace_given=workspace is not None,
        )

    def root_args(self, *, workspace: bool = True) -> str:
        """The root options to repeat in a suggested command, shell-quoted (may be empty).

        Args:
            workspace: include ``--workspace`` (only commands that filter by it need it).
        """
        parts: list[str] = []
        if self.store_given:
            parts += ["--store", self.store]
        if workspace and self.workspace_given:
            parts += ["--workspace", str(self.workspace)]
        return "".join(f" {shlex.quote(p)}" for p in parts)


pass_settings = click.make_pass_decorator(Settings)
"""Decorator passing the root :class:`Settings` as a command's first argument."""


def open_client(settings: Settings, *, create: bool = False) -> Client:
    """Open a client on the settings' store and workspace, closed when the command ends.

    Args:
        settings: the root options.
        create: the command makes something new (``run``, ``chat``, ``import`` ...), so
            a store file that is not there yet is made. Every other command reads, or
            changes what exists, and a store that is not there is an error: a typo in
            ``--store`` must not leave a new database (and its folders) behind.

    Raises:
        StoreNotFoundError: without ``create``, the store file (or its folder) is not there.
        NotAStoreError: the file named is not a SQLite database; it is left untouched.
        PlaitError: the store cannot be opened (turned into a clean error by the root group).
    """
    ctx = click.get_current_context()
    check_store_file(settings, create=create)
    from plait.client import Client

    return ctx.with_resource(Client(settings.workspace, store=settings.store))


SQLITE_HEADER: Final = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def sqlite_file(settings: Settings) -> Path | None:
    """The SQLite file the settings' store names; None for ``:memory:`` or another engine."""
    target = settings.store
    if target == ":memory:":
        return None
    if target.startswith("sqlite://"):
        target = target.removeprefix("sqlite://")
    elif "://" in target:
        return None
    return Path(target).expanduser()


def check_store_file(settings: Settings, *, create: bool) -> None:
    """Refuse a store file that is missing (unless ``create``) or is not a SQLite database.

    Raises:
        StoreNotFoundError: without ``create``, nothing (or an empty file) is at the path.
        NotAStoreError: a folder, or a file whose first bytes are not SQLite's header.
    """
    from plait.errors import NotAStoreError, StoreNotFoundError

    path = sqlite_file(settings)
    if path is None:
        return
    try:
        info = path.stat()
    except FileNotFoundError:
        if create:
            return
        folder = "" if path.parent.is_dir() else f" (nor is its folder {path.parent})"
        raise StoreNotFoundError(
            str(path),
            f"no store at {path}{folder}; nothing was created "
            "(plait run, plait chat and plait import make one)",
        ) from None
    except OSError as exc:
        raise StoreNotFoundError(str(path), f"cannot read {path}: {exc.strerror}") from None
    if path.is_dir():
        raise NotAStoreError(str(path), f"{path} is a folder, not a store file")
    if info.st_size == 0:
        if create:
            return
        raise StoreNotFoundError(str(path), f"{path} is empty: no store has been made there")
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreNotFoundError(str(path), f"cannot read {path}: {exc.strerror}") from None
    if head != SQLITE_HEADER:
        raise NotAStoreError(
            str(path),
            f"{path} is not a plait store: it is not a SQLite database file "
            "(its first bytes are not SQLite's); nothing was written to it",
        )


def for_store(text: str, settings: Settings | None) -> str:
    """``text`` with each command it suggests (`` `plait ...` ``) aimed at the settings' store.

    The library's hints name bare ``plait`` commands; run as they are, they would
    look at the default store, not the one ``--store`` (or ``$PLAIT_STORE``) named.
    """
    if settings is None or not settings.store_given:
        return text
    # A command that names its own store (`plait --store NEW ...`) is left as it is.
    return _BARE_PLAIT.sub(f"`plait{settings.root_args(workspace=False)} ", text)


_BARE_PLAIT: Final = re.compile(r"`plait (?!--store)")


def open_session(client: Client, session_id: str) -> Session:
    """A handle on the session ``session_id`` names: a full id, a unique prefix, or ``latest``.

    Raises:
        SessionNotFoundError: nothing matches.
        AmbiguousSessionIdError: several sessions share the prefix (it names them).
    """
    from plait._prefix import resolve_session_id

    return client.sessions.open(resolve_session_id(client, session_id))


def store_file(settings: Settings) -> Path:
    """The SQLite file the settings name (for ``plait db``).

    Raises:
        click.UsageError: the store is ``:memory:`` or a URL that is not ``sqlite://``.
    """
    target = settings.store
    if target == ":memory:":
        raise click.UsageError("this command needs a store file, not ':memory:'")
    if target.startswith("sqlite://"):
        target = target.removeprefix("sqlite://")
    elif "://" in target:
        scheme = target.split("://", 1)[0]
        raise click.UsageError(f"this command needs a SQLite store, not a {scheme!r} URL")
    return Path(target).expanduser()


class PlaitGroup(click.Group):
    """A click group that reports plait's errors as one line, never a traceback.

    A :class:`PlaitError` (an unknown session id, a bad argument, a store that
    cannot be opened) and an :class:`OSError` (a store folder that cannot be
    created) become a :class:`click.ClickException`: ``Error: <message>`` on
    stderr and exit code 1. Anything else is a bug and keeps its traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        """Invoke the command, translating plait's errors (and showing its warnings)."""
        with warnings.catch_warnings():
            # A listing that left out a damaged session says so on one line of stderr,
            # each time (Python's default shows a warning once, with a source line).
            warnings.simplefilter("always", StoreCorruptWarning)
            warnings.showwarning = functools.partial(_show_warning, warnings.showwarning)
            try:
                return super().invoke(ctx)
            except (PlaitError, OSError) as exc:
                settings = ctx.find_object(Settings)
                raise click.ClickException(for_store(_one_line(exc), settings)) from exc


def _show_warning(
    show: Callable[..., None],
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Print plait's warning as ``warning: <message>`` on stderr, on one terminal-safe line.

    Any other warning goes to ``show``, the way it was shown before.
    """
    if not issubclass(category, StoreCorruptWarning):
        show(message, category, filename, lineno, file, line)
        return
    ctx = click.get_current_context(silent=True)
    settings = ctx.find_object(Settings) if ctx is not None else None
    said = for_store(_one_line(Exception(str(message))), settings)
    click.echo(f"warning: {safe(said)}", err=True)


def _one_line(exc: BaseException) -> str:
    """The error's message on one line (driver messages may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def console() -> Console:
    """A rich console on the current stdout (looked up per call, so tests can capture it).

    It is a :class:`~plait.cli._terminal.SafeConsole`: stored text it prints can hold no
    control sequence the terminal would act on.
    """
    return SafeConsole(highlight=False)


def echo_json(value: JSONLike) -> None:
    """Print ``value`` as indented JSON on stdout (plain text, never styled)."""
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def info_json(info: SessionInfo) -> dict[str, JSONValue]:
    """A listed session as the JSON object ``sessions list --json`` prints."""
    return {
        "id": info.id,
        "title": info.title,
        "created_at": _iso(info.created_at),
        "updated_at": _iso(info.updated_at),
        "length": info.length,
        "workspace": info.workspace,
        "parent_session_ids": list(info.parent_session_ids),
        "lineage_operator": info.lineage_operator,
    }


def described_json(described: Described) -> dict[str, JSONValue]:
    """A listed session as ``sessions list --json`` prints it: :func:`info_json` and more.

    ``short_id`` is a prefix unique in the store, ``first_prompt`` the first user
    message's text (None if none), ``source`` the agent that wrote the transcript.
    """
    return {
        **info_json(described.info),
        "short_id": described.short,
        "first_prompt": described.first_prompt,
        "source": described.source,
    }


def message_json(message: Message) -> dict[str, JSONValue]:
    """A message as JSON: its ``to_dict()`` form plus its position ``seq``."""
    return {"seq": message.seq, **message.to_dict()}


def record_json(record: Record) -> dict[str, JSONValue]:
    """A record as JSON: position, id, kind, time, tokens, meta and payload."""
    return {
        "seq": record.seq,
        "id": record.id,
        "kind": record.kind,
        "created_at": _iso(record.created_at),
        "tokens": record.tokens,
        "meta": dict(record.meta),
        "payload": record.payload,
    }


def local_time(moment: datetime) -> str:
    """A UTC moment in the user's local time, to the minute, for tables."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M")


def age(moment: datetime, now: datetime | None = None) -> str:
    """How long ago ``moment`` was, briefly: ``just now``, ``5m ago``, ``3h ago``, ``2d ago``.

    Past a month, the local date (``2026-01-31``).
    """
    seconds = ((now or datetime.now(moment.tzinfo)) - moment).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)}m ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h ago"
    if seconds < 86400 * 31:
        return f"{int(seconds // 86400)}d ago"
    return moment.astimezone().strftime("%Y-%m-%d")


def short_operator(operator: str | None) -> str:
    """``Session.fork_at`` -> ``fork_at``; a root (no operator) -> ``root``."""
    if not operator:
        return "root"
    return operator.removeprefix("Session.")
