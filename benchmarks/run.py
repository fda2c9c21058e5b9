"""plait's performance suite: ``make bench`` (``.venv/bin/python benchmarks/run.py``).

Builds transcripts of 1k, 10k and 100k messages in file SQLite stores and
measures appends (against a raw sqlite3 floor), full loads (``history(full=True)``,
``history()``, ``records``, each beside the raw floor of a load and openai-agents'
``SQLiteSession.get_items()`` of the same messages, in the same rounds), ``tail``,
copy-on-write branches (time and bytes per op) and session listing. Prints a
table of medians and a PASS/FAIL line per performance target, and writes
everything to ``benchmarks/results/latest.json``.

The machine may be shared and noisy: every number is the median of several
rounds, and rounds of the things being compared are interleaved. The run
always exits 0; a missed target prints FAIL.

Options:
    --quick     fewer rounds and sessions (a smoke run; writes results/quick.json).
    --profile   instead of the suite, profile append-one-per-call on a 10k transcript.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

import plait
from cases import (
    Config,
    Transcript,
    build_transcript,
    measure_appends,
    measure_branches,
    measure_listing,
    measure_reads,
)
from harness import Row
from profiling import profile_append

SIZES: dict[str, int] = {"1k": 1_000, "10k": 10_000, "100k": 100_000}
"""Transcript sizes (messages), by column label."""

FULL = Config(
    repeats=7,
    append_ops=2000,
    full_ops=40,
    batch_calls=4,
    batch_size=100,
    tail_calls=200,
    history_repeats=5,
    branch_ops=40,
    list_calls=200,
    session_counts=(1_000, 10_000, 100_000),
)
QUICK = Config(
    repeats=3,
    append_ops=100,
    full_ops=20,
    batch_calls=2,
    batch_size=100,
    tail_calls=100,
    history_repeats=3,
    branch_ops=20,
    list_calls=100,
    session_counts=(1_000, 10_000),
)

RESULTS = Path(__file__).resolve().parent / "results"
KB = 1024


@dataclass(frozen=True)
class Target:
    """One performance target and whether this run met it."""

    key: str
    description: str
    passed: bool
    detail: str


# -- targets ----------------------------------------------------------------------------------


def check_targets(rows: dict[str, Row]) -> list[Target]:
    """Evaluate the performance targets (a)-(d) against the measured medians."""
    targets: list[Target] = []
    for op in ("fork", "fork_at", "detach"):
        time_row, bytes_row = rows[op], rows[f"{op}_bytes"]
        growth = time_row.values["100k"] / time_row.values["1k"]
        worst = max(bytes_row.values.values())
        targets.append(
            Target(
                f"a_{op}",
                f"(a) {time_row.label}: time at 100k within 2x of 1k, < 1 KB added per op",
                growth <= 2.0 and worst < KB,
                f"100k/1k = {growth:.2f}x ({time_row.values['1k']:.0f} -> "
                f"{time_row.values['100k']:.0f} µs); worst {worst:.0f} B/op",
            )
        )
    ratios = rows["append_one_vs_floor"].values
    targets.append(
        Target(
            "b_append_vs_floor",
            "(b) append 1 per call >= 0.5x the raw sqlite3 floor (NORMAL vs NORMAL), every size",
            all(r >= 0.5 for r in ratios.values()),
            ", ".join(f"{k}: {v:.2f}x" for k, v in ratios.items()),
        )
    )
    tail = rows["tail_20"].values
    targets.append(
        Target(
            "c_tail",
            "(c) tail(20) at 100k within 2x of 1k",
            tail["100k"] / tail["1k"] <= 2.0,
            f"100k/1k = {tail['100k'] / tail['1k']:.2f}x "
            f"({tail['1k']:.0f} -> {tail['100k']:.0f} µs)",
        )
    )
    targets += _load_targets(rows)
    listing, history = rows["list_20"].values, rows["history_full"].values
    top = max(listing, key=lambda k: int(k.removesuffix("k")))
    targets.append(
        Target(
            "d_list_vs_history",
            f"(d) a page of 20 out of {top} sessions faster than one 10k-record history load",
            listing[top] < history["10k"] * 1e3,
            f"list(20) at {top} sessions {listing[top]:,.0f} µs vs "
            f"history(full=True) at 10k {history['10k'] * 1e3:,.0f} µs",
        )
    )
    return targets


def _load_targets(rows: dict[str, Row]) -> list[Target]:
    """(e) full loads at 10k: at or ahead of the peer, within 1.5x the raw floor; (f) flat."""
    targets: list[Target] = []
    for key in ("history_full", "history", "records"):
        label = rows[key].label
        floor = rows[f"{key}_vs_floor"]
        peer = rows.get(f"{key}_vs_peer")
        ok_floor = floor.values["10k"] >= 1 / 1.5
        detail = f"floor/plait {_spread(floor, '10k')}"
        if peer is not None:
            detail += f"; peer/plait {_spread(peer, '10k')}"
        else:
            detail += "; peer not installed (pip install openai-agents)"
        targets.append(
            Target(
                f"e_{key}",
                f"(e) {label} of 10k: >= 1x openai-agents' get_items(), within 1.5x the raw floor",
                ok_floor and peer is not None and peer.values["10k"] >= 1.0,
                detail,
            )
        )
    per = rows["history_full_per_record"].values
    floor = rows["load_floor"].values
    top = max(per, key=lambda k: int(k.removesuffix("k")))
    growth = per[top] / per["1k"]
    # The floor's own cost a record grows too (1k rows stay in the CPU's caches): what
    # plait adds must not grow faster than what every reader of the same rows pays.
    floor_growth = (floor[top] / int(top.removesuffix("k"))) / floor["1k"]
    targets.append(
        Target(
            "f_load_flat",
            f"(f) history(full=True) per record at {top}/1k within 1.5x of the floor's own growth",
            growth <= 1.5 * floor_growth,
            f"plait {top}/1k = {growth:.2f}x ({per['1k']:.2f} -> {per[top]:.2f} µs/record); "
            f"floor {top}/1k = {floor_growth:.2f}x",
        )
    )
    return targets


def _spread(row: Row, col: str) -> str:
    """A ratio cell: the median and the range of the per-round ratios."""
    got = row.samples.get(col, [])
    if len(got) < 2:
        return f"{row.values[col]:.2f}x"
    return f"{row.values[col]:.2f}x ({min(got):.2f}-{max(got):.2f})"


# -- output -----------------------------------------------------------------------------------


def fmt(value: float, unit: str) -> str:
    """Format one table cell for its unit."""
    if unit == "x":
        return f"{value:.2f}x"
    if unit in ("pages", "pages/op"):
        return f"{value:.1f}"
    if unit == "s":
        return f"{value:.1f}"
    if unit == "ms" and value < 10:
        return f"{value:.2f}"
    if unit in ("µs", "µs/op") and value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def render(console: Console, rows: list[Row], targets: list[Target], columns: list[str]) -> None:
    """Print the results table and the targets section."""
    table = Table(
        title="plait benchmarks: medians",
        title_justify="left",
        caption="columns: messages in the transcript (sessions in the store for sessions.list)",
        caption_justify="left",
    )
    table.add_column("measurement")
    table.add_column("unit")
    for col in columns:
        table.add_column(col, justify="right")
    group = None
    for row in rows:
        if group is not None and row.group != group:
            table.add_section()
        group = row.group
        cells = [
            (
                "—"
                if c not in row.values
                else _spread(row, c)
                if row.unit == "x"
                else fmt(row.values[c], row.unit)
            )
            for c in columns
        ]
        style = "dim" if row.label.startswith("  ") else None
        table.add_row(
            row.label.strip() if style is None else row.label, row.unit, *cells, style=style
        )
    console.print(table)
    console.print()
    console.print("[bold]targets[/bold]")
    for target in targets:
        mark = "[bold green]PASS[/bold green]" if target.passed else "[bold white on red] FAIL [/]"
        console.print(f"  {mark}  {target.description}")
        console.print(f"         [dim]{target.detail}[/dim]")
    failed = [t for t in targets if not t.passed]
    console.print()
    if failed:
        console.print(
            Panel(
                f"[bold]{len(failed)} of {len(targets)} targets FAILED: "
                + ", ".join(t.key for t in failed),
                style="bold red",
            )
        )
    else:
        console.print(Panel(f"all {len(targets)} targets passed", style="bold green"))


def write_json(
    path: Path, cfg: Config, rows: list[Row], targets: list[Target], seconds: float
) -> None:
    """Write the run's results, with enough context to quote them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "meta": {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "plait": plait.__version__,
            "python": sys.version.split()[0],
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
            "seconds": round(seconds, 1),
            "sizes": SIZES,
        },
        "config": asdict(cfg),
        "rows": [asdict(r) for r in rows],
        "targets": [asdict(t) for t in targets],
    }
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")


# -- main -------------------------------------------------------------------------------------


def run_suite(console: Console, cfg: Config, tmp: Path) -> list[Row]:
    """Build the transcripts and run every measurement; return the rows in table order."""
    transcripts: list[Transcript] = []
    try:
        for label, size in SIZES.items():
            console.print(f"[dim]building the {label} transcript …[/dim]")
            transcripts.append(build_transcript(tmp, label, size))
        # Reads and branches first: appends grow the transcripts.
        console.print("[dim]reads …[/dim]")
        reads = measure_reads(transcripts, cfg, tmp)
        console.print("[dim]fork, fork_at, detach …[/dim]")
        branches = measure_branches(transcripts, cfg)
        console.print("[dim]appends (and the raw sqlite3 floor) …[/dim]")
        appends = measure_appends(transcripts, cfg)
    finally:
        for t in transcripts:
            t.close()
    console.print("[dim]sessions.list (building stores of 1k … 100k sessions) …[/dim]")
    listing = measure_listing(tmp, cfg)
    return [*appends, *reads, *branches, *listing]


def main(argv: list[str] | None = None) -> int:
    """Run the suite (or the profile); always return 0 unless the run itself broke."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--profile", action="store_true", help="profile append-one-per-call")
    args = parser.parse_args(argv)
    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the table into 80 columns
        console = Console(width=120)
    cfg = QUICK if args.quick else FULL
    tmp = Path(tempfile.mkdtemp(prefix="plait-bench-"))
    start = time.perf_counter()
    try:
        if args.profile:
            t = build_transcript(tmp, "10k", SIZES["10k"])
            try:
                sys.stdout.write(profile_append(t, 2000))
            finally:
                t.close()
            return 0
        rows = run_suite(console, cfg, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - start
    targets = check_targets({r.key: r for r in rows})
    render(console, rows, targets, list(SIZES))
    out = RESULTS / ("quick.json" if args.quick else "latest.json")
    write_json(out, cfg, rows, targets, seconds)
    console.print(f"[dim]{seconds:.0f} s; results written to {out}[/dim]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
