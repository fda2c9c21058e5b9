"""N processes writing N sessions at once: throughput and append latency (issue 5).

``make bench`` runs it after the main table. Each process appends one record per
call to its own session in one shared store; the table shows total records/s
and the p50 / p99 latency of one append, for N = 1 and 8 (on a 2-core
machine, so 8 processes also contend for the CPU), and the ratio of N = 8 to N = 1. Set
``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``) names
the PostgreSQL server the same runs use beside SQLite, each in a fresh schema that is dropped
afterwards; without a server answering there, only SQLite runs.

``--against DIR`` compares this checkout with another (DIR is its root, e.g. a worktree of
``main``): every run then happens in a fresh interpreter importing one checkout's ``src``,
the two alternate within each round, and the table adds this checkout's rate over the
other's, per round.

Beside SQLite, the same writers as bare ``sqlite3`` INSERTs of record rows into the same
kind of store file (``sqlite3 floor``): what the engine itself does with 8 writers on this
machine, the bound for plait's own ratio (SQLite has one writer at a time, and each commit
by another connection empties a connection's page cache). For SQLite the target is the
floor's ratio, not 1x (D228). Two PASS/FAIL lines close the table: PostgreSQL's 8 writers
at least 1.6x one, SQLite's ratio at least 0.9x the floor's.

Usage: python benchmarks/concurrency.py [--appends K] [--rounds R] [--against DIR]
       [--only sqlite|postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
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
Result = tuple[float, float, float, float]  # records/s, p50 µs, p99 µs, CPU µs per append


def _timed(append: Callable[[int], None], appends: int, wfd: int, go: int) -> None:
    """Report ready, wait for the start, time ``appends`` calls of ``append``; report them."""
    os.write(wfd, b"ready\n")
    os.read(go, 1)  # every writer starts together
    lat: list[int] = []
    cpu = time.process_time_ns()
    start = time.monotonic_ns()
    for i in range(appends):
        t0 = time.perf_counter_ns()
        append(i)
        lat.append(time.perf_counter_ns() - t0)
    end = time.monotonic_ns()
    cpu = time.process_time_ns() - cpu
    os.write(wfd, (f"{start} {end} {cpu} " + " ".join(map(str, lat)) + "\n").encode())


def _child(store_target: str, ws: Path, sid: str, appends: int, wfd: int, go: int) -> None:
    code = 1
    try:
        with plait.Client(ws, store=store_target) as client:
            s = client.open(sid)
            text = "y" * 200
            s.inject({"role": "user", "content": f"warm {text}"})  # connected and warm
            _timed(lambda i: s.inject({"role": "user", "content": f"{i} {text}"}), appends,
                   wfd, go)
        code = 0
    finally:
        os._exit(code)


def _floor_child(store_target: str, pk: int, appends: int, wfd: int, go: int) -> None:
    """The same write with nothing of plait: bare self-committing INSERTs of record rows."""
    import sqlite3

    from plait.records import UserRecord, encode_payload

    code = 1
    try:
        db = sqlite3.connect(store_target, isolation_level=None, timeout=30.0)
        db.execute("PRAGMA busy_timeout = 30000")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")  # as plait's store (D211)
        insert = (
            "INSERT INTO records (key, mpos, id, kind, payload, meta, created_at, tokens) "
            "VALUES (?, ?, ?, 'user', ?, NULL, ?, NULL)"
        )
        # The payload plait's codec writes for the message plait's writers append.
        payload = encode_payload(UserRecord(seq=0, content="0 " + "y" * 200))
        base = (pk << 32) + 1  # after the session's system message

        def append(i: int) -> None:
            db.execute(insert, (base + i, i + 1, uuid.uuid4().hex, payload, time.time_ns() // 1000))

        append(0)  # connected and warm
        _timed(lambda i: append(i + 1), appends, wfd, go)
        db.close()
        code = 0
    finally:
        os._exit(code)


def run(store_target: str, ws: Path, n: int, appends: int, *, floor: bool = False) -> Result:
    """Return (records/s, p50 µs, p99 µs, CPU µs per append) for ``n`` processes.

    The rate counts from the first writer's start to the last one's end, once
    every writer has opened its store and appended once (set-up is not timed). The CPU
    time is the writers' own (every thread of theirs, not the database server's): unlike
    the rate, it hardly moves when other programs share the machine. ``floor``: each
    writer is bare ``sqlite3`` INSERTs of record rows into the same store file instead
    (what SQLite itself does with ``n`` writers on this machine).
    """
    with plait.Client(ws, store=store_target) as client:
        sids = [client.sessions.create([{"role": "system", "content": "bench"}]).id
                for _ in range(n)]
    pks: list[int] = []
    if floor:
        import sqlite3

        with contextlib.closing(sqlite3.connect(store_target)) as db:
            pks = [db.execute("SELECT pk FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
                   for sid in sids]
    go_r, go_w = os.pipe()
    kids: list[tuple[int, int]] = []
    for sid in sids:
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(rfd)
            os.close(go_w)
            if floor:
                _floor_child(store_target, pks[sids.index(sid)], appends, wfd, go_r)
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
    cpu = 0
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
        cpu += values[2]
        lat.extend(values[3:])
    os.close(go_w)
    wall = (max(ends) - min(starts)) / 1e9
    qs = statistics.quantiles(lat, n=100)
    return n * appends / wall, qs[49] / 1000, qs[98] / 1000, cpu / 1000 / (n * appends)


def _run_in(tree: Path, store_target: str, ws: Path, n: int, appends: int) -> Result:
    """:func:`run` in a fresh interpreter that imports the checkout at ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run(
        [sys.executable, __file__, "--one", store_target, str(ws), str(n), str(appends)],
        env=env, check=True, capture_output=True, text=True,
    ).stdout
    rate, p50, p99, cpu = (float(x) for x in out.split())
    return rate, p50, p99, cpu


def main(argv: list[str] | None = None) -> int:
    """Print the concurrency table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--appends", type=int, default=1000, help="appends per process")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="run one store only")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # one run, for --against
    args = parser.parse_args(argv)
    if args.one:
        target, ws, n, appends = args.one
        print(*run(target, Path(ws), int(n), int(appends)))
        return 0
    targets: dict[str, Callable[[Path], str]] = {"sqlite": lambda d: str(d / "c.db")}
    pg = os.environ.get("PLAIT_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    schemas: list[str] = []
    if _answers(pg):

        def fresh_schema(_: Path) -> str:
            schemas.append(f"plait_bench_{uuid.uuid4().hex[:10]}")
            return f"{pg}{'&' if '?' in pg else '?'}schema={schemas[-1]}"

        targets["postgres"] = fresh_schema
    if args.only is not None:
        targets = {k: v for k, v in targets.items() if k == args.only}
    floors: set[str] = set()
    if "sqlite" in targets and args.against is None:
        # What SQLite itself does with the same writers, beside plait on the same file.
        targets["sqlite3 floor"] = targets["sqlite"]
        floors.add("sqlite3 floor")
    here = Path(__file__).resolve().parent.parent
    trees: dict[str, Path | None] = {"": None}
    if args.against is not None:
        trees = {"this": here, "other": args.against.resolve()}
    table = Table(
        title=f"N processes x {args.appends} appends, one session each "
        f"(medians of {args.rounds} interleaved rounds)"
    )
    columns = ["store", "N", "records/s", "x N=1", "p50 µs", "p99 µs", "CPU µs"]
    if args.against is not None:
        columns[1:1] = ["code"]
        columns.append("this / other")
    for col in columns:
        table.add_column(col, justify="right")
    scaling: dict[str, float] = {}  # store -> median N=8 rate over the median N=1 rate
    for name, target in targets.items():
        got: dict[tuple[str, int], list[Result]] = {(t, n): [] for t in trees for n in COUNTS}
        for _ in range(args.rounds):  # N=1, N=8, N=1, ...: noise hits both alike
            for n in COUNTS:
                for label, tree in trees.items():
                    with tempfile.TemporaryDirectory() as tmp:
                        where = target(Path(tmp))
                        got[label, n].append(
                            run(where, Path(tmp), n, args.appends, floor=name in floors)
                            if tree is None
                            else _run_in(tree, where, Path(tmp), n, args.appends)
                        )
        for label in trees:
            one = statistics.median(r[0] for r in got[label, COUNTS[0]])
            if label == "":
                scaling[name] = statistics.median(r[0] for r in got[label, COUNTS[-1]]) / one
            for n in COUNTS:
                runs = got[label, n]
                rate, p50, p99, cpu = (statistics.median(r[i] for r in runs) for i in range(4))
                rates = ", ".join(f"{r[0] / one:.2f}" for r in runs)
                row = [name, str(n), f"{rate:,.0f}", f"{rate / one:.2f}x ({rates})",
                       f"{p50:,.0f}", f"{p99:,.0f}", f"{cpu:,.1f}"]
                if args.against is not None:
                    row[1:1] = [label]
                    ratios = [a[0] / b[0] for a, b in
                              zip(got["this", n], got["other", n], strict=True)]
                    row.append(
                        f"{statistics.median(ratios):.2f}x "
                        f"({', '.join(f'{r:.2f}' for r in ratios)})" if label == "this" else ""
                    )
                table.add_row(*row)
    console = Console() if sys.stdout.isatty() else Console(width=130)
    console.print(table)
    # The targets (D228): PostgreSQL's writers scale; SQLite's cost what SQLite's own do.
    if "postgres" in scaling:
        ok = scaling["postgres"] >= 1.6
        console.print(f"{'PASS' if ok else 'FAIL'} PostgreSQL: {COUNTS[-1]} writers make "
                      f"{scaling['postgres']:.2f}x one (target >= 1.6x)")
    if "sqlite" in scaling and "sqlite3 floor" in scaling:
        ok = scaling["sqlite"] >= 0.9 * scaling["sqlite3 floor"]
        console.print(f"{'PASS' if ok else 'FAIL'} SQLite: {COUNTS[-1]} writers make "
                      f"{scaling['sqlite']:.2f}x one, bare sqlite3 {scaling['sqlite3 floor']:.2f}x "
                      "(target: at least 0.9x the floor's ratio)")
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
