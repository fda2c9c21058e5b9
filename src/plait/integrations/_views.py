"""What an adapter reads back: the records in view, as a compaction left them.

A plait compaction appends a summary and folds what came before it, and
``uncompact`` hides the summary again: the records a framework is given are the
newest visible summary, then what it kept; with no visible summary, every
record but the summaries that were undone.
"""

from __future__ import annotations

from collections.abc import Sequence

from plait.records import Record, newest_summary

__all__ = ["compacted"]


def compacted(records: Sequence[Record]) -> list[Record]:
    """The records a framework reads: the newest visible summary first, then what it kept."""
    summary = newest_summary(records)
    if summary is None:
        return [r for r in records if r.kind != "summary"]
    return [summary] + [r for r in records if r.seq >= summary.folds_to and r.kind != "summary"]
