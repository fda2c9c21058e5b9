"""Full loads from 1k to 1M records: time per record, peak memory, and PostgreSQL beside a peer.

``make bench`` runs it after the main table (which has the 10k comparisons with
the raw floor and openai-agents' ``SQLiteSession`` at 1k-100k). Here:

* **per record**: ``history(full=True)``, the raw floor (sqlite3 ``SELECT payload``
  + ``json.loads`` of the same rows) and ``SQLiteSession.get_items()`` of the same
  messages, interleaved, at each size; the ratios are per round.
* **peak memory**: each load in a fresh process (``ru_maxrss`` after it, less the
  process before it): ``history(full=True)``, ``iter_history(full=True)`` consumed
  without keeping the messages, and ``SQLiteSession.get_items()``.
* **PostgreSQL**: ``history(full=True)`` of 10k on :class:`plait.PostgresStore`
  beside openai-agents' ``SQLAlchemySession`` on asyncpg, when a server answers at
  ``PLAIT_BENCH_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
  and ``sqlalchemy`` and ``asyncpg`` are installed (skipped, saying why, otherwise).

Usage: python benchmarks/fullload.py [--sizes 1k,10k,100k,1M] [--rounds N] [--no-memory]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import plait
from cases import message
from harness import interleave
from plait.errors import StoreError

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"
BATCH = 10_000
"""Messages per write while building a transcript."""


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def _size(text: str) -> int:
    text = text.strip().lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(text.rstrip("km")) * scale


def build(folder: Path, n: int) -> None:
    """A plait store (``plait.db``) and an openai-agents store (``peer.db``) of ``n`` messages."""
    folder.mkdir(parents=True, exist_ok=True)
    with plait.Client(folder, store=folder / "plait.db") as client:
        s = client.sessions.create()
        for start in range(0, n, BATCH):
            s.transcript.inject_many([message(i) for i in range(start, min(n, start + BATCH))])
        (folder / "id").write_text(s.id)
    from agents import SQLiteSession

    peer = SQLiteSession("bench", folder / "peer.db")
    for start in range(0, n, BATCH):
        items = [message(i) for i in range(start, min(n, start + BATCH))]
        asyncio.run(peer.add_items(items))  # type: ignore[arg-type]
    peer.close()


def _floor(folder: Path, sid: str, n: int) -> Callable[[], object]:
    db = sqlite3.connect(folder / "plait.db")
    pk = db.execute("SELECT pk FROM sessions WHERE id = ?", (sid,)).fetchone()[0]
    query = "SELECT payload FROM records WHERE key >= ? AND key < ? ORDER BY key"
    span = (pk << 32, (pk << 32) + n)
    return lambda: [json.loads(p) for (p,) in db.execute(query, span)]


def per_record(folder: Path, n: int, rounds: int) -> dict[str, list[float]]:
    """Seconds per round of each load of ``n`` messages, interleaved."""
    from agents import SQLiteSession

    sid = (folder / "id").read_text()
    client = plait.Client(folder, store=folder / "plait.db")
    session = client.open(sid)
    peer = SQLiteSession("bench", folder / "peer.db")
    runner = asyncio.Runner()
    try:
        if len(session.history(full=True)) != n or len(runner.run(peer.get_items())) != n:
            raise RuntimeError("unexpected load size")
        return interleave(
            {
                "plait": lambda: session.history(full=True),
                "floor": _floor(folder, sid, n),
                "peer": lambda: runner.run(peer.get_items()),
            },
            rounds,
        )
    finally:
        runner.close()
        peer.close()
        client.close()


_PROBE = """
import asyncio, sys
folder, what = sys.argv[1], sys.argv[2]

def status(key):  # KiB; VmHWM is this process's own peak (ru_maxrss carries a parent's over exec)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))

if what.startswith("plait"):
    import plait
    client = plait.Client(folder, store=folder + "/plait.db")
    s = client.open(open(folder + "/id").read())
    next(s.transcript.iter_history(full=True, batch=1))  # what a first read imports, unmeasured
else:
    from agents import SQLiteSession
    peer = SQLiteSession("bench", folder + "/peer.db")
    asyncio.run(peer.get_items(limit=1))
before = status("VmRSS")
if what == "plait":
    got = len(s.history(full=True))
elif what == "plait-stream":
    got = sum(1 for _ in s.transcript.iter_history(full=True))
else:
    got = len(asyncio.run(peer.get_items()))
print(got, before, status("VmHWM"))
"""
"""One load in a fresh process: the resident KiB before it, and the peak KiB after it. Each
side imports only its own library, and has made one small read first."""


def peak_memory(folder: Path, what: str) -> tuple[int, int]:
    """(peak KiB of the process, KiB the load added to it) of one load in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(folder), what],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    ).stdout.split()
    _, before, after = (int(x) for x in out)
    return after, after - before


def postgres(console: Console, n: int, rounds: int) -> Table | None:
    """plait's PostgreSQL store beside openai-agents' SQLAlchemy session on asyncpg."""
    url = os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG)
    try:
        import asyncpg  # noqa: F401
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
        from sqlalchemy.ext.asyncio import create_async_engine
    except ImportError as exc:
        console.print(f"[dim]PostgreSQL comparison skipped: {exc} (pip install sqlalchemy asyncpg)")
        return None
    schema = f"plait_bench_{uuid.uuid4().hex[:10]}"
    try:
        from plait.store.postgres import PostgresStore

        store = PostgresStore(url, schema=schema, connect_timeout=3)
    except (StoreError, ImportError) as exc:
        console.print(f"[dim]PostgreSQL comparison skipped: {exc}")
        return None
    tmp = Path(tempfile.mkdtemp())
    runner = asyncio.Runner()
    engine = create_async_engine(
        url.replace("postgresql://", "postgresql+asyncpg://"),
        connect_args={"server_settings": {"search_path": schema}},
    )
    try:
        with plait.Client(tmp, store=store) as client:
            s = client.sessions.create()
            for start in range(0, n, BATCH):
                s.transcript.inject_many([message(i) for i in range(start, min(n, start + BATCH))])
            peer = SQLAlchemySession("bench", engine=engine, create_tables=True)
            for start in range(0, n, BATCH):
                items = [message(i) for i in range(start, min(n, start + BATCH))]
                runner.run(peer.add_items(items))  # type: ignore[arg-type]
            if len(runner.run(peer.get_items())) != n or len(s.history(full=True)) != n:
                raise RuntimeError("unexpected load size")
            secs = interleave(
                {
                    "plait": lambda: s.history(full=True),
                    "stream": lambda: sum(1 for _ in s.transcript.iter_history(full=True)),
                    "peer": lambda: runner.run(peer.get_items()),
                },
                rounds,
            )
    finally:
        runner.run(engine.dispose())
        runner.close()
        store.close()
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    table = Table(title=f"PostgreSQL: full load of {_label(n)} messages (medians of {rounds})")
    for col in ("load", "ms", "peer / it (per round)"):
        table.add_column(col, justify="left" if col == "load" else "right")
    for key, name in (("plait", "plait history(full=True)"), ("stream", "plait iter_history")):
        table.add_row(
            name, f"{statistics.median(secs[key]) * 1e3:.1f}", _ratio(secs[key], secs["peer"])
        )
    table.add_row(
        "openai-agents SQLAlchemySession (asyncpg)",
        f"{statistics.median(secs['peer']) * 1e3:.1f}",
        "1.00x",
    )
    return table


def _ratio(mine: list[float], other: list[float]) -> str:
    got = [o / m for m, o in zip(mine, other, strict=True)]
    return f"{statistics.median(got):.2f}x ({min(got):.2f}-{max(got):.2f})"


def main(argv: list[str] | None = None) -> int:
    """Print the tables; a peer that is not installed is skipped, saying so."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1k,10k,100k,1M")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args(argv)
    console = Console(width=120)
    try:
        import agents  # noqa: F401
    except ImportError:
        console.print("[dim]full loads skipped: openai-agents is not installed[/dim]")
        return 0
    sizes = [_size(x) for x in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="plait-fullload-"))
    timing = Table(title=f"full load per record (medians of {args.rounds} interleaved rounds)")
    for col in (
        "messages",
        "plait µs/rec",
        "floor µs/rec",
        "peer µs/rec",
        "floor / plait",
        "peer / plait",
    ):
        timing.add_column(col, justify="right")
    memory = Table(title="peak memory of one load, fresh process (MiB added / process peak)")
    for col in (
        "messages",
        "history(full=True)",
        "iter_history(full=True)",
        "SQLiteSession.get_items()",
        "peer / plait",
    ):
        memory.add_column(col, justify="right")
    try:
        for n in sizes:
            folder = tmp / _label(n)
            console.print(f"[dim]building {_label(n)} …[/dim]")
            build(folder, n)
            secs = per_record(folder, n, args.rounds)
            us = {k: statistics.median(v) / n * 1e6 for k, v in secs.items()}
            timing.add_row(
                _label(n),
                f"{us['plait']:.2f}",
                f"{us['floor']:.2f}",
                f"{us['peer']:.2f}",
                _ratio(secs["plait"], secs["floor"]),
                _ratio(secs["plait"], secs["peer"]),
            )
            if not args.no_memory:
                got = {w: peak_memory(folder, w) for w in ("plait", "plait-stream", "peer")}
                cells = [f"{got[w][1] / 1024:,.0f} / {got[w][0] / 1024:,.0f}" for w in got]
                ratio = got["peer"][1] / max(got["plait"][1], 1)
                memory.add_row(_label(n), *cells, f"{ratio:.2f}x")
            shutil.rmtree(folder)  # the next size's files take the room
        console.print(timing)
        if not args.no_memory:
            console.print(memory)
        pg = postgres(console, 10_000, args.rounds)
        if pg is not None:
            console.print(pg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
