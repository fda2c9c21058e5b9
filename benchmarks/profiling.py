"""``run.py --profile``: where the time of append-one-per-call goes.

Splits each ``inject()`` into the SQL statements it runs and the Python around
them, next to the same split for the raw sqlite3 floor, then prints cProfile's
top functions. Diagnostics only: to time plait's statements it temporarily
swaps the private connection of :class:`plait.store.SQLiteStore` for a timing proxy.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import plait
import plait.store
from cases import Transcript, message

__all__ = ["profile_append"]

_ROUNDS = 4


class _TimedConnection:
    """A sqlite3 connection proxy that adds up the seconds spent per kind of statement."""

    def __init__(self, db: sqlite3.Connection, seconds: defaultdict[str, float]) -> None:
        self._db = db
        self.seconds = seconds

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        start = time.perf_counter()
        try:
            return self._db.execute(sql, params)
        finally:
            self.seconds[_kind(sql)] += time.perf_counter() - start

    def executemany(self, sql: str, params: Iterable[Any]) -> sqlite3.Cursor:
        start = time.perf_counter()
        try:
            return self._db.executemany(sql, params)
        finally:
            self.seconds[_kind(sql)] += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


def _kind(sql: str) -> str:
    """Name a statement by its first words: ``BEGIN IMMEDIATE``, ``UPDATE sessions``, ..."""
    words = sql.split()
    if words[0].upper() in ("INSERT", "DELETE"):
        return " ".join(words[:3])
    return " ".join(words[:2]) if words[0].upper() in ("UPDATE", "BEGIN") else words[0]


@contextmanager
def _timed_store(store: plait.store.SQLiteStore) -> Iterator[defaultdict[str, float]]:
    seconds: defaultdict[str, float] = defaultdict(float)
    # Reaching into the store's private connection is fine for diagnostics only.
    real = store._db
    store._db = _TimedConnection(real, seconds)  # type: ignore[assignment]
    try:
        yield seconds
    finally:
        store._db = real


def _raw_floor(
    db: sqlite3.Connection, body: str, seconds: defaultdict[str, float]
) -> Callable[[int], None]:
    """The raw floor's loop (see harness.RawFloor), its statements timed."""
    timed = _TimedConnection(db, seconds)

    def run(n: int) -> None:
        for _ in range(n):
            timed.execute("BEGIN")
            timed.execute("INSERT INTO floor (body) VALUES (?)", (body,))
            timed.execute("COMMIT")

    return run


def _split(title: str, total: float, seconds: dict[str, float], calls: int) -> list[str]:
    lines = [f"{title:<34}{total / calls * 1e6:8.1f} µs/call"]
    for kind, secs in sorted(seconds.items(), key=lambda kv: -kv[1]):
        lines.append(f"    SQL {kind:<28}{secs / calls * 1e6:8.1f}")
    python = total - sum(seconds.values())
    lines.append(f"    {'Python outside SQL':<32}{python / calls * 1e6:8.1f}")
    return lines


def profile_append(t: Transcript, calls: int, top: int = 20) -> str:
    """Profile ``calls`` appends of one message each on ``t``; return a text report."""
    store = t.client.store
    if not isinstance(store, plait.store.SQLiteStore):
        raise TypeError("profiling needs a SQLiteStore")
    written = t.size

    def inject(n: int) -> None:
        nonlocal written
        for _ in range(n):
            t.session.inject(message(written))
            written += 1

    inject(200)  # warm up
    raw_db = sqlite3.connect(t.floor.path, isolation_level=None)
    raw_db.execute("PRAGMA synchronous = NORMAL")
    raw_seconds: defaultdict[str, float] = defaultdict(float)
    raw = _raw_floor(raw_db, t.floor.body, raw_seconds)
    totals = {"plait": 0.0, "raw": 0.0}
    per_round = calls // _ROUNDS
    with _timed_store(store) as plait_seconds:
        for _ in range(_ROUNDS):  # interleaved, as in the suite
            for name, run in (("plait", inject), ("raw", raw)):
                start = time.perf_counter()
                run(per_round)
                totals[name] += time.perf_counter() - start
    raw_db.close()
    n = per_round * _ROUNDS
    lines = [
        f"append one per call on the {t.label} transcript, {n} calls, synchronous=NORMAL",
        *_split("plait inject()", totals["plait"], plait_seconds, n),
        *_split("raw floor (BEGIN; INSERT; COMMIT)", totals["raw"], raw_seconds, n),
        "",
    ]
    prof = cProfile.Profile()
    prof.enable()
    inject(n)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return "\n".join(lines) + "\n" + out.getvalue()
