"""Encoding and decoding a session row, shared by the SQL stores.

Both stores select the same columns in the same order (their ``_SELECT_ROW``):
the ``sessions`` columns, then the session's newest own record (``key``,
``mpos``, ``kind``, ``created_at``, or NULLs when it has none). Appends do not
write the session row, so its head is read from that record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from plait.errors import StoreCorruptError
from plait.layout import Layout
from plait.records import dumps
from plait.store.base import BearerRow, LiveClientRow, ScratchpadEntry, SessionRow

__all__ = [
    "BEARER_COLUMNS",
    "LIVE_COLUMNS",
    "ROW_COLUMNS",
    "SCRATCHPAD_COLUMNS",
    "SEQ_BITS",
    "SEQ_MAX",
    "bearer_row_from_columns",
    "live_row_from_columns",
    "row_from_columns",
    "row_values",
    "scratchpad_entry_from_columns",
    "scratchpad_values",
]

SEQ_BITS: Final = 32
"""A record's key is ``owner_pk << SEQ_BITS | seq``."""
SEQ_MAX: Final = (1 << SEQ_BITS) - 1


ROW_COLUMNS: Final = (
    "title",
    "bases",
    "end_seq",
    "end_msgs",
    "view_start",
    "view_msgs",
    "status",
    "scratchpad",
    "scratchpad_version",
    "metadata",
)
"""The ``sessions`` columns a create or a write sets from a row, in :func:`row_values`' order."""

SCRATCHPAD_COLUMNS: Final = ("version", "scratchpad", "source", "reason", "metadata")
"""The ``scratchpads`` columns :func:`scratchpad_values` gives, in order."""


def row_values(row: SessionRow) -> tuple[Any, ...]:
    """The :data:`ROW_COLUMNS` of a row, encoded as stored (JSON columns through the codec)."""
    lay = row.layout
    return (
        row.title,
        dumps([list(b) for b in lay.bases]),
        lay.end_seq,
        lay.end_msgs,
        lay.view_start,
        lay.view_msgs,
        row.status,
        dumps(dict(row.scratchpad)) if row.scratchpad is not None else None,
        row.scratchpad_version,
        dumps(dict(row.metadata)),
    )


def scratchpad_values(entry: ScratchpadEntry) -> tuple[Any, ...]:
    """The :data:`SCRATCHPAD_COLUMNS` of a scratchpad version, encoded as stored."""
    return (
        entry.version,
        dumps(dict(entry.scratchpad)) if entry.scratchpad is not None else None,
        entry.source,
        entry.reason,
        dumps(dict(entry.metadata)),
    )


def row_from_columns(r: Sequence[Any]) -> SessionRow:
    """Decode one selected row into a :class:`SessionRow`.

    Raises:
        StoreCorruptError: a column does not hold what it should.
    """
    try:
        end_seq, end_msgs, updated = r[8], r[9], r[5]
        if r[19] is not None:  # the newest own record
            head_end = (r[19] & SEQ_MAX) + 1
            if head_end > end_seq:
                end_seq, end_msgs = head_end, r[20] + (r[21] != "event")
                updated = max(updated, r[22])
        bases = tuple((int(o), int(h)) for o, h in json.loads(r[7])) if r[7] != "[]" else ()
        row = SessionRow(
            r[1],
            r[2],
            Layout(bases, end_seq, end_msgs, r[10], r[11]),
            r[0],
            r[6],
            r[4],
            updated,
            r[3],
            tuple(json.loads(r[12])) if r[12] != "[]" else (),
            r[13],
            r[14],
            r[15],
            json.loads(r[16]) if r[16] is not None else None,
            r[17],
            json.loads(r[18]) if r[18] != "{}" else {},
        )
    except (ValueError, TypeError, IndexError, RecursionError) as exc:
        raise StoreCorruptError(
            f"session row {r[1]!r} could not be decoded: {_bad_json(r)}{exc}"
        ) from exc
    if not _well_typed(row):
        raise StoreCorruptError(
            f"session row {r[1]!r} could not be decoded: {_wrong_column(row)} "
            "does not hold what it should"
        )
    return row


_JSON_COLUMNS: Final = ((7, "bases"), (12, "parent_ids"), (16, "scratchpad"), (18, "metadata"))


def _bad_json(r: Sequence[Any]) -> str:
    """``"<column>: "`` for the first JSON column of a row that does not decode, else ``""``."""
    for i, name in _JSON_COLUMNS:
        try:
            if i < len(r) and r[i] is not None:
                json.loads(r[i])
        except (ValueError, TypeError, RecursionError):
            return f"{name}: "
    return ""


def _well_typed(row: SessionRow) -> bool:
    """Whether every column decoded to the type the row promises (a foreign writer's may not).

    Written out test by test: it runs on every row read, and a loop or a generator
    costs several times more.
    """
    lay = row.layout
    title, operator, branched = row.title, row.lineage_operator, row.branched_at
    return (
        type(row.id) is str
        and type(row.workspace) is str
        and (title is None or type(title) is str)
        and (operator is None or type(operator) is str)
        and type(row.status) is str
        and type(row.metadata) is dict
        and (row.scratchpad is None or type(row.scratchpad) is dict)
        and (branched is None or type(branched) is int)
        and (not row.parent_ids or all(type(p) is str for p in row.parent_ids))
        and type(row.pk) is int
        and type(row.row_version) is int
        and type(row.created_at_us) is int
        and type(row.updated_at_us) is int
        and type(row.scratchpad_version) is int
        and type(lay.end_seq) is int
        and type(lay.end_msgs) is int
        and type(lay.view_start) is int
        and type(lay.view_msgs) is int
    )


def _wrong_column(row: SessionRow) -> str:
    """The first column of a row :func:`_well_typed` refused (to name it in the error)."""
    text_or_none = {"title": row.title, "lineage_operator": row.lineage_operator}
    for name, value in text_or_none.items():
        if value is not None and type(value) is not str:
            return f"{name} (a {type(value).__name__}, not text)"
    if type(row.metadata) is not dict:
        return f"metadata (a {type(row.metadata).__name__}, not a JSON object)"
    if row.scratchpad is not None and type(row.scratchpad) is not dict:
        return f"scratchpad (a {type(row.scratchpad).__name__}, not a JSON object)"
    if not all(type(p) is str for p in row.parent_ids):
        return "parent_ids (not a list of ids)"
    return "a column"


def scratchpad_entry_from_columns(r: Sequence[Any]) -> ScratchpadEntry:
    """Decode ``(version, scratchpad, source, reason, metadata, created_at)`` of the history."""
    try:
        return ScratchpadEntry(
            version=r[0],
            scratchpad=json.loads(r[1]) if r[1] is not None else None,
            source=r[2],
            reason=r[3],
            metadata=json.loads(r[4]),
            created_at_us=r[5],
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise StoreCorruptError(f"scratchpad version {r[0]!r} could not be decoded: {exc}") from exc


BEARER_COLUMNS: Final = (
    "token_hash, principal, scopes, attributes, created_at, last_seen_at, expires_at"
)
"""The ``durable_sessions`` columns :func:`bearer_row_from_columns` reads, in order."""

LIVE_COLUMNS: Final = "s.id, c.client_id, c.mode, c.attached_at, c.last_seen_at, c.metadata"
"""The columns :func:`live_row_from_columns` reads (``live_clients c`` joined to ``sessions s``)."""


def bearer_row_from_columns(r: Sequence[Any]) -> BearerRow:
    """Decode the :data:`BEARER_COLUMNS` of one ``durable_sessions`` row.

    Raises:
        StoreCorruptError: a column does not hold what it should.
    """
    try:
        return BearerRow(
            token_hash=r[0],
            principal=r[1],
            scopes=tuple(json.loads(r[2])),
            attributes=json.loads(r[3]),
            created_at_us=r[4],
            last_seen_at_us=r[5],
            expires_at_us=r[6],
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise StoreCorruptError(f"durable session could not be decoded: {exc}") from exc


def live_row_from_columns(r: Sequence[Any]) -> LiveClientRow:
    """Decode the :data:`LIVE_COLUMNS` of one ``live_clients`` row.

    Raises:
        StoreCorruptError: a column does not hold what it should.
    """
    try:
        return LiveClientRow(
            session_id=r[0],
            client_id=r[1],
            mode=r[2],
            attached_at_us=r[3],
            last_seen_at_us=r[4],
            metadata=json.loads(r[5]),
        )
    except (ValueError, TypeError, IndexError) as exc:
        raise StoreCorruptError(f"live client {r[1]!r} could not be decoded: {exc}") from exc
