"""Branching: fork, fork_at, detach and merge, each one new session row.

A branch's layout copies its source's segment list, clipped at the cut
(:func:`plait.layout.branch`), so its cost does not depend on the transcript's
length; a merge copies only what the other parents added past the prefix they
share with the first (:func:`plait.layout.merge_copies`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from plait._ids import is_session_id, new_id
from plait.errors import InvalidArgumentError, shown
from plait.layout import Layout, branch, find_message, merge_copies, shared_prefix
from plait.records import JSONValue, Record
from plait.session._values import SETTINGS, check_count
from plait.store.base import SessionRow

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["branch_row", "cut_after", "detach_row", "fork_at_row", "fork_row", "merge_rows"]


def branch_row(
    row: SessionRow,
    layout: Layout,
    dst: str | None,
    *,
    parents: tuple[str, ...],
    operator: str,
    branched_at: int | None = None,
    provenance: Mapping[str, JSONValue] | None = None,
) -> SessionRow:
    """The new row of a branch of ``row``: settings and scratchpad inherited, nothing else."""
    if dst is not None and not is_session_id(dst):
        raise InvalidArgumentError(f"{shown(dst)} is not a valid session id")
    meta: dict[str, JSONValue] = {}
    if SETTINGS in row.metadata:
        meta[SETTINGS] = row.metadata[SETTINGS]
    if provenance:
        meta.update(provenance)
    return SessionRow(
        id=dst or new_id(),
        workspace=row.workspace,
        layout=layout,
        parent_ids=parents,
        lineage_operator=operator,
        branched_at=branched_at,
        scratchpad=row.scratchpad,
        scratchpad_version=row.scratchpad_version,
        metadata=meta,
    )


def fork_row(head: Head, dst: str | None) -> SessionRow:
    """The row of a fork from the current state (``Session.fork``)."""
    row = head.fresh()
    lay = row.layout
    layout = branch(lay, row.pk, lay.end_seq, lay.end_msgs)
    return branch_row(row, layout, dst, parents=(row.id,), operator="Session.fork")


def cut_after(head: Head, row: SessionRow, keep: int) -> int:
    """The position just past the ``keep``-th message in view (``fork_at`` and ``rewind``).

    Raises:
        InvalidArgumentError: more messages than the session has.
    """
    lay = row.layout
    if keep > lay.length:
        raise InvalidArgumentError(
            f"cannot keep the first {keep} messages: the session has only {lay.length}"
        )
    if keep == 0:
        return lay.view_start
    ordinal = lay.view_msgs + keep - 1
    return find_message(lay, ordinal, lambda s: head.store.probe(row, s)) + 1


def fork_at_row(head: Head, keep_first: int, dst: str | None) -> SessionRow:
    """The row of a branch keeping the first ``keep_first`` messages in view."""
    keep = check_count(keep_first, "keep_first")
    row = head.fresh()
    lay = row.layout
    cut = cut_after(head, row, keep)
    layout = branch(lay, row.pk, cut, lay.view_msgs + keep)
    return branch_row(
        row, layout, dst, parents=(row.id,), operator="Session.fork_at", branched_at=keep
    )


def detach_row(head: Head, dst: str | None) -> SessionRow:
    """The row of a new lineage root sharing this transcript (``Session.detach``)."""
    row = head.fresh()
    lay = row.layout
    layout = branch(lay, row.pk, lay.end_seq, lay.end_msgs)
    return branch_row(
        row,
        layout,
        dst,
        parents=(),
        operator="Session.detach",
        provenance={"detached_from": row.id},
    )


def merge_rows(
    head: Head, others: Sequence[Head], dst: str | None, operator: str
) -> tuple[SessionRow, list[Record]]:
    """The row of a merge of ``head`` with ``others``, and the records it copies."""
    if not others:
        raise InvalidArgumentError("merge needs at least one other session")
    row = head.fresh()
    rows: list[SessionRow] = []
    for other in others:
        if other.store is not head.store:
            raise InvalidArgumentError(f"session {other.id} lives in another store")
        rows.append(other.fresh())
    lay = row.layout
    layout = branch(lay, row.pk, lay.end_seq, lay.end_msgs)
    copies: list[Record] = []
    pos = lay.end_seq
    for other_row in rows:
        if other_row.id == row.id:
            continue
        shared = shared_prefix(lay, row.pk, other_row.layout, other_row.pk)
        start = max(shared, other_row.layout.view_start)
        tail = head.store.read(other_row, start, other_row.layout.end_seq)
        copies += merge_copies(tail, shared, start, pos)
        pos += len(tail)
    messages = sum(1 for r in copies if r.kind != "event")
    layout = replace(layout, end_seq=pos, end_msgs=layout.end_msgs + messages)
    parents = tuple(dict.fromkeys((row.id, *(r.id for r in rows))))
    return branch_row(row, layout, dst, parents=parents, operator=operator), copies
