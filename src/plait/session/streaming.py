"""Reads that stream: a transcript's records or messages a batch of positions at a time.

The row is read once, when the iteration is asked for; its layout then names
the same rows for as long as the iteration runs (records are never rewritten),
so reading it a batch at a time yields what one read would, while holding one
batch. A session erased meanwhile ends the iteration with
:class:`~plait.errors.SessionNotFoundError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from plait.errors import SessionNotFoundError, StoreCorruptError
from plait.records import Message, Record, SummaryRecord, hidden_summaries
from plait.session.context import history_start
from plait.session.reading import view_items
from plait.store.base import SessionRow
from plait.views import ViewItem, shown

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["iter_history", "iter_records"]

_T = TypeVar("_T")


def _batches(
    head: Head,
    row: SessionRow,
    lo: int,
    batch: int,
    read: Callable[[SessionRow, int, int], Sequence[_T]],
) -> Iterator[Sequence[_T]]:
    """``read`` over ``[lo, end)`` of ``row``, ``batch`` positions at a time."""
    end = row.layout.end_seq
    while lo < end:
        hi = min(lo + batch, end)
        try:
            got = read(row, lo, hi)
        except StoreCorruptError as exc:
            # The rows a layout names stay while it is live: missing ones mean it is gone.
            if head.store.get(row.id) is None:
                raise SessionNotFoundError(row.id, "deleted while it was read") from exc
            raise
        yield got
        lo = hi


def iter_records(head: Head, batch: int) -> Iterator[Record]:
    """Every record in view, oldest first, read ``batch`` positions at a time."""
    row = head.fresh()

    def run() -> Iterator[Record]:
        for got in _batches(head, row, row.layout.view_start, batch, head.store.read):
            yield from got

    return run()


def _views(head: Head, row: SessionRow, lo: int, batch: int) -> Iterator[Sequence[ViewItem]]:
    return _batches(head, row, lo, batch, lambda r, a, b: view_items(head, r, a, b))


def iter_history(head: Head, full: bool, batch: int) -> Iterator[Message]:
    """``history(full=...)``, a batch of positions at a time (see :func:`_full`, :func:`_kept`)."""
    row = head.fresh()
    return _full(head, row, batch) if full else _kept(head, row, batch)


def _full(head: Head, row: SessionRow, batch: int) -> Iterator[Message]:
    """``history(full=True)``: every message, each summary no ``uncompact`` hid where it ran.

    Whether a summary was hidden is told by events after it: at the first summary,
    the rest of the view is read once for them (a transcript never compacted is
    read once).
    """
    hidden: set[int] | None = None
    start = row.layout.view_start
    for got in _views(head, row, start, batch):
        if hidden is None and any(isinstance(r, SummaryRecord) for r in got):
            hidden = hidden_summaries(got)
            for more in _views(head, row, got[-1].seq + 1, batch):
                hidden |= hidden_summaries(more)
        yield from shown(got, (), hidden or ())


def _kept(head: Head, row: SessionRow, batch: int) -> Iterator[Message]:
    """``history()``: the newest summary no ``uncompact`` hid, then what followed it."""
    start = history_start(head, row)
    if start is not None:
        lo, summary = start
        if summary is None:
            return _without_summaries(head, row, lo, batch)
    else:
        # The tallies cannot say: a pass over the view finds the newest summary not hidden.
        lo = row.layout.view_start
        summaries: dict[int, SummaryRecord] = {}
        hidden: set[int] = set()
        for got in _views(head, row, lo, batch):
            summaries.update((r.seq, r) for r in got if isinstance(r, SummaryRecord))
            hidden |= hidden_summaries(got)
        shown_ones = [s for seq, s in summaries.items() if seq not in hidden]
        summary = max(shown_ones, key=lambda s: s.seq) if shown_ones else None
        if summary is None:
            return _without_summaries(head, row, lo, batch)
        lo = min(summary.folds_to, summary.seq)
    return _after(head, row, summary, lo, batch)


def _without_summaries(head: Head, row: SessionRow, lo: int, batch: int) -> Iterator[Message]:
    for got in _views(head, row, lo, batch):
        yield from shown((r for r in got if not isinstance(r, SummaryRecord)), ())


def _after(
    head: Head, row: SessionRow, summary: SummaryRecord, lo: int, batch: int
) -> Iterator[Message]:
    yield Message.from_record(summary)
    for got in _views(head, row, lo, batch):
        kept = (r for r in got if r.seq >= summary.folds_to and not isinstance(r, SummaryRecord))
        yield from shown(kept, ())
