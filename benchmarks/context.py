"""Context benchmarks (issue 4): ``.venv/bin/python benchmarks/context.py``.

Measures, in file SQLite stores:

* ``session.context()`` on transcripts of 1k and 100k records, once their counts are stored:
  the target is "flat in transcript length" (100k within 2x of 1k), because the report reads
  a few rows (running tallies), never the transcript (decisions D50..D52);
* tokens counted per second on write: the writer counting and storing records it appended
  (bulk: a 100k-record transcript counted at once; incremental: 8 records per model call, the
  shape of an agent step);
* ``compact()`` on a 10k-record transcript (the extractive strategy, no model);
* what a run reads before each model call on a compacted branch of the 1k and 100k
  transcripts: ``request_messages()`` (target: flat, D92) and ``resumable()``.

Prints a table and a PASS/FAIL line, writes ``benchmarks/results/context.json``. Always
exits 0; the machine may be shared, so every figure is a median of several rounds.

Options:
    --quick     fewer rounds and a 20k transcript instead of 100k (a smoke run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import plait
import plait.context
from plait.context._tokens import _backend

RESULTS = Path(__file__).resolve().parent / "results"
BUILD_BATCH = 2_000
_PHRASE = (
    "the quick brown fox jumps over the lazy dog while parsing config files and "
    "reporting errors in src/plait/store/sqlite/_store.py line 412 with exit code 0"
)
WORDS = _PHRASE.split(" ")


def _text(i: int, n: int) -> str:
    return " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))


def _turn(i: int) -> list[dict[str, Any]]:
    """One agent step: a request, a tool call, its output and an answer (4 records)."""
    return [
        {"role": "user", "content": f"step {i}: " + _text(i, 24)},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": f"c{i}", "name": "shell", "arguments": {"cmd": f"ls {i}"}}],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "tool_name": "shell", "content": _text(i, 60)},
        {"role": "assistant", "content": _text(i + 7, 30)},
    ]


def build(client: plait.Client, records: int) -> plait.Session:
    """A session of ``records`` records (system prompt first), counts not yet stored."""
    s = client.sessions.create([{"role": "system", "content": "You are a careful agent."}])
    batch: list[dict[str, Any]] = []
    i = 0
    written = 1
    while written < records:
        batch.extend(_turn(i))
        i += 1
        if len(batch) >= BUILD_BATCH or written + len(batch) >= records:
            batch = batch[: records - written]
            s.transcript.inject_many(batch)
            written += len(batch)
            batch = []
    return s


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def stored_tokens(s: plait.Session) -> int:
    return sum(r.tokens or 0 for r in s.transcript.records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    big = 20_000 if args.quick else 100_000
    rounds = 5 if args.quick else 9
    calls = 50 if args.quick else 200
    console = Console()
    results: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "plait": getattr(plait, "__version__", "dev"),
        "counter": _backend(),
    }
    with tempfile.TemporaryDirectory(prefix="plait-ctx-bench-") as tmp:
        client = plait.Client(Path(tmp), store=Path(tmp) / "ctx.db")
        sizes = {"1k": 1_000, f"{big // 1000}k": big}
        plait.context.count_text("load the vocabulary before timing", "cl100k_base")
        sessions: dict[str, plait.Session] = {}
        fill: dict[str, float] = {}
        fill_tokens: dict[str, int] = {}
        for label, n in sizes.items():
            console.print(f"building {label} records ...")
            s = build(client, n)
            t0 = time.perf_counter()
            s.context()  # the writer counts and stores every record once
            fill[label] = time.perf_counter() - t0
            fill_tokens[label] = stored_tokens(s)
            sessions[label] = s
        # context() once counted: interleave the sizes, median per call.
        per_call: dict[str, list[float]] = {label: [] for label in sizes}
        for _ in range(rounds):
            for label, s in sessions.items():
                secs = timed(lambda s=s: [s.context() for _ in range(calls)], 1)[0]
                per_call[label].append(secs / calls * 1e6)
        ctx = {label: statistics.median(v) for label, v in per_call.items()}
        # What a run reads before each model call, on a compacted branch of each transcript:
        # request_messages() (from the newest summary's kept part, D92) and resumable() (the tail).
        request_us: dict[str, float] = {}
        resumable_us: dict[str, float] = {}
        for label, s in sessions.items():
            branch = s.fork()
            asyncio.run(branch.compact(keep_last=20))
            branch.context()
            reps = max(5, calls // 10)
            request_us[label] = statistics.median(
                timed(lambda b=branch, k=reps: [b.request_messages() for _ in range(k)], rounds)
            ) / reps * 1e6
            resumable_us[label] = statistics.median(
                timed(lambda b=branch, k=reps: [b.resumable() for _ in range(k)], rounds)
            ) / reps * 1e6
        # Incremental counting: append one agent step (8 records), then a model call asks.
        s = sessions["1k"]
        steps = 100 if args.quick else 400
        t_inject = t_count = 0.0
        before = stored_tokens(s)
        for i in range(steps):
            t0 = time.perf_counter()
            for m in _turn(10_000 + 2 * i) + _turn(10_001 + 2 * i):
                s.inject(m)
            t1 = time.perf_counter()
            s.context()
            t_count += time.perf_counter() - t1
            t_inject += t1 - t0
        inc_records = steps * 8
        inc_tokens = stored_tokens(s) - before
        # compact() on 10k records: each round compacts a fresh fork of the same transcript.
        console.print("building 10k records for compaction ...")
        base = build(client, 10_000)
        base.context()
        compact_ms: list[float] = []
        for _ in range(max(3, rounds // 2)):
            fork = base.fork()
            t0 = time.perf_counter()
            done = asyncio.run(fork.compact(keep_last=20))
            compact_ms.append((time.perf_counter() - t0) * 1e3)
            assert done is not None
        client.close()
    big_label = list(sizes)[1]
    growth = ctx[big_label] / ctx["1k"]
    request_growth = request_us[big_label] / request_us["1k"]
    results.update(
        {
            "request_messages_compacted_us": request_us,
            "request_growth": request_growth,
            "resumable_us": resumable_us,
            "context_us": ctx,
            "context_growth": growth,
            "bulk_fill_seconds": fill,
            "bulk_fill_tokens": fill_tokens,
            "bulk_tokens_per_s": {k: fill_tokens[k] / fill[k] for k in fill},
            "bulk_records_per_s": {k: sizes[k] / fill[k] for k in fill},
            "incremental_records": inc_records,
            "incremental_tokens_per_s": inc_tokens / t_count,
            "incremental_count_us_per_record": t_count / inc_records * 1e6,
            "incremental_inject_us_per_record": t_inject / inc_records * 1e6,
            "compact_10k_ms": statistics.median(compact_ms),
        }
    )
    table = Table(title=f"context benchmarks (counter: {results['counter']})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for label in sizes:
        table.add_row(f"context() at {label} records", f"{ctx[label]:,.0f} µs")
    for label in sizes:
        table.add_row(
            f"count on write, bulk {label}",
            f"{fill_tokens[label] / fill[label]:,.0f} tokens/s "
            f"({sizes[label] / fill[label]:,.0f} records/s)",
        )
    table.add_row(
        "count on write, 8 records per model call",
        f"{results['incremental_tokens_per_s']:,.0f} tokens/s "
        f"({results['incremental_count_us_per_record']:.1f} µs/record; "
        f"inject {results['incremental_inject_us_per_record']:.1f} µs/record)",
    )
    table.add_row("compact() at 10k records", f"{results['compact_10k_ms']:,.0f} ms")
    for label in sizes:
        table.add_row(
            f"request_messages(), compacted, {label} records", f"{request_us[label]:,.0f} µs"
        )
    for label in sizes:
        table.add_row(f"resumable() at {label} records", f"{resumable_us[label]:,.0f} µs")
    console.print(table)
    passed = growth <= 2.0
    console.print(
        f"[{'green' if passed else 'red'}]{'PASS' if passed else 'FAIL'}[/] "
        f"context() flat in transcript length: {big_label}/1k = {growth:.2f}x (target <= 2x)"
    )
    request_ok = request_growth <= 2.0
    console.print(
        f"[{'green' if request_ok else 'red'}]{'PASS' if request_ok else 'FAIL'}[/] "
        f"a compacted session's next request flat in transcript length: {big_label}/1k = "
        f"{request_growth:.2f}x (target <= 2x)"
    )
    RESULTS.mkdir(exist_ok=True)
    name = "context-quick.json" if args.quick else "context.json"
    (RESULTS / name).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
