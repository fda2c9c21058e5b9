"""The plait workloads: build transcripts, then time appends, reads, branches and listing.

Each ``measure_*`` function returns :class:`harness.Row` objects whose columns
are the transcript sizes (or, for listing, the number of sessions in the store).
Repeats of one measurement are interleaved across sizes (see
:func:`harness.interleave`) so noise on the shared machine hits every size alike.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import plait
import plait.records
import plait.store
from harness import RawFloor, Row, db_size, interleave, wal_pages

__all__ = [
    "Config",
    "Transcript",
    "build_transcript",
    "measure_appends",
    "measure_branches",
    "measure_listing",
    "measure_reads",
    "message",
]

TEXT_CHARS = 200
"""Characters of text in every benchmark message."""
FLOOR_ROW_CHARS = 260
"""Text per raw-floor row: a plait record row holds a 36-character id, the kind
and the ~215-character JSON payload of a 200-character message."""
BUILD_BATCH = 1000
"""Messages per ``inject_many`` call while building a transcript."""
WAL_PROBE_OPS = 20
"""Operations per write-amplification probe (few enough that no auto-checkpoint runs)."""

_FILLER = "The quick brown fox jumps over the lazy dog while the agent reads the logs. " * 4


@dataclass(frozen=True)
class Config:
    """How much work each measurement does (repeats and operations per repeat)."""

    repeats: int
    """Rounds for every measurement (odd, so the median is a sample)."""
    append_ops: int
    """``inject`` calls per round (synchronous=NORMAL)."""
    full_ops: int
    """``inject`` calls per round with durability="full" (each one fsyncs)."""
    batch_calls: int
    """``inject_many(100)`` calls per round."""
    batch_size: int
    """Messages per ``inject_many`` call."""
    tail_calls: int
    """``tail(20)`` calls per round."""
    history_repeats: int
    """Rounds of full history loads (each one reads the whole transcript)."""
    branch_ops: int
    """``fork`` / ``fork_at`` / ``detach`` calls per round."""
    list_calls: int
    """``sessions.list(20)`` calls per round."""
    session_counts: tuple[int, ...]
    """Sessions in the store when listing is timed (built up incrementally)."""


def message(i: int) -> dict[str, str]:
    """Return message ``i`` of a transcript: user and assistant alternate, ~200 characters."""
    role = "user" if i % 2 == 0 else "assistant"
    head = f"#{i:07d} {role}: "
    return {"role": role, "content": (head + _FILLER)[:TEXT_CHARS]}


def _messages(start: int, n: int) -> list[dict[str, str]]:
    return [message(i) for i in range(start, start + n)]


@dataclass
class Transcript:
    """One transcript under test: its own store file, client, session and raw floor."""

    label: str
    size: int
    path: Path
    client: plait.Client
    session: plait.Session
    floor: RawFloor
    written: int
    """Messages written to the session so far (the next message's number)."""
    closers: list[Callable[[], object]] = field(default_factory=list)
    """What the read comparisons opened beside it (floor connections, peers)."""

    def close_extras(self) -> None:
        """Close what the read comparisons opened."""
        while self.closers:
            self.closers.pop()()

    def close(self) -> None:
        """Close the client (and its store), the raw floor and the comparisons."""
        self.close_extras()
        self.client.close()
        self.floor.close()


def build_transcript(tmp: Path, label: str, size: int) -> Transcript:
    """Create a store holding one session of ``size`` messages, plus a raw floor as large."""
    path = tmp / f"transcript-{label}.db"
    client = plait.Client(tmp, store=path)
    session = client.session
    for start in range(0, size, BUILD_BATCH):
        session.transcript.inject_many(_messages(start, min(BUILD_BATCH, size - start)))
    if session.transcript.length != size:
        raise RuntimeError(f"built {session.transcript.length} messages, wanted {size}")
    floor = RawFloor(tmp / f"floor-{label}.db", prefill=size, row_chars=FLOOR_ROW_CHARS)
    return Transcript(label, size, path, client, session, floor, size)


def _appender(t: Transcript, session: plait.Session, n: int) -> Callable[[], None]:
    """Return a task appending ``n`` messages to ``session``, one ``inject`` per message."""

    def run() -> None:
        for _ in range(n):
            session.inject(message(t.written))
            t.written += 1

    return run


def _batch_appender(t: Transcript, calls: int, size: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(calls):
            t.session.transcript.inject_many(_messages(t.written, size))
            t.written += size

    return run


def _repeat(op: Callable[[], object], n: int) -> Callable[[], None]:
    """Return a task calling ``op`` ``n`` times."""

    def run() -> None:
        for _ in range(n):
            op()

    return run


def _rates(seconds: list[float], ops: int) -> list[float]:
    return [ops / s for s in seconds]


def _per_op(seconds: list[float], ops: int, scale: float) -> list[float]:
    return [s / ops * scale for s in seconds]


def _wal_pages_per_op(path: Path, run: Callable[[], None], ops: int) -> float:
    """Checkpoint, run ``ops`` operations, and return WAL page frames written per op."""
    page_size = db_size(path).page_size  # checkpoints: the WAL starts empty
    run()
    return wal_pages(path, page_size) / ops


# -- appends ----------------------------------------------------------------------------------


def measure_appends(transcripts: list[Transcript], cfg: Config) -> list[Row]:
    """Append one per call (NORMAL and FULL) against the raw floor, and append in batches.

    Each plait run is interleaved with a raw-floor run of the same size and
    mode, so the ratio compares runs made under the same machine load.
    """
    group = "append"
    one = Row("append_one", "append 1 per call: inject()", "records/s", group)
    floor = Row("raw_floor_normal", "raw floor: 1 INSERT/txn, sync=NORMAL", "records/s", group)
    ratio = Row("append_one_vs_floor", "  append 1 per call / raw floor (NORMAL)", "x", group)
    one_full = Row("append_one_full", "append 1 per call, durability=full", "records/s", group)
    floor_full = Row("raw_floor_full", "raw floor: 1 INSERT/txn, sync=FULL", "records/s", group)
    ratio_full = Row("append_one_full_vs_floor", "  append (full) / raw floor (FULL)", "x", group)
    batch = Row("append_batch", "append batch: inject_many(100)", "records/s", group)
    wal_plait = Row("wal_pages_append", "  WAL pages written per inject()", "pages", group)
    wal_floor = Row("wal_pages_floor", "  WAL pages written per raw INSERT", "pages", group)

    for t in transcripts:
        full_store = plait.store.SQLiteStore(t.path, durability="full")
        try:
            full_client = plait.Client(t.client.workspace, store=full_store)
            full_session = full_client.open(t.session.id)
            secs = interleave(
                {
                    "plait": _appender(t, t.session, cfg.append_ops),
                    "floor": partial(t.floor.append, cfg.append_ops, "NORMAL"),
                },
                cfg.repeats,
            )
            one.add(t.label, _rates(secs["plait"], cfg.append_ops))
            floor.add(t.label, _rates(secs["floor"], cfg.append_ops))
            secs = interleave(
                {
                    "plait": _appender(t, full_session, cfg.full_ops),
                    "floor": partial(t.floor.append, cfg.full_ops, "FULL"),
                },
                cfg.repeats,
            )
            one_full.add(t.label, _rates(secs["plait"], cfg.full_ops))
            floor_full.add(t.label, _rates(secs["floor"], cfg.full_ops))
        finally:
            full_store.close()
        # The full-durability client wrote last: bring the main handle up to date.
        t.session.live.refresh()
        ops = cfg.batch_calls * cfg.batch_size
        secs = interleave(
            {"batch": _batch_appender(t, cfg.batch_calls, cfg.batch_size)}, cfg.repeats
        )
        batch.add(t.label, _rates(secs["batch"], ops))
        wal_plait.add(
            t.label,
            [_wal_pages_per_op(t.path, _appender(t, t.session, WAL_PROBE_OPS), WAL_PROBE_OPS)],
        )
        wal_floor.add(
            t.label,
            [
                _wal_pages_per_op(
                    t.floor.path, partial(t.floor.append, WAL_PROBE_OPS, "NORMAL"), WAL_PROBE_OPS
                )
            ],
        )
        ratio.values[t.label] = one.values[t.label] / floor.values[t.label]
        ratio_full.values[t.label] = one_full.values[t.label] / floor_full.values[t.label]
    return [one, floor, ratio, one_full, floor_full, ratio_full, batch, wal_plait, wal_floor]


# -- reads ------------------------------------------------------------------------------------


def _records(session: plait.Session) -> list[plait.records.Record]:
    return session.transcript.records


def _floor_load(t: Transcript) -> Callable[[], list[object]]:
    """The raw floor of a full load: sqlite3 ``SELECT payload`` of the session's rows + json.loads.

    It reads plait's own rows of the session (the same pages plait reads), on a
    connection of its own.
    """
    db = sqlite3.connect(t.path)
    t.closers.append(db.close)
    pk = db.execute("SELECT pk FROM sessions WHERE id = ?", (t.session.id,)).fetchone()[0]
    query = "SELECT payload FROM records WHERE key >= ? AND key < ? ORDER BY key"
    span = (pk << 32, (pk << 32) + t.size)
    loads = json.loads

    def load() -> list[object]:
        return [loads(p) for (p,) in db.execute(query, span)]

    return load


def _peer_load(t: Transcript, tmp: Path) -> Callable[[], object] | None:
    """openai-agents' ``SQLiteSession.get_items()`` of the same messages; None if not installed."""
    try:
        from agents import SQLiteSession
    except ImportError:
        return None
    peer = SQLiteSession("bench", tmp / f"peer-{t.label}.db")
    runner = asyncio.Runner()
    t.closers += [peer.close, runner.close]
    for start in range(0, t.size, BUILD_BATCH):
        items = [message(i) for i in range(start, min(t.size, start + BUILD_BATCH))]
        runner.run(peer.add_items(items))  # type: ignore[arg-type]
    return lambda: runner.run(peer.get_items())


def _ratios(a: list[float], b: list[float]) -> list[float]:
    """Per-round ratios ``b / a`` (how many times faster ``a`` is): same-round pairs."""
    return [y / x for x, y in zip(a, b, strict=True)]


def measure_reads(transcripts: list[Transcript], cfg: Config, tmp: Path) -> list[Row]:
    """Time full loads (``history(full=True)``, ``history()``, ``records``) and ``tail(20)``.

    Each full load is interleaved with the raw floor and (when openai-agents is
    installed) its ``SQLiteSession.get_items()`` of the same messages, in the same
    rounds; the ratio rows are per-round ratios (floor / plait, peer / plait: above 1
    is plait ahead), with their spread.
    """
    group = "read"
    loads = {
        "h": Row("history_full", "history(full=True)", "ms", group),
        "k": Row("history", "history()", "ms", group),
        "r": Row("records", "records (every record in view)", "ms", group),
    }
    floor = Row("load_floor", "raw floor: SELECT payload + json.loads", "ms", group)
    peer = Row("load_peer", "openai-agents SQLiteSession.get_items()", "ms", group)
    per = Row("history_full_per_record", "  history(full=True) per record", "µs", group)
    vs_floor = {
        k: Row(f"{r.key}_vs_floor", f"  floor / {r.label}", "x", group) for k, r in loads.items()
    }
    vs_peer = {
        k: Row(f"{r.key}_vs_peer", f"  peer / {r.label}", "x", group) for k, r in loads.items()
    }
    tail = Row("tail_20", "tail(20)", "µs", group)

    def check() -> None:
        for t in transcripts:
            if (
                len(t.session.history(full=True)) != t.size
                or len(t.session.transcript.tail(20)) != 20
            ):
                raise RuntimeError(f"{t.label}: unexpected read result")

    check()
    for t in transcripts:
        tasks: dict[str, Callable[[], object]] = {
            "h": partial(t.session.history, full=True),
            "k": t.session.history,
            "r": partial(_records, t.session),
            "floor": _floor_load(t),
        }
        get_items = _peer_load(t, tmp)
        if get_items is not None:
            tasks["peer"] = get_items
        secs = interleave(tasks, cfg.history_repeats)
        for k, row in loads.items():
            row.add(t.label, _per_op(secs[k], 1, 1e3))
            vs_floor[k].add(t.label, _ratios(secs[k], secs["floor"]))
            if "peer" in secs:
                vs_peer[k].add(t.label, _ratios(secs[k], secs["peer"]))
        floor.add(t.label, _per_op(secs["floor"], 1, 1e3))
        if "peer" in secs:
            peer.add(t.label, _per_op(secs["peer"], 1, 1e3))
        per.add(t.label, _per_op(secs["h"], t.size, 1e6))
        t.close_extras()

    secs = interleave(
        {
            t.label: _repeat(partial(t.session.transcript.tail, 20), cfg.tail_calls)
            for t in transcripts
        },
        cfg.repeats,
    )
    for t in transcripts:
        tail.add(t.label, _per_op(secs[t.label], cfg.tail_calls, 1e6))
    rows = [*loads.values(), floor, peer, per, *vs_floor.values(), *vs_peer.values(), tail]
    return [r for r in rows if r.values]


# -- branches ---------------------------------------------------------------------------------

BranchOp = Callable[[plait.Session], plait.Session]

BRANCH_OPS: dict[str, tuple[str, BranchOp]] = {
    "fork": ("fork()", lambda s: s.fork()),
    "fork_at": ("fork_at(length // 2)", lambda s: s.fork_at(s.transcript.length // 2)),
    "detach": ("detach()", lambda s: s.detach()),
}


def measure_branches(transcripts: list[Transcript], cfg: Config) -> list[Row]:
    """Time fork, fork_at and detach, and measure the bytes each adds to the database.

    Bytes are ``(page_count - freelist_count) * page_size`` after a full WAL
    checkpoint, before and after all of an operation's runs, divided by the
    number of operations.
    """
    rows: list[Row] = []
    group = "branch"
    for key, (label, op) in BRANCH_OPS.items():
        timing = Row(key, label, "µs/op", group)
        growth = Row(f"{key}_bytes", f"  {label}: database growth", "bytes/op", group)
        wal = Row(f"{key}_wal_pages", f"  {label}: WAL pages written", "pages/op", group)

        before = {t.label: db_size(t.path) for t in transcripts}
        secs = interleave(
            {t.label: _repeat(partial(op, t.session), cfg.branch_ops) for t in transcripts},
            cfg.repeats,
        )
        total_ops = cfg.branch_ops * cfg.repeats
        for t in transcripts:
            after = db_size(t.path)
            timing.add(t.label, _per_op(secs[t.label], cfg.branch_ops, 1e6))
            growth.add(t.label, [(after.used_bytes - before[t.label].used_bytes) / total_ops])
            probe = _repeat(partial(op, t.session), WAL_PROBE_OPS)
            wal.add(t.label, [_wal_pages_per_op(t.path, probe, WAL_PROBE_OPS)])
        rows += [timing, growth, wal]
    return rows


# -- listing ----------------------------------------------------------------------------------


def measure_listing(tmp: Path, cfg: Config) -> tuple[Row, Row]:
    """Time ``sessions.list(20)`` with 1k, 10k, 100k sessions in one store.

    The sessions are forks of one small session (a fork writes one row), added
    incrementally: listing is timed at each count on the way up.

    Returns:
        The listing row (µs per call) and the build row (forks per second on the way
        to each count).
    """
    group = "list"
    listing = Row("list_20", "sessions.list(20) [cols: sessions in store]", "µs", group)
    build = Row("list_build", "  fork() rate while building that store", "forks/s", group)
    with plait.Client(tmp, store=tmp / "sessions.db") as client:
        root = client.session
        root.inject(message(0))
        have = 1
        for count in cfg.session_counts:
            label = _count_label(count)
            start = time.perf_counter()
            _repeat(root.fork, count - have)()
            build.add(label, _rates([time.perf_counter() - start], count - have))
            have = count
            if len(client.sessions.list(20)) != min(20, count):
                raise RuntimeError("sessions.list(20) returned the wrong number of sessions")

            page = _repeat(partial(client.sessions.list, 20), cfg.list_calls)
            secs = interleave({"list": page}, cfg.repeats)["list"]
            listing.add(label, _per_op(secs, cfg.list_calls, 1e6))
    return listing, build


def _count_label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)
