"""What encryption at rest costs: appends and full reads, plain beside sealed (D320).

Each engine is opened twice on fresh targets, without and with a master key; in each,
one session takes ``--appends`` one-record appends (an agent step's write, through the
store's ``append``), then its records are read back whole ``--reads`` times. The two
stores take turns, append by append and read by read. Printed
as a Markdown table (microseconds per append, milliseconds per full read, and the
sealed/plain ratio); ``--out FILE`` also writes it there.

    .venv/bin/python benchmarks/encryption.py [--appends 3000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plait.records import UserRecord
from plait.store import PostgresStore, SQLiteStore, Store, new_encryption_key, open_store
from plait.store.base import SessionRow

TEXT = "An agent's step: the model read the file, then called a tool with its arguments. " * 3


def _measure(opener: Callable[[str | None], Any], appends: int, reads: int) -> dict[str, float]:
    """Plain and sealed side by side: their appends and reads alternate, so a load on the
    machine (or the server) falls on both alike."""
    stores = {"plain": opener(None), "sealed": opener(new_encryption_key())}
    try:
        rows = {
            k: s.create(SessionRow(id="bench", workspace="/bench")) for k, s in stores.items()
        }
        times: dict[str, list[float]] = {k: [] for k in stores}
        for i in range(appends):
            for k, store in stores.items():
                row = rows[k]
                record = UserRecord(seq=row.layout.end_seq, content=f"{i} {TEXT}")
                t = time.perf_counter()
                rows[k] = store.append(row, [record])
                times[k].append(time.perf_counter() - t)
        out = {f"{k}_append_us": statistics.median(v) * 1e6 for k, v in times.items()}
        reads_ms: dict[str, list[float]] = {k: [] for k in stores}
        for _ in range(reads):
            for k, store in stores.items():
                t = time.perf_counter()
                got = store.read(rows[k], 0, rows[k].layout.end_seq)
                reads_ms[k].append(time.perf_counter() - t)
                assert len(got) == appends
        out.update({f"{k}_read_ms": statistics.median(v) * 1e3 for k, v in reads_ms.items()})
        return out
    finally:
        for store in stores.values():
            store.close()


def main() -> None:
    """Run the comparison and print (and optionally write) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=3000)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--postgres", default=None, help="a postgresql:// URL to measure too")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(1_000_000))

        def sqlite(key: str | None) -> Store:
            return SQLiteStore(Path(tmp) / f"b{next(counter)}.db", encryption_key=key)

        def memory(key: str | None) -> Store:
            return open_store(":memory:", encryption_key=key)

        rows.append(("SQLite (file, WAL)", _measure(sqlite, args.appends, args.reads)))
        rows.append(("memory", _measure(memory, args.appends, args.reads)))
    if args.postgres:
        import psycopg

        def postgres(key: str | None) -> Store:
            schema = f"bench_crypto_{next(counter_pg)}"
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            sep = "&" if "?" in args.postgres else "?"
            return PostgresStore(f"{args.postgres}{sep}schema={schema}", encryption_key=key)

        counter_pg = iter(range(1_000_000))
        rows.append(("PostgreSQL", _measure(postgres, args.appends, args.reads)))
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            for i in range(2):
                conn.execute(f"DROP SCHEMA IF EXISTS bench_crypto_{i} CASCADE")
    lines = [
        f"One session, {args.appends} one-record appends ({len(TEXT) + 5} characters each), "
        f"then {args.reads} full reads of the {args.appends} records; medians.",
        "",
        "| engine | append plain (us) | append sealed (us) | ratio "
        "| full read plain (ms) | full read sealed (ms) | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in rows:
        lines.append(
            f"| {name} | {m['plain_append_us']:.1f} | {m['sealed_append_us']:.1f} "
            f"| {m['sealed_append_us'] / m['plain_append_us']:.2f}x "
            f"| {m['plain_read_ms']:.1f} | {m['sealed_read_ms']:.1f} "
            f"| {m['sealed_read_ms'] / m['plain_read_ms']:.2f}x |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
