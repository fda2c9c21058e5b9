"""Full-text search: what the index costs an append, a query, a delete and an erase (D300).

Appends of messages of ordinary prose (40 words from a 5,000-word vocabulary) to one
session, on a store with the full-text index (schema 12) and on one without it
(schema 11), in alternating rounds; then, over ``--sessions`` sessions of
``--messages`` messages each: the first search (which indexes everything), a rare
and a common word's, a search right after an append by the same store and after one
by another connection (SQLite: the owners to catch up found from the store's own
writes, or by reading every session's mark), and the delete and the erase of a
session of 10,000 messages. SQLite always; PostgreSQL when a server answers at
``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``),
in fresh schemas it drops (``--pg-sessions``, default 1000). Figures are medians of
several rounds.

Usage: python benchmarks/search.py [--sessions N] [--messages M] [--pg-sessions N] [--no-pg]
"""

from __future__ import annotations

import argparse
import contextlib
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
import plait.store
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


def append_us(stores: dict[str, plait.store.Store], ws: Path, rounds: int = 7) -> dict[str, float]:
    """The median time of one single-message append of prose, per store, rounds alternating."""
    rng = random.Random(1)
    times: dict[str, list[float]] = {name: [] for name in stores}
    with contextlib.ExitStack() as stack:
        sessions = {}
        for name, store in stores.items():
            client = stack.enter_context(plait.Client(ws, store=store))
            sessions[name] = client.sessions.create()
            sessions[name].inject({"role": "user", "content": _prose(rng)})
        for _ in range(rounds):
            for name, s in sessions.items():
                texts = [_prose(rng) for _ in range(300)]
                start = time.perf_counter()
                for text in texts:
                    s.inject({"role": "user", "content": text})
                times[name].append((time.perf_counter() - start) / len(texts) * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def peer_append_us(ws: Path, rounds: int = 5) -> float | None:
    """openai-agents' ``SQLiteSession.add_items`` of one such message, or None without it."""
    try:
        from agents import SQLiteSession
    except ImportError:
        return None
    import asyncio

    rng = random.Random(1)
    session = SQLiteSession("bench", str(ws / "agents.db"))

    async def run() -> float:
        times = []
        for _ in range(rounds):
            texts = [_prose(rng) for _ in range(300)]
            start = time.perf_counter()
            for text in texts:
                await session.add_items([{"role": "user", "content": text}])
            times.append((time.perf_counter() - start) / len(texts) * 1e6)
        return statistics.median(times)

    try:
        return asyncio.run(run())
    finally:
        session.close()


def query_ms(store: plait.store.Store, ws: Path, sessions: int, messages: int) -> dict[str, float]:
    """Fill ``store``; time the first search, then a rare and a common term's (limit 20)."""
    rng = random.Random(2)
    with plait.Client(ws, store=store) as client:
        for i in range(sessions):
            s = client.sessions.create()
            batch = [{"role": "user", "content": _prose(rng, 20)} for _ in range(messages)]
            if i % 97 == 0:
                batch[-1] = {"role": "user", "content": "a rare zanzibarite here"}
            s.transcript.inject_many(batch)
        start = time.perf_counter()
        client.sessions.search("zanzibarite", all_workspaces=True)
        # On SQLite the first search indexes every record the appends wrote.
        out = {"first query ms": (time.perf_counter() - start) * 1000}
        for name, term in (("rare", "zanzibarite"), ("common", "w7x")):
            out[f"query {name} ms"] = (
                _median_us(lambda t=term: client.sessions.search(t, all_workspaces=True), 5) / 1000
            )
        last = s

        def after_own_append() -> None:
            last.inject({"role": "user", "content": _prose(rng, 20)})
            client.sessions.search("zanzibarite", all_workspaces=True)

        out["append + query ms"] = _median_us(after_own_append, 5) / 1000
        if isinstance(store, lite.SQLiteStore):
            other = lite.SQLiteStore(store.location)
            with plait.Client(ws, store=other) as writer:
                w = writer.open(last.id)

                def after_other_append() -> None:
                    w.inject({"role": "user", "content": _prose(rng, 20)})
                    client.sessions.search("zanzibarite", all_workspaces=True)

                out["another connection's append + query ms"] = (
                    _median_us(after_other_append, 5) / 1000
                )
        for verb in ("delete", "erase"):
            big = client.sessions.create()
            big.transcript.inject_many(
                [{"role": "user", "content": _prose(rng, 20)} for _ in range(10_000)]
            )
            client.sessions.search("zanzibarite", all_workspaces=True)  # indexed
            start = time.perf_counter()
            getattr(client.sessions, verb)(big.id)
            out[f"{verb} of 10,000 messages ms"] = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            client.sessions.search("zanzibarite", all_workspaces=True)
            out[f"query after the {verb} ms"] = (time.perf_counter() - start) * 1000
        return out


def erase_ms(
    path: Path, ws: Path, steps: tuple[plait.store.Migration, ...], sessions: int, messages: int
) -> dict[str, float]:
    """The erase of a 10,000-message session in a store of ``sessions`` sessions (SQLite)."""
    rng = random.Random(3)
    store = lite.SQLiteStore(path, migrations=steps)
    out: dict[str, float] = {}
    with plait.Client(ws, store=store) as client:
        for _ in range(sessions):
            client.sessions.create().transcript.inject_many(
                [{"role": "user", "content": _prose(rng, 20)} for _ in range(messages)]
            )
        big = client.sessions.create()
        big.transcript.inject_many(
            [{"role": "user", "content": _prose(rng, 20)} for _ in range(10_000)]
        )
        if len(steps) >= 12:
            client.sessions.search("w7x", all_workspaces=True)  # everything indexed
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the same log before each
        start = time.perf_counter()
        client.sessions.erase(big.id)
        out["erase ms"] = (time.perf_counter() - start) * 1000
    store.close()
    return out


@contextmanager
def _pg(url: str, steps: tuple[plait.store.Migration, ...] | None) -> Iterator[plait.store.Store]:
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
    parser.add_argument("--pg-sessions", type=int, default=1000)
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument(
        "--erase", action="store_true", help="only the erase, without and with the index"
    )
    args = parser.parse_args(argv)
    url = os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG)
    if args.erase:
        with tempfile.TemporaryDirectory() as tmp:
            for name, steps in (("without index", lite.MIGRATIONS[:11]), ("with index", None)):
                found = erase_ms(
                    Path(tmp) / f"{name}.db",
                    Path(tmp),
                    steps or lite.MIGRATIONS,
                    args.sessions,
                    args.messages,
                )
                n = args.sessions * args.messages
                print(
                    f"sqlite erase of 10,000 messages ms ({name}, {n:,} records): "
                    f"{found['erase ms']:.1f}"
                )
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        old = lite.MIGRATIONS[:11]
        stores: dict[str, plait.store.Store] = {
            name: lite.SQLiteStore(ws / f"{name}.db", migrations=steps)
            for name, steps in (("without index", old), ("with index", lite.MIGRATIONS))
        }
        for name, us in append_us(stores, ws).items():
            print(f"sqlite append µs ({name}): {us:.1f}")
        for store in stores.values():
            store.close()
        peer = peer_append_us(ws)
        if peer is not None:
            print(f"openai-agents SQLiteSession.add_items µs (one message): {peer:.1f}")
        store = lite.SQLiteStore(ws / "q.db")
        for k, v in query_ms(store, ws, args.sessions, args.messages).items():
            print(f"sqlite {k} ({args.sessions * args.messages:,} records): {v:.2f}")
        store.close()
        if args.no_pg:
            return 0
        try:
            from plait.store.postgres import MIGRATIONS

            with _pg(url, MIGRATIONS[:11]) as bare, _pg(url, None) as indexed:
                pair = {"without index": bare, "with index": indexed}
                for name, us in append_us(pair, ws).items():
                    print(f"postgres append µs ({name}): {us:.1f}")
            with _pg(url, None) as pg:
                n = args.pg_sessions * args.messages
                for k, v in query_ms(pg, ws, args.pg_sessions, args.messages).items():
                    print(f"postgres {k} ({n:,} records): {v:.2f}")
        except (plait.errors.StoreError, ImportError) as exc:
            print(f"PostgreSQL skipped: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
