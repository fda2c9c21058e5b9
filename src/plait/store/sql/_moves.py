"""Moving a session's head, and erasing a session: the SQL both stores share.

A rewind cannot cut a session's own rows in place: a record's key is
``owner << 32 | seq``, so the next append at the cut would collide with the
rows past it. Instead the session's id moves to a new row whose layout shares
the old one up to the cut (a ``fork_at`` in all but name), and the old row stays,
under a new id, as a *hidden head*: a child of the session in the lineage with
the operator :data:`HIDDEN_OPERATOR`, listed nowhere else. Undoing a rewind moves
the id back onto that row. Either way one transaction renames one row and
inserts or renames another, whatever the transcript's length or the number of
sessions in the store.

Erasing removes a session, its hidden heads and every record of theirs that no
live layout still reads (a fork made earlier keeps the rows it shares).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from plait.errors import InvalidArgumentError, SessionNotFoundError, StaleSessionError
from plait.records import Record, dumps, encode_payload
from plait.store.base import HIDDEN_OPERATOR, SessionRow
from plait.store.sql._rows import ROW_COLUMNS, SEQ_BITS, row_from_columns, row_values

if TYPE_CHECKING:
    from plait.store.sql._sealing import Sealer
    from plait.store.sql._sealstore import SQLSealing
    from plait.store.sql._store import Connection, Dialect

__all__ = ["HIDDEN_OPERATOR", "erase_sessions", "hidden_heads", "move_head"]

_SHIFT: Final = SEQ_BITS


def hidden_heads(conn: Connection, d: Dialect, session_id: str) -> list[str]:
    """The ids of a session's hidden heads, theirs too, nearest first."""
    children = d.sql(
        "SELECT s.id FROM lineage l JOIN sessions s ON s.id = l.child_id "
        "WHERE l.parent_id = ? AND {live_s} AND s.lineage_operator = ? ORDER BY s.pk"
    )
    found: list[str] = []
    todo = [session_id]
    while todo:
        parent = todo.pop()
        for (child,) in conn.execute(children, (parent, HIDDEN_OPERATOR)).fetchall():
            if child not in found and child != session_id:
                found.append(child)
                todo.append(child)
    return found


def _row(conn: Connection, d: Dialect, pk: int, sealer: Sealer | None) -> SessionRow | None:
    r = conn.execute(d.sql("{select_row} WHERE s.pk = ? AND {live_s}"), (pk,)).fetchone()
    return row_from_columns(r, None, sealer) if r is not None else None


def move_head(
    conn: Connection,
    d: Dialect,
    expected: SessionRow,
    head: SessionRow,
    hidden_id: str,
    records: Sequence[Record],
    now_us: int,
    store: SQLSealing,
) -> int:
    """Give ``expected``'s id to ``head``, keeping the row it named as ``hidden_id``.

    Runs inside the caller's write transaction. ``head`` is either a new row
    (``pk == 0``, its layout branching from ``expected``'s, with ``records``
    appended at its end) or a hidden head of this session (an undo). The id's
    identity (title, status, settings, scratchpad and its history, lineage,
    creation time, live clients) stays with the id; only the transcript moves.

    Returns:
        The key of the row that now has the id. In an encrypted store (``store``'s
        sealer) a new row gets a data key of its own; an undo seals the id's columns
        under the key of the row it moves back to.

    Raises:
        StaleSessionError: the session changed since ``expected`` (nothing written).
        SessionNotFoundError: the session is gone.
        InvalidArgumentError: ``head`` is a stored row that is not one of its hidden heads.
    """
    sealer = store._sealer
    if d.row_lock:
        conn.execute(d.row_lock, (expected.pk,))
    current = _row(conn, d, expected.pk, sealer)
    if current is None:
        raise SessionNotFoundError(expected.id)
    if (current.row_version, current.layout.end_seq) != (
        expected.row_version,
        expected.layout.end_seq,
    ):
        raise StaleSessionError(expected.id, expected.version, current.version)
    end = head.layout.end_seq
    if head.pk:
        incoming = _row(conn, d, head.pk, sealer)
        if (
            incoming is None
            or incoming.lineage_operator != HIDDEN_OPERATOR
            or tuple(incoming.parent_ids) != (current.id,)
        ):
            raise InvalidArgumentError(f"{head.id!r} is not a hidden head of {current.id!r}")
        end = incoming.layout.end_seq
    # The id's version keeps growing: it is what compare-and-set and stamps compare.
    version = max(1, current.version + 1 - end)
    conn.execute(
        d.sql(
            "UPDATE sessions SET id = ?, parent_ids = ?, lineage_operator = ?, "
            "branched_at = NULL, version = version + 1, updated_at = ? WHERE pk = ?"
        ),
        (hidden_id, dumps([current.id]), HIDDEN_OPERATOR, now_us, current.pk),
    )
    identity = (
        dumps(list(current.parent_ids)),
        current.lineage_operator,
        current.branched_at,
        current.created_at_us,
    )
    if head.pk == 0:
        key = sealer.new_key() if sealer is not None else None
        columns = ", ".join(ROW_COLUMNS)
        marks = ", ".join("?" * len(ROW_COLUMNS))
        pk = int(
            conn.execute(
                d.sql(
                    "INSERT INTO sessions (id, workspace, parent_ids, lineage_operator, "
                    f"branched_at, created_at, updated_at, version, {columns}) "
                    f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, {marks}) RETURNING pk"
                ),
                (
                    current.id,
                    current.workspace,
                    *identity,
                    now_us,
                    version,
                    *row_values(head, sealer, key),
                ),
            ).fetchone()[0]
        )
        store._bind_key(conn, key, pk)
        mpos = head.layout.end_msgs - sum(1 for r in records if r.kind != "event")
        insert = d.sql(
            "INSERT INTO records (key, mpos, id, kind, payload, meta, created_at, tokens) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        )
        for record in records:
            conn.execute(insert, _record_values(pk, record, mpos, sealer))
            mpos += record.kind != "event"
    else:
        pk = head.pk
        conn.execute(d.sql("DELETE FROM lineage WHERE child_id = ?"), (head.id,))
        conn.execute(
            d.sql(
                "UPDATE sessions SET id = ?, parent_ids = ?, lineage_operator = ?, "
                "branched_at = ?, created_at = ?, updated_at = ?, version = ?, title = ?, "
                "status = ?, scratchpad = ?, scratchpad_version = ?, metadata = ? WHERE pk = ?"
            ),
            (current.id, *identity, now_us, version, *_identity_values(current, sealer, pk), pk),
        )
        conn.execute(d.sql("DELETE FROM scratchpads WHERE session_pk = ?"), (pk,))
        conn.execute(d.sql("DELETE FROM live_clients WHERE session_pk = ?"), (pk,))
    conn.execute(
        d.sql("INSERT INTO lineage (parent_id, child_id, ord) VALUES (?, ?, 0)"),
        (current.id, hidden_id),
    )
    for table in ("scratchpads", "live_clients"):
        conn.execute(
            d.sql(f"UPDATE {table} SET session_pk = ? WHERE session_pk = ?"), (pk, current.pk)
        )
    return pk


def _identity_values(row: SessionRow, sealer: Sealer | None, pk: int) -> tuple[Any, ...]:
    """title, status, scratchpad, scratchpad_version, metadata: as ``row_values`` encodes them.

    Sealed, in an encrypted store, under the key of the row ``pk`` they are written to.
    """
    key = sealer.owner_key(pk) if sealer is not None else None
    values = dict(zip(ROW_COLUMNS, row_values(row, sealer, key), strict=True))
    return tuple(
        values[c] for c in ("title", "status", "scratchpad", "scratchpad_version", "metadata")
    )


def _record_values(pk: int, record: Record, mpos: int, sealer: Sealer | None) -> tuple[Any, ...]:
    payload = encode_payload(record)
    meta = dumps(dict(record.meta)) if record.meta else None
    if sealer is not None:
        key = sealer.owner_key(pk)
        payload, meta = sealer.seal_record(key, record.seq, record.id, record.kind, payload, meta)
    return (
        (pk << _SHIFT) | record.seq,
        mpos,
        record.id,
        record.kind,
        payload,
        meta,
        record.created_at_us,
        record.tokens,
    )


def erase_sessions(
    conn: Connection, d: Dialect, session_id: str, sealer: Sealer | None = None
) -> list[int]:
    """Tombstone a session and its hidden heads, and delete every row of theirs nobody reads.

    Runs inside the caller's write transaction. A record another live layout
    still reads (a fork's shared prefix) stays, with the tombstone that owns it;
    every later record of that owner goes. Reads every live layout once: erasing
    is rare, and what it must not delete is exactly what those layouts say.

    In an encrypted store (``sealer``) a session row that goes takes its data key with
    it; a tombstone kept for a fork has the rows it keeps sealed again under a new key
    and its own columns cleared, and its old key is destroyed: nothing the erased
    session wrote past what the fork reads opens any more, from any copy (D322).

    Returns:
        The keys of the sessions erased.

    Raises:
        SessionNotFoundError: no live session has this id.
    """
    ids = [session_id, *hidden_heads(conn, d, session_id)]
    pks: list[int] = []
    pk_of = d.sql("SELECT pk FROM sessions WHERE id = ? AND {live}")
    for sid in ids:
        found = conn.execute(pk_of, (sid,)).fetchone()
        if found is None:
            if sid == session_id:
                raise SessionNotFoundError(session_id)
            continue
        pk = int(found[0])
        pks.append(pk)
        conn.execute(d.sql(f"UPDATE sessions SET {d.tombstone} WHERE pk = ?"), (pk,))
        conn.execute(d.sql("DELETE FROM lineage WHERE child_id = ?"), (sid,))
        conn.execute(d.sql("DELETE FROM scratchpads WHERE session_pk = ?"), (pk,))
        conn.execute(d.sql("DELETE FROM live_clients WHERE session_pk = ?"), (pk,))
    read_upto: dict[int, int] = {}
    erased = set(pks)
    for (bases,) in conn.execute(d.sql("SELECT bases FROM sessions WHERE {live}")).fetchall():
        for owner, hi in _bases(bases):
            if owner in erased:
                read_upto[owner] = max(read_upto.get(owner, 0), hi)
    for pk in pks:
        lo = read_upto.get(pk, 0)
        conn.execute(
            d.sql("DELETE FROM records WHERE key >= ? AND key < ?"),
            ((pk << _SHIFT) | lo, (pk + 1) << _SHIFT),
        )
        if pk not in read_upto:
            conn.execute(d.sql("DELETE FROM sessions WHERE pk = ?"), (pk,))
        elif sealer is not None:
            _reseal_kept(conn, d, sealer, pk, lo)
    return pks


def _reseal_kept(conn: Connection, d: Dialect, sealer: Sealer, pk: int, lo: int) -> None:
    """Seal the rows ``[0, lo)`` of ``pk`` a fork still reads under a new key; drop the old.

    The tombstone's title and scratchpad are cleared and its metadata emptied (sealed
    under the new key): the erased session keeps nothing but what the fork reads.
    """
    base = pk << _SHIFT
    rows = conn.execute(
        d.sql("SELECT key, id, kind, payload, meta FROM records WHERE key >= ? AND key < ?"),
        (base, base | lo),
    ).fetchall()
    opened = sealer.open_rows(rows)  # under the old key, before it goes
    conn.execute(d.sql("DELETE FROM data_keys WHERE owner_pk = ?"), (pk,))
    key = sealer.new_key()
    conn.execute(
        d.sql("INSERT INTO data_keys (kid, owner_pk, wrapped) VALUES (?, ?, ?)"),
        sealer.bind(key, pk),
    )
    update = d.sql("UPDATE records SET payload = ?, meta = ? WHERE key = ?")
    for row_key, rid, kind, payload, meta in opened:
        sealed = sealer.seal_record(key, row_key & ((1 << _SHIFT) - 1), rid, kind, payload, meta)
        conn.execute(update, (*sealed, row_key))
    empty = sealer.seal_columns(key, ("metadata",), ("{}",), frozenset({"metadata"}))[0]
    conn.execute(
        d.sql("UPDATE sessions SET title = NULL, scratchpad = NULL, metadata = ? WHERE pk = ?"),
        (empty, pk),
    )


def _bases(text: str) -> list[tuple[int, int]]:
    return [(int(owner), int(hi)) for owner, hi in json.loads(text)]
