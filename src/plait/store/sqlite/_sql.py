"""The SQLite store's own statements: its spelling of the schema and its hot paths.

An append is one ``INSERT`` whose key (``owner << 32 | seq``) is the
compare-and-set; reading a row finds its head as the newest own record (appends
do not write the session row). See ``SQLiteStore.append``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from plait.errors import StoreError
from plait.records import Record, dumps, encode_payload
from plait.store.sql._dialect import Dialect
from plait.store.sql._rows import ROW_COLUMNS, SEQ_BITS, SEQ_MAX
from plait.store.sql._schema import DDL
from plait.store.sqlite._text import SQLITE_TEXT_INDEX

if TYPE_CHECKING:
    from plait.store.sql._sealing import Sealer

__all__ = [
    "DIALECT",
    "APPEND_STATE",
    "INSERT_PLAIN",
    "INSERT_RECORD",
    "INSERT_SESSION",
    "INSERT_SESSION_UNLINKED",
    "SELECT_ROW",
    "SELECT_ROW_KEPT",
    "SQLITE_DDL",
    "UPDATE_SESSION",
    "UPDATE_SESSION_UNLINKED",
    "RecordRows",
    "insert_records",
    "read_ranges",
    "record_params",
]

_SHIFT: Final = SEQ_BITS
_SEQ_MAX: Final = SEQ_MAX

SQLITE_DDL: Final = DDL(
    pk="INTEGER PRIMARY KEY AUTOINCREMENT",
    big="INTEGER",
    flag="INTEGER NOT NULL DEFAULT 0",
    id_unique="UNIQUE",
    # Ascending, so a backward scan yields (updated_at DESC, pk DESC): ties break by age.
    recent="updated_at",
    live="deleted = 0",
    rowid=" WITHOUT ROWID",
    blob="BLOB",
    tombstone="char(0) || pk",
    last_owner="json_extract(bases, '$[#-1][0]')",
    text_index=SQLITE_TEXT_INDEX,
)

INSERT_SESSION: Final = (
    "INSERT INTO sessions (id, workspace, created_at, updated_at, version, parent_ids, "
    f"lineage_operator, branched_at, base_owner, {', '.join(ROW_COLUMNS)}) "
    f"VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, {', '.join('?' * len(ROW_COLUMNS))})"
)
"""A new session row: its identity, lineage and base owner, then ``row_values``."""
INSERT_SESSION_UNLINKED: Final = (
    "INSERT INTO sessions (id, workspace, created_at, updated_at, version, parent_ids, "
    f"lineage_operator, branched_at, {', '.join(ROW_COLUMNS)}) "
    f"VALUES (?, ?, ?, ?, 1, ?, ?, ?, {', '.join('?' * len(ROW_COLUMNS))})"
)
"""The same in a schema before version 5 (no ``base_owner``; opened with fewer migrations)."""

UPDATE_SESSION: Final = (
    "UPDATE sessions SET version = ?, updated_at = ?, "
    "base_owner = CASE WHEN bases = ? THEN base_owner END, "
    f"{', '.join(f'{c} = ?' for c in ROW_COLUMNS)} WHERE pk = ?"
)
UPDATE_SESSION_UNLINKED: Final = UPDATE_SESSION.replace(
    "base_owner = CASE WHEN bases = ? THEN base_owner END, ", "bases = ?, "
)
"""The same in a schema before version 5 (``bases`` is set twice, to the same value)."""
"""A row write: the version, the time, the new ``bases`` (a layout whose segments
change is no longer known to be a branch of its base owner), ``row_values``, then the key."""

INSERT_RECORD: Final = (
    "INSERT INTO records (key, mpos, id, kind, payload, meta, created_at, tokens) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_PLAIN: Final = (
    "INSERT INTO records (key, mpos, id, kind, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)"
)
"""INSERT_RECORD for a record with no meta and no token count: both columns left NULL.

The sqlite3 module binds an int or a str as it is, but a ``None`` goes through its
adapter lookup, which raises and clears an AttributeError for every ``None`` bound;
most records have neither meta nor a count, so leaving the two columns out of the
statement spares two of those a row."""

# One read before an append: is the session live, and which session is the most recent?
APPEND_STATE: Final = (
    "SELECT (SELECT 1 FROM sessions WHERE pk = ?1 AND deleted = 0), t.pk, t.updated_at "
    "FROM (SELECT pk, updated_at FROM sessions WHERE deleted = 0 "
    "ORDER BY updated_at DESC, pk DESC LIMIT 1) AS t"
)

# A session row with its head: the newest record the session wrote itself (appends do
# not write the session row, see SQLiteStore.append). One statement, so one snapshot.
SELECT_ROW: Final = (
    "SELECT s.pk, s.id, s.workspace, s.title, s.created_at, s.updated_at, s.version, s.bases, "
    "s.end_seq, s.end_msgs, s.view_start, s.view_msgs, s.parent_ids, s.lineage_operator, "
    "s.branched_at, s.status, s.scratchpad, s.scratchpad_version, s.metadata, "
    "h.key, h.mpos, h.kind, h.created_at "
    "FROM sessions s LEFT JOIN records h ON h.key = ("
    "SELECT key FROM records WHERE key >= (s.pk << 32) AND key < ((s.pk + 1) << 32) "
    "ORDER BY key DESC LIMIT 1)"
)


SELECT_ROW_KEPT: Final = SELECT_ROW.replace(
    "s.bases, ", "CASE WHEN s.bases = ? THEN NULL ELSE s.bases END, ", 1
)
"""SELECT_ROW with ``bases`` NULL where it equals the first parameter: a long layout held
decoded is compared by the engine, and no copy of its text is made for the compare."""


READ_RANGES_MAX: Final = 64
"""Key ranges :func:`read_ranges` spells in one statement (SQLite allows 500 arms)."""


@lru_cache(maxsize=READ_RANGES_MAX)
def read_ranges(n: int) -> str:
    """Read ``n`` key ranges (parameters ``lo, hi`` each) in one statement, one arm each.

    The ranges are a read's segments, whose positions run on from one to the next, so
    a row's position (its key's low bits) orders the rows. A point search per arm, with
    neither a JSON list to build and parse nor a sort in the engine, is what a tail deep
    in a chain of branches reads.
    """
    return " UNION ALL ".join(
        "SELECT key, id, kind, payload, meta, created_at, tokens FROM records "
        "WHERE key >= ? AND key < ?"
        for _ in range(n)
    )


class RecordRows(NamedTuple):
    """The parameters of records to insert: ``INSERT_PLAIN``'s rows and ``INSERT_RECORD``'s."""

    plain: list[tuple[Any, ...]]
    """Records with no meta and no token count."""
    full: list[tuple[Any, ...]]
    """The others."""


def record_params(
    pk: int, records: Sequence[Record], mpos: int, sealer: Sealer | None = None
) -> RecordRows:
    """The insert parameters of records appended after ``mpos`` messages.

    Every record is encoded here, so a record that cannot be is refused before the
    store writes anything. With a ``sealer`` (an encrypted store), payload and meta
    are sealed under the session's data key (every such row is a full one).
    """
    plain: list[tuple[Any, ...]] = []
    full: list[tuple[Any, ...]] = []
    base = pk << _SHIFT
    key = sealer.owner_key(pk) if sealer is not None else None
    for record in records:
        seq = record.seq
        if seq > _SEQ_MAX:
            raise StoreError(f"position {seq} exceeds the store's limit {_SEQ_MAX}")
        kind = record.kind
        meta, tokens = record.meta, record.tokens
        if key is not None:
            assert sealer is not None
            text = dumps(dict(meta)) if meta else None
            payload, sealed = sealer.seal_record(
                key, seq, record.id, kind, encode_payload(record), text
            )
            full.append(
                (base | seq, mpos, record.id, kind, payload, sealed, record.created_at_us, tokens)
            )
        elif meta or tokens is not None:
            full.append(
                (
                    base | seq,
                    mpos,
                    record.id,
                    kind,
                    encode_payload(record),
                    dumps(dict(meta)) if meta else None,
                    record.created_at_us,
                    tokens,
                )
            )
        else:
            plain.append(
                (base | seq, mpos, record.id, kind, encode_payload(record), record.created_at_us)
            )
        if kind != "event":
            mpos += 1
    return RecordRows(plain, full)


def insert_records(db: sqlite3.Connection, rows: RecordRows) -> None:
    """Insert ``rows`` (one statement per shape present; raises what the driver raises)."""
    for sql, params in ((INSERT_PLAIN, rows.plain), (INSERT_RECORD, rows.full)):
        if len(params) == 1:
            db.execute(sql, params[0])
        elif params:
            db.executemany(sql, params)


DIALECT: Final = Dialect(
    param="?",
    greatest="MAX",
    least="MIN",
    live="deleted = 0",
    live_s="s.deleted = 0",
    select_row=SELECT_ROW,
    select_row_kept=SELECT_ROW_KEPT,
    key_share="",
    tombstone="deleted = 1, id = char(0) || pk",
)
"""How this engine spells what the shared statements leave open (``sql/_dialect.py``)."""
