"""The cost of one SQLite writer lock and unlock while a process holds many others.

A store takes ``--held`` sessions' writer locks and keeps them; then a lock and unlock
of 200 other sessions (each locked once before) is timed, again and again, and the table
shows the median CPU µs (user and system: the kernel's list walks are system time, and
CPU time moves less than wall time on a shared machine) per lock+unlock and the
descriptors the process has open, for each count held. A lock whose kernel list grows
with the locks held shows it here as a cost that grows with them.

``--against DIR`` compares this checkout with another (DIR is its root, e.g. a worktree
of ``main``): every run happens in a fresh interpreter importing one checkout's ``src``,
the two alternate within each round, and the table adds this checkout's cost over the
other's, per round. ``--shards K`` tries another count of shard files (this checkout's
sharded locks only: every process of one database must use the same count).

Usage: python benchmarks/locks.py [--held 1000,5000,20000] [--pairs P] [--rounds R]
       [--against DIR] [--shards K]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

Result = tuple[float, int]  # CPU µs per lock+unlock, open descriptors while holding


def run(held: int, pairs: int, shards: int | None) -> Result:
    """Hold ``held`` locks in a fresh store, then time ``pairs`` lock+unlock of others."""
    _raise_open_file_limit(held + 1000)  # one flock file per session needs one each
    if shards is not None:
        from plait.store.sqlite import _shardlocks

        _shardlocks.SHARDS = shards
    from plait.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(str(Path(tmp) / "locks.db"))
        try:
            for i in range(held):
                assert store.lock(f"held/{i}")
            fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1
            # Sessions locked before (a lock file of their own exists where there is one),
            # as a writer that takes turns meets them; the first pass is not timed.
            ids = [f"probe/{i}" for i in range(200)]
            per: list[float] = []
            for _ in range(1 + pairs // len(ids)):
                start = time.process_time()
                for sid in ids:
                    store.lock(sid)
                    store.unlock(sid)
                per.append((time.process_time() - start) / len(ids) * 1e6)
            del per[0]
        finally:
            store.close()
    return statistics.median(per), fds


def _raise_open_file_limit(want: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return
    try:  # root may raise the hard limit too
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(want, hard), max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _run_in(tree: Path, held: int, pairs: int, shards: int | None) -> Result:
    """:func:`run` in a fresh interpreter that imports the checkout at ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    extra = ["--shards", str(shards)] if shards is not None else []
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(held), str(pairs), *extra],
        env=env, check=True, capture_output=True, text=True,
    ).stdout
    us, fds = out.split()
    return float(us), int(fds)


def main(argv: list[str] | None = None) -> int:
    """Print the table of lock+unlock cost by locks held."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--held", default="1000,5000,20000", help="locks held, comma-separated")
    parser.add_argument("--pairs", type=int, default=4000, help="lock+unlock pairs timed")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--shards", type=int, help="shard files (this checkout only)")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # one run, for the rounds
    args = parser.parse_args(argv)
    if args.one:
        print(*run(int(args.one[0]), int(args.one[1]), args.shards))
        return 0
    here = Path(__file__).resolve().parent.parent
    trees = {"this": here}
    if args.against is not None:
        trees["other"] = args.against.resolve()
    counts = [int(x) for x in args.held.split(",")]
    got: dict[tuple[str, int], list[Result]] = {(t, h): [] for t in trees for h in counts}
    for _ in range(args.rounds):  # this, other, this, ...: noise hits both alike
        for held in counts:
            for label, tree in trees.items():
                shards = args.shards if label == "this" else None
                got[label, held].append(_run_in(tree, held, args.pairs, shards))
    table = Table(title=f"one lock+unlock with N held ({args.pairs} pairs, medians of "
                  f"{args.rounds} interleaved rounds)")
    columns = ["code", "held", "CPU µs per lock+unlock", "per round", "open fds"]
    if args.against is not None:
        columns.append("this / other")
    for col in columns:
        table.add_column(col, justify="right")
    for label in trees:
        for held in counts:
            runs = got[label, held]
            row = [label, f"{held:,}", f"{statistics.median(r[0] for r in runs):.1f}",
                   ", ".join(f"{r[0]:.1f}" for r in runs), str(max(r[1] for r in runs))]
            if args.against is not None:
                ratios = [a[0] / b[0] for a, b in
                          zip(got["this", held], got["other", held], strict=True)]
                row.append(f"{statistics.median(ratios):.2f}x "
                           f"({', '.join(f'{r:.2f}' for r in ratios)})" if label == "this" else "")
            table.add_row(*row)
    console = Console() if sys.stdout.isatty() else Console(width=130)
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
