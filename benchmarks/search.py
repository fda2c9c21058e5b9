"""Full-text search: what the index costs an append, and what a query costs (D275).

Appends of messages of ordinary prose (40 words from a 5,000-word vocabulary) to one
session, on a store with the full-text index (schema 12) and on one without it
(schema 11); then a query for a rare and for a common word over ``--sessions``
sessions of ``--messages`` messages each. SQLite always; PostgreSQL when a server
answers at ``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``),
in fresh schemas it drops. Figures are medians of several rounds.

Usage: python benchmarks/search.py [--sessions N] [--messages M]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import plait
from plait.store import sqlite as lite

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
WORDS = [f"w{i}x" for i in range(5000)]


def _prose(rng: random.Random, n: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _median_us(op: Callable[[], object], n: int, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            op()
        times.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(times)


def append_us(store: plait.Store, ws: Path) -> float:
    """The median time of one single-message append of prose."""
    rng = random.Random(1)
    with plait.Client(ws, store=store) as client:
        s = client.sessions.create()
        s.inject({"role": "user", "content": _prose(rng)})
        return _median_us(lambda: s.inject({"role": "user", "content": _prose(rng)}), 300)


def query_ms(store: plait.Store, ws: Path, sessions: int, messages: int) -> dict[str, float]:
    """Fill ``store``; time the first search, then a rare and a common term's (limit 20)."""
    rng = random.Random(2)
    with plait.Client(ws, store=store) as client:
        for i in range(sessions):
            s = client.sessions.create()
            batch = [{"role": "user", "content": _prose(rng, 20)} for _ in range(messages)]
            if i % 97 == 0:
                batch[-1] = {"role": "user", "content": "a rare zanzibarite here"}
            s.inject_many(batch)
        start = time.perf_counter()
        client.sessions.search("zanzibarite", all_workspaces=True)
        # On SQLite the first search folds every record the appends left owed.
        out = {"first query ms": (time.perf_counter() - start) * 1000}
        for name, term in (("rare", "zanzibarite"), ("common", "w7x")):
            out[f"query {name} ms"] = (
                _median_us(lambda t=term: client.sessions.search(t, all_workspaces=True), 5) / 1000
            )
        return out


@contextmanager
def _pg(url: str, steps: tuple[plait.store.Migration, ...] | None) -> Iterator[plait.Store]:
    import psycopg

    from plait.store.postgres import MIGRATIONS, PostgresStore

    schema = f"plait_bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema=schema, migrations=steps or MIGRATIONS)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: list[str] | None = None) -> int:
    """Print the figures, one line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args(argv)
    url = os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        old = lite.MIGRATIONS[:11]
        for name, steps in (("without index", old), ("with index", lite.MIGRATIONS)):
            store = lite.SQLiteStore(ws / f"{name}.db", migrations=steps)
            print(f"sqlite append µs ({name}): {append_us(store, ws):.1f}")
            store.close()
        store = lite.SQLiteStore(ws / "q.db")
        for k, v in query_ms(store, ws, args.sessions, args.messages).items():
            print(f"sqlite {k} ({args.sessions * args.messages:,} records): {v:.2f}")
        store.close()
        try:
            from plait.store.postgres import MIGRATIONS

            for name, pg_steps in (("without index", MIGRATIONS[:11]), ("with index", None)):
                with _pg(url, pg_steps) as pg:
                    print(f"postgres append µs ({name}): {append_us(pg, ws):.1f}")
            with _pg(url, None) as pg:
                for k, v in query_ms(pg, ws, args.sessions, args.messages).items():
                    print(f"postgres {k} ({args.sessions * args.messages:,} records): {v:.2f}")
        except (plait.errors.StoreError, ImportError) as exc:
            print(f"PostgreSQL skipped: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
