"""The small writes on a session's row and view: title, reset, trim, close, scratchpad.

Each is one compare-and-set write through the :class:`~plait.session._head.Head`;
the ones that change the view also append the event that says what they hid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from plait._time import now_micros
from plait.errors import InvalidArgumentError
from plait.layout import find_message
from plait.records import JSONLike, JSONValue, Record
from plait.session._values import ScratchpadUpdate, check_count, clean_title, json_object
from plait.store.base import ScratchpadEntry, SessionRow

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["close", "rename", "reopen", "reset", "set_pad", "trim"]


def rename(head: Head, title: str) -> str:
    """Set the title; returns it as stored (trimmed)."""
    clean = clean_title(title)
    head.change_row(lambda row: replace(row, title=clean))
    return clean


def reset(head: Head) -> None:
    """Hide the whole transcript from every view, with a ``session_reset`` event."""
    head.require()

    def hide(row: SessionRow) -> SessionRow:
        lay = row.layout
        return replace(row, layout=replace(lay, view_start=lay.end_seq, view_msgs=lay.end_msgs))

    before = head.fresh().layout
    head.event("session_reset", {"hidden": [before.view_start, before.end_seq]}, hide)


def trim(head: Head, keep_last: int) -> int:
    """Keep only the last ``keep_last`` messages in view; returns how many are kept."""
    keep = check_count(keep_last, "keep_last")
    row = head.fresh()
    if keep >= row.layout.length:
        return row.layout.length

    def hide(at: SessionRow) -> SessionRow:
        lay = at.layout
        kept = min(keep, lay.length)
        if kept == 0:
            start = lay.end_seq
        else:
            start = find_message(lay, lay.end_msgs - kept, lambda s: head.store.probe(at, s))
        return replace(at, layout=replace(lay, view_start=start, view_msgs=lay.end_msgs - kept))

    head.event("session_trimmed", {"keep_last": keep}, hide)
    return keep


def close(head: Head, status: str | Mapping[str, JSONLike] | None) -> None:
    """Close the session with an ``agent_session_closed`` event (nothing if already closed)."""
    if status is not None and not isinstance(status, str | Mapping):
        raise InvalidArgumentError("status must be a string reason or a dict")
    detail: JSONValue = json_object(status, "status") if isinstance(status, Mapping) else status
    if head.fresh().status == "closed":
        return

    def shut(row: SessionRow) -> SessionRow:
        meta = dict(row.metadata)
        meta["closed"] = {"status": detail, "at_us": now_micros()}
        return replace(row, status="closed", metadata=meta)

    head.event("agent_session_closed", {"status": detail}, shut)


def reopen(head: Head) -> None:
    """Reopen a closed session (nothing if it is open)."""
    if head.fresh().status != "closed":
        return

    def reopened(row: SessionRow) -> SessionRow:
        meta = dict(row.metadata)
        meta.pop("closed", None)
        return replace(row, status="open", metadata=meta)

    head.event("agent_session_reopened", {}, reopened, allow_closed=True)


def set_pad(
    head: Head,
    pad: Mapping[str, JSONLike] | None,
    source: str | None,
    reason: str | None,
    metadata: Mapping[str, JSONLike] | None,
) -> ScratchpadUpdate:
    """Store a new scratchpad version (None clears it), with who wrote it and why."""
    clean = json_object(pad, "scratchpad") if pad is not None else None
    for name, value in (("source", source), ("reason", reason)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string")
    meta = json_object(metadata or {}, "metadata")
    head.require()

    def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow, ScratchpadEntry]:
        version = row.scratchpad_version + 1
        entry = ScratchpadEntry(version, clean, source, reason, meta)
        return (), replace(row, scratchpad=clean, scratchpad_version=version), entry

    row, _ = head.mutate(build, allow_closed=True)
    return ScratchpadUpdate(True, row.scratchpad_version, row.scratchpad)
