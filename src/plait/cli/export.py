"""``plait export`` writes a session as a page or a bundle; ``plait stats`` shows sessions.

An export is written to the working directory unless ``-o`` says where, under a
name that never collides with another session's: ``plait-<slug of the title>-<id>``
(or ``plait-<id>`` when untitled, and always for a bundle, whose redaction a title
in its name would bypass), the whole id, since UUIDv7 ids made within a minute
share their first characters.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Final, cast

import click
from rich.table import Table
from rich.text import Text

from plait._checks import MAX_INT
from plait._files import export_target, write_atomically
from plait._ids import id_slug
from plait._prefix import resolve_session_id
from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    console,
    echo_json,
    open_client,
    open_session,
    pass_settings,
)
from plait.client import SessionStats
from plait.interop import to_claude_code_jsonl, to_openai_messages, write_bundle
from plait.interop.bundle import MODES, BundleMode
from plait.records import JSONValue
from plait.session import Session

__all__ = ["default_export_path", "export_command", "stats_command"]

_SLUG_CHARS: Final = 40


def _slug(title: str | None) -> str:
    """``"Fix the parser!"`` -> ``fix-the-parser``: ASCII letters, digits and dashes only."""
    if not title:
        return ""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    words = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return words[:_SLUG_CHARS].rstrip("-")


def default_export_path(session: Session, ext: str, titled: bool = True) -> Path:
    """Where an export of ``session`` goes when no path is given.

    Args:
        session: the session exported.
        ext: the extension without its dot (``html``, ``md``, ``bundle.json``).
        titled: put a slug of the title in the name (not for bundles, whose redaction
            the title would bypass).

    Returns:
        ``plait-<slug>-<id>.<ext>`` (``plait-<id>.<ext>`` untitled or not ``titled``) in
        the working directory, the id as :func:`~plait._ids.id_slug` makes it a file
        name (a UUIDv7 as it is).
    """
    slug = _slug(session.title) if titled else ""
    name = id_slug(session.id)
    stem = f"plait-{slug}-{name}" if slug else f"plait-{name}"
    return Path.cwd() / f"{stem}.{ext}"


@click.command("export", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.option(
    "--html/--md",
    "as_html",
    default=True,
    help="Write one self-contained HTML page (default) or a Markdown document.",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="PATH",
    help=(
        "Where to write, relative to the working directory. "
        "Default: plait-<title slug>-<id>.html (.md; a bundle: plait-<id>.bundle.json) "
        "in the working directory."
    ),
)
@click.option(
    "--bundle",
    "bundle_mode",
    type=click.Choice(MODES),
    default=None,
    metavar="MODE",
    help=(
        "Write a portable JSON bundle instead of a page: sanitized (secrets redacted), "
        "local (as stored) or replay-only (no prompt or tool text)."
    ),
)
@click.option(
    "--as",
    "as_format",
    type=click.Choice(["openai", "claude-code"]),
    default=None,
    help=(
        "Write the conversation in another agent's format instead: OpenAI chat messages "
        "(a JSON array) or a Claude Code session (JSONL); `plait import` reads both back."
    ),
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="REGEX",
    help="With --bundle: also redact what this regular expression matches (repeatable).",
)
@click.option(
    "--follow-symlinks",
    is_flag=True,
    help="If the output path is a symlink, write to the regular file it names (else refused).",
)
@pass_settings
def export_command(
    settings: Settings,
    session_id: str,
    as_html: bool,
    output: str | None,
    bundle_mode: str | None,
    as_format: str | None,
    redact: tuple[str, ...],
    follow_symlinks: bool,
) -> None:
    """Write a session's conversation to a file; print the file's absolute path.

    The page shows the transcript as `plait sessions show` does, beside the
    request the next turn would send, under the session's lineage. It loads
    nothing and runs no script. With --bundle, the file is a plait.bundle.v1
    JSON bundle that `plait import` reads back.
    """
    if redact and bundle_mode is None:
        raise click.UsageError("--redact needs --bundle")
    if as_format is not None and bundle_mode is not None:
        raise click.UsageError("give --as or --bundle, not both")
    client = open_client(settings)
    session = open_session(client, session_id)
    if as_format is not None:
        ext = "openai.json" if as_format == "openai" else "claude-code.jsonl"
        name = output if output is not None else str(default_export_path(session, ext, False))
        if as_format == "openai":
            text = json.dumps(to_openai_messages(session), ensure_ascii=False, indent=1) + "\n"
        else:
            text = to_claude_code_jsonl(session)
        where = export_target(
            name, session.workspace.name, session.id, ext, follow_symlinks=follow_symlinks
        )
        click.echo(write_atomically(where, text))
        return
    ext = "bundle.json" if bundle_mode is not None else "html" if as_html else "md"
    # A bundle's name holds no title: a sanitized bundle must not carry a secret it redacted.
    named = bundle_mode is None
    target = output if output is not None else str(default_export_path(session, ext, named))
    if bundle_mode is not None:
        mode = cast(BundleMode, bundle_mode)  # click.Choice(MODES) checked it
        path = write_bundle(
            session, target, mode=mode, redact=redact, follow_symlinks=follow_symlinks
        )
    elif as_html:
        path = session.export(target, follow_symlinks=follow_symlinks)
    else:
        path = session.export(target, format="markdown", follow_symlinks=follow_symlinks)
    click.echo(path)


def _stats_json(stats: SessionStats) -> dict[str, JSONValue]:
    return {
        "id": stats.id,
        "entries": stats.entries,
        "replies": stats.replies,
        "input_tokens": stats.input_tokens,
        "output_tokens": stats.output_tokens,
        "cached_tokens": stats.cached_tokens,
        "cache_share": stats.cache_share,
    }


@click.command("stats", context_settings=CONTEXT_SETTINGS)
@click.argument("session_ids", metavar="[IDS]...", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array instead of a table.")
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1, max=MAX_INT),
    default=20,
    show_default=True,
    help="Without IDS: the workspace's most recently active sessions, at most this many.",
)
@pass_settings
def stats_command(
    settings: Settings, session_ids: tuple[str, ...], as_json: bool, limit: int
) -> None:
    """Show what sessions hold: entries, replies, tokens and the cached share.

    Tokens add up the usage each reply recorded; cached tokens are part of the
    input. Without IDS, the workspace's most recently active sessions.
    """
    client = open_client(settings)
    ids = [resolve_session_id(client, i) for i in session_ids] or [
        info.id for info in client.sessions.list(limit)
    ]
    rows = client.session_stats(ids)
    if as_json:
        echo_json([_stats_json(s) for s in rows])
        return
    out = console()
    if not rows:
        out.print(Text(f"no sessions in {client.workspace}", style="dim"))
        return
    # One space between columns and ids never cut: a row fits 80 columns until tokens run
    # into the millions.
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("id", no_wrap=True, min_width=max(len(s.id) for s in rows))
    for name in ("entries", "replies", "input", "output", "cached", "cache"):
        table.add_column(name, justify="right", no_wrap=True)
    for s in rows:
        table.add_row(
            Text(s.id),
            f"{s.entries:,}",
            f"{s.replies:,}",
            f"{s.input_tokens:,}",
            f"{s.output_tokens:,}",
            f"{s.cached_tokens:,}",
            f"{s.cache_share:.0%}",
        )
    out.print(table)
