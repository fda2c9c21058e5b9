"""plait beside its peers in one run: ``make bench-peers`` (``.venv-peers/bin/python``).

The peers are openai-agents' SQLiteSession, AdvancedSQLiteSession and SQLAlchemySession
(aiosqlite, asyncpg), LangGraph's SqliteSaver and PostgresSaver, and Google ADK's
DatabaseSessionService (aiosqlite, asyncpg), SqliteSessionService and
InMemorySessionService; plait runs beside them on SQLite, in memory and on PostgreSQL.
Every store holds the same synthetic agent transcript (``transcript.py``) and is timed
on the verbs it has: append one item per call, append a batch, full load, tail 20,
fork, list sessions; then LangGraph's checkpointers under a real ``StateGraph``: plait's
``PlaitSaver`` beside ``SqliteSaver`` and ``PostgresSaver``, bytes on disk after 50, 200
and 500 turns, ``put`` and ``get_tuple`` latency, ``copy_thread`` (``checkpointers.py``);
then the peak memory of one full load of 1M items, plait beside SQLiteSession, each in
its own subprocess (``memory.py``).

PostgreSQL: ``PLAIT_BENCH_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``); the run makes a fresh database, one
schema per store in it, and drops the database at the end. No server: PostgreSQL is
skipped with the reason printed. A peer that is not installed is skipped likewise.

Writes ``benchmarks/results/peers.json`` (``peers-quick.json`` with ``--quick``) and
prints the Markdown tables the README quotes.

Options:
    --quick         sizes 1k and 10k, fewer sessions to list, memory at 100k, checkpointers
                    to 20 and 50 turns.
    --only A,B      only the adapters whose names contain one of these (plait is kept).
    --no-postgres   leave PostgreSQL out.
    --no-memory     leave the peak-memory subprocesses out.
    --no-checkpointers  leave LangGraph's checkpointers under a real graph out.
    --tables FILE   print the tables of a saved report (``--short``: the README's form).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import suppress
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from base import Adapter, Place  # noqa: E402
from checkpointers import SAVERS, Saver, Where, checkpointer_tables, run_checkpointers  # noqa: E402
from measure import Settings, build_all, measure_op  # noqa: E402
from report import markdown  # noqa: E402

RESULTS = HERE.parent / "results"
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"

ADAPTERS: tuple[tuple[str, str], ...] = (
    ("peer_plait", "PlaitSQLite"),
    ("peer_plait", "PlaitSQLiteFull"),
    ("peer_openai_agents", "SQLiteSession"),
    ("peer_openai_agents", "AdvancedSQLite"),
    ("peer_openai_agents", "SQLAlchemySQLite"),
    ("peer_langgraph", "SqliteSaver"),
    ("peer_adk", "AdkDatabaseSQLite"),
    ("peer_adk", "AdkSqlite"),
    ("peer_plait", "PlaitMemory"),
    ("peer_adk", "AdkInMemory"),
    ("peer_plait", "PlaitPostgres"),
    ("peer_openai_agents", "SQLAlchemyPostgres"),
    ("peer_langgraph", "PostgresSaver"),
    ("peer_adk", "AdkDatabasePostgres"),
)
"""Every adapter, in table order: module and class."""


@dataclass(frozen=True)
class Plan:
    """What a run measures."""

    sizes: dict[str, int]
    """Transcript sizes by column label."""
    append_sizes: tuple[str, ...]
    """Sizes at which appends are timed (appends grow the transcript)."""
    list_sessions: int
    """Sessions in each store when listing is timed."""
    memory_size: int
    """Items in the peak-memory transcript."""
    memory_rounds: int
    settings: Settings
    rounds_at: dict[str, int]
    """Fewer rounds at these sizes (a 100k load or LangGraph tail takes seconds a call)."""


FULL = Plan(
    sizes={"1k": 1_000, "10k": 10_000, "100k": 100_000},
    append_sizes=("1k", "10k"),
    list_sessions=1_000,
    memory_size=1_000_000,
    memory_rounds=3,
    settings=Settings(
        rounds=5, round_seconds=0.05, max_calls=500, build_budget=45.0, load_budget=6.0
    ),
    rounds_at={"100k": 3},
)
QUICK = Plan(
    sizes={"1k": 1_000, "10k": 10_000},
    append_sizes=("1k", "10k"),
    list_sessions=200,
    memory_size=100_000,
    memory_rounds=3,
    settings=Settings(
        rounds=3, round_seconds=0.04, max_calls=200, build_budget=20.0, load_budget=2.0
    ),
    rounds_at={},
)


README_ROWS: set[object] = {"10k", ("load", "100k"), ("list", "1k")}
"""The columns the README quotes: everything at 10k, the 100k loads, the listing."""

_START = time.perf_counter()


def log(text: str) -> None:
    """Progress on stderr (with the seconds since the start), so stdout holds only the tables."""
    print(f"{time.perf_counter() - _START:6.0f}s {text}", file=sys.stderr, flush=True)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def available(only: list[str] | None, postgres: bool) -> tuple[list[type[Adapter]], list[str]]:
    """Import the adapters whose libraries are installed; return them and why others are not."""
    found: list[type[Adapter]] = []
    missing: list[str] = []
    for module, cls_name in ADAPTERS:
        cls: type[Adapter] = getattr(importlib.import_module(module), cls_name)
        if not postgres and cls.engine == "postgres":
            continue
        if only and not cls.name.startswith("plait") and not any(o in cls.name for o in only):
            continue
        absent = [m for m in cls.requires if not _importable(m)]
        if absent:
            missing.append(f"{cls.name}: not installed ({', '.join(absent)})")
            continue
        found.append(cls)
    return found, missing


class Postgres:
    """A fresh database for the run, a fresh schema per adapter instance, dropped at the end."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.psycopg = psycopg
        self.base = url
        self.db = f"plait_peers_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{self.db}"')
        head, _, _ = url.rpartition("/")
        self.url = f"{head}/{self.db}"
        self.count = 0

    def schema(self) -> str:
        """Create and return a new schema."""
        self.count += 1
        name = f"s{self.count}"
        with self.psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return name

    def drop(self) -> None:
        """Drop the run's database, whatever still holds a connection to it."""
        with self.psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')


def open_postgres(url: str) -> tuple[Postgres | None, str]:
    """Return the run's database, or None and why PostgreSQL is skipped."""
    try:
        return Postgres(url), ""
    except ImportError:
        return None, "psycopg is not installed"
    except Exception as exc:  # the driver's errors: no server, refused, auth
        return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"


def make(cls: type[Adapter], tmp: Path, key: str, pg: Postgres | None) -> Adapter:
    """Create one adapter instance in its own folder (and schema)."""
    folder = tmp / f"{cls.__name__}-{key}"
    folder.mkdir()
    if cls.engine == "postgres":
        assert pg is not None
        return cls(Place(folder, key, pg.url, pg.schema()))
    return cls(Place(folder, key))


def run_timed(
    classes: list[type[Adapter]], plan: Plan, tmp: Path, pg: Postgres | None
) -> tuple[list[dict[str, Any]], dict[str, dict[str, str]]]:
    """Build every size for every adapter and time its verbs; return measurements, skips."""
    measurements: list[dict[str, Any]] = []
    skipped: dict[str, dict[str, str]] = {}
    rates: dict[str, float] = {}
    loads: dict[str, float] = {}
    """Adapter -> seconds of one full load at the previous size."""
    dropped: set[str] = set()
    previous = 0
    for label, size in plan.sizes.items():
        log(f"building {label} transcripts …")
        too_slow = {
            name: f"a full load of {previous:,} took {secs:.1f} s: {size:,} would take "
            f"~{secs * size / previous:.0f} s per call"
            for name, secs in loads.items()
            if previous and secs * size / previous > plan.settings.load_budget
        }
        dropped |= set(too_slow)
        # Reads first, then fork (a LangGraph fork becomes its thread's newest
        # checkpoint), then appends, which grow the transcripts.
        ops = ["load", "tail", "fork"]
        if label in plan.append_sizes:
            ops += ["append_one", "append_batch"]
        settings = replace(plan.settings, rounds=plan.rounds_at.get(label, plan.settings.rounds))
        chosen = [c for c in classes if c.name not in dropped and c.ops & set(ops)]
        # plait on an engine none of the remaining peers uses has nothing to be compared with.
        engines = {c.engine for c in chosen if not c.name.startswith("plait")}
        if any(not c.name.startswith("plait") for c in classes):  # else plait runs alone
            chosen = [c for c in chosen if not c.name.startswith("plait") or c.engine in engines]
        adapters = {c.name: make(c, tmp, label, pg) for c in chosen}
        try:
            skips = too_slow | build_all(adapters, size, rates, plan.settings.build_budget, log)
            for name in skips:
                if name in adapters:
                    adapters.pop(name).close()
                dropped.add(name)
            skipped[label] = skips | {n: "skipped at a smaller size" for n in dropped - set(skips)}
            previous = size
            gc.freeze()  # what the builds made stays: keep it out of every collection
            for op in ops:
                log(f"  {op} at {label} …")
                m = measure_op(adapters, op, label, settings)
                measurements.append(m.to_dict())
                if op == "load":
                    loads = {}
                    for key, samples in m.samples.items():
                        name, secs = key.split("|")[0], statistics.median(samples) / 1e3
                        loads[name] = max(loads.get(name, 0.0), secs)
        finally:
            for a in adapters.values():
                a.close()
            gc.unfreeze()
    log(f"listing: {plan.list_sessions:,} sessions per store …")
    adapters = {}
    try:
        engines = {c.engine for c in classes if not c.name.startswith("plait")}
        for c in classes:
            if "list" in c.ops and (c.engine in engines or not engines):
                a = make(c, tmp, "list", pg)
                start = time.perf_counter()
                a.fill_sessions(plan.list_sessions)
                log(f"  {c.name}: {plan.list_sessions:,} sessions in "
                    f"{time.perf_counter() - start:.1f} s")
                adapters[c.name] = a
        gc.freeze()
        label = f"{plan.list_sessions // 1000}k" if plan.list_sessions >= 1000 else str(
            plan.list_sessions
        )
        measurements.append(measure_op(adapters, "list", label, plan.settings).to_dict())
    finally:
        for a in adapters.values():
            a.close()
        gc.unfreeze()
    return measurements, skipped


def run_memory(plan: Plan, tmp: Path, with_agents: bool) -> dict[str, Any]:
    """Build the memory transcripts and measure each reader's peak in subprocesses."""
    from memory import METHOD, build_stores, measure_memory

    log(f"peak memory: building {plan.memory_size:,}-item stores …")
    start = time.perf_counter()
    stores = build_stores(tmp, plan.memory_size, with_agents)
    log(f"  built in {time.perf_counter() - start:.0f} s")
    runs = measure_memory(stores, plan.memory_rounds, log)
    return {"size": plan.memory_size, "method": METHOD, "runs": runs}


def checkpointer_savers(
    only: list[str] | None, postgres: bool
) -> tuple[list[type[Saver]], list[str]]:
    """The LangGraph checkpointers to run (none if ``--only`` names no LangGraph saver)."""
    if only and not any(o in cls.name for cls in SAVERS if "LangGraph" in cls.name for o in only):
        return [], []
    found: list[type[Saver]] = []
    missing: list[str] = []
    for cls in SAVERS:
        if not postgres and cls.engine == "postgres":
            continue
        absent = [m for m in (*cls.requires, "langgraph.graph") if not _importable(m)]
        if absent:
            missing.append(f"{cls.name} under a graph: not installed ({', '.join(absent)})")
        else:
            found.append(cls)
    return found, missing


def run_savers(
    savers: list[type[Saver]], quick: bool, tmp: Path, pg: Postgres | None
) -> dict[str, Any]:
    """Run the checkpointers, each instance in a fresh folder (and schema)."""

    def place(cls: type[Saver], key: str) -> Where:
        folder = tmp / f"saver-{cls.__name__}-{key}"
        folder.mkdir()
        if cls.engine == "postgres":
            assert pg is not None
            return Where(folder, pg.url, pg.schema())
        return Where(folder)

    return run_checkpointers(savers, quick, place, log)


def meta(seconds: float, notes: list[str]) -> dict[str, Any]:
    """Where and with what the run was made."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("plait", "openai-agents", "langgraph-checkpoint", "langgraph-checkpoint-sqlite",
                "langgraph-checkpoint-postgres", "google-adk", "sqlalchemy", "aiosqlite",
                "asyncpg", "psycopg"):
        with suppress(PackageNotFoundError):
            versions[pkg] = version(pkg)
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "seconds": round(seconds, 1),
        "versions": versions,
        "notes": notes,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, write the JSON report, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--only", help="comma-separated parts of adapter names (plait is kept)")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-checkpointers", action="store_true")
    parser.add_argument("--out", type=Path, help="where to write the JSON report")
    parser.add_argument("--tables", type=Path, help="print a saved report's tables, run nothing")
    parser.add_argument("--short", action="store_true",
                        help="with --tables: the README's form (10k, 100k loads, ratios only)")
    args = parser.parse_args(argv)
    if args.tables:
        saved = json.loads(args.tables.read_text())
        print(markdown(saved, README_ROWS, short=True) if args.short else markdown(saved))
        print(checkpointer_tables(saved.get("checkpointers", {})))
        return 0
    plan = QUICK if args.quick else FULL
    only = args.only.split(",") if args.only else None
    notes: list[str] = []
    pg: Postgres | None = None
    if not args.no_postgres:
        pg, why = open_postgres(os.environ.get("PLAIT_BENCH_POSTGRES_URL", DEFAULT_PG))
        if pg is None:
            notes.append(f"PostgreSQL skipped: {why}")
            log(notes[-1])
    classes, missing = available(only, postgres=pg is not None)
    savers: list[type[Saver]] = []
    if not args.no_checkpointers:
        savers, missing_savers = checkpointer_savers(only, postgres=pg is not None)
        missing += missing_savers
    for line in missing:
        notes.append(f"skipped: {line}")
        log(notes[-1])
    tmp = Path(tempfile.mkdtemp(prefix="plait-peers-"))
    start = time.perf_counter()
    try:
        measurements, skipped = run_timed(classes, plan, tmp, pg)
        checkpoints = run_savers(savers, args.quick, tmp, pg) if savers else {}
        memory: dict[str, Any] = {}
        if not args.no_memory:
            with_agents = any(c.name == "SQLiteSession" for c in classes)
            memory = run_memory(plan, tmp, with_agents)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if pg is not None:
            pg.drop()
    report = {
        "meta": meta(time.perf_counter() - start, notes),
        "plan": asdict(plan),
        "adapters": {
            c.name: {"engine": c.engine, "ops": sorted(c.ops), "loads": list(c.load_names),
                     "notes": c.notes}
            for c in classes
        },
        "skipped": skipped,
        "measurements": measurements,
        "checkpointers": checkpoints,
        "memory": memory,
    }
    out = args.out or RESULTS / ("peers-quick.json" if args.quick else "peers.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(markdown(report))
    print(checkpointer_tables(checkpoints))
    for line in notes:
        print(f"- {line}")
    for size, skips in skipped.items():
        for name, why in skips.items():
            print(f"- {name} at {size}: {why}")
    log(f"{report['meta']['seconds']:.0f} s; results written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
