"""The timed part of the peers benchmark: build transcripts, time each verb in interleaved rounds.

Every adapter that offers a verb runs it once per round, all adapters in the same round
one after another (the order rotated every round, :func:`harness.interleave`), so a slow
stretch of the shared machine hits every peer alike. A verb's calls per round are
calibrated per adapter from one untimed call, so a peer that takes a second per call
runs once while one that takes microseconds runs hundreds of times; every figure is a
time per call (per item for appends).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from base import Adapter

from harness import median

__all__ = ["Measurement", "Settings", "build_all", "measure_op"]

BATCH = 100
"""Items per ``append_batch`` call when batch appends are timed."""
TAIL = 20
"""Items read by ``tail``."""
PAGE = 20
"""Sessions asked for by ``list_sessions``."""

UNITS = {
    "append_one": ("µs/item", 1e6),
    "append_batch": ("µs/item", 1e6),
    "load": ("ms", 1e3),
    "tail": ("µs", 1e6),
    "fork": ("µs", 1e6),
    "list": ("µs", 1e6),
}
"""Each verb's unit and the factor from seconds."""


@dataclass(frozen=True)
class Settings:
    """How much work a run does."""

    rounds: int
    """Interleaved rounds per measurement (odd, so the median is a sample)."""
    round_seconds: float
    """About how long one adapter's share of a round should take (calls are calibrated)."""
    max_calls: int
    """At most this many calls per round."""
    build_budget: float
    """Skip a size for a peer whose build would take longer than this (s), by its last rate."""
    load_budget: float
    """Skip a size for a peer whose full load would take longer than this (s), by its last."""


@dataclass
class Measurement:
    """One verb at one size: every adapter's per-round times (in the verb's unit)."""

    op: str
    size: str
    variant: dict[str, str] = field(default_factory=dict)
    """Adapter name -> what it called (the load variant)."""
    samples: dict[str, list[float]] = field(default_factory=dict)
    """Task key (adapter name, or ``name|variant``) -> per-round values."""
    calls: dict[str, int] = field(default_factory=dict)
    """Task key -> calls per round."""

    @property
    def unit(self) -> str:
        """The unit of every value."""
        return UNITS[self.op][0]

    def to_dict(self) -> dict[str, Any]:
        """The measurement as the JSON report holds it."""
        return {"op": self.op, "size": self.size, "unit": self.unit, "variant": self.variant,
                "calls": self.calls, "samples": self.samples}

    def value(self, key: str) -> float:
        """The median of a task's rounds."""
        return median(self.samples[key])


def build_all(
    adapters: dict[str, Adapter], size: int, rates: dict[str, float], budget: float,
    log: Callable[[str], None],
) -> dict[str, str]:
    """Grow every adapter's session to ``size`` items; return the ones skipped, with why.

    ``rates`` holds each adapter's build rate (items/s) at the previous size; an adapter
    whose build would take more than ``budget`` seconds at that rate is skipped.
    """
    skipped: dict[str, str] = {}
    for name, a in adapters.items():
        rate = rates.get(name)
        if rate is not None and size / rate > budget:
            skipped[name] = f"building {size:,} items would take ~{size / rate:,.0f} s"
            continue
        start = time.perf_counter()
        a.build(size)
        took = time.perf_counter() - start
        rates[name] = size / took if took > 0 else float("inf")
        log(f"  {name}: built {size:,} in {took:.1f} s")
    return skipped


def _task(a: Adapter, op: str, variant: str, calls: int, rounds: int) -> Callable[[], Any]:
    """Return a callable doing ``calls`` calls of ``op``; item-making happens here, untimed."""
    if op == "append_one":
        pending = iter(a.items(a.length, calls * rounds))
        a.length += calls * rounds

        def append_one() -> None:
            for _ in range(calls):
                a.append_one(next(pending))

        return append_one
    if op == "append_batch":
        batches = iter(
            [a.items(a.length + k * BATCH, BATCH) for k in range(calls * rounds)]
        )
        a.length += BATCH * calls * rounds

        def append_batch() -> None:
            for _ in range(calls):
                a.append_batch(next(batches))

        return append_batch
    verb: Callable[[], object]
    if op == "load":
        verb = lambda: a.load(variant)  # noqa: E731
    elif op == "tail":
        verb = lambda: a.tail(TAIL)  # noqa: E731
    elif op == "fork":
        verb = a.fork
    elif op == "list":
        verb = lambda: a.list_sessions(PAGE)  # noqa: E731
    else:
        raise ValueError(op)

    def repeat() -> None:
        for _ in range(calls):
            verb()

    return repeat


def interleave(tasks: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Run every task once per round, the order rotated each round; return each run's seconds.

    Like ``harness.interleave``, but the cyclic collector runs once per round, not before
    every task: with a dozen peers' libraries imported and their transcripts in memory a
    full collection takes longer than most of the calls being timed. The runner freezes
    what the builds made (``gc.freeze``), so that collection stays short.
    """
    keys = list(tasks)
    out: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(rounds):
        gc.collect()
        shift = r % len(keys) if keys else 0
        for key in keys[shift:] + keys[:shift]:
            start = time.perf_counter()
            tasks[key]()
            out[key].append(time.perf_counter() - start)
    return out


def _items_per_call(op: str) -> int:
    return BATCH if op == "append_batch" else 1


def measure_op(
    adapters: dict[str, Adapter], op: str, size: str, settings: Settings
) -> Measurement:
    """Time ``op`` on every adapter that has it, in interleaved rounds."""
    m = Measurement(op, size)
    tasks: dict[str, Callable[[], Any]] = {}
    for name, a in adapters.items():
        if op not in a.ops:
            continue
        variants = a.load_names if op == "load" else ("",)
        for variant in variants:
            key = f"{name}|{variant}" if variant and len(variants) > 1 else name
            if op == "load":
                m.variant[key] = variant
            # One untimed call: warms caches, checks the verb works, calibrates the count.
            probe = _task(a, op, variant, 1, 1)
            start = time.perf_counter()
            probe()
            one = max(time.perf_counter() - start, 1e-7)
            calls = max(1, min(settings.max_calls, round(settings.round_seconds / one)))
            m.calls[key] = calls
            tasks[key] = _task(a, op, variant, calls, settings.rounds)
    seconds = interleave(tasks, settings.rounds)
    factor = UNITS[op][1]
    for key, secs in seconds.items():
        per = m.calls[key] * _items_per_call(op)
        m.samples[key] = [s / per * factor for s in secs]
    return m
