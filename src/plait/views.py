"""Views over a transcript: what the model works with, and what was written.

Pure: no I/O. ``records`` is everything in a session's view; these functions
pick the prompt-visible part of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from plait.records import Message, Record, SummaryRecord, hidden_summaries, newest_summary

__all__ = ["full_history", "history", "newest_summary", "system_prompt"]  # re-exported

_NOT_IN_HISTORY = frozenset({"event", "system"})


def history(records: Sequence[Record]) -> list[Message]:
    """Return the messages the model works with: the newest summary, then what it kept.

    A summary folds the records ``[folds_from, folds_to)``; everything from
    ``folds_to`` on (the records the compaction kept and those written since)
    follows it. Events, system prompts and older summaries are left out.
    """
    summary = newest_summary(records)
    if summary is None:
        return full_history(records)
    kept = [
        Message.from_record(r)
        for r in records
        if r.seq >= summary.folds_to and r.kind not in _NOT_IN_HISTORY and r.kind != "summary"
    ]
    return [Message.from_record(summary), *kept]


def full_history(records: Sequence[Record]) -> list[Message]:
    """Return every prompt-visible message as written, each summary where its compaction ran.

    A summary an ``uncompact`` hid is left out: that compaction was undone.
    """
    hidden = hidden_summaries(records)
    return [
        Message.from_record(r)
        for r in records
        if r.kind not in _NOT_IN_HISTORY and not (isinstance(r, SummaryRecord) and r.seq in hidden)
    ]


def system_prompt(records: Sequence[Record]) -> str | None:
    """Return the newest system prompt in ``records``, or None."""
    for record in reversed(records):
        if record.kind == "system":
            return record.text
    return None
