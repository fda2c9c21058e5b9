"""The PostgreSQL store's hot statements: one round trip per create, append, write, read.

Each is one statement built from data-modifying CTEs, so it runs in its own
(autocommit) transaction; records travel as parallel arrays (``unnest``) so a
statement's shape does not depend on how many there are and the server keeps it
prepared, and a one-record append sends scalars (see ``PostgresStore.append``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from plait.errors import StoreError
from plait.records import Record, dumps, encode_payload
from plait.store.postgres._prep import prepare
from plait.store.sql._dialect import Dialect
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX

if TYPE_CHECKING:
    from plait.store.sql._sealing import DataKey, Sealer

__all__ = [
    "DIALECT",
    "APPEND",
    "APPEND_FENCED",
    "APPEND_ONE",
    "APPEND_ONE_FENCED",
    "APPEND_ONE_FENCED_PREPARED",
    "APPEND_ONE_PREPARED",
    "FENCE",
    "CREATE",
    "CREATE_UNLINKED",
    "HEAD",
    "KEPT",
    "READ",
    "READ_VIEW",
    "READ_VIEW_ONE",
    "SELECT_ROW",
    "WRITE",
    "WRITE_FENCED",
    "WRITE_UNLINKED",
    "WRITE_UNLINKED_FENCED",
    "key_ranges",
    "record_arrays",
]

_SEQ_MAX: Final = SEQ_MAX

# A session row with its head: the newest record the session wrote itself (appends do
# not write the session row). One statement, so one snapshot.
SELECT_ROW: Final = (
    "SELECT s.pk, s.id, s.workspace, s.title, s.created_at, s.updated_at, s.version, s.bases, "
    "s.end_seq, s.end_msgs, s.view_start, s.view_msgs, s.parent_ids, s.lineage_operator, "
    "s.branched_at, s.status, s.scratchpad, s.scratchpad_version, s.metadata, "
    "h.key, h.mpos, h.kind, h.created_at "
    "FROM sessions s LEFT JOIN LATERAL (SELECT key, mpos, kind, created_at FROM records "
    "WHERE key >= (s.pk << 32) AND key < ((s.pk + 1) << 32) ORDER BY key DESC LIMIT 1) h ON true"
)

# Records as parallel arrays: one statement shape for any number of records.
_UNNEST_RECORDS: Final = (
    "unnest(%(seq)s::bigint[], %(mpos)s::bigint[], %(rid)s::text[], %(kind)s::text[], "
    "%(payload)s::text[], %(meta)s::text[], %(created)s::bigint[], %(tokens)s::integer[]) "
    "AS u(seq, mpos, rid, kind, payload, meta, created_at, tokens)"
)
_RECORD_COLUMNS: Final = "(key, mpos, id, kind, payload, meta, created_at, tokens)"

# One record as scalars: the hot path (one record per agent step) skips building and
# sending arrays, several times cheaper on the client and cheaper on the server.
_ONE_RECORD: Final = (
    "(VALUES (%(seq)s::bigint, %(mpos)s::bigint, %(rid)s::text, %(kind)s::text, "
    "%(payload)s::text, %(meta)s::text, %(created)s::bigint, %(tokens)s::integer)) "
    "AS u(seq, mpos, rid, kind, payload, meta, created_at, tokens)"
)


FENCE: Final = (
    "SELECT FROM writer_fences WHERE session_id = %(id)s AND epoch = %(epoch)s FOR SHARE"
)
"""The writer fence: the session's epoch is still the one this writer's lock was taken at.

One probe of the fences' primary key. The row is held ``FOR SHARE`` until the write
commits, so a writer taking the lock (its epoch bump updates the row) waits for the
write; and a bump committed while the write was starting is seen (a locking read
checks the row's newest version), so the write finds its epoch gone and writes
nothing (D232).
"""


def _append_sql(source: str, *, move: bool, fenced: bool = False) -> str:
    """The append statement reading its records from ``source`` (see PostgresStore.append).

    With ``move``, it moves the session to the top of the "most recent" order when
    another session is there; without, it returns which session is (the store queues
    the move, store/postgres/_recency.py). ``fenced``: the records go in only if the writer's
    epoch is the session's (:data:`FENCE`), and a third column says whether it was.
    """
    fence = f"fence AS ({FENCE}), " if fenced else ""
    gate = " AND EXISTS (SELECT FROM fence)" if fenced else ""
    said = ", EXISTS (SELECT FROM fence)" if fenced else ""
    moved = f""", moved AS (
    UPDATE sessions s SET updated_at = GREATEST(s.updated_at, %(now)s, t.updated_at + 1)
    FROM top t
    WHERE s.pk = %(pk)s AND t.pk <> %(pk)s AND EXISTS (SELECT FROM ins)
    RETURNING s.updated_at
)
SELECT EXISTS (SELECT FROM live), (SELECT updated_at FROM moved){said}"""
    top = f"\nSELECT EXISTS (SELECT FROM live), (SELECT pk FROM top){said}"
    return f"""
WITH {fence}live AS (
    SELECT pk FROM sessions WHERE pk = %(pk)s AND NOT deleted FOR KEY SHARE
), ins AS (
    INSERT INTO records {_RECORD_COLUMNS}
    SELECT (%(pk)s::bigint << 32) | u.seq, u.mpos, u.rid, u.kind, u.payload, u.meta,
           u.created_at, u.tokens
    FROM {source}
    WHERE EXISTS (SELECT FROM live){gate}
    RETURNING 1
), top AS (
    SELECT pk, updated_at FROM sessions WHERE NOT deleted
    ORDER BY updated_at DESC, pk DESC LIMIT 1
){moved if move else top}
"""


# The append, in one statement and so one round trip: any number of records, moving the
# session in the order; or one record (every agent step), reading the order only. Each
# also fenced: what a writer holding the session's lock sends (D232).
APPEND: Final = _append_sql(_UNNEST_RECORDS, move=True)
APPEND_FENCED: Final = _append_sql(_UNNEST_RECORDS, move=True, fenced=True)
APPEND_ONE: Final = _append_sql(_ONE_RECORD, move=False)
APPEND_ONE_FENCED: Final = _append_sql(_ONE_RECORD, move=False, fenced=True)
APPEND_ONE_PREPARED: Final = prepare("append_one", APPEND_ONE)
"""APPEND_ONE as the store sends it, through libpq (store/postgres/_prep.py)."""
APPEND_ONE_FENCED_PREPARED: Final = prepare("append_one_fenced", APPEND_ONE_FENCED)
"""APPEND_ONE_FENCED as the store sends it, through libpq."""

# The head of session s: one past its newest own record, or the row's end_seq.
HEAD: Final = (
    "GREATEST(s.end_seq, COALESCE((SELECT (r.key & 4294967295) + 1 FROM records r "
    "WHERE r.key >= (s.pk << 32) AND r.key < ((s.pk + 1) << 32) ORDER BY r.key DESC LIMIT 1), 0))"
)

def _write_sql(*, fenced: bool) -> str:
    """The row write (see :data:`WRITE`); ``fenced``: only at the writer's epoch.

    Fenced, it selects a second column: whether the epoch was the session's.
    """
    fence = f"fence AS ({FENCE}), " if fenced else ""
    gate = "\n      AND EXISTS (SELECT FROM fence)" if fenced else ""
    said = ", EXISTS (SELECT FROM fence)" if fenced else ""
    return f"""
WITH {fence}upd AS (
    UPDATE sessions s SET version = s.version + 1,
        updated_at = GREATEST(%(now)s, s.updated_at + 1,
            (SELECT max(updated_at) FROM sessions WHERE NOT deleted) + 1),
        title = %(title)s, bases = %(bases)s, end_seq = %(end_seq)s,
        end_msgs = %(end_msgs)s, view_start = %(view_start)s, view_msgs = %(view_msgs)s,
        status = %(status)s, scratchpad = %(scratchpad)s,
        scratchpad_version = %(scratchpad_version)s, metadata = %(metadata)s,
        base_owner = CASE WHEN s.bases = %(bases)s THEN s.base_owner END
    WHERE s.pk = %(pk)s AND NOT s.deleted AND s.version = %(row_version)s
      AND {HEAD} = %(head)s{gate}
    RETURNING s.updated_at
), ins AS (
    INSERT INTO records {_RECORD_COLUMNS}
    SELECT (%(pk)s::bigint << 32) | u.seq, u.mpos, u.rid, u.kind, u.payload, u.meta,
           u.created_at, u.tokens
    FROM {_UNNEST_RECORDS}
    WHERE EXISTS (SELECT FROM upd)
), pad AS (
    INSERT INTO scratchpads (session_pk, version, scratchpad, source, reason, metadata,
                             created_at)
    SELECT %(pk)s, %(sp_version)s, %(sp)s, %(sp_source)s, %(sp_reason)s, %(sp_metadata)s,
           upd.updated_at
    FROM upd WHERE %(has_sp)s
)
SELECT (SELECT updated_at FROM upd){said}
"""


# A row write: the UPDATE's WHERE is the compare-and-set on the row version and the head.
# A concurrent writer of the same row makes this one wait, then re-check the version.
WRITE: Final = _write_sql(fenced=False)
WRITE_FENCED: Final = _write_sql(fenced=True)

# A new session. Its base owner is the owner of its last segment when its other segments
# are that owner's own bases (see _pggc.collect); else NULL. The sessions it
# shares rows with must all still have their rows (a tombstone counts: its rows are still
# there), and keep them until it is in:
# - A branch of its base owner locks only that row, FOR SHARE: no write can change that
#   layout meanwhile, and a stored layout's owners are kept while it is (a collection
#   walks down the base-owner links to them, or keeps every owner of a kept layout, see
#   _pggc.collect and collect_all), which are all the branch's other owners.
# - Any other layout locks every owner FOR KEY SHARE (read from its bases in the statement).
# A delete that collects a row locks it first, so the two never cross. The base owner
# first: the source of a fork is the newest owner of its layout, and a delete locks its
# target before anything else, so a fork racing the delete of its source waits holding
# nothing.
CREATE: Final = f"""
WITH o AS (
    SELECT pk, bases = %(prefix)s AS branch FROM sessions WHERE pk = %(last_owner)s
    FOR SHARE
), owners AS (
    SELECT DISTINCT (e.value ->> 0)::bigint AS pk FROM jsonb_array_elements(
        (CASE WHEN (SELECT branch FROM o) THEN '[]' ELSE %(bases)s END)::jsonb) e
), b AS (
    SELECT pk FROM sessions WHERE pk IN (SELECT pk FROM owners)
    ORDER BY pk DESC FOR KEY SHARE
), new AS (
    INSERT INTO sessions (id, workspace, title, created_at, updated_at, version, bases,
        end_seq, end_msgs, view_start, view_msgs, parent_ids, lineage_operator, branched_at,
        status, scratchpad, scratchpad_version, metadata, base_owner)
    SELECT %(id)s, %(workspace)s, %(title)s, %(now)s, %(now)s, 1, %(bases)s, %(end_seq)s,
        %(end_msgs)s, %(view_start)s, %(view_msgs)s, %(parent_ids)s, %(lineage_operator)s,
        %(branched_at)s, %(status)s, %(scratchpad)s, %(scratchpad_version)s, %(metadata)s,
        (SELECT pk FROM o WHERE branch)
    WHERE (SELECT branch FROM o)
        OR (SELECT count(*) FROM b) = (SELECT count(*) FROM owners)
    RETURNING pk
), ins AS (
    INSERT INTO records {_RECORD_COLUMNS}
    SELECT (new.pk << 32) | u.seq, u.mpos, u.rid, u.kind, u.payload, u.meta, u.created_at,
           u.tokens
    FROM new, {_UNNEST_RECORDS}
), lin AS (
    INSERT INTO lineage (parent_id, child_id, ord)
    SELECT p.parent, %(id)s, p.ord - 1
    FROM new, unnest(%(parents)s::text[]) WITH ORDINALITY AS p(parent, ord)
)
SELECT (SELECT pk FROM new)
"""

# The same in a schema before version 6 (no sessions.base_owner; tests make old ones).
CREATE_UNLINKED: Final = CREATE.replace("metadata, base_owner)", "metadata)").replace(
    ",\n        (SELECT pk FROM o WHERE branch)", ""
)
_BASE_OWNER: Final = ",\n        base_owner = CASE WHEN s.bases = %(bases)s THEN s.base_owner END"
WRITE_UNLINKED: Final = WRITE.replace(_BASE_OWNER, "")
WRITE_UNLINKED_FENCED: Final = WRITE_FENCED.replace(_BASE_OWNER, "")

# The rows to keep: every live one, and every owner a kept layout lists (a tombstone
# still read is kept, and so are the owners its own layout lists). A tombstone no
# kept layout lists is garbage. Each layout lists all the owners it reads, so this is
# every owner a live layout lists, and more only where a layout read by a live one
# lists owners that live one does not: a branch being created (see CREATE) counts on
# its source's owners staying while its source does.
KEPT: Final = (
    "WITH RECURSIVE kept(pk) AS (SELECT pk FROM sessions WHERE NOT deleted UNION "
    "SELECT (e.value ->> 0)::bigint FROM kept JOIN sessions l ON l.pk = kept.pk "
    "CROSS JOIN jsonb_array_elements(l.bases::jsonb) e WHERE l.bases <> '[]')"
)

# The records of key ranges, in the ranges' order. ORDER BY and LIMIT in the lateral
# read: prepared, the statement runs a generic plan once custom ones have cost about as
# much (after a few long reads), and without them that plan joins each range to a scan
# of the whole table.
READ: Final = (
    "SELECT g.n, r.key, r.id, r.kind, r.payload, r.meta, r.created_at, r.tokens "
    "FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS g(lo, hi, n) "
    "CROSS JOIN LATERAL (SELECT * FROM records WHERE key >= g.lo AND key < g.hi "
    "ORDER BY key LIMIT g.hi - g.lo) r "
    "ORDER BY g.n, r.key"
)

READ_ONE: Final = (
    "SELECT id, kind, payload, meta, created_at, tokens FROM records "
    "WHERE key >= %s AND key < %s ORDER BY key"
)
"""``READ`` of one segment (most reads): a range scan in key order; a row's position is
its place in the run (the count is checked), so neither key nor segment is selected."""

_VIEW_COLUMNS: Final = (
    "SELECT r.kind, r.payload, CASE WHEN r.kind IN ('summary', 'event', 'opaque') "
    "THEN json_build_array(r.id, r.meta, r.created_at, r.tokens)::text END "
)
READ_VIEW: Final = (
    _VIEW_COLUMNS + "FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS g(lo, hi, n) "
    "CROSS JOIN LATERAL (SELECT * FROM records WHERE key >= g.lo AND key < g.hi "
    "ORDER BY key LIMIT g.hi - g.lo) r "
    "ORDER BY g.n, r.key"
)
"""``READ`` for a view read (``records.decode_view_rows``): a message's row is its kind and
payload; the other columns come, as one JSON array, only with the rows a view keeps whole.
No key, no segment number: a segment's range holds at most its span of rows, so when
the read has them all, each segment has all of its own, in order."""
READ_VIEW_ONE: Final = (
    _VIEW_COLUMNS + "FROM records r WHERE r.key >= %s AND r.key < %s ORDER BY r.key"
)
"""``READ_VIEW`` of one segment (most reads): a range scan in key order, nothing to sort."""


def key_ranges(parts: Sequence[tuple[int, int, int]]) -> tuple[str, str]:
    """The ``READ`` parameters of segments ``(owner, lo, hi)``: two bigint array literals.

    Literals, not lists: psycopg's list dumper costs about a microsecond an element,
    and a tail deep in a chain of branches has a segment per record.
    """
    los = ",".join(str((owner << SEQ_BITS) | a) for owner, a, _ in parts)
    his = ",".join(str((owner << SEQ_BITS) | b) for owner, _, b in parts)
    return f"{{{los}}}", f"{{{his}}}"


def record_arrays(
    records: Sequence[Record], mpos: int, seal: tuple[Sealer, DataKey] | None = None
) -> dict[str, list[Any]]:
    """The records as the parallel arrays ``_UNNEST_RECORDS`` reads.

    ``seal``: an encrypted store's sealer and the session's data key, which seal each
    record's payload and meta.
    """
    out: dict[str, list[Any]] = {
        "seq": [],
        "mpos": [],
        "rid": [],
        "kind": [],
        "payload": [],
        "meta": [],
        "created": [],
        "tokens": [],
    }
    for record in records:
        if record.seq > _SEQ_MAX:
            raise StoreError(f"position {record.seq} exceeds the store's limit {_SEQ_MAX}")
        out["seq"].append(record.seq)
        out["mpos"].append(mpos)
        out["rid"].append(record.id)
        out["kind"].append(record.kind)
        payload = encode_payload(record)
        meta = dumps(dict(record.meta)) if record.meta else None
        if seal is not None:
            sealer, key = seal
            payload, meta = sealer.seal_record(
                key, record.seq, record.id, record.kind, payload, meta
            )
        out["payload"].append(payload)
        out["meta"].append(meta)
        out["created"].append(record.created_at_us)
        out["tokens"].append(record.tokens)
        if record.kind != "event":
            mpos += 1
    return out


DIALECT: Final = Dialect(
    param="%s",
    greatest="GREATEST",
    least="LEAST",
    live="NOT deleted",
    live_s="NOT s.deleted",
    select_row=SELECT_ROW,
    key_share=" FOR KEY SHARE",
    # chr(1): a control character, which no session id may hold (PostgreSQL text
    # cannot hold the NUL SQLite's tombstones use).
    tombstone="deleted = true, id = chr(1) || pk",
    row_lock="SELECT 1 FROM sessions WHERE pk = %s FOR UPDATE",
    by_bytes=' COLLATE "C"',
    # A point read per step: without statistics the planner scans every edge per step.
    first_parent="CROSS JOIN LATERAL (SELECT parent_id FROM lineage "
    "WHERE child_id = up.id AND ord = 0 LIMIT 1) l",
)
"""How this engine spells what the shared statements leave open (``sql/_dialect.py``)."""
