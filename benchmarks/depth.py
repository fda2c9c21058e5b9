"""Reads and branches deep in a chain of forks, and delete among many sessions.

``make bench`` runs it after the main table. A root of ``--size`` messages, then a
chain of ``--depth`` forks, each plus one message; ``open``, ``tail(20)``,
``context()``, ``fork()`` and ``ancestry()`` are timed on the root (depth 0) and on
the deepest fork, in interleaved rounds, and the table shows depth/depth-0 as a
ratio with its spread (a ratio per round). Then ``delete()`` of a forked session
with its fork is timed in a store of few sessions and in one of many.

The machine may be shared: every figure is a median of interleaved rounds, and
the ratios within one round are what to compare.

Usage: python benchmarks/depth.py [--size N] [--depth D] [--sessions S] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from rich.console import Console
from rich.table import Table

import plait
from cases import message


def _per_call_us(op: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        op()
    return (time.perf_counter() - start) / n * 1e6


def _chain(tmp: Path, size: int, depth: int) -> tuple[plait.Client, str, str]:
    client = plait.Client(tmp, store=tmp / "depth.db")
    # Not the client's current session: both ends are opened alike, by id.
    root = client.sessions.create([message(0)])
    for start in range(1, size, 1000):
        root.inject_many([message(i) for i in range(start, min(start + 1000, size))])
    current = root
    for d in range(depth):
        current = current.fork()
        current.inject(message(size + d))
    return client, root.id, current.id


Measured = tuple[str, float, float, list[float]]


def measure_depth(size: int, depth: int, rounds: int) -> list[Measured]:
    """Return ``(operation, µs at depth 0, µs at depth, per-round ratios)`` rows."""
    with tempfile.TemporaryDirectory() as tmp:
        client, shallow, deep = _chain(Path(tmp), size, depth)
        for sid in (shallow, deep):
            client.open(sid).context()  # the first count of new records is done once
        ops: dict[str, tuple[Callable[[str], object], int]] = {
            "open(id)": (lambda sid: client.open(sid), 200),
            "tail(20)": (lambda sid: client.open(sid).tail(20), 100),
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
        client.close()
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
    args = parser.parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=110)
    table = Table(
        title=f"a chain of {args.depth} forks (one message each) on a {args.size:,}-message "
        f"root: medians of {args.rounds} interleaved rounds"
    )
    for col in ("operation", "depth 0 µs", f"depth {args.depth} µs", "ratio", "per round"):
        table.add_column(col, justify="right")
    for name, a, b, ratios in measure_depth(args.size, args.depth, args.rounds):
        spread = ", ".join(f"{r:.2f}" for r in ratios)
        table.add_row(name, f"{a:,.0f}", f"{b:,.0f}", f"{statistics.median(ratios):.2f}x", spread)
    console.print(table)
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
