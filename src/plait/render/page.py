"""What an export shows: one session's records, its next request, and its lineage.

Pure: no I/O. The session layer reads the store and fills an
:class:`ExportPage`; the renderers turn it into text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from plait.records import Message, OpaqueRecord, Record, SummaryRecord, newest_summary
from plait.render.graph import LineageBox

__all__ = [
    "ExportPage",
    "count_line",
    "folded_by_newest_summary",
    "folds_of",
    "opaque_label",
    "plural",
]


@dataclass(frozen=True, slots=True)
class ExportPage:
    """Everything an exported page shows about one session."""

    session_id: str
    """The session exported."""
    title: str | None
    """Its title, or None."""
    workspace: str
    """The workspace it belongs to."""
    operator: str | None
    """How it was made (``Session.fork``, ...); None for a root."""
    parent_ids: tuple[str, ...]
    """Its lineage parents."""
    status: str
    """``open`` or ``closed``."""
    created_at: datetime
    """When it was stored (UTC)."""
    updated_at: datetime
    """When it was last written (UTC)."""
    records: Sequence[Record]
    """Every record in view, events included, oldest first."""
    system_prompt: str | None
    """The system prompt the next request would carry."""
    request: Sequence[Message]
    """``history()``: the messages the next request would carry after the system prompt."""
    lineage: Sequence[LineageBox] = ()
    """The session, its ancestors and its descendants (see :func:`collect_lineage`)."""

    @property
    def name(self) -> str:
        """The title, or ``Session <id>`` when there is none."""
        return self.title or f"Session {self.session_id}"


def plural(n: int, word: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def count_line(records: Sequence[Record]) -> str:
    """``7 records: 6 messages, 1 event`` (``, 2 provider items`` when there are any)."""
    events = sum(1 for r in records if r.kind == "event")
    opaque = sum(1 for r in records if r.kind == "opaque")
    items = f", {plural(opaque, 'provider item')}" if opaque else ""
    return (
        f"{plural(len(records), 'record')}: "
        f"{plural(len(records) - events - opaque, 'message')}{items}, {plural(events, 'event')}"
    )


def opaque_label(record: OpaqueRecord) -> str:
    """``provider item openai-agents reasoning``: an opaque item on one line.

    Such an item has no text to show; its format and, when it names one, its
    ``type`` say what it is (the item itself is in the record's export).
    """
    kind = record.item.get("type")
    named = f" {kind}" if isinstance(kind, str) and kind else ""
    return f"provider item {record.format}{named}"


def folded_by_newest_summary(records: Sequence[Record]) -> dict[int, int]:
    """Map the position of each record the newest summary folds to the summary's position.

    Those are the messages the model no longer sees. System prompts (always
    sent) and events (never sent) are not folded.
    """
    record = newest_summary(records)
    if record is None:
        return {}
    span = folds_of(record)
    if span is None:
        return {}
    folds = range(*span)
    return {r.seq: record.seq for r in records if r.seq in folds and r.kind in _FOLDABLE}


def folds_of(summary: SummaryRecord) -> tuple[int, int] | None:
    """A summary's ``(folds_from, folds_to)``, or None if a foreign row stored something else.

    The renderers take rows as stored; a row written by another tool may hold
    anything there, and the page must still render (and escape) it.
    """
    lo, hi = summary.folds_from, summary.folds_to
    if type(lo) is int and type(hi) is int:
        return lo, hi
    return None


_FOLDABLE = frozenset({"user", "assistant", "tool", "summary"})
