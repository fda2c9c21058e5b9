"""SQLite beside PostgreSQL: append, full history load and fork on one 10k transcript (issue 5).

``make bench`` runs it after the main table when a PostgreSQL server answers at
``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
each run uses a fresh schema and drops it. Figures are medians of several rounds.

Usage: python benchmarks/stores.py [--size N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import plait
import plait.store
from plait.errors import StoreError

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
TEXT = "y" * 200


def _median_us(op: Callable[[], object], n: int, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            op()
        times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times)


def measure(store: plait.store.Store, ws: Path, size: int) -> dict[str, float]:
    """Build a ``size``-message session in ``store`` and time the three operations."""
    with plait.Client(ws, store=store) as client:
        s = client.sessions.create()
        for start in range(0, size, 1000):
            s.transcript.inject_many([{"role": "user", "content": f"{i} {TEXT}"}
                           for i in range(start, min(size, start + 1000))])
        append = _median_us(lambda: s.inject({"role": "user", "content": TEXT}), 300)
        load = _median_us(lambda: s.history(full=True), 1, rounds=3) / 1000
        fork = _median_us(s.fork, 50)
        tail = _median_us(lambda: s.transcript.tail(20), 100)
    return {"append µs": append, "history(full) ms": load, "tail(20) µs": tail, "fork µs": fork}


def main(argv: list[str] | None = None) -> int:
    """Print the table; skip PostgreSQL (saying why) when no server answers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=100)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = plait.store.SQLiteStore(Path(tmp) / "b.db")
        results["sqlite"] = measure(sqlite, Path(tmp), args.size)
        sqlite.close()
        url = os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG)
        schema = f"plait_bench_{uuid.uuid4().hex[:10]}"
        try:
            from plait.store.postgres import PostgresStore

            pg = PostgresStore(url, schema=schema, connect_timeout=3)
        except (StoreError, ImportError) as exc:
            console.print(f"[yellow]PostgreSQL skipped: {exc}[/yellow]")
        else:
            try:
                results["postgres"] = measure(pg, Path(tmp), args.size)
            finally:
                pg.close()
                import psycopg

                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    table = Table(title=f"stores side by side, one {args.size:,}-message session")
    table.add_column("measurement")
    for name in results:
        table.add_column(name, justify="right")
    for key in results["sqlite"]:
        table.add_row(key, *(f"{results[n][key]:,.1f}" for n in results))
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
