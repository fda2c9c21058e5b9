"""``plait import``: a new session from a transcript file (plait, OpenAI, Claude Code, ...)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.text import Text

from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    checked_id,
    console,
    echo_json,
    open_client,
    pass_settings,
)
from plait.interop import (
    FORMATS,
    ProgressCallback,
    SeedResult,
    import_bundle,
    is_bundle_file,
    seed_from_jsonl,
)
from plait.render.page import plural

__all__ = ["import_command"]

PROGRESS_MIN_BYTES: Final = 1 << 20
"""Files at least this big show a progress bar (when stderr is a terminal)."""


@contextmanager
def _progress(path: Path) -> Iterator[ProgressCallback | None]:
    """A progress callback drawing a bar on stderr, or None when no bar is wanted."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if size < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
        yield None
        return
    bar = Progress(
        TextColumn("reading {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(path.name, total=size)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


def _print(result: SeedResult, *, lenient: bool) -> None:
    out = console()
    source = result.source or {}
    problems = source.get("problems")
    problems = problems if isinstance(problems, list) else []
    line = Text(f"imported {result.session_id}", style="bold")
    line.append(
        f"  {plural(result.messages_loaded, 'message')} ({plural(result.turns_loaded, 'turn')}) "
        f"from {source.get('format')} {result.source_format}"
    )
    out.print(line, soft_wrap=True)
    facts = []
    if result.provider or result.model:
        facts.append(f"model {result.provider or '?'}/{result.model or '?'}")
    facts.append(plural(result.source_records, "source record"))
    if result.truncated:
        facts.append("truncated")
    if result.partial:
        facts.append(f"PARTIAL: {len(problems)} problem(s) skipped")
    if result.recommend_compaction:
        facts.append("compaction recommended")
    out.print(Text(", ".join(facts), style="dim"), soft_wrap=True)
    for problem in problems:
        out.print(Text(f"  skipped {problem}", style="yellow"), soft_wrap=True)
    if lenient or result.partial:
        found = source.get("skipped")
        found = found if isinstance(found, dict) else {}
        skipped = {kind: n for kind, n in found.items() if isinstance(n, int)}
        if skipped:
            out.print(
                Text(
                    "not imported as messages, by record type "
                    "(unmapped records are kept verbatim on the session):"
                ),
                soft_wrap=True,
            )
        for kind, count in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])):
            out.print(Text(f"  {count:>6}  {kind}"), soft_wrap=True)


@click.command("import", context_settings=CONTEXT_SETTINGS)
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", *FORMATS]),
    default="auto",
    show_default=True,
    help="The transcript's format.",
)
@click.option(
    "--id",
    "session_id",
    metavar="ID",
    callback=checked_id,
    help="The new session's id (must be free).",
)
@click.option("--title", metavar="TITLE", help="The new session's title (default: the file's).")
@click.option(
    "--last",
    "truncate_to_last",
    type=click.IntRange(min=1),
    metavar="N",
    help="Keep only the last N messages.",
)
@click.option("--drop-tool-calls", is_flag=True, help="Keep only user and assistant text.")
@click.option(
    "--lenient",
    is_flag=True,
    help=(
        "Skip what cannot be read (a cut-off last line, bad records) instead of failing, "
        "and list what was not imported as messages, by record type and count."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def import_command(
    settings: Settings,
    file: Path,
    fmt: str,
    session_id: str | None,
    title: str | None,
    truncate_to_last: int | None,
    drop_tool_calls: bool,
    lenient: bool,
    as_json: bool,
) -> None:
    """Create a session from a transcript FILE; print what was imported.

    Reads plait JSONL, OpenAI chat messages (JSON or JSONL), Claude Code
    session files, Codex rollouts, Gemini CLI recordings, OpenHands event
    streams, SWE-agent trajectories, openai-agents items, pydantic-ai message
    dumps, and plait bundles (`plait export --bundle`). The whole file is checked
    first: a malformed one imports nothing and names the bad line. Only a
    regular file is read (not a FIFO or a device), up to 512 MiB.
    """
    client = open_client(settings, create=True)
    if fmt == "auto" and is_bundle_file(file):
        if title or truncate_to_last or drop_tool_calls or lenient:
            raise click.UsageError("a bundle is imported whole: only --id and --json apply")
        session = import_bundle(client, file, session_id=session_id)
        provenance = session.settings.metadata["imported_bundle"]
        assert isinstance(provenance, dict)  # import_bundle wrote it as an object
        if as_json:
            echo_json(
                {
                    "ok": True,
                    "session_id": session.id,
                    "messages_loaded": session.transcript.length,
                    "source": provenance,
                }
            )
            return
        console().print(
            Text(f"imported {session.id}", style="bold").append(
                f"  {plural(session.transcript.length, 'message')} from {provenance['schema']} "
                f"({provenance['mode']}) bundle of {provenance['source_session_id']}",
                style="",
            ),
            soft_wrap=True,
        )
        return
    with _progress(file) as progress:
        result = seed_from_jsonl(
            client,
            file,
            format=fmt,
            rename_session=session_id,
            title=title,
            truncate_to_last=truncate_to_last,
            drop_tool_calls=drop_tool_calls,
            validate=not lenient,
            progress=progress,
        )
    if as_json:
        echo_json(result.to_dict())
        if not result.ok:
            sys.exit(1)
        return
    if not result.ok:
        raise click.ClickException(f"nothing imported: {result.error}")
    _print(result, lenient=lenient)
