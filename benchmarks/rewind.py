"""Rewind and pop_item benchmarks: ``.venv/bin/python benchmarks/rewind.py``.

``Session.rewind`` moves a session's head back in place, and the openai-agents
adapter's ``pop_item`` is one rewind (plus reading the popped item). Both should
cost the same whatever the transcript's length and however many sessions the
store holds. Measured in file SQLite stores:

* a session of 1k records and one of 100k records, in one store: ``rewind`` and
  ``pop_item`` on each (each pop is followed by an untimed ``add_items`` of the same
  item, so the length stays put);
* a 1k-record session in a store with it alone, and in a store with 10k other
  sessions.

Target: flat, every ratio (100k / 1k, 10k sessions / 1 session) within 2x. Prints a
table and a PASS/FAIL line, writes ``benchmarks/results/rewind.json``; always exits 0
(the machine may be shared: every figure is a median of several rounds, the sizes
interleaved).

Options:
    --quick     fewer rounds, 20k records and 2k sessions (a smoke run).
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
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import plait
from plait.integrations.openai_agents import PlaitSession

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 2_000
TARGET = 2.0


def _items(start: int, n: int) -> list[dict[str, Any]]:
    """``n`` openai-agents items: user and assistant messages, a function call and output."""
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        k = i % 4
        if k == 0:
            out.append({"role": "user", "content": f"question {i} about the build"})
        elif k == 1:
            out.append(
                {
                    "type": "function_call",
                    "call_id": f"c{i}",
                    "name": "shell",
                    "arguments": json.dumps({"cmd": f"ls {i}"}),
                }
            )
        elif k == 2:
            out.append(
                {"type": "function_call_output", "call_id": f"c{i - 1}", "output": f"file_{i}.txt"}
            )
        else:
            out.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"answer {i}", "annotations": []}],
                }
            )
    return out


def build(session: PlaitSession, records: int) -> None:
    """Fill a conversation with ``records`` items, in batches."""

    async def fill() -> None:
        for start in range(0, records, BATCH):
            await session.add_items(_items(start, min(BATCH, records - start)))  # type: ignore[arg-type]

    asyncio.run(fill())


def pop_us(session: PlaitSession, rounds: int) -> list[float]:
    """Microseconds per ``pop_item``, the popped item added back (untimed) after each."""

    async def go() -> list[float]:
        out: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            item = await session.pop_item()
            out.append((time.perf_counter() - t0) * 1e6)
            assert item is not None
            await session.add_items([item])
        return out

    return asyncio.run(go())


def rewind_us(session: plait.Session, rounds: int) -> list[float]:
    """Microseconds per ``rewind(length - 1)``, undone (untimed) after each."""
    out: list[float] = []
    for _ in range(rounds):
        n = session.transcript.length
        t0 = time.perf_counter()
        session.transcript.rewind(n - 1)
        out.append((time.perf_counter() - t0) * 1e6)
        session.transcript.undo_rewind()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    console = Console()
    big, many, rounds, passes = (20_000, 2_000, 20, 3) if args.quick else (100_000, 10_000, 40, 5)
    big_label, many_label = f"{big // 1000}k", f"{many // 1000}k sessions"
    results: dict[str, Any] = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "plait": getattr(plait, "__version__", "dev"),
    }
    with tempfile.TemporaryDirectory(prefix="plait-rewind-bench-") as tmp:
        lengths_db = str(Path(tmp) / "lengths.db")
        alone_db = str(Path(tmp) / "alone.db")
        crowd_db = str(Path(tmp) / "crowd.db")
        console.print(f"building 1k and {big_label} records ...")
        conv = {
            "1k": PlaitSession("len-1k", lengths_db),
            big_label: PlaitSession(f"len-{big_label}", lengths_db),
        }
        build(conv["1k"], 1_000)
        build(conv[big_label], big)
        console.print(f"building a store of 1 session and one of {many_label} ...")
        alone = PlaitSession("alone", alone_db)
        build(alone, 1_000)
        crowd = PlaitSession("crowd", crowd_db)
        with plait.Client(tmp, store=crowd_db) as client:
            for i in range(many):
                client.sessions.create(
                    [{"role": "user", "content": f"s{i}"}], session_id=f"other-{i}"
                )
        build(crowd, 1_000)
        stores = {"1 session": alone, many_label: crowd}

        pops: dict[str, list[float]] = {k: [] for k in [*conv, *stores]}
        rewinds: dict[str, list[float]] = {k: [] for k in [*conv, *stores]}
        every = {**conv, **stores}
        for _ in range(passes):  # interleaved, so a busy moment hits every column
            for label, s in every.items():
                pops[label] += pop_us(s, rounds)
                handle = s.plait_session()
                assert handle is not None
                rewinds[label] += rewind_us(handle, rounds)
        for s in every.values():
            s.close()

    def med(d: dict[str, list[float]]) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in d.items()}

    pop, rew = med(pops), med(rewinds)
    ratios = {
        f"pop_item {big_label} / 1k": pop[big_label] / pop["1k"],
        f"rewind {big_label} / 1k": rew[big_label] / rew["1k"],
        f"pop_item {many_label} / 1 session": pop[many_label] / pop["1 session"],
        f"rewind {many_label} / 1 session": rew[many_label] / rew["1 session"],
    }
    results.update({"pop_item_us": pop, "rewind_us": rew, "ratios": ratios, "target": TARGET})
    table = Table(title="rewind and pop_item (SQLite file, median µs per call)")
    table.add_column("case")
    for label in every:
        table.add_column(label, justify="right")
    table.add_row("pop_item", *(f"{pop[k]:.0f}" for k in every))
    table.add_row("rewind", *(f"{rew[k]:.0f}" for k in every))
    console.print(table)
    ok = True
    for name, ratio in ratios.items():
        flat = ratio <= TARGET
        ok = ok and flat
        console.print(
            f"{name}: {ratio:.2f}x {'flat' if flat else 'NOT flat'} (target <= {TARGET}x)"
        )
    console.print("PASS" if ok else "FAIL")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "rewind.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
