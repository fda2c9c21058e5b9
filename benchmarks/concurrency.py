"""N processes writing N sessions at once: throughput and append latency (issue 5).

``make bench`` runs it after the main table. Each process appends one record per
call to its own session in one shared store; the table shows total records/s
and the p50 / p99 latency of one append, for N = 1 and 8 (on a 2-core
machine, so 8 processes also contend for the CPU), and the ratio of N = 8 to N = 1. Set
``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``) names
the PostgreSQL server the same runs use beside SQLite, each in a fresh schema that is dropped
afterwards; without a server answering there, only SQLite runs.

Usage: python benchmarks/concurrency.py [--appends K] [--rounds R]
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

COUNTS = (1, 8)


def _child(store_target: str, ws: Path, sid: str, appends: int, wfd: int, go: int) -> None:
    code = 1
    try:
        with plait.Client(ws, store=store_target) as client:
            s = client.sessions.get(sid)
            text = "y" * 200
            s.inject({"role": "user", "content": f"warm {text}"})  # connected and warm
            os.write(wfd, b"ready\n")
            os.read(go, 1)  # every writer starts together
            lat: list[int] = []
            start = time.monotonic_ns()
            for i in range(appends):
                t0 = time.perf_counter_ns()
                s.inject({"role": "user", "content": f"{i} {text}"})
                lat.append(time.perf_counter_ns() - t0)
            end = time.monotonic_ns()
        os.write(wfd, (f"{start} {end} " + " ".join(map(str, lat)) + "\n").encode())
        code = 0
    finally:
        os._exit(code)


def run(store_target: str, ws: Path, n: int, appends: int) -> tuple[float, float, float]:
    """Return (records/s, p50 µs, p99 µs) for ``n`` processes on ``store_target``.

    The rate counts from the first writer's start to the last one's end, once
    every writer has opened its store and appended once (set-up is not timed).
    """
    with plait.Client(ws, store=store_target) as client:
        sids = [client.sessions.create([{"role": "system", "content": "bench"}]).id
                for _ in range(n)]
    go_r, go_w = os.pipe()
    kids: list[tuple[int, int]] = []
    for sid in sids:
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(rfd)
            os.close(go_w)
            _child(store_target, ws, sid, appends, wfd, go_r)
        os.close(wfd)
        kids.append((pid, rfd))
    os.close(go_r)
    outputs: list[bytes] = []
    for _, rfd in kids:  # wait until every writer is ready
        got = b""
        while not got.endswith(b"\n"):
            chunk = os.read(rfd, 64)
            if not chunk:
                raise RuntimeError("a writer died before it was ready")
            got += chunk
        outputs.append(got[len(b"ready\n"):])
    os.write(go_w, b"g" * n)
    lat: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for (pid, rfd), head in zip(kids, outputs, strict=True):
        chunks = [head]
        while chunk := os.read(rfd, 1 << 16):
            chunks.append(chunk)
        os.close(rfd)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"writer {pid} failed")
        values = [int(x) for x in b"".join(chunks).split()]
        starts.append(values[0])
        ends.append(values[1])
        lat.extend(values[2:])
    os.close(go_w)
    wall = (max(ends) - min(starts)) / 1e9
    qs = statistics.quantiles(lat, n=100)
    return n * appends / wall, qs[49] / 1000, qs[98] / 1000


def main(argv: list[str] | None = None) -> int:
    """Print the concurrency table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--appends", type=int, default=1000, help="appends per process")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    args = parser.parse_args(argv)
    targets: dict[str, Callable[[Path], str]] = {"sqlite": lambda d: str(d / "c.db")}
    pg = os.environ.get("PLAIT_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    schemas: list[str] = []
    if _answers(pg):

        def fresh_schema(_: Path) -> str:
            schemas.append(f"plait_bench_{uuid.uuid4().hex[:10]}")
            return f"{pg}{'&' if '?' in pg else '?'}schema={schemas[-1]}"

        targets["postgres"] = fresh_schema
    table = Table(
        title=f"N processes x {args.appends} appends, one session each "
        f"(medians of {args.rounds} interleaved rounds)"
    )
    for col in ("store", "N", "records/s", "x N=1", "p50 µs", "p99 µs"):
        table.add_column(col, justify="right")
    for name, target in targets.items():
        got: dict[int, list[tuple[float, float, float]]] = {n: [] for n in COUNTS}
        for _ in range(args.rounds):  # N=1, N=8, N=1, ...: noise hits both alike
            for n in COUNTS:
                with tempfile.TemporaryDirectory() as tmp:
                    got[n].append(run(target(Path(tmp)), Path(tmp), n, args.appends))
        one = statistics.median(r[0] for r in got[COUNTS[0]])
        for n in COUNTS:
            rate, p50, p99 = (statistics.median(r[i] for r in got[n]) for i in range(3))
            rates = ", ".join(f"{r[0] / one:.2f}" for r in got[n])
            table.add_row(
                name, str(n), f"{rate:,.0f}", f"{rate / one:.2f}x ({rates})",
                f"{p50:,.0f}", f"{p99:,.0f}",
            )
    console = Console() if sys.stdout.isatty() else Console(width=100)
    console.print(table)
    if schemas:
        import psycopg

        with psycopg.connect(pg, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return 0


def _answers(url: str) -> bool:
    """Whether a PostgreSQL server answers at ``url`` (and the driver is installed)."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return True
    except Exception:  # any failure means: no PostgreSQL run
        return False


if __name__ == "__main__":
    sys.exit(main())
