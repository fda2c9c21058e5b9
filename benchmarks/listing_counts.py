"""A page of the listing on PostgreSQL: `client.sessions.list(20)` among 1,000 sessions (D440).

    PLAIT_TEST_POSTGRES_URL=postgresql://... .venv/bin/python benchmarks/listing_counts.py

Prints the median of 30 pages and a profile of 20 more (where the time goes).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import statistics
import tempfile
import time
import uuid

import psycopg

from plait import Client
from plait.store import PostgresStore

url = os.environ.get("PLAIT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
schema = "bench_list_" + uuid.uuid4().hex[:8]
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"CREATE SCHEMA {schema}")
target = f"{url}?options=-csearch_path%3D{schema}"
store = PostgresStore(target)
with tempfile.TemporaryDirectory() as ws, Client(ws, store=store) as client:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    for _ in range(1000):
        client.sessions.create(msgs)
    for _ in range(3):
        client.sessions.list(limit=20)
    ts = []
    for _ in range(30):
        t = time.perf_counter()
        client.sessions.list(limit=20)
        ts.append(time.perf_counter() - t)
    print("list(20) at 1k sessions: median ms", round(statistics.median(ts) * 1000, 2))
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(20):
        client.sessions.list(limit=20)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(12)
store.close()
with psycopg.connect(url, autocommit=True) as c:
    c.execute(f"DROP SCHEMA {schema} CASCADE")
