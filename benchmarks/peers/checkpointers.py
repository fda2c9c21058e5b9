"""LangGraph's checkpointers under a real ``StateGraph``: plait's ``PlaitSaver`` beside
LangGraph's own ``SqliteSaver`` and ``PostgresSaver``.

The graph is the smallest agent LangGraph users write: a ``messages`` channel reduced
by ``add_messages``, a model node and a ``ToolNode``. The model is fake and
deterministic (no network): given a person's message it asks for one tool call, given
the tool's result it answers, so one turn (``invoke`` with one user message) is four
messages, the same four items as the rest of the peers benchmark (``transcript.py``),
and four super-steps, each written as a checkpoint. Every saver runs the same
conversation, with ``durability="sync"`` (each checkpoint written before the next
step runs, so a ``put`` is timed alone, not overlapping the graph's next step).

Measured, per saver:

- **bytes on disk** after 50, 200 and 500 turns of one thread: on SQLite the database
  file and its WAL after a ``wal_checkpoint(TRUNCATE)``; on PostgreSQL
  ``pg_total_relation_size`` (heap, TOAST and indexes) of every table in the saver's
  own fresh schema;
- **put** and **get_tuple** latency: every call the graph makes, timed by wrapping the
  saver's methods, the median over the ten turns before each mark (``get_tuple`` is
  the read with which each ``invoke`` begins);
- **copy_thread** of a thread of 20 and of 200 turns (median of several copies, each to
  a new thread id), in a store of its own so the copies never count in the sizes.
  A saver whose ``copy_thread`` raises ``NotImplementedError`` says so.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SAVERS", "Where", "checkpointer_tables", "run_checkpointers"]

MARKS = (50, 200, 500)
"""Turns after which the thread's bytes on disk (and the latency around) are taken."""
QUICK_MARKS = (20, 50)
COPY_AT = (20, 200)
"""Thread lengths (turns) at which ``copy_thread`` is timed."""
QUICK_COPY_AT = (20,)
COPIES = 5
"""Copies timed per length (each to a new thread id)."""
WINDOW = 10
"""Turns before a mark whose calls give the latency at that mark."""


@dataclass(frozen=True)
class Where:
    """Where a saver instance keeps its data."""

    dir: Path
    pg_url: str | None = None
    schema: str | None = None


# -- the savers ------------------------------------------------------------------------------


class Saver:
    """One checkpointer on its own store: open, bytes on disk, close."""

    name = "?"
    engine = "sqlite"
    requires: tuple[str, ...] = ()

    def __init__(self, where: Where) -> None:
        self.where = where
        self.saver = self.open()

    def open(self) -> Any:
        """Return the checkpointer."""
        raise NotImplementedError

    def size(self) -> int:
        """Bytes the store holds on disk now."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the store."""


def _sqlite_bytes(folder: Path, db: Path) -> int:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def _schema_bytes(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (schema,),
        ).fetchone()
    assert row is not None
    return int(row[0])


class PlaitSQLite(Saver):
    """``PlaitSaver`` on a SQLite file."""

    name = "plait PlaitSaver"
    requires = ("plait.integrations.langgraph",)

    def open(self) -> Any:
        from plait.integrations.langgraph import PlaitSaver

        self.db = self.where.dir / "plait.db"
        return PlaitSaver(self.db, workspace=self.where.dir)

    def size(self) -> int:
        return _sqlite_bytes(self.where.dir, self.db)

    def close(self) -> None:
        self.saver.close()


class LangGraphSQLite(Saver):
    """LangGraph's ``SqliteSaver`` on a sqlite3 connection."""

    name = "LangGraph SqliteSaver"
    requires = ("langgraph.checkpoint.sqlite",)

    def open(self) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver

        self.db = self.where.dir / "langgraph.db"
        self.conn = sqlite3.connect(self.db, check_same_thread=False)
        return SqliteSaver(self.conn)

    def size(self) -> int:
        self.conn.commit()
        return _sqlite_bytes(self.where.dir, self.db)

    def close(self) -> None:
        self.conn.close()


class PlaitPostgres(Saver):
    """``PlaitSaver`` on plait's PostgreSQL store, in a fresh schema."""

    name = "plait PlaitSaver PG"
    engine = "postgres"
    requires = ("plait.integrations.langgraph", "psycopg")

    def open(self) -> Any:
        from plait.integrations.langgraph import PlaitSaver
        from plait.store.postgres import PostgresStore

        assert self.where.pg_url is not None
        self.store = PostgresStore(self.where.pg_url, schema=self.where.schema)
        return PlaitSaver(self.store, workspace=self.where.dir)

    def size(self) -> int:
        assert self.where.pg_url is not None and self.where.schema is not None
        return _schema_bytes(self.where.pg_url, self.where.schema)

    def close(self) -> None:
        self.saver.close()
        self.store.close()


class LangGraphPostgres(Saver):
    """LangGraph's ``PostgresSaver`` on one psycopg connection, in a fresh schema."""

    name = "LangGraph PostgresSaver"
    engine = "postgres"
    requires = ("langgraph.checkpoint.postgres", "psycopg")

    def open(self) -> Any:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        assert self.where.pg_url is not None
        self.conn = psycopg.connect(
            self.where.pg_url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={self.where.schema}",
        )
        saver = PostgresSaver(self.conn)
        saver.setup()
        return saver

    def size(self) -> int:
        assert self.where.pg_url is not None and self.where.schema is not None
        return _schema_bytes(self.where.pg_url, self.where.schema)

    def close(self) -> None:
        self.conn.close()


SAVERS: tuple[type[Saver], ...] = (PlaitSQLite, LangGraphSQLite, PlaitPostgres, LangGraphPostgres)
"""Every checkpointer, in table order."""


# -- timing ----------------------------------------------------------------------------------


@contextmanager
def timed(saver: Any, names: tuple[str, ...]) -> Iterator[dict[str, list[float]]]:
    """Time every call of ``saver``'s methods ``names`` (seconds, in call order)."""
    calls: dict[str, list[float]] = {n: [] for n in names}
    originals = {n: getattr(saver, n) for n in names}

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                calls[name].append(time.perf_counter() - start)

        return call

    for n, method in originals.items():
        setattr(saver, n, wrap(n, method))
    try:
        yield calls
    finally:
        for n in names:
            delattr(saver, n)


def grow(
    cls: type[Saver], where: Where, marks: tuple[int, ...], log: Callable[[str], None]
) -> dict[str, Any]:
    """Run one thread to the last mark; bytes and latency at every mark."""
    s = cls(where)
    out: dict[str, Any] = {"bytes": {}, "put_us": {}, "get_tuple_us": {}, "seconds": {}}
    try:
        from agent_graph import build_graph, turn

        graph = build_graph(s.saver)
        start = time.perf_counter()
        done = 0
        for mark in marks:
            per_turn: list[tuple[list[float], list[float]]] = []
            while done < mark:
                with timed(s.saver, ("put", "get_tuple")) as calls:
                    turn(graph, "t", done)
                per_turn.append((calls["put"], calls["get_tuple"]))
                done += 1
            window = per_turn[-WINDOW:]
            puts = [x for p, _ in window for x in p]
            gets = [x for _, g in window for x in g]
            out["put_us"][str(mark)] = statistics.median(puts) * 1e6
            out["get_tuple_us"][str(mark)] = statistics.median(gets) * 1e6
            out["seconds"][str(mark)] = round(time.perf_counter() - start, 2)
            out["bytes"][str(mark)] = s.size()
            log(f"  {cls.name}: {mark} turns, {out['bytes'][str(mark)]:,} bytes, "
                f"{out['seconds'][str(mark)]:.1f} s")
    finally:
        s.close()
    return out


def copies(
    cls: type[Saver], where: Where, lengths: tuple[int, ...], log: Callable[[str], None]
) -> dict[str, Any]:
    """Time ``copy_thread`` of a thread at each length (turns), or say why it cannot be."""
    s = cls(where)
    out: dict[str, Any] = {}
    try:
        from agent_graph import build_graph, turn

        graph = build_graph(s.saver)
        done = 0
        for length in lengths:
            while done < length:
                turn(graph, "t", done)
                done += 1
            secs: list[float] = []
            for k in range(COPIES):
                start = time.perf_counter()
                try:
                    s.saver.copy_thread("t", f"copy-{length}-{k}")
                except NotImplementedError:
                    return {"missing": f"{type(s.saver).__name__}.copy_thread raises "
                                       "NotImplementedError"}
                secs.append(time.perf_counter() - start)
            out[str(length)] = statistics.median(secs) * 1e6
            log(f"  {cls.name}: copy_thread at {length} turns {out[str(length)]:,.0f} µs")
    finally:
        s.close()
    return out


def run_checkpointers(
    classes: list[type[Saver]],
    quick: bool,
    place: Callable[[type[Saver], str], Where],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Measure every saver in ``classes``; ``place(cls, key)`` gives each instance a home."""
    marks = QUICK_MARKS if quick else MARKS
    lengths = QUICK_COPY_AT if quick else COPY_AT
    result: dict[str, Any] = {"marks": list(marks), "copy_at": list(lengths), "savers": {}}
    for cls in classes:
        log(f"LangGraph checkpointer: {cls.name} …")
        found = grow(cls, place(cls, "grow"), marks, log)
        found["engine"] = cls.engine
        found["copy_thread_us"] = copies(cls, place(cls, "copy"), lengths, log)
        result["savers"][cls.name] = found
    return result


# -- tables ----------------------------------------------------------------------------------


def _num(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _mb(b: int) -> str:
    return f"{b / 1e6:,.2f}" if b < 10e6 else f"{b / 1e6:,.1f}"


def checkpointer_tables(result: dict[str, Any]) -> str:
    """The checkpointer figures in Markdown: bytes on disk, latency, copy_thread."""
    savers: dict[str, Any] = result.get("savers", {})
    if not savers:
        return ""
    names = list(savers)
    marks = [str(m) for m in result["marks"]]
    out = [
        "**LangGraph checkpointers under a real StateGraph** (messages channel with "
        "add_messages, a fake model node, a ToolNode; 4 messages and 4 checkpoints a turn)\n",
        "| after | " + " | ".join(f"{n} (MB)" for n in names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for m in marks:
        cells = [_mb(savers[n]["bytes"][m]) for n in names]
        out.append(f"| {m} turns | " + " | ".join(cells) + " |")
    first, last = marks[0], marks[-1]
    growth = [f"{savers[n]['bytes'][last] / savers[n]['bytes'][first]:.1f}x" for n in names]
    out.append(f"| growth {first} → {last} turns ({int(last) / int(first):g}x the turns) | "
               + " | ".join(growth) + " |")
    per_turn = [
        f"{(savers[n]['bytes'][last] - savers[n]['bytes'][first]) / (int(last) - int(first)):,.0f}"
        for n in names
    ]
    out.append(f"| bytes per turn, turns {first}-{last} | " + " | ".join(per_turn) + " |")
    out.append("")
    out.append(f"**Checkpointer latency** (median µs per call over the {WINDOW} turns before "
               "each mark, the calls the graph makes)\n")
    out.append("| call | " + " | ".join(names) + " |")
    out.append("|---|" + "---:|" * len(names))
    for key, label in (("put_us", "put"), ("get_tuple_us", "get_tuple")):
        for m in marks:
            out.append(f"| {label} at {m} turns | "
                       + " | ".join(_num(savers[n][key][m]) for n in names) + " |")
    for length in (str(c) for c in result["copy_at"]):
        cells = []
        for n in names:
            c = savers[n]["copy_thread_us"]
            cells.append("n/a (not implemented)" if "missing" in c else _num(c[length]))
        out.append(f"| copy_thread at {length} turns | " + " | ".join(cells) + " |")
    missing = [f"{n}: {savers[n]['copy_thread_us']['missing']}" for n in names
               if "missing" in savers[n]["copy_thread_us"]]
    out.append("")
    for line in missing:
        out.append(f"- {line}")
    return "\n".join(out) + "\n"
