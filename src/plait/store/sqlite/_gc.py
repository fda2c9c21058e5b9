"""The SQLite store's collection of rows no layout reads, and the owner check of a branch.

See D164: every stored layout but a root's names its base owner, so a delete walks up
those links from what it deleted instead of reading every layout.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Final

from plait.records import dumps
from plait.store.sql._rows import SEQ_BITS, prefix_text

__all__ = ["collect", "collect_all", "owners_found"]

_SHIFT: Final = SEQ_BITS

_OWNERS_FOUND: Final = (
    "SELECT COUNT(*) FROM json_each(?) AS j CROSS JOIN sessions AS s ON s.pk = j.value"
)
"""How many of the owners (a JSON list of distinct keys) still have a row, tombstones included."""

_IRREGULAR: Final = "SELECT 1 FROM sessions WHERE base_owner IS NULL AND bases <> '[]' LIMIT 1"
"""A stored layout that is not a branch of its base owner (see :func:`collect`)."""

_READ_BY: Final = "SELECT 1 FROM sessions WHERE base_owner = ? LIMIT 1"
"""A row (live, or a tombstone still read) whose layout is a branch of this owner."""


def owners_found(
    db: sqlite3.Connection, bases: tuple[tuple[int, int], ...], text: str
) -> int | None:
    """Whether every owner a new layout reads still has its row (tombstones count).

    ``text`` is the layout's ``bases`` column. Returns None if one is missing;
    else the layout's base owner (the owner of its last segment) when the
    layout is a branch of it, or 0 (a root, or a layout of any other shape).

    A stored row's owners are all kept while it is (a collection frees an owner
    only when no live layout reads it, and a layout reads the owners before
    each of its segments too), so when the newest owner is there with exactly
    the segments before it as its own bases, the rest are there: one point
    read, a compare of the texts, however long the chain of branches. Any
    other layout has every owner looked up, in one statement.
    """
    if not bases:
        return 0
    last = bases[-1][0]
    found = db.execute(
        "SELECT bases = ? FROM sessions WHERE pk = ?", (prefix_text(bases, text), last)
    ).fetchone()
    if found is None:
        return None
    if found[0]:
        return int(last)
    owners = sorted({owner for owner, _ in bases})
    if db.execute(_OWNERS_FOUND, (dumps(owners),)).fetchone()[0] != len(owners):
        return None
    return 0


def collect(db: sqlite3.Connection, pks: list[int], *, links: bool) -> None:
    """Drop the tombstones no live layout reads any more, with their rows.

    Every stored layout but a root's is a branch of its base owner (the
    owner of its last segment, whose own bases are all the segments before
    it), so a layout reads its base owner and everything that one reads. A
    tombstone of ``pks`` is read by nobody when no row names it as its base
    owner; once it goes, its own base owner may be next: the walk goes up
    those links and stops at the first owner still read, an index lookup
    each, so a delete costs what it frees. A layout of another shape (only a
    caller of the store protocol can write one), or a schema without the
    links (``links`` False), makes it fall back to reading every layout.
    """
    if not links or db.execute(_IRREGULAR).fetchone() is not None:
        collect_all(db)
        return
    for pk in pks:
        current: int | None = pk
        while current is not None:
            found = db.execute(
                "SELECT base_owner FROM sessions WHERE pk = ? AND deleted = 1", (current,)
            ).fetchone()
            if found is None or db.execute(_READ_BY, (current,)).fetchone() is not None:
                break
            db.execute(
                "DELETE FROM records WHERE key >= ? AND key < ?",
                (current << _SHIFT, (current + 1) << _SHIFT),
            )
            db.execute("DELETE FROM sessions WHERE pk = ?", (current,))
            current = found[0]


def collect_all(db: sqlite3.Connection) -> None:
    """Drop every tombstone no live layout reads, reading every layout."""
    referenced: set[int] = set()
    for (bases,) in db.execute("SELECT bases FROM sessions WHERE deleted = 0"):
        referenced.update(int(owner) for owner, _ in json.loads(bases))
    tombstones = [int(r[0]) for r in db.execute("SELECT pk FROM sessions WHERE deleted = 1")]
    # A tombstone read only by other tombstones is garbage too: iterate to a fixed point
    # by counting only references from live sessions (above), which is already that.
    for pk in tombstones:
        if pk in referenced:
            continue
        db.execute(
            "DELETE FROM records WHERE key >= ? AND key < ?",
            (pk << _SHIFT, (pk + 1) << _SHIFT),
        )
        db.execute("DELETE FROM sessions WHERE pk = ?", (pk,))
