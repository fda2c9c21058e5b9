"""The PostgreSQL store's collection of rows no layout reads (D164, D208).

A delete walks up the base owner links from what it deleted and drops each tombstone
no row still branches from, with its records; a layout that is not a branch of its base
owner, or a store without the links, makes it read every layout instead. Both run in
the deleting transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from plait.store.postgres._sql import KEPT

if TYPE_CHECKING:
    import psycopg

__all__ = ["collect", "collect_all"]


def collect(conn: psycopg.Connection[tuple[Any, ...]], pks: list[int]) -> None:
    """Drop the tombstones no live layout reads any more, with their rows.

    Walks up the base owner links from each of ``pks`` as the SQLite store does (see
    ``store.sqlite._gc.collect``): each tombstone is locked, then looked at again
    (a fresh snapshot: a fork that held it ``FOR KEY SHARE`` has committed by
    then and is seen; a later one waits, then finds it gone), and dropped when
    no row names it as its base owner. A stored layout that is not a branch of
    its base owner makes it read every layout instead (:func:`collect_all`).
    """
    for pk in pks:
        current: int | None = pk
        while current is not None:
            locked = conn.execute(
                "SELECT base_owner FROM sessions WHERE pk = %s AND deleted FOR UPDATE",
                (current,),
            ).fetchone()
            if locked is None:
                break
            looked = conn.execute(
                "SELECT EXISTS (SELECT FROM sessions WHERE base_owner = %s), EXISTS (SELECT "
                "FROM sessions WHERE base_owner IS NULL AND bases <> '[]')",
                (current,),
            ).fetchone()
            assert looked is not None  # a SELECT of two values returns one row
            read_by, irregular = looked
            if irregular:
                collect_all(conn)
                return
            if read_by:
                break
            conn.execute(
                "WITH gone AS (DELETE FROM records WHERE key >= (%(pk)s::bigint << 32) "
                "AND key < ((%(pk)s::bigint + 1) << 32)) "
                "DELETE FROM sessions WHERE pk = %(pk)s",
                {"pk": current},
            )
            current = locked[0]

def collect_all(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """Drop every tombstone no kept layout lists, reading every layout.

    Lock the candidates first, then look again: a fork that locked one (its
    source, see ``CREATE``) has committed by then and is seen by the second look
    (a fresh snapshot); a later one waits, then finds its source gone. The
    source's owners are kept with it (:data:`KEPT`), so they need no lock.
    """
    candidates = [
        int(r[0])
        for r in conn.execute(
            f"{KEPT} SELECT pk FROM sessions WHERE deleted "
            "AND pk NOT IN (SELECT pk FROM kept) ORDER BY pk FOR UPDATE"
        ).fetchall()
    ]
    if not candidates:
        return
    conn.execute(
        f"{KEPT}, garbage AS (SELECT pk FROM sessions WHERE pk = ANY(%s::bigint[]) "
        "AND deleted AND pk NOT IN (SELECT pk FROM kept)), "
        "gone AS (DELETE FROM records r USING garbage g "
        "WHERE r.key >= (g.pk << 32) AND r.key < ((g.pk + 1) << 32)) "
        "DELETE FROM sessions WHERE pk IN (SELECT pk FROM garbage)",
        (candidates,),
    )
