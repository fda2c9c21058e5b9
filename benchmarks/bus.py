"""Two ways to carry run events between processes on PostgreSQL, measured (D235).

* ``inline``: the batch is the ``NOTIFY`` payload (``pg_notify`` in its own
  transaction); a batch past 8000 bytes cannot go this way at all.
* ``table``: the batch is a row of the UNLOGGED ``plait_bus`` table, inserted and
  announced by id in one statement; the listener reads it by id (what plait does).

For each, one publisher connection and one listener connection (as two processes
would hold them): the round trip of one batch at a time (published, heard and read
back; p50 and p99 in µs) for batch sizes from a few deltas to a tool's large
output, and the rate of a publisher sending small batches back to back while the
listener keeps up (batches/s heard). Last, the store's own bus end to end: a
``PostgresStore`` queues a delta every 2 ms (a streaming model) for a few seconds
and another one's ``events()`` hears them: the delay of each delta from queued to
heard (its 15 ms batching included) and the rows sent per second. Every statement
runs in autocommit, with ``synchronous_commit = off`` on the publisher, as the store's
publisher runs.

Usage: python benchmarks/bus.py [--url URL] [--rounds N] [--burst N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import uuid
from typing import Any

import psycopg

from plait.store.postgres import PostgresStore
from plait.store.postgres._bus import _SEND

SIZES = (200, 4_000, 7_900, 64_000, 1_000_000)


def _body(size: int) -> str:
    return json.dumps(["1.1~a", "text_delta", {"text": "x" * max(0, size - 40)}])


def _connect(url: str, schema: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, options=f"-c search_path={schema}")


def _send(conn: psycopg.Connection[Any], how: str, channel: str, body: str) -> None:
    if how == "inline":
        conn.execute("SELECT pg_notify(%s, %s)", (channel, body))
    else:
        conn.execute(
            _SEND,
            {"origin": "bench", "sids": ["s"], "bodies": [body], "channel": channel},
            prepare=True,
        )


def _receive(conn: psycopg.Connection[Any], how: str) -> list[str]:
    got = [n.payload for n in conn.notifies(timeout=10, stop_after=1)]
    if how == "inline":
        return got
    ids = [int(p.split(" ", 1)[0]) for p in got]
    rows = conn.execute("SELECT body FROM plait_bus WHERE id = ANY(%s)", (ids,)).fetchall()
    return [r[0] for r in rows]


def round_trips(url: str, schema: str, how: str, size: int, rounds: int) -> tuple[float, float]:
    """p50 and p99 µs of one batch published, heard and read back."""
    channel = f"bench_{how}"
    pub, sub = _connect(url, schema), _connect(url, schema)
    pub.execute("SET synchronous_commit = off")
    sub.execute(f"LISTEN {channel}")
    body = _body(size)
    times: list[float] = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        _send(pub, how, channel, body)
        got = _receive(sub, how)
        times.append((time.perf_counter() - t0) * 1e6)
        assert got and len(got[0]) == len(body)
    pub.close()
    sub.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def burst(url: str, schema: str, how: str, count: int) -> float:
    """Small batches per second heard while a publisher sends ``count`` back to back."""
    channel = f"bench_{how}_burst"
    pub, sub = _connect(url, schema), _connect(url, schema)
    pub.execute("SET synchronous_commit = off")
    sub.execute(f"LISTEN {channel}")
    body = _body(200)
    heard = 0

    def listen() -> None:
        nonlocal heard
        while heard < count:
            heard += len(_receive(sub, how))

    thread = threading.Thread(target=listen)
    t0 = time.perf_counter()
    thread.start()
    for _ in range(count):
        _send(pub, how, channel, body)
    thread.join()
    elapsed = time.perf_counter() - t0
    pub.close()
    sub.close()
    return count / elapsed


def store_bus(url: str, schema: str, seconds: float = 3.0) -> tuple[float, float, float]:
    """p50 and p99 ms from a delta queued to it heard, and the rows sent per second."""
    pub, sub = PostgresStore(url, schema=schema), PostgresStore(url, schema=schema)
    delays: list[float] = []
    rows = 0
    done = threading.Event()

    def listen() -> None:
        nonlocal rows
        while not done.is_set():
            for message in sub.events(timeout=0.5):
                now = time.perf_counter()
                rows += 1
                delays.extend(now - float(e[2]["t"]) for e in json.loads(message.body))

    thread = threading.Thread(target=listen)
    thread.start()
    time.sleep(0.3)  # listening
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        event = json.dumps(["1.1~a", "text_delta", {"text": "word ", "t": time.perf_counter()}])
        pub.publish_events("s", [event])
        time.sleep(0.002)
    pub.flush_events()
    time.sleep(0.3)
    done.set()
    thread.join()
    pub.close()
    sub.close()
    delays.sort()
    ms = [d * 1000 for d in delays]
    return statistics.median(ms), ms[int(len(ms) * 0.99) - 1], rows / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--burst", type=int, default=5000)
    args = parser.parse_args()
    schema = f"bench_bus_{uuid.uuid4().hex[:8]}"
    PostgresStore(args.url, schema=schema).close()  # the schema, with plait_bus
    try:
        print(f"{'how':<7} {'bytes':>9} {'p50 us':>9} {'p99 us':>9}")
        for size in SIZES:
            for how in ("inline", "table"):
                if how == "inline" and size > 7_990:
                    print(f"{how:<7} {size:>9} {'(payload too large)':>19}")
                    continue
                p50, p99 = round_trips(args.url, schema, how, size, args.rounds)
                print(f"{how:<7} {size:>9} {p50:>9.0f} {p99:>9.0f}")
        for how in ("inline", "table"):
            print(f"{how:<7} burst of {args.burst} small batches: "
                  f"{burst(args.url, schema, how, args.burst):,.0f} batches/s")
        p50, p99, rate = store_bus(args.url, schema)
        print(f"store bus, a delta every 2 ms: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
              f"from queued to heard, {rate:.0f} rows/s")
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()
