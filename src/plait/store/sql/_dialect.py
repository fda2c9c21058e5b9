"""How the two SQL engines spell the shared statements, and the statements themselves.

A :class:`Dialect` holds one engine's spellings (placeholders, ``MAX`` / ``GREATEST``,
the ``deleted`` flag, the head join, row locks, tombstones); :class:`Statements`
spells every statement :class:`~plait.store.sql._store.SQLStore` shares, once per store
class. :class:`Connection` and :class:`Cursor` are what the shared code calls on a
DB-API connection, sqlite3's or psycopg's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from plait.store.base import HIDDEN_OPERATOR
from plait.store.sql._rows import BEARER_COLUMNS, LIVE_COLUMNS

__all__ = ["Connection", "Cursor", "Dialect", "Statements"]


class Cursor(Protocol):
    """What the shared code reads of a DB-API cursor (sqlite3's or psycopg's)."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...


class Connection(Protocol):
    """What the shared code calls on a connection (sqlite3's or psycopg's)."""

    def execute(self, query: str, params: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement."""
        ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL engine spells what the shared statements need."""

    param: str
    """The positional placeholder: ``?`` or ``%s``."""
    greatest: str
    """The larger of two values: ``MAX`` (SQLite's scalar form) or ``GREATEST``."""
    least: str
    """The smaller of two values: ``MIN`` or ``LEAST``."""
    live: str
    """A live (not deleted) session row, as a condition on ``deleted``."""
    live_s: str
    """The same condition on the session row ``s``."""
    select_row: str
    """``SELECT`` of a session row ``s`` with its head (its newest own record ``h``)."""
    key_share: str
    """The lock a live-client write takes on its session row (``FOR KEY SHARE`` or none)."""
    tombstone: str
    """The ``SET`` list that makes a row a tombstone giving up its id (to a value no id takes)."""
    by_bytes: str = ""
    """What makes a comparison of ids go by code point (``COLLATE "C"``), where the
    engine's default may not (PostgreSQL follows the database's collation)."""
    row_lock: str = ""
    """A statement locking the session row ``pk = ?`` against appends, or none (SQLite's
    ``BEGIN IMMEDIATE`` already holds every writer off)."""
    select_row_kept: str = ""
    """:attr:`select_row` with ``bases`` NULL where it equals the first parameter (a
    layout this process holds decoded), or none: a long layout is then compared in the
    engine instead of being handed over and compared again (SQLite, D217)."""
    first_parent: str = "JOIN lineage l ON l.child_id = up.id AND l.ord = 0"
    """How a step of the ancestors' walk joins ``up.id`` to its first parent's edge ``l``."""

    def sql(self, template: str) -> str:
        """Spell a shared statement in this dialect.

        ``?`` becomes :attr:`param`; ``{live}``, ``{live_s}``, ``{greatest}``,
        ``{least}``, ``{select_row}`` and ``{key_share}`` become their forms.
        """
        text = template.format(
            live=self.live,
            live_s=self.live_s,
            greatest=self.greatest,
            least=self.least,
            select_row=self.select_row,
            key_share=self.key_share,
        )
        return text.replace("?", self.param) if self.param != "?" else text


class Statements:
    """Every shared statement, spelled once per dialect when its store class is made."""

    def __init__(self, d: Dialect) -> None:
        order = "ORDER BY s.updated_at DESC, s.pk DESC LIMIT ?"
        # A hidden head (what an id named before a rewind) is listed only in the lineage.
        shown = f" AND (s.lineage_operator IS NULL OR s.lineage_operator <> '{HIDDEN_OPERATOR}') "
        self.get = d.sql("{select_row} WHERE s.id = ? AND {live_s}")
        self.get_kept = (
            d.sql(d.select_row_kept + " WHERE s.id = ? AND {live_s}") if d.select_row_kept else ""
        )
        self.row_by_pk = d.sql("{select_row} WHERE s.pk = ? AND {live_s}")
        self.recent_all = d.sql("{select_row} WHERE {live_s}" + shown + order)
        self.recent = d.sql("{select_row} WHERE s.workspace = ? AND {live_s}" + shown + order)
        after = f"s.id{d.by_bytes} >= ? AND s.id{d.by_bytes} < ? AND "
        self.prefix_all = d.sql("{select_row} WHERE " + after + "{live_s}" + shown + order)
        # The workspace is compared as an expression, which no index serves: the range of
        # ids is what narrows the listing (a workspace may hold every session).
        self.prefix = d.sql(
            "{select_row} WHERE " + after + "s.workspace || '' = ? AND {live_s}" + shown + order
        )
        self.live_rows = d.sql("{select_row} WHERE {live_s}")
        self.children = d.sql(
            "SELECT s.id FROM lineage l JOIN sessions s ON s.id = l.child_id "
            "WHERE l.parent_id = ? AND {live_s} ORDER BY s.pk"
        )
        # First parents from the lineage edges (ord 0 is parent_ids[0]; a deleted child's
        # edges go with it). A parent is live exactly when a session has its id: a tombstone
        # gives its id up. So every step reads two indexes and no session row, whose
        # layout a deep chain makes long.
        self.ancestors = d.sql(
            "WITH RECURSIVE up(id, n) AS (SELECT CAST(? AS TEXT), 0 UNION ALL "
            f"SELECT l.parent_id, up.n + 1 FROM up {d.first_parent} WHERE up.n < ? "
            "AND EXISTS (SELECT 1 FROM sessions p WHERE p.id = l.parent_id)) "
            "SELECT id FROM up WHERE n > 0 ORDER BY n"
        )
        self.link_base_owner = d.sql(
            "UPDATE sessions SET base_owner = (SELECT o.pk FROM sessions o "
            "WHERE o.pk = ? AND o.bases = ?) WHERE pk = ?"
        )
        self.probe = d.sql("SELECT mpos, kind FROM records WHERE key = ?")
        self.scratchpads = d.sql(
            "SELECT p.version, p.scratchpad, p.source, p.reason, p.metadata, p.created_at "
            "FROM scratchpads p JOIN sessions s ON s.pk = p.session_pk "
            "WHERE s.id = ? AND {live_s} ORDER BY p.version"
        )
        self.orphans = (
            "SELECT DISTINCT key >> 32 FROM records EXCEPT SELECT pk FROM sessions ORDER BY 1"
        )
        self.counted = d.sql(
            "SELECT key FROM records WHERE key >= ? AND key < ? AND running IS NOT NULL "
            "ORDER BY key DESC LIMIT 1"
        )
        self.tally = d.sql("SELECT running FROM records WHERE key = ?")
        self.bearer_insert = d.sql(
            f"INSERT INTO durable_sessions ({BEARER_COLUMNS}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        )
        self.bearer_get = d.sql(
            f"SELECT {BEARER_COLUMNS} FROM durable_sessions WHERE token_hash = ?"
        )
        self.bearer_touch = d.sql(
            "UPDATE durable_sessions SET last_seen_at = {greatest}(last_seen_at, ?) "
            f"WHERE token_hash = ? AND expires_at > ? RETURNING {BEARER_COLUMNS}"
        )
        self.bearer_expire = d.sql(
            "UPDATE durable_sessions SET expires_at = ?, last_seen_at = {least}(last_seen_at, ?) "
            "WHERE token_hash = ? AND expires_at > ?"
        )
        self.bearer_purge = d.sql("DELETE FROM durable_sessions WHERE expires_at < ?")
        self.live_pk = d.sql("SELECT pk FROM sessions WHERE id = ? AND {live}{key_share}")
        self.live_row = d.sql(
            f"SELECT {LIVE_COLUMNS} FROM live_clients c JOIN sessions s ON s.pk = c.session_pk "
            "WHERE c.session_pk = ? AND c.client_id = ?"
        )
        self.live_controller = d.sql(
            "SELECT client_id FROM live_clients WHERE session_pk = ? AND mode = 'controller'"
        )
        self.live_demote = d.sql(
            "UPDATE live_clients SET mode = 'observer' WHERE session_pk = ? AND client_id = ?"
        )
        self.live_upsert = d.sql(
            "INSERT INTO live_clients (session_pk, client_id, mode, attached_at, "
            "last_seen_at, metadata) VALUES (?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (session_pk, client_id) DO UPDATE SET mode = excluded.mode, "
            "last_seen_at = excluded.last_seen_at, metadata = excluded.metadata"
        )
        self.live_heartbeat = d.sql(
            "UPDATE live_clients SET last_seen_at = {greatest}(last_seen_at, ?), "
            "metadata = COALESCE(?, metadata) WHERE session_pk = ? AND client_id = ?"
        )
        self.live_delete = d.sql("DELETE FROM live_clients WHERE session_pk = ? AND client_id = ?")
        self.live_clients = d.sql(
            f"SELECT {LIVE_COLUMNS} FROM live_clients c JOIN sessions s "
            "ON s.pk = c.session_pk WHERE s.id = ? AND {live_s} "
            "ORDER BY c.attached_at, c.client_id"
        )
