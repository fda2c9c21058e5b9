"""Search on an encrypted SQLite store beside a plain one: hashed terms' cost (D324).

Two SQLite files, plain and sealed, each get ``--sessions`` sessions of ``--messages``
messages of ordinary prose (40 words from a 5,000-word vocabulary, the same in both).
Then, in each: the first search (which indexes every record: on the sealed store each is
opened and its terms hashed), the median of ``--rounds`` searches for a common word
(20 hits, so 20 snippets) and for a rare one, and the erase of one session (its shard
dropped and rebuilt). Printed as a Markdown table; ``--out FILE`` also writes it there.

    .venv/bin/python benchmarks/sealed_search.py [--sessions 200] [--messages 100]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from plait.records import Record, UserRecord
from plait.store import SQLiteStore, new_encryption_key
from plait.store.base import SessionRow


def _words(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(5000)
    ]


def _fill(store: SQLiteStore, sessions: int, messages: int, vocab: list[str]) -> None:
    rng = random.Random(7)
    weights = [1 / (i + 1) for i in range(len(vocab))]  # a Zipf-like prose
    for n in range(sessions):
        recs: list[Record] = [
            UserRecord(seq=i, content=" ".join(rng.choices(vocab, weights, k=40)))
            for i in range(messages)
        ]
        row = store.create(SessionRow(id=f"s{n}", workspace="/bench"))
        store.append(row, recs)


def _ms(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def _measure(key: str | None, args: argparse.Namespace, vocab: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "b.db", encryption_key=key)
        try:
            _fill(store, args.sessions, args.messages, vocab)
            out = {"first search (indexes all), ms": _ms(lambda: store.search(vocab[0]))}
            out["common word, 20 hits, ms"] = statistics.median(
                _ms(lambda: store.search(vocab[0], 20)) for _ in range(args.rounds)
            )
            out["rare word, ms"] = statistics.median(
                _ms(lambda: store.search(vocab[1500], 20)) for _ in range(args.rounds)
            )
            out["erase a session, ms"] = _ms(lambda: store.erase("s1"))
            return out
        finally:
            store.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    vocab = _words(1)
    plain = _measure(None, args, vocab)
    sealed = _measure(new_encryption_key(), args, vocab)
    lines = [
        f"{args.sessions} sessions x {args.messages} messages of 40 words, SQLite",
        "",
        "| | plain | sealed | sealed/plain |",
        "|---|---:|---:|---:|",
    ]
    for name, value in plain.items():
        lines.append(f"| {name} | {value:.1f} | {sealed[name]:.1f} | {sealed[name] / value:.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
