"""Ratios and tables from a peers run's JSON report (plait alone needs nothing else).

A ratio is how many times better plait is: the peer's time (or memory) over plait's,
taken per round, plait on the same engine as the peer (SQLite beside SQLite, PostgreSQL
beside PostgreSQL, in-memory beside in-memory), then the median and the spread
(lowest-highest) over the rounds. Above 1x plait is ahead; below 1x the peer is.
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["PARTNERS", "cell_ratio", "markdown", "ratio"]

PARTNERS = {"sqlite": "plait", "memory": "plait :memory:", "postgres": "plait PG"}
"""Engine -> the plait adapter its peers are compared with."""

GROUPS = (
    ("SQLite (and in memory)", ("sqlite", "memory")),
    ("PostgreSQL", ("postgres",)),
)

OP_LABELS = {
    "append_one": "append 1 item per call",
    "append_batch": "append a batch of 100",
    "tail": "tail 20",
    "fork": "fork at the middle",
    "list": "list 20 sessions",
}


def ratio(peer: list[float], plait: list[float]) -> dict[str, float]:
    """Per-round ratios peer/plait: their median, lowest and highest."""
    per_round = [p / q for p, q in zip(peer, plait, strict=False) if q > 0]
    return {
        "median": statistics.median(per_round),
        "low": min(per_round),
        "high": max(per_round),
    }


def _num(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def cell_ratio(r: dict[str, float]) -> str:
    """Format a ratio with its spread: ``2.1x (1.9-2.3)``."""
    return f"{_num(r['median'])}x ({_num(r['low'])}-{_num(r['high'])})"


def _samples(m: dict[str, Any], name: str, variant: str | None) -> list[float] | None:
    key = f"{name}|{variant}" if variant else name
    found = m["samples"].get(key)
    if found is None and variant:
        found = m["samples"].get(name)
    return found


def _rows(
    report: dict[str, Any], names: list[str], sizes: set[str] | None, short: bool
) -> list[tuple[str, dict[str, str]]]:
    adapters = report["adapters"]
    plait_names = {n for n in names if n.startswith("plait")}
    rows: list[tuple[str, dict[str, str]]] = []
    for m in report["measurements"]:
        if sizes is not None and (m["op"], m["size"]) not in sizes and m["size"] not in sizes:
            continue
        variants: list[str | None] = [None]
        if m["op"] == "load":
            plait_variants = sorted(
                {v for k, v in m["variant"].items() if k.split("|")[0] in plait_names},
                key=lambda v: ("history(full=True)", "history()", "records").index(v)
                if v in ("history(full=True)", "history()", "records")
                else 9,
            )
            variants = list(plait_variants) or [None]
        for variant in variants:
            if m["op"] == "load":
                label = f"full load {m['size']}: plait {variant} (ms)"
            else:
                label = f"{OP_LABELS[m['op']]} ({m['size']}, {m['unit']})"
            cells: dict[str, str] = {}
            for name in names:
                engine = adapters[name]["engine"]
                partner = PARTNERS[engine]
                mine = _samples(m, name, variant if name in plait_names else None)
                if mine is None:
                    skipped = report.get("skipped", {}).get(m["size"], {}).get(name)
                    has_op = m["op"] in adapters[name]["ops"]
                    if name in plait_names and has_op:
                        cells[name] = "—"  # left out: no peer of its engine at this size
                    else:
                        cells[name] = "skipped" if skipped and has_op else "n/a"
                    continue
                value = _num(statistics.median(mine))
                theirs = _samples(m, partner, variant)
                if name in plait_names or theirs is None:
                    cells[name] = value
                elif short:
                    cells[name] = cell_ratio(ratio(mine, theirs))
                else:
                    cells[name] = f"{value} · {cell_ratio(ratio(mine, theirs))}"
            rows.append((label, cells))
    return rows


def markdown(
    report: dict[str, Any], sizes: set[Any] | None = None, short: bool = False
) -> str:
    """Return the run's tables in Markdown: one per engine group, then peak memory.

    Args:
        report: the run's JSON report.
        sizes: only these columns (``"10k"``) or (verb, size) pairs; None for all.
        short: peers' cells show the ratio alone (the README's form).
    """
    out: list[str] = []
    adapters = report["adapters"]
    for title, engines in GROUPS:
        names = [n for n, a in adapters.items() if a["engine"] in engines]
        if not names:
            continue
        form = "ratio (spread)" if short else "value · ratio (spread)"
        out.append(f"**{title}**: plait's time per call; peers' cells are `{form}`\n")
        out.append("| operation | " + " | ".join(names) + " |")
        out.append("|---|" + "---:|" * len(names))
        for label, cells in _rows(report, names, sizes, short):
            if all(c == "n/a" for c in cells.values()):
                continue
            out.append(f"| {label} | " + " | ".join(cells[n] for n in names) + " |")
        out.append("")
    mem = report.get("memory")
    if mem and mem.get("runs"):
        out.append(
            f"**Peak memory of a full load of {mem['size']:,} items** "
            f"(each in a fresh subprocess; {mem['method']})\n"
        )
        out.append("| load | peak RSS (MB) | above baseline (MB) | seconds | peer / plait |")
        out.append("|---|---:|---:|---:|---:|")
        plait_peak = mem["runs"].get("plait history(full=True)")
        for name, runs in mem["runs"].items():
            peak = [r["peak_mb"] for r in runs]
            above = [r["peak_mb"] - r["baseline_mb"] for r in runs]
            secs = [r["seconds"] for r in runs]
            rel = ""
            if plait_peak is not None and not name.startswith("plait"):
                rel = cell_ratio(ratio(peak, [r["peak_mb"] for r in plait_peak]))
            out.append(
                f"| {name} | {_num(statistics.median(peak))} | "
                f"{_num(statistics.median(above))} | {_num(statistics.median(secs))} | {rel} |"
            )
        out.append("")
    return "\n".join(out)
