"""Search on an encrypted PostgreSQL store beside a plain one: the token table's cost (D326).

Part one, the append: ``--appends`` single appends of a 40-word message to one session,
on a plain store, on an encrypted one (whose index is fed past marks, so its append is
the encrypted append and nothing more), and on an encrypted one whose engine index still
reads sealed payloads as migration 12's function did; then what an index written in the
append's transaction would add: a sealed record's insert alone and with its token row in
the same statement, and cutting and hashing the message's terms.

Part two, the search: ``--sessions`` sessions of ``--messages`` messages in each store;
the first search (on the encrypted store it opens, hashes and writes every record), the
median of ``--rounds`` searches for a common word (20 hits) and for a rare one, a search
with nothing owed (every session's mark looked at), one after a single append, and the
erase of one session. Part three: deleting a 5,000-record session of a plain store, with
and without the trigger that takes a deleted record's tokens. Printed as Markdown tables;
``--out FILE`` also writes them there.

    PLAIT_TEST_POSTGRES_URL=postgresql://... .venv/bin/python benchmarks/pg_sealed_search.py
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from plait.records import Record, UserRecord
from plait.store import PostgresStore, new_encryption_key
from plait.store.base import SessionRow
from plait.store.postgres._text import vector
from plait.store.sql._search import PG_TEXT_INDEX


def _words(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(5000)
    ]


def _prose(rng: random.Random, vocab: list[str]) -> str:
    weights = [1 / (i + 1) for i in range(len(vocab))]  # a Zipf-like prose
    return " ".join(rng.choices(vocab, weights, k=40))


def _us(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def _open(url: str, key: str | None) -> PostgresStore:
    return PostgresStore(url, schema=f"bench_{uuid.uuid4().hex[:10]}", encryption_key=key)


def _drop(store: PostgresStore, url: str) -> None:
    import psycopg

    schema = store.location.rsplit("schema=", 1)[1]
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:  # the benchmark's own schema
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _appends(
    url: str, key: str | None, args: argparse.Namespace, vocab: list[str], old: bool = False
) -> float:
    store = _open(url, key)
    try:
        if old:  # migration 12's record text, which read a sealed payload as text
            with store._conn("bench") as conn:
                old_text = PG_TEXT_INDEX[0].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
                conn.execute(old_text)
        rng = random.Random(3)
        row = store.create(SessionRow(id="a", workspace="/bench"))
        times = []
        for i in range(args.appends):
            record = UserRecord(seq=i, content=_prose(rng, vocab))
            start = time.perf_counter()
            row = store.append(row, [record])
            times.append((time.perf_counter() - start) * 1e6)
        return statistics.median(times)
    finally:
        _drop(store, url)


_RECORD = (
    "INSERT INTO records (key, mpos, id, kind, payload, meta, created_at, tokens) "
    "VALUES (%s, %s, %s, 'user', %s, NULL, %s, NULL)"
)
_WITH_TOKENS = (
    f"WITH r AS ({_RECORD} RETURNING key) "
    "INSERT INTO record_tokens (key, body) SELECT key, %s::tsvector FROM r"
)


def _token_parts(
    url: str, args: argparse.Namespace, vocab: list[str]
) -> tuple[float, float, float]:
    """Medians, in microseconds: hashing a message's terms; inserting a sealed record
    alone; inserting it with its token row in the same statement (so one transaction,
    one round trip: the least an index written with the append could cost)."""
    store = _open(url, new_encryption_key())
    try:
        rng = random.Random(3)
        texts = [_prose(rng, vocab) for _ in range(args.appends)]
        sealed = store.create(SessionRow(id="a", workspace="/bench"))
        store.append(sealed, [UserRecord(seq=0, content=texts[0])])
        with store._conn("bench") as conn:
            payload = str(conn.execute("SELECT payload FROM records LIMIT 1").fetchone()[0])
        terms = store._search_terms()
        assert terms is not None
        hashing, bodies = [], []
        for text in texts:
            start = time.perf_counter()
            bodies.append(vector(terms.tokens(text).split()))
            hashing.append((time.perf_counter() - start) * 1e6)
        alone_row = store.create(SessionRow(id="b", workspace="/bench"))
        both_row = store.create(SessionRow(id="c", workspace="/bench"))
        alone, both = [], []
        with store._conn("bench") as conn:
            for i, body in enumerate(bodies):
                now = time.time_ns() // 1000
                alone.append(
                    _us(
                        lambda i=i, now=now: conn.execute(
                            _RECORD, ((alone_row.pk << 32) | i, i, f"r{i}", payload, now),
                            prepare=True,
                        )
                    )
                )
                both.append(
                    _us(
                        lambda i=i, b=body, now=now: conn.execute(
                            _WITH_TOKENS,
                            ((both_row.pk << 32) | i, i, f"r{i}", payload, now, b),
                            prepare=True,
                        )
                    )
                )
        return statistics.median(hashing), statistics.median(alone), statistics.median(both)
    finally:
        _drop(store, url)


def _deletes(url: str, trigger: bool) -> float:
    """Median milliseconds to delete a 5,000-record session of a plain store."""
    store = _open(url, None)
    try:
        if not trigger:  # the baseline: no trigger for the token table on records
            with store._conn("bench") as conn:
                conn.execute("DROP TRIGGER records_tokens_gone ON records")
        times = []
        for n in range(5):
            row = store.create(SessionRow(id=f"d{n}", workspace="/bench"))
            store.append(row, [UserRecord(seq=i, content="word " * 40) for i in range(5000)])
            times.append(_us(lambda n=n: store.delete(f"d{n}")) / 1000)
        return statistics.median(times)
    finally:
        _drop(store, url)


def _searches(
    url: str, key: str | None, args: argparse.Namespace, vocab: list[str]
) -> dict[str, float]:
    store = _open(url, key)
    try:
        rng = random.Random(7)
        rows = []
        for n in range(args.sessions):
            recs: list[Record] = [
                UserRecord(seq=i, content=_prose(rng, vocab)) for i in range(args.messages)
            ]
            row = store.create(SessionRow(id=f"s{n}", workspace="/bench"))
            rows.append(store.append(row, recs))
        ms = 1000.0
        out = {"first search (indexes all), ms": _us(lambda: store.search(vocab[0])) / ms}
        out["common word, 20 hits, ms"] = statistics.median(
            _us(lambda: store.search(vocab[0], 20)) / ms for _ in range(args.rounds)
        )
        out["rare word, ms"] = statistics.median(
            _us(lambda: store.search(vocab[1500], 20)) / ms for _ in range(args.rounds)
        )
        out["nothing owed: a search's catch-up look, ms"] = statistics.median(
            _us(lambda: store._catch_up()) / ms for _ in range(args.rounds)
        )
        after = []
        last = rows[-1]
        for _ in range(args.rounds):
            record = UserRecord(seq=last.layout.end_seq, content=_prose(rng, vocab))
            last = store.append(last, [record])
            after.append(_us(lambda: store.search(vocab[1500], 20)) / ms)
        out["rare word after one append, ms"] = statistics.median(after)
        out["erase a session, ms"] = _us(lambda: store.erase("s1")) / ms
        return out
    finally:
        _drop(store, url)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=os.environ.get("PLAIT_TEST_POSTGRES_URL"))
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("give --url or set PLAIT_TEST_POSTGRES_URL")
    vocab = _words(1)
    plain_append = _appends(args.url, None, args, vocab)
    sealed_append = _appends(args.url, new_encryption_key(), args, vocab)
    sealed_before = _appends(args.url, new_encryption_key(), args, vocab, old=True)
    hashing, alone, both = _token_parts(args.url, args, vocab)
    within = both + hashing
    lines = [
        f"Single appends of a 40-word message ({args.appends}, median), PostgreSQL",
        "",
        "| | us | ratio |",
        "|---|---:|---:|",
        f"| plain append (the store's) | {plain_append:.0f} | |",
        f"| encrypted append (the store's; index fed past marks: nothing added) "
        f"| {sealed_append:.0f} | {sealed_append / plain_append:.2f} of plain |",
        f"| encrypted append, the record text function of migration 12 "
        f"| {sealed_before:.0f} | {sealed_before / plain_append:.2f} of plain |",
        f"| a sealed record's insert alone (one statement) | {alone:.0f} | 1.00 |",
        f"| the same insert with its token row, one statement | {both:.0f} "
        f"| {both / alone:.2f} |",
        f"| cutting and hashing the message's terms (in the writer) | {hashing:.0f} "
        f"| {hashing / alone:.2f} |",
        f"| an index written with the append: the two together | {within:.0f} "
        f"| {within / alone:.2f} |",
        "",
        f"{args.sessions} sessions x {args.messages} messages of 40 words, PostgreSQL",
        "",
        "| | plain | sealed | sealed/plain |",
        "|---|---:|---:|---:|",
    ]
    plain = _searches(args.url, None, args, vocab)
    sealed = _searches(args.url, new_encryption_key(), args, vocab)
    for name, value in plain.items():
        ratio = sealed[name] / value if value else float("nan")
        lines.append(f"| {name} | {value:.1f} | {sealed[name]:.1f} | {ratio:.2f} |")
    # In turns, so that neither side has the machine's quieter moments to itself.
    runs: dict[bool, list[float]] = {True: [], False: []}
    for trigger in (False, True, False, True):
        runs[trigger].append(_deletes(args.url, trigger))
    with_trigger, without = statistics.mean(runs[True]), statistics.mean(runs[False])
    lines += [
        "",
        "Deleting a 5,000-record session of a plain store (median of 5, two stores each), ms",
        "",
        "| without the token trigger | with it | ratio |",
        "|---:|---:|---:|",
        f"| {without:.1f} | {with_trigger:.1f} | {with_trigger / without:.2f} |",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
