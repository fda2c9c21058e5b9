"""Retention benchmarks: ``.venv/bin/python benchmarks/retention.py [--quick]``.

Two questions, both on SQLite files (D311):

* What does ``auto_vacuum = INCREMENTAL`` (new stores) cost one-record appends, against
  NONE (stores made before it)? Rounds of 5,000 appends through ``Session.inject``, the
  two modes interleaved and their order alternated; the median of per-round ratios.
* What does a pass cost and give back? A store of 1,000 sessions of 40 records (300 bytes
  of text each); the older half idle, a fork of every tenth of them kept alive. The pass's time,
  what it removed and how much smaller the file is.

Prints the figures; always exits 0 (the machine may be shared: read the ratios, not the
rates).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from datetime import timedelta

from plait import Client
from plait.store import SQLiteStore


def _store(folder: str, mode: str) -> str:
    path = os.path.join(folder, f"{mode}.db")
    SQLiteStore(path).close()  # made in incremental mode
    if mode == "none":
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute("PRAGMA auto_vacuum = NONE")
        raw.execute("VACUUM")
        raw.close()
    return path


def _appends(path: str, n: int) -> float:
    with Client(os.path.dirname(path), store=path) as client:
        s = client.sessions.new()
        message = {"role": "user", "content": "x" * 300}
        s.inject(message)
        start = time.perf_counter()
        for _ in range(n):
            s.inject(message)
        return n / (time.perf_counter() - start)


def appends(rounds: int) -> None:
    ratios = []
    for r in range(rounds):
        folder = tempfile.mkdtemp(prefix="plait-bench-")
        none, incremental = _store(folder, "none"), _store(folder, "incremental")
        if r % 2:
            b, a = _appends(incremental, 5000), _appends(none, 5000)
        else:
            a, b = _appends(none, 5000), _appends(incremental, 5000)
        ratios.append(b / a)
        print(f"  round {r}: NONE {a:,.0f}/s  INCREMENTAL {b:,.0f}/s  ratio {b / a:.3f}")
    print(f"appends, INCREMENTAL / NONE: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


def a_pass(sessions: int) -> None:
    folder = tempfile.mkdtemp(prefix="plait-bench-")
    path = os.path.join(folder, "plait.db")
    message = {"role": "user", "content": "y" * 300}
    with Client(folder, store=path, writer_lock="write") as client:
        forks = []
        middle = time.time()
        for k in range(sessions):
            s = client.sessions.new()
            s.transcript.inject_many([message] * 40)
            if k % 10 == 0 and k < sessions // 2:
                forks.append(s.fork_at(20))
            if k == sessions // 2 - 1:
                time.sleep(0.5)
                middle = time.time()  # the older half was written before this
                time.sleep(0.5)
                for fork in forks:
                    fork.inject(message)  # the older half's forks stay alive
        start = time.perf_counter()
        age = timedelta(seconds=time.time() - middle)
        done = client.sessions.retain(age, all_workspaces=True)
        took = time.perf_counter() - start
    print(
        f"a pass over {sessions} sessions: {took:.2f} s; removed {len(done.sessions)} "
        f"sessions, {done.records:,} records ({done.record_bytes / 2**20:.1f} MiB of text); "
        f"file {done.bytes_before / 2**20:.1f} -> {done.bytes_after / 2**20:.1f} MiB "
        f"({done.reclaimed})"
        if done.bytes_before is not None and done.bytes_after is not None
        else f"a pass over {sessions} sessions: {took:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, fewer sessions")
    args = parser.parse_args()
    appends(4 if args.quick else 16)
    a_pass(200 if args.quick else 1000)


if __name__ == "__main__":
    main()
