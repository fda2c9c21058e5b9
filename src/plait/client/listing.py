"""How stored sessions are shown in lists and stats: :class:`SessionInfo`, :class:`SessionStats`.

Also which rows are conversations at all (a framework's state holder is not) and the
most recent of them (:func:`conversations`), which the client's list and the server's
share.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from plait._time import from_micros
from plait.records import AssistantRecord, JSONValue, Record
from plait.store import Store
from plait.store.base import SessionRow, sessions_with_prefix

__all__ = ["STATE_ONLY", "SessionInfo", "SessionStats", "conversations", "is_conversation"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One stored session as ``sessions.list()`` shows it."""

    id: str
    title: str | None
    created_at: datetime
    updated_at: datetime
    length: int
    """Messages in view a person sees: a summary an ``uncompact`` hid is not counted."""
    workspace: str
    parent_session_ids: tuple[str, ...]
    lineage_operator: str | None

    @classmethod
    def from_row(cls, row: SessionRow, length: int | None = None) -> SessionInfo:
        """Build the info of a stored row.

        Args:
            row: the row.
            length: the messages a person sees (:func:`shown_length`); the view's length
                when not given.
        """
        return cls(
            row.id,
            row.title,
            from_micros(row.created_at_us),
            from_micros(row.updated_at_us),
            row.layout.length if length is None else length,
            row.workspace,
            row.parent_ids,
            row.lineage_operator,
        )


STATE_ONLY: Final = ".state"
"""The end of the lineage operator of a session that holds a framework's state and no
conversation (ADK's app and user state: ``google_adk.state``); lists leave it out."""


def is_conversation(row: SessionRow) -> bool:
    """Whether a stored session is a conversation, not a holder of a framework's state."""
    return not (row.lineage_operator or "").endswith(STATE_ONLY)


def _usage_count(usage: Mapping[str, JSONValue], key: str) -> int:
    value = usage.get(key)
    # A count is a non-negative int; anything else (None, a string, a bool) counts as 0.
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


@dataclass(frozen=True, slots=True)
class SessionStats:
    """The stored side of a conversation (seed 001's ``session_stats``).

    Tokens come from the assistant records' ``meta["usage"]``:
    ``{"input_tokens", "output_tokens", "cached_tokens"}``, where
    ``cached_tokens`` is the part of ``input_tokens`` the provider served from
    its cache (decision D29). Everything counts what is in the
    session's view, inherited records included.
    """

    id: str
    """The session."""
    entries: int
    """Records in view, events included."""
    replies: int
    """Assistant records that carry usage: the replies the session was charged for."""
    input_tokens: int
    """Prompt tokens of those replies, cached ones included."""
    output_tokens: int
    """Tokens the model wrote in those replies."""
    cached_tokens: int
    """The part of ``input_tokens`` served from the provider's cache."""
    cache_share: float
    """``cached_tokens / input_tokens``; 0.0 when there was no input."""

    @classmethod
    def from_records(cls, session_id: str, records: Iterable[Record]) -> SessionStats:
        """Count a session's records in view and add up its replies' usage."""
        entries = replies = input_tokens = output_tokens = cached = 0
        for record in records:
            entries += 1
            if not isinstance(record, AssistantRecord):
                continue
            usage = record.meta.get("usage")
            if not isinstance(usage, Mapping):
                continue
            replies += 1
            input_tokens += _usage_count(usage, "input_tokens")
            output_tokens += _usage_count(usage, "output_tokens")
            cached += _usage_count(usage, "cached_tokens")
        share = cached / input_tokens if input_tokens else 0.0
        return cls(session_id, entries, replies, input_tokens, output_tokens, cached, share)


def conversations(
    store: Store, workspace: str | None, limit: int, prefix: str | None = None
) -> list[SessionRow]:
    """The ``limit`` most recently active conversations (:func:`is_conversation`).

    Args:
        store: where to look.
        workspace: only this workspace's (None: every one).
        limit: at most this many.
        prefix: only ids that start with it.
    """
    want = limit
    while True:
        rows = (
            store.recent(workspace, want)
            if prefix is None
            else sessions_with_prefix(store, workspace, prefix, want)
        )
        kept = [r for r in rows if is_conversation(r)]
        if len(kept) >= limit or len(rows) < want:
            return kept[:limit]
        want = min(want * 2 + len(rows) - len(kept), sys.maxsize)  # state holders took places
