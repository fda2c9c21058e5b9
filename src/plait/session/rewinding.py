"""Rewinding a session in place, and undoing it.

``rewind(keep_first)`` moves the session's head back to a message count and keeps
its id: the store gives the id a new row whose layout shares the old one up to
the cut, and keeps the old row, under a new id, as a *hidden head* (a child in the
lineage with the operator ``Session.rewind``, listed nowhere else), so the rewind
can itself be undone (:func:`undo_rewind` gives the id back to a hidden head).
Both cost the same whatever the transcript's length and the number of sessions.

A rewind keeps the view state of what it keeps: a compaction whose summary stays
but whose undo (an ``uncompact`` event) lay past the cut is undone again at the
new head, by the same event, written in the same transaction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from plait._ids import new_id
from plait.errors import (
    InvalidArgumentError,
    NothingToDoError,
    SessionBusyError,
    SessionClosedError,
    StaleSessionError,
    shown,
)
from plait.layout import branch
from plait.records import COMPACTION_UNDONE, EventRecord, Record, SummaryRecord, hidden_summaries
from plait.session._values import check_count
from plait.session.branching import cut_after
from plait.store.base import HIDDEN_OPERATOR, SessionRow

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["HIDDEN_OPERATOR", "hidden_heads", "rewind", "undo_rewind"]

_RETRIES = 8


def _writable(head: Head, expect_version: int | None) -> SessionRow:
    """The stored row, under the writer lock, if a rewind may move it now."""
    if expect_version is not None:
        check_count(expect_version, "expect_version")
    head.require()
    if head.host.runs.running(head.id):
        raise SessionBusyError(head.id)
    head.lock.ensure()
    row = head.fresh()
    if expect_version is not None and row.version != expect_version:
        raise StaleSessionError(head.id, expect_version, row.version)
    if row.status == "closed":
        raise SessionClosedError(head.id)
    return row


def _carried(head: Head, row: SessionRow, cut: int) -> list[Record]:
    """The ``uncompact`` events past the cut whose summaries the rewind keeps, moved to it."""
    dropped = head.store.read(row, cut, row.layout.end_seq)
    undone = sorted(s for s in hidden_summaries(dropped) if s < cut)
    if not undone:
        return []
    kept = {s for s in undone if isinstance(_one(head, row, s), SummaryRecord)}
    return [
        EventRecord(seq=cut + i, name=COMPACTION_UNDONE, data={"summary_seq": s})
        for i, s in enumerate(s for s in undone if s in kept)
    ]


def _one(head: Head, row: SessionRow, seq: int) -> Record | None:
    found = head.store.read(row, seq, seq + 1)
    return found[0] if found else None


def rewind(head: Head, keep_first: int, expect_version: int | None = None) -> str:
    """Move the head back so the session keeps its first ``keep_first`` messages in view.

    Returns:
        The id of the hidden head that keeps what the session held before.

    Raises:
        InvalidArgumentError: a negative count, or more messages than the session has.
        NothingToDoError: nothing lies past that message (not even an event).
        SessionBusyError: a run of this process is driving the session.
        SessionClosedError: the session is closed.
        StaleSessionError: ``expect_version`` is not the head.
    """
    with head.lock.turn():
        return _rewind(head, keep_first, expect_version)


def _rewind(head: Head, keep_first: int, expect_version: int | None = None) -> str:
    """The rewind itself, under the writer lock :func:`rewind` holds."""
    keep = check_count(keep_first, "keep_first")
    for attempt in range(_RETRIES):
        row = _writable(head, expect_version)
        lay = row.layout
        cut = cut_after(head, row, keep)
        if cut >= lay.end_seq:
            raise NothingToDoError(f"nothing lies past message {keep} of {shown(head.id)}")
        carried = _carried(head, row, cut)
        layout = branch(lay, row.pk, cut, lay.view_msgs + keep).appended(len(carried), 0)
        hidden_id = new_id()
        try:
            moved = head.store.move_head(row, replace(row, pk=0, layout=layout), hidden_id, carried)
        except StaleSessionError:
            if expect_version is not None or attempt == _RETRIES - 1:
                raise
            continue
        head.wrote(moved)
        return hidden_id
    raise AssertionError("unreachable")  # pragma: no cover


def hidden_heads(head: Head) -> list[SessionRow]:
    """The session's hidden heads, the most recently hidden first."""
    row = head.fresh()
    found = [head.store.get(child) for child in head.store.children(row.id)]
    hidden = [
        r
        for r in found
        if r is not None
        and r.lineage_operator == HIDDEN_OPERATOR
        and tuple(r.parent_ids) == (row.id,)
    ]
    return sorted(hidden, key=lambda r: (r.updated_at_us, r.pk), reverse=True)


def undo_rewind(head: Head, branch_id: str | None = None, expect_version: int | None = None) -> str:
    """Give the session's id back to a hidden head (the newest one by default).

    What the session held until now becomes a hidden head in turn, so an undo can be
    undone the same way.

    Returns:
        The id of the hidden head that keeps what the session held until now.

    Raises:
        NothingToDoError: the session has no hidden head.
        InvalidArgumentError: ``branch_id`` is not one of its hidden heads.
        SessionBusyError, SessionClosedError, StaleSessionError: as :func:`rewind`.
    """
    with head.lock.turn():
        return _undo_rewind(head, branch_id, expect_version)


def _undo_rewind(
    head: Head, branch_id: str | None = None, expect_version: int | None = None
) -> str:
    """The undo itself, under the writer lock :func:`undo_rewind` holds."""
    row = _writable(head, expect_version)
    heads = hidden_heads(head)
    if branch_id is None:
        if not heads:
            raise NothingToDoError(f"{shown(head.id)} has no rewind to undo")
        target = heads[0]
    else:
        chosen = [r for r in heads if r.id == branch_id]
        if not chosen:
            raise InvalidArgumentError(
                f"{shown(branch_id)} is not a hidden head of {shown(head.id)}"
            )
        target = chosen[0]
    hidden_id = new_id()
    head.wrote(head.store.move_head(row, target, hidden_id))
    return hidden_id
