"""Reads that gather more than the row: the snapshot, the ancestry, the resume state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from plait._time import from_micros
from plait.errors import SessionNotFoundError
from plait.lineage import Ancestry
from plait.records import Record, hidden_summaries
from plait.render import LineageBox, collect_lineage
from plait.session import counting
from plait.session._values import Snapshot
from plait.store.base import SessionRow, ViewReader
from plait.views import ResumeInfo, ViewItem, resume_info, system_prompt

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["ancestry", "lineage", "resumable", "snapshot", "view_items"]


def view_items(head: Head, row: SessionRow, lo: int, hi: int) -> Sequence[ViewItem]:
    """The records at ``[lo, hi)`` as a history reads them: messages as messages.

    A store that offers a view read (:class:`~plait.store.base.ViewReader`) leaves
    unread what a message does not show; any other store's records serve as they are.
    """
    store = head.store
    if isinstance(store, ViewReader):
        return store.read_view(row, lo, hi)
    return store.read(row, lo, hi)


def snapshot(head: Head) -> Snapshot | None:
    """A read-only picture of the session, or None for one not stored (or gone)."""
    if head.row is None:
        return None
    try:
        row = head.fresh()
    except SessionNotFoundError:
        return None
    store = head.store
    records = store.read(row, row.layout.view_start, row.layout.end_seq)
    clients = tuple(store.live_clients(row.id))
    chain = row.metadata.get("actor_chain")
    return Snapshot(
        id=row.id,
        title=row.title,
        length=row.layout.length,
        created_at=from_micros(row.created_at_us),
        updated_at=from_micros(row.updated_at_us),
        status=row.status,
        system_prompt=system_prompt(records),
        tool_format=str(head.settings(row).get("tool_format", "native")),
        actor_chain=chain if isinstance(chain, dict) else None,
        scratchpad=row.scratchpad,
        scratchpad_version=row.scratchpad_version,
        parent_id=row.parent_ids[0] if row.parent_ids else None,
        parent_session_ids=row.parent_ids,
        child_ids=tuple(store.children(row.id)),
        lineage_operator=row.lineage_operator,
        branched_at_event_index=row.branched_at,
        version=row.version,
        records=tuple(records),
        metadata=row.metadata,
        live_clients=clients,
        live_controller_id=next((c.client_id for c in clients if c.mode == "controller"), None),
    )


def ancestry(head: Head) -> Ancestry:
    """``Ancestry(parent_id, child_ids, root_id)``; a parent that was deleted ends the walk."""
    row = head.fresh()
    store = head.store
    # The store walks the chain in one read: a walk here would read a row per link.
    chain = store.ancestors(row.id)
    return Ancestry(
        parent_id=row.parent_ids[0] if row.parent_ids else None,
        child_ids=tuple(store.children(row.id)),
        root_id=chain[-1] if chain else row.id,
    )


def lineage(head: Head, row: SessionRow) -> list[LineageBox]:
    """The boxes of ``row``'s lineage drawing: its ancestors and descendants (merges too)."""
    store = head.store

    def describe(sid: str) -> LineageBox | None:
        found = row if sid == row.id else store.get(sid)
        if found is None:
            return None
        return LineageBox(
            found.id, found.title, found.lineage_operator, found.parent_ids, found.layout.length
        )

    return collect_lineage(row.id, describe, store.children)


def resumable(head: Head) -> ResumeInfo | None:
    """How an interrupted request would be picked up, or None; reads the tail only."""
    if head.row is None:
        return None
    n = 32
    while True:
        row = head.fresh()
        lay = row.layout
        lo = max(lay.view_start, lay.end_seq - n)
        memo = head.memo(row)  # a writer's: what a run's previous steps read or wrote
        held = memo.records(lo, lay.end_seq) if memo is not None else None
        tail = held if held is not None else head.store.read(row, lo, lay.end_seq)
        # The last user or assistant record decides; tool results and events after it count.
        if len(tail) < n or any(r.kind in ("user", "assistant") for r in tail):
            return resume_info(tail)
        n *= 8


def shown_length(head: Head) -> int:
    """Messages in view a person sees: a summary an ``uncompact`` hid is not one."""
    return counting.shown_length(head.store, head.fresh())


def tail(head: Head, n: int) -> list[Record]:
    """The records of the last ``n`` messages in view (events among them uncounted).

    A summary an ``uncompact`` hid is no message either (the event that hid it comes
    after it, so it is known when the summary is reached). Reads the last ``n``
    positions, then further back only as far as events there took the place of
    messages: one read when the tail holds no events.
    """
    row = head.fresh()
    lay = row.layout
    if n == 0:
        return []
    lo = max(lay.view_start, lay.end_seq - n)
    out = head.store.read(row, lo, lay.end_seq)

    def counted(records: Sequence[Record]) -> int:
        return sum(1 for r in records if r.kind != "event" and r.seq not in hidden)

    hidden = hidden_summaries(out)
    messages = counted(out)
    while messages < n and lo > lay.view_start:
        step = max(n - messages, 16)
        new_lo = max(lay.view_start, lo - step)
        more = head.store.read(row, new_lo, lo)
        hidden |= hidden_summaries(more)
        messages += counted(more)
        out = more + out
        lo = new_lo
    # Start at the n-th message from the end: older records (events too) stay out.
    seen = 0
    for i in range(len(out) - 1, -1, -1):
        if out[i].kind != "event" and out[i].seq not in hidden:
            seen += 1
            if seen == n:
                return out[i:]
    return out
