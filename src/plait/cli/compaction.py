"""``plait compact`` folds a session's older messages into a summary; ``plait uncompact`` undoes it.

Both only append (a summary record, or the event that hides one): nothing stored
is deleted. The default strategy needs no model (observation masking plus an
extractive summary); ``--strategy llm`` has a model (``--model``) write the summary.
"""

from __future__ import annotations

import asyncio

import click

from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    echo_json,
    open_client,
    open_session,
    pass_settings,
)
from plait.cli._turns import checked_spec
from plait.compaction import STRATEGIES
from plait.errors import NothingToDoError
from plait.providers import select_provider
from plait.render.page import plural

__all__ = ["compact_command", "uncompact_command"]

_CHOICES = tuple(s for s in STRATEGIES if s != "custom")


@click.command("compact", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.option(
    "--strategy",
    type=click.Choice(_CHOICES),
    default=None,
    help="How to write the summary (default: masking plus an extractive summary, no model; "
    "llm: the model named by --model writes it).",
)
@click.option(
    "--model",
    "-m",
    metavar="SPEC",
    default=None,
    callback=checked_spec,
    help="The model the llm strategy summarizes with (provider[:model]; default: as for runs).",
)
@click.option(
    "--keep-last",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Keep the last N messages as they are (default 12).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be folded; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def compact_command(
    settings: Settings,
    session_id: str,
    strategy: str | None,
    keep_last: int | None,
    model: str | None,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Fold the older part of a session into a summary now (nothing is deleted)."""
    client = open_client(settings)
    session = open_session(client, session_id)
    options: dict[str, object] = {}
    if strategy is not None:
        options["compact_strategy"] = strategy
    if keep_last is not None:
        options["keep_last"] = keep_last
    try:
        if dry_run:
            plan = session.transcript.compact_preview(options)
            result = None if plan is None else plan.to_dict()
        else:
            # A strategy that writes its summary without a model needs none built (and no
            # API key); with no --strategy the session's own may be llm.
            wants_model = strategy == "llm" or (strategy is None and model is not None)
            provider = select_provider(model) if wants_model else None
            done = asyncio.run(session.compact(options, provider=provider))
            result = (
                None
                if done is None
                else {
                    "summary": done.summary,
                    "compressed": done.compressed,
                    "kept": done.kept,
                    "folds": [done.folds_from, done.folds_to],
                }
            )
    except NothingToDoError as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        echo_json(result)
    elif result is None:
        click.echo("nothing worth folding")
    elif dry_run:
        click.echo(
            f"would fold {plural(result['compressed'], 'message')} "
            f"(positions {result['folds'][0]}..{result['folds'][1] - 1}), keep {result['kept']}"
        )
    else:
        folded = plural(result["compressed"], "message")
        click.echo(f"folded {folded} into a summary, kept {result['kept']}")


@click.command("uncompact", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@pass_settings
def uncompact_command(settings: Settings, session_id: str) -> None:
    """Undo a session's newest compaction: what it folded shows again."""
    client = open_client(settings)
    try:
        summary = open_session(client, session_id).transcript.uncompact()
    except NothingToDoError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"undid the compaction at position {summary.seq}")
