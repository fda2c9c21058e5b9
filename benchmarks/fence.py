"""The cost of the writer fence on PostgreSQL: a holder's appends and writes, fenced or not.

A store that holds a session's writer lock sends its epoch with every write, checked in
the same statement (D232); one that holds no lock sends the statements it always did.
Each variant runs in a process of its own, the variants taking turns round after round
(the machine is shared: turns spread its noise over all of them), and each round reports
the median time of one call. ``--source DIR`` adds a variant run on another checkout's
``src`` (the code before the fence, say) with the lock held.

Usage: python benchmarks/fence.py [--rounds 7] [--n 2000] [--source DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"

# One round in a fresh process: a session of its own, the lock taken or not, then the
# median of one-record appends, two-record appends and row writes, in µs.
_ROUND = """
import json, statistics, sys, time
from dataclasses import replace
from plait.records import UserRecord
from plait.store import SessionRow
from plait.store.postgres import PostgresStore

url, schema, locked, n = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
store = PostgresStore(url, schema=schema, auto_migrate=True)
sid = f"s-{time.monotonic_ns()}"
row = store.create(SessionRow(id=sid, workspace="/bench"), [])
if locked:
    assert store.lock(sid)
text = "y" * 200

def timed(step, count):
    global row
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6

def one():
    global row
    row = store.append(row, [UserRecord(seq=row.layout.end_seq, content=text)])

def two():
    global row
    seq = row.layout.end_seq
    pair = [UserRecord(seq=seq, content=text), UserRecord(seq=seq + 1, content=text)]
    row = store.append(row, pair)

def write():
    global row
    row = store.write(row, replace(row, title=str(row.row_version)))

for _ in range(200):  # warm: connections, prepared statements, caches
    one()
out = {"append one": timed(one, n), "append two": timed(two, n // 4), "write": timed(write, n // 4)}
store.close()
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    """Print the medians of the rounds' medians per variant, as a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--source", type=Path, default=None)
    args = parser.parse_args(argv)
    url = os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG)
    here = str(Path(__file__).resolve().parent.parent / "src")
    variants = [("holds no lock (unfenced)", here, "0"), ("holds the lock (fenced)", here, "1")]
    if args.source is not None:
        variants.insert(0, ("before the fence, holds the lock", str(args.source), "1"))
    import psycopg

    schemas = {src: f"plait_fence_bench_{uuid.uuid4().hex[:8]}" for _, src, _ in variants}
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in variants}
    try:
        for _ in range(args.rounds):
            for name, src, locked in variants:
                env = dict(os.environ, PYTHONPATH=src)
                done = subprocess.run(
                    [sys.executable, "-c", _ROUND, url, schemas[src], locked, str(args.n)],
                    capture_output=True, text=True, env=env, check=True,
                )  # fmt: skip
                results[name].append(json.loads(done.stdout))
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            for schema in set(schemas.values()):
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    ops = list(next(iter(results.values()))[0])
    print("| variant | " + " | ".join(f"{op} µs" for op in ops) + " |")
    print("| --- |" + " --- |" * len(ops))
    for name, rounds in results.items():
        cells = []
        for op in ops:
            values = [r[op] for r in rounds]
            cells.append(f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
