"""Salvage a damaged SQLite store: copy every row that can still be read into a new file.

SQLite's own ``.recover`` needs a ``sqlite3`` shell built with the ``dbpage``
table, which many distributions' shells are not. This copies at the level of
plait's tables instead: each table is read in key ranges, a range that meets a
damaged page is read a row at a time, and every row read goes into a fresh
store file at the current schema, in one transaction. The damaged file is only
read. What could not be read is counted, so ``plait db check --deep`` on the new
file then names each session with records missing.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from plait.errors import InvalidArgumentError, StoreError
from plait.store.sql._rows import SEQ_BITS

__all__ = ["Salvaged", "salvage"]

_CHUNK: Final = 512
_EMPTY_RUNS: Final = 4
"""Empty key ranges read in a row before a table whose end is unknown is taken as done."""
_RANGED: Final = frozenset({"sessions", "records", "plait_schema"})
"""Tables copied by key ranges (sessions, records) or written by the new store itself."""
_BATCH: Final = 256
_DAMAGED: Final = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB: what reading a damaged file raises


@dataclass(slots=True)
class Salvaged:
    """What :func:`salvage` copied and what it could not read."""

    target: str
    """The new store file."""
    sessions: int = 0
    """Session rows copied (deleted ones that branches still read included)."""
    records: int = 0
    """Records copied."""
    lost_sessions: int = 0
    """Session keys that could not be read (a key of a session deleted long ago may be one)."""
    lost_records: int = 0
    """Records that could not be read, at positions their session's row says it holds."""
    lost_tables: list[str] = field(default_factory=list)
    """Other tables (lineage, scratchpads, checkpoint objects, ...) not read in full."""


def salvage(source: str | Path, target: str | Path) -> Salvaged:
    """Copy every readable row of the SQLite store ``source`` into a new store ``target``.

    Raises:
        InvalidArgumentError: ``target`` exists, or is ``source``.
        StoreError: ``source`` cannot be opened at all, or ``target`` cannot be written.
    """
    from plait.store.sqlite import SQLiteStore

    src_path, dst_path = Path(source).resolve(), Path(target).resolve()
    if dst_path == src_path:
        raise InvalidArgumentError("salvage into a new file, not the damaged one")
    if dst_path.exists():
        raise InvalidArgumentError(f"{dst_path} exists: salvage writes a new file")
    if not src_path.is_file():
        raise InvalidArgumentError(f"no store at {src_path}")
    SQLiteStore(dst_path).close()  # the schema, at this plait's version
    report = Salvaged(str(dst_path))
    try:
        src = sqlite3.connect(f"{src_path.as_uri()}?mode=ro", uri=True)
        dst = sqlite3.connect(dst_path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {src_path}: {exc}") from exc
    with contextlib.closing(src), contextlib.closing(dst):
        try:
            dst.execute("BEGIN IMMEDIATE")
            # The new file takes the damaged one's keys (an encrypted store's rows open
            # with them only), not those it made if opened with $PLAIT_ENCRYPTION_KEY.
            dst.execute("DELETE FROM data_keys")
            _copy_all(src, dst, report)
            dst.execute("COMMIT")
        except sqlite3.Error as exc:
            if dst.in_transaction:
                dst.execute("ROLLBACK")
            raise StoreError(f"salvage into {dst_path}: {exc}") from exc
    return report


def _copy_all(src: sqlite3.Connection, dst: sqlite3.Connection, report: Salvaged) -> None:
    cols = {t: _shared_columns(src, dst, t) for t in ("sessions", "records")}
    if not {"pk", "end_seq"} <= set(cols["sessions"]) or "key" not in cols["records"]:
        raise sqlite3.DatabaseError("it holds no plait sessions and records to copy")
    end = _known_end(src, "SELECT seq FROM sqlite_sequence WHERE name = 'sessions'")
    span: tuple[int, int | None, int, int] = (1, None, end if end is not None else 0, 1 << 31)
    sessions = list(_ranges(src, "sessions", cols["sessions"], "pk", span, report, "lost_sessions"))
    _insert(dst, "sessions", cols["sessions"], sessions)
    report.sessions = len(sessions)
    pk_at, end_at = cols["sessions"].index("pk"), cols["sessions"].index("end_seq")
    for row in sessions:
        pk = int(row[pk_at])
        lo, hi = pk << SEQ_BITS, (pk + 1) << SEQ_BITS
        last = _known_end(src, "SELECT MAX(key) FROM records WHERE key >= ? AND key < ?", lo, hi)
        expected = last if last is not None else lo + int(row[end_at]) - 1
        span = (lo, last, expected, hi)
        found = list(_ranges(src, "records", cols["records"], "key", span, report, "lost_records"))
        _insert(dst, "records", cols["records"], found)
        report.records += len(found)
    for table in _other_tables(dst):
        columns = _shared_columns(src, dst, table)
        if columns:
            _copy_table(src, dst, table, columns, report)


def _other_tables(dst: sqlite3.Connection) -> list[str]:
    """Every table of the schema but the two copied range by range and the bookkeeping.

    The full-text index (``record_text``, its FTS5 shadow tables and what it owes) is
    not copied: the new file indexes the records it holds at its first search.
    """
    names = dst.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return [
        str(n)
        for (n,) in names
        if n not in _RANGED and not str(n).startswith(("sqlite_", "record_text"))
    ]


def _copy_table(
    src: sqlite3.Connection,
    dst: sqlite3.Connection,
    table: str,
    columns: list[str],
    report: Salvaged,
) -> None:
    """Copy a table whole, a batch at a time (checkpoint parts can be large); stop at damage."""
    names = ", ".join(columns)
    insert = f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(columns))})"
    try:
        cursor = src.execute(f"SELECT {names} FROM {table}")
        batch = cursor.fetchmany(_BATCH)
        while batch:
            dst.executemany(insert, batch)  # an error here is the new file's: raised
            batch = cursor.fetchmany(_BATCH)
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _DAMAGED:
            raise  # the new file's error, not the damaged one's
        report.lost_tables.append(table)


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")]


def _shared_columns(src: sqlite3.Connection, dst: sqlite3.Connection, table: str) -> list[str]:
    """The new table's columns the damaged file has too (an older schema may lack some).

    Empty for a table the damaged file has not; the new rows get a new column's default.
    """
    have = set(_columns(src, table))
    return [c for c in _columns(dst, table) if c in have]


def _known_end(src: sqlite3.Connection, query: str, *params: int) -> int | None:
    """A table's last key, if the pages on the way to it can be read."""
    try:
        found = src.execute(query, params).fetchone()
    except sqlite3.DatabaseError:
        return None
    return int(found[0]) if found is not None and found[0] is not None else None


def _ranges(
    src: sqlite3.Connection,
    table: str,
    columns: list[str],
    key: str,
    span: tuple[int, int | None, int, int],
    report: Salvaged,
    lost: str,
) -> Iterator[tuple[Any, ...]]:
    """The readable rows of ``table`` whose ``key`` lies in ``span``, in key order.

    ``span`` is ``(lo, last, expected, limit)``: the first key; the last one when it
    could be read (else None); the key up to which rows are expected (unreadable
    keys up to it are counted in ``report.<lost>``); and one past the largest key
    possible. With no last key, reading goes on past ``expected`` until
    :data:`_EMPTY_RUNS` ranges in a row hold nothing.
    """
    lo, last, expected, limit = span
    names = ", ".join(columns)
    select = f"SELECT {names} FROM {table} WHERE {key} >= ? AND {key} < ? ORDER BY {key}"
    point = f"SELECT {names} FROM {table} WHERE {key} = ?"
    start, empty = lo, 0
    while start < limit:
        if last is not None and start > last:
            return
        if last is None and start > expected and empty >= _EMPTY_RUNS:
            return
        stop = min(start + _CHUNK, limit)
        try:
            rows = src.execute(select, (start, stop)).fetchall()
        except sqlite3.DatabaseError:
            rows = []
            for k in range(start, stop):
                try:
                    one = src.execute(point, (k,)).fetchone()
                except sqlite3.DatabaseError:
                    if k <= expected:
                        setattr(report, lost, getattr(report, lost) + 1)
                    continue
                if one is not None:
                    rows.append(one)
        empty = 0 if rows else empty + 1
        for row in rows:
            yield tuple(row)
        start = stop


def _insert(dst: sqlite3.Connection, table: str, columns: list[str], rows: list[Any]) -> None:
    if rows:
        marks = ", ".join("?" * len(columns))
        dst.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
