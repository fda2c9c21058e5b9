"""Reads and branches deep in a chain of forks, and delete among many sessions.

``make bench`` runs it after the main table. A root of ``--size`` messages, then a
chain of ``--depth`` forks, each plus one message; ``open``, ``tail(20)``,
``context()``, ``fork()`` and ``ancestry()`` are timed on the root (depth 0) and on
the deepest fork, in interleaved rounds, and the table shows depth/depth-0 as a
ratio with its spread (a ratio per round). Then ``delete()`` of a forked session
with its fork is timed in a store of few sessions and in one of many.

The machine may be shared: every figure is a median of interleaved rounds, and
the ratios within one round are what to compare.

The depth table runs on SQLite and on PostgreSQL side by side:
``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
names the server, a fresh schema is made and dropped after, and PostgreSQL is
skipped, saying why, when nobody answers there.

Usage: python benchmarks/depth.py [--size N] [--depth D] [--sessions S] [--rounds R]
       [--engines sqlite,postgres] [--no-delete]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

import plait
from cases import message
from plait.errors import StoreError

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


def _per_call_us(op: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        op()
    return (time.perf_counter() - start) / n * 1e6


def _chain(client: plait.Client, size: int, depth: int) -> tuple[str, str]:
    # Not the client's current session: both ends are opened alike, by id.
    root = client.sessions.create([message(0)])
    for start in range(1, size, 1000):
        root.transcript.inject_many([message(i) for i in range(start, min(start + 1000, size))])
    current = root
    for d in range(depth):
        current = current.fork()
        current.inject(message(size + d))
    return root.id, current.id


@contextmanager
def _engine(name: str, tmp: Path) -> Iterator[plait.Client]:
    """A client on a fresh store of the named engine (a PostgreSQL schema dropped after).

    Raises:
        StoreError: PostgreSQL does not answer (or psycopg is missing: ImportError).
    """
    if name == "sqlite":
        client = plait.Client(tmp, store=tmp / "depth.db")
        try:
            yield client
        finally:
            client.close()
        return
    url = os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG)
    schema = f"plait_bench_{uuid.uuid4().hex[:10]}"
    from plait.store.postgres import PostgresStore

    store = PostgresStore(url, schema=schema, connect_timeout=3)
    try:
        client = plait.Client(tmp, store=store)
        try:
            yield client
        finally:
            client.close()
    finally:
        store.close()
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


Measured = tuple[str, float, float, list[float]]


def measure_depth(engine: str, size: int, depth: int, rounds: int) -> list[Measured]:
    """Return ``(operation, µs at depth 0, µs at depth, per-round ratios)`` rows.

    Raises:
        StoreError: the engine's store cannot be opened (PostgreSQL not answering).
    """
    with tempfile.TemporaryDirectory() as tmp, _engine(engine, Path(tmp)) as client:
        shallow, deep = _chain(client, size, depth)
        for sid in (shallow, deep):
            client.open(sid).context()  # the first count of new records is done once
        ops: dict[str, tuple[Callable[[str], object], int]] = {
            "open(id)": (lambda sid: client.open(sid), 200),
            "tail(20)": (lambda sid: client.open(sid).transcript.tail(20), 100),
            "context()": (lambda sid: client.open(sid).context(), 100),
            "fork()": (lambda sid: client.open(sid).fork(), 30),
            "ancestry()": (lambda sid: client.ancestry(sid), 5),
        }
        out = []
        for name, (op, n) in ops.items():
            a: list[float] = []
            b: list[float] = []
            for _ in range(rounds):  # depth 0, deep, depth 0, ...
                a.append(_per_call_us(partial(op, shallow), n))
                b.append(_per_call_us(partial(op, deep), n))
            ratios = [y / x for x, y in zip(a, b, strict=True)]
            out.append((name, statistics.median(a), statistics.median(b), ratios))
    return out


def measure_delete(few: int, many: int, rounds: int) -> tuple[float, float, list[float]]:
    """Return ``(µs among few sessions, µs among many, per-round ratios)`` of one delete.

    Each delete is of a session with one fork, then of the fork (which frees both).
    """
    with tempfile.TemporaryDirectory() as tmp:
        clients = []
        for label, count in (("few", few), ("many", many)):
            client = plait.Client(Path(tmp), store=Path(tmp) / f"{label}.db")
            for _ in range(count // 2):
                s = client.sessions.create([message(0)])
                s.fork().inject(message(1))
            clients.append(client)

        def one(client: plait.Client) -> float:
            s = client.sessions.create([message(0)])
            child = s.fork()
            start = time.perf_counter()
            client.sessions.delete(s.id)
            client.sessions.delete(child.id)
            return (time.perf_counter() - start) / 2 * 1e6

        a: list[float] = []
        b: list[float] = []
        for _ in range(rounds):
            a.append(statistics.median(one(clients[0]) for _ in range(5)))
            b.append(statistics.median(one(clients[1]) for _ in range(5)))
        for client in clients:
            client.close()
    return statistics.median(a), statistics.median(b), [y / x for x, y in zip(a, b, strict=True)]


def main(argv: list[str] | None = None) -> int:
    """Print the depth and delete tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=10_000, help="messages in the root")
    parser.add_argument("--depth", type=int, default=1000, help="forks in the chain")
    parser.add_argument("--sessions", type=int, default=20_000, help="sessions for delete")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--engines", default="sqlite,postgres", help="stores to run, in order")
    parser.add_argument("--no-delete", action="store_true", help="skip the delete table")
    args = parser.parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=120)
    table = Table(
        title=f"a chain of {args.depth} forks (one message each) on a {args.size:,}-message "
        f"root: medians of {args.rounds} interleaved rounds"
    )
    columns = ("engine", "operation", "depth 0 µs", f"depth {args.depth} µs", "ratio")
    for col in (*columns, "per round"):
        table.add_column(col, justify="right")
    for engine in args.engines.split(","):
        try:
            rows = measure_depth(engine, args.size, args.depth, args.rounds)
        except (StoreError, ImportError) as exc:
            console.print(f"[yellow]{engine} skipped: {exc}[/yellow]")
            continue
        for name, a, b, ratios in rows:
            spread = ", ".join(f"{r:.2f}" for r in ratios)
            ratio = f"{statistics.median(ratios):.2f}x"
            table.add_row(engine, name, f"{a:,.0f}", f"{b:,.0f}", ratio, spread)
        table.add_section()
    console.print(table)
    if args.no_delete:
        return 0
    few, many = 100, args.sessions
    a, b, ratios = measure_delete(few, many, args.rounds)
    table = Table(title="delete() of a session and its fork")
    for col in (f"{few} sessions µs", f"{many:,} sessions µs", "ratio", "per round"):
        table.add_column(col, justify="right")
    spread = ", ".join(f"{r:.2f}" for r in ratios)
    table.add_row(f"{a:,.0f}", f"{b:,.0f}", f"{statistics.median(ratios):.2f}x", spread)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
