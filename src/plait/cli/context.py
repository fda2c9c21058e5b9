"""``plait context ID``: how full the model's window is, and by what (seed 001's report).

One bar per source (System prompt, Environment notes, Tool schemas, User messages,
Assistant messages, Tool output, Compaction summary; only non-empty ones, then
Unattributed: what the provider counted that no source accounts for), then the total,
which the shares add up to.
It reads stored counts (counted once) and writes nothing.
"""

from __future__ import annotations

from typing import Final

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from plait.cli._common import (
    CONTEXT_SETTINGS,
    Settings,
    console,
    echo_json,
    open_client,
    open_session,
    pass_settings,
)
from plait.context import UNATTRIBUTED, ContextReport
from plait.records import JSONValue

__all__ = ["WINDOW_SOURCES", "context_command", "print_report", "report_json"]

_BAR = 30
WINDOW_SOURCES: Final = {
    "table": "the model family's table",
    "server": "the model's server",
    "environment": "PLAIT_CONTEXT_WINDOW",
    "settings": "the session's model_info setting",
    "guess": "a guess: plait does not know this model's window",
}
"""How each :attr:`ContextReport.window_source` is named to a person."""


def _bar(part: int, whole: int) -> Text:
    """A bar of ``_BAR`` cells, filled in proportion (at least one cell for a non-empty part)."""
    filled = 0 if whole <= 0 or part <= 0 else max(1, round(_BAR * min(part / whole, 1.0)))
    return Text("█" * filled, style="cyan") + Text("░" * (_BAR - filled), style="dim")


def report_json(report: ContextReport) -> dict[str, JSONValue]:
    """The report as JSON: every field of seed 001's ``ContextReport``."""
    return {
        "window": report.window,
        "used": report.used,
        "from_provider": report.from_provider,
        "measured_by": report.measured_by,
        "partial": report.partial,
        "free": report.free,
        "fraction": report.fraction,
        "shares": [{"name": s.name, "tokens": s.tokens, "items": s.items} for s in report.shares],
        "window_source": report.window_source,
    }


@click.command("context", context_settings=CONTEXT_SETTINGS)
@click.argument("session_id", metavar="ID")
@click.option(
    "--model",
    default=None,
    metavar="M",
    help="Measure for this model's window (default: the model of the newest reply).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_settings
def context_command(settings: Settings, session_id: str, model: str | None, as_json: bool) -> None:
    """Show how full a session's context is, with a bar per source."""
    client = open_client(settings)
    report = open_session(client, session_id).context(model=model)
    if as_json:
        echo_json(report_json(report) if report is not None else None)
        return
    if report is None:
        click.echo("no reply yet: nothing to measure")
        return
    print_report(console(), report)


def print_report(out: Console, report: ContextReport) -> None:
    """Draw a report: a bar per source, the total, and a bar for how full the window is."""
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column("source")
    table.add_column("tokens", justify="right")
    table.add_column("items", justify="right", style="dim")
    table.add_column("bar")
    measured = sum(share.tokens for share in report.shares)
    for share in report.shares:  # each bar: the source's part of what the context holds
        table.add_row(
            share.name, f"{share.tokens:,}", f"({share.items})", _bar(share.tokens, measured)
        )
    out.print(table)
    source = "provider's count" if report.from_provider else report.measured_by
    note = " (partial: part could not be measured yet)" if report.partial else ""
    out.print(
        f"{report.used:,} / {report.window:,} tokens ({report.fraction:.0%}), "
        f"{report.free:,} free  [{source}]{note}",
        markup=False,
    )
    out.print(_bar(report.used, report.window))  # and how full the window is
    if report.window_source == "guess":
        says = "window: a guess, plait does not know this model's window (set PLAIT_CONTEXT_WINDOW)"
    else:
        says = f"window from {WINDOW_SOURCES[report.window_source]}"
    out.print(Text(says, style="dim"), soft_wrap=True)
    if any(share.name == UNATTRIBUTED for share in report.shares):
        out.print(
            Text(
                f"{UNATTRIBUTED}: what the provider counted that no source accounts for "
                "(its chat template, tool schemas it was sent, tokenizer differences)",
                style="dim",
            ),
            soft_wrap=True,
        )
