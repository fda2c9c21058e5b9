"""Timing and database-accounting helpers for the benchmark suite.

Everything here is independent of plait: wall-clock timing with repeats and
medians, on-disk size accounting for SQLite files, and the raw sqlite3 "floor"
that plait's appends are compared with.
"""

from __future__ import annotations

import gc
import sqlite3
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DbSize",
    "RawFloor",
    "Row",
    "checkpoint",
    "db_size",
    "interleave",
    "median",
    "wal_pages",
]

_WAL_HEADER = 32
_WAL_FRAME_HEADER = 24


def median(values: list[float]) -> float:
    """Return the median of a non-empty list."""
    return statistics.median(values)


@dataclass
class Row:
    """One line of the results table: a measurement with a value per column.

    ``samples`` keeps the per-repeat values the median was taken from, so the
    JSON report shows the spread too.
    """

    key: str
    """Stable identifier, used in the JSON report and by the targets."""
    label: str
    """What the table shows."""
    unit: str
    """Unit of every value on the row."""
    group: str
    """Section of the table the row belongs to."""
    values: dict[str, float] = field(default_factory=dict)
    """Column label (``1k``, ``10k``, ``100k``) -> median value."""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """Column label -> the per-repeat values."""

    def add(self, column: str, samples: list[float]) -> None:
        """Record the samples of one column and their median."""
        self.samples[column] = samples
        self.values[column] = median(samples)


def interleave(tasks: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Run every task once per round, ``repeats`` rounds, and return each run's seconds.

    The machine is shared and noisy; interleaving the tasks (and rotating their
    order every round) spreads slow periods across all of them instead of
    letting one task absorb a bad stretch, which matters for the ratio targets.
    """
    keys = list(tasks)
    out: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(repeats):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            gc.collect()
            start = time.perf_counter()
            tasks[key]()
            out[key].append(time.perf_counter() - start)
    return out


# -- SQLite file accounting ---------------------------------------------------------------


@dataclass(frozen=True)
class DbSize:
    """The size of a SQLite database right after a full checkpoint."""

    file_bytes: int
    """Size of the main database file."""
    page_size: int
    page_count: int
    freelist: int

    @property
    def used_bytes(self) -> int:
        """Bytes in pages that hold data (free pages excluded)."""
        return (self.page_count - self.freelist) * self.page_size


def checkpoint(path: Path) -> None:
    """Move the whole WAL into the database file and truncate the WAL.

    Uses its own connection, so the store under test is not touched; the
    store's connection must be idle (no open transaction), which it is between
    plait calls.
    """
    db = sqlite3.connect(path)
    try:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        db.close()
    if busy:
        raise RuntimeError(f"{path}: checkpoint blocked by another connection")


def db_size(path: Path) -> DbSize:
    """Checkpoint ``path`` and return its size."""
    checkpoint(path)
    db = sqlite3.connect(path)
    try:
        page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
        page_count = int(db.execute("PRAGMA page_count").fetchone()[0])
        freelist = int(db.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        db.close()
    return DbSize(path.stat().st_size, page_size, page_count, freelist)


def wal_pages(path: Path, page_size: int) -> int:
    """Return how many page frames the WAL of ``path`` holds right now."""
    wal = path.with_name(path.name + "-wal")
    if not wal.exists():
        return 0
    return max(0, wal.stat().st_size - _WAL_HEADER) // (page_size + _WAL_FRAME_HEADER)


# -- the raw sqlite3 floor ------------------------------------------------------------------


class RawFloor:
    """A plain table appended to with one INSERT per transaction, in WAL mode.

    This is the cheapest durable append sqlite3 offers from Python; plait's
    append-one-per-call is compared with it. One connection per synchronous
    mode (the pragma is per connection), both on the same file.

    Args:
        path: the database file to create.
        prefill: rows to insert up front, so the table is as large as the
            transcript it stands beside.
        row_chars: characters of text per row (about a plait record row).
    """

    def __init__(self, path: Path, prefill: int, row_chars: int) -> None:
        self.path = path
        self.body: str
        """The text every row holds."""
        self.body = ("floor " * (row_chars // 6 + 1))[:row_chars]
        self._conns: dict[str, sqlite3.Connection] = {}
        for mode in ("NORMAL", "FULL"):
            db = sqlite3.connect(path, isolation_level=None)
            db.execute("PRAGMA journal_mode = WAL")
            db.execute(f"PRAGMA synchronous = {mode}")
            self._conns[mode] = db
        db = self._conns["NORMAL"]
        db.execute("CREATE TABLE floor (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO floor (body) VALUES (?)", ((self.body,) for _ in range(prefill))
        )
        db.execute("COMMIT")

    def append(self, n: int, synchronous: str) -> None:
        """Append ``n`` rows, each in its own ``BEGIN; INSERT; COMMIT``."""
        db = self._conns[synchronous]
        body = self.body
        for _ in range(n):
            db.execute("BEGIN")
            db.execute("INSERT INTO floor (body) VALUES (?)", (body,))
            db.execute("COMMIT")

    def close(self) -> None:
        """Close both connections."""
        for db in self._conns.values():
            db.close()
