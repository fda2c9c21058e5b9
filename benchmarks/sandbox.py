"""Sandbox benchmarks: ``.venv/bin/python benchmarks/sandbox.py``.

Measures:

* one shell call (``true``) and one ``read_file`` through the built-in tools, on the
  ``local`` backend and on the ``isolated`` one (bubblewrap): the overhead of confinement
  per call (skipped, saying why, where the isolated backend cannot run);
* workspace checkpoints of a 1,000-file / 100 MB folder: the first checkpoint, one of an
  unchanged tree, one after a one-file change (time and bytes written), a restore after a
  one-file change, and a diff of the two;
* the same walks over a tree of many folders (1,110 folders three deep, 2,000 small
  files): what walking a workspace folder by folder costs (each is entered and left
  through descriptors).

Prints a table, writes ``benchmarks/results/sandbox.json``. Always exits 0; the machine may
be shared, so every figure is a median of several rounds.

Options:
    --quick     fewer rounds and a 10 MB workspace (a smoke run).
    --postgres URL
                also measure checkpoints kept in a PostgreSQL store's object space
                (in a schema of its own, dropped afterwards); default
                ``$PLAIT_TEST_POSTGRES_URL`` when it is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from plait.errors import SandboxUnavailableError
from plait.sandbox import CheckpointStore, Objects, backend_named
from plait.session.checkpoints import StoreObjects
from plait.store import PostgresStore
from plait.tools import ToolContext, read_file, shell

RESULTS = Path(__file__).parent / "results" / "sandbox.json"


def _median_ms(op: Callable[[], Awaitable[object]], rounds: int) -> float:
    async def timed() -> list[float]:
        out = []
        for _ in range(rounds):
            start = time.perf_counter()
            await op()
            out.append((time.perf_counter() - start) * 1000)
        return out

    return statistics.median(asyncio.run(timed()))


def calls(rounds: int) -> dict[str, dict[str, float]]:
    """Median ms of one shell call and one read_file, per backend."""
    out: dict[str, dict[str, float]] = {}
    for name in ("local", "isolated"):
        try:
            handle = backend_named(name).open(None)
        except SandboxUnavailableError as exc:
            print(f"isolated skipped: {exc}", file=sys.stderr)
            continue
        try:
            (handle.root / "f.txt").write_text("x" * 10_000)
            ctx = ToolContext(handle.root, sandbox=handle)
            out[name] = {
                "shell `true` ms": _median_ms(
                    lambda ctx=ctx: shell.call(ctx, {"command": "true"}), rounds
                ),
                "read_file ms": _median_ms(
                    lambda ctx=ctx: read_file.call(ctx, {"path": "f.txt"}), rounds
                ),
            }
        finally:
            handle.release()
    return out


def _timed(op: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = op()
    return (time.perf_counter() - start) * 1000, value


def checkpoints(
    files: int, total_bytes: int, rounds: int, objects: Objects | None = None
) -> dict[str, float]:
    """Checkpoint costs on a ``files``-file workspace of ``total_bytes`` (in ``objects``)."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        size = total_bytes // files
        for i in range(files):
            folder = ws / f"d{i % 20:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i:04d}.bin").write_bytes(os.urandom(size))
        store = CheckpointStore(Path(tmp) / "cp", objects=objects)
        first_ms, first = _timed(lambda: store.checkpoint(ws))
        first_bytes = store.written
        time.sleep(0.1)  # past the stat cache's "too recent to trust" window
        store.checkpoint(ws)
        before = store.written
        unchanged = [_timed(lambda: store.checkpoint(ws))[0] for _ in range(rounds)]
        unchanged_bytes = store.written - before
        changed, costs, ids = [], [], [str(first)]
        for r in range(rounds):
            target = ws / f"d{r % 20:02d}" / f"f{r:04d}.bin"
            target.write_bytes(os.urandom(size))
            before = store.written
            ms, cid = _timed(lambda: store.checkpoint(ws))
            changed.append(ms)
            costs.append(store.written - before)
            ids.append(str(cid))
        restore = []
        for r in range(rounds):
            (ws / f"d{r % 20:02d}" / f"f{r:04d}.bin").write_bytes(b"damaged")
            restore.append(_timed(lambda: store.restore(ws, ids[-1]))[0])
        diff_ms, _ = _timed(lambda: store.diff(ids[0], ids[-1]))
    return {
        "first checkpoint ms": first_ms,
        "first checkpoint MB written": first_bytes / 1e6,
        "unchanged tree ms": statistics.median(unchanged),
        "unchanged tree bytes written": unchanged_bytes / rounds,
        "one-file change ms": statistics.median(changed),
        "one-file change bytes written": statistics.median(costs),
        "one file's bytes": float(size),
        "restore after one-file change ms": statistics.median(restore),
        "diff first..last ms": diff_ms,
    }


def folders(rounds: int) -> dict[str, float]:
    """Checkpoint and restore costs on a tree of many small folders (10 x 10 x 10, 3 deep)."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        made = 0
        for a in range(10):
            for b in range(10):
                for c in range(10):
                    folder = ws / f"a{a}" / f"b{b}" / f"c{c}"
                    folder.mkdir(parents=True)
                    for i in range(2):
                        (folder / f"f{i}.txt").write_bytes(os.urandom(512))
                        made += 1
        store = CheckpointStore(Path(tmp) / "cp")
        first_ms, first = _timed(lambda: store.checkpoint(ws))
        time.sleep(0.1)  # past the stat cache's "too recent to trust" window
        store.checkpoint(ws)
        unchanged = [_both(lambda: store.checkpoint(ws)) for _ in range(rounds)]
        same = [_both(lambda: store.restore(ws, str(first))) for _ in range(rounds)]
        changed = []
        for r in range(rounds):
            (ws / f"a{r % 10}" / "b0" / "c0" / "f0.txt").write_bytes(b"damaged")
            changed.append(_timed(lambda: store.restore(ws, str(first)))[0])
    return {
        "files": float(made),
        "first checkpoint ms": first_ms,
        "unchanged tree ms": statistics.median(t[0] for t in unchanged),
        "unchanged tree CPU ms": statistics.median(t[1] for t in unchanged),
        "restore of an unchanged tree ms": statistics.median(t[0] for t in same),
        "restore of an unchanged tree CPU ms": statistics.median(t[1] for t in same),
        "restore after one-file change ms": statistics.median(changed),
    }


def _both(op: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one call (CPU time is steadier on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    op()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def _in_postgres(url: str, total: int, rounds: int) -> dict[str, float]:
    """The checkpoint costs with the objects in a PostgreSQL store (a schema of its own)."""
    import uuid

    import psycopg

    schema = f"plait_bench_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(url, schema=schema)
    try:
        return checkpoints(1000, total, rounds, StoreObjects(store))
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main(argv: list[str] | None = None) -> int:
    """Print the tables and write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--postgres", metavar="URL", default=os.environ.get("PLAIT_TEST_POSTGRES_URL")
    )
    args = parser.parse_args(argv)
    rounds = 5 if args.quick else 30
    total = 10_000_000 if args.quick else 100_000_000
    console = Console() if sys.stdout.isatty() else Console(width=100)
    per_call = calls(rounds)
    table = Table(title=f"one tool call, median of {rounds}")
    table.add_column("measurement")
    for name in per_call:
        table.add_column(name, justify="right")
    if "isolated" in per_call:
        table.add_column("isolated - local", justify="right")
    for key in per_call.get("local", {}):
        cells = [f"{per_call[n][key]:.2f}" for n in per_call]
        if "isolated" in per_call:
            cells.append(f"{per_call['isolated'][key] - per_call['local'][key]:+.2f}")
        table.add_row(key, *cells)
    console.print(table)
    cp = checkpoints(1000, total, max(3, rounds // 3))
    spaces = {"folder": cp}
    if args.postgres:
        spaces["postgresql"] = _in_postgres(args.postgres, total, max(3, rounds // 3))
    table = Table(title=f"workspace checkpoints, 1,000 files / {total // 1_000_000} MB")
    table.add_column("measurement")
    for name in spaces:
        table.add_column(name, justify="right")
    for key in cp:
        table.add_row(key, *(f"{spaces[n][key]:,.2f}" for n in spaces))
    console.print(table)
    many = folders(max(3, rounds // 3))
    table = Table(title="a tree of 1,110 folders, 2,000 files of 512 B")
    table.add_column("measurement")
    table.add_column("folder", justify="right")
    for key, value in many.items():
        table.add_row(key, f"{value:,.2f}")
    console.print(table)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "calls": per_call,
                "checkpoints": spaces,
                "folders": many,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
