"""Kill a writing process at random moments and check that nothing committed is lost.

Shared by ``tests/durability/test_crash.py`` (a few hundred trials in ``make test``)
and ``make soak`` (thousands). Children are forked, not spawned, so a trial
costs milliseconds.
"""

from __future__ import annotations

import os
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from plait import Client
from plait.store import SQLiteStore

FILLER = "x" * 300


def content(seq: int) -> str:
    """The text the writer stores at position ``seq``: checkable after a crash."""
    return f"{seq}|{FILLER[: seq % 300]}"


def _writer(ws: Path, path: Path, sid: str, wfd: int, seed: int) -> None:
    """Child: append forever, reporting each committed position; never returns."""
    try:
        rng = random.Random(seed)
        client = Client(ws, store=path)
        s = client.open(sid)
        head = s.transcript.tail(1)[-1].seq + 1
        while True:
            op = rng.random()
            if op < 0.6:
                last = s.inject({"role": "user", "content": content(head)}).seq
            elif op < 0.9:
                n = rng.randint(2, 6)
                batch = s.transcript.inject_many(
                    [{"role": "assistant", "content": content(head + i)} for i in range(n)]
                )
                last = batch[-1].seq
            else:
                s.rename(f"title {head}")  # a row write: no record
                continue
            head = last + 1
            os.write(wfd, f"{last}\n".encode())
    finally:
        os._exit(0)


@dataclass
class Trial:
    """What one trial saw."""

    committed: int
    """The highest position the writer reported committed (-1 if none)."""
    stored: int
    """Records in the session afterwards."""


def run_trial(
    ws: Path, path: Path, sid: str, rng: random.Random, max_delay: float, checked: int = 0
) -> Trial:
    """Fork a writer, kill it with SIGKILL after a random delay, and check the store.

    Records before ``checked`` were verified by an earlier trial; only the rest
    are read back and compared.
    """
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(rfd)
        _writer(ws, path, sid, wfd, rng.randrange(1 << 30))
    os.close(wfd)
    # Half the trials kill at any moment (start-up included); the other half wait for
    # the first commit, so that kills land mid-write however slow the machine is.
    first = b""
    if rng.random() < 0.5:
        first = os.read(rfd, 65536)
    time.sleep(rng.uniform(0, max_delay))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    chunks = [first]
    while True:
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(rfd)
    lines = b"".join(chunks).decode().split("\n")
    complete = [int(x) for x in lines[:-1] if x]  # the last piece may be cut mid-line
    committed = max(complete, default=-1)

    store = SQLiteStore(path)
    try:
        with Client(ws, store=store) as client:
            s = client.open(sid)
            total = s.transcript.length
            records = s.transcript.tail(
                total - checked
            )  # decodes every new row: a partial one raises
            assert [r.seq for r in records] == list(range(checked, total)), "gap in the transcript"
            for r in records:
                if r.seq:
                    assert r.text == content(r.seq), f"record {r.seq} is damaged"
            assert total - 1 >= committed, (
                f"writer saw {committed} committed, store has {total - 1}"
            )
            assert store.integrity_check() == []
            # The session opens and continues: the dead writer's lock died with it.
            assert not s.locked
            s.inject({"role": "user", "content": content(total)})
            stored = total + 1
    finally:
        store.close()
    return Trial(committed, stored)


def setup(ws: Path) -> tuple[Path, str]:
    """Create the store and the session the trials write to."""
    path = ws / "crash.db"
    with Client(ws, store=path) as client:
        s = client.sessions.create([{"role": "system", "content": "crash test"}])
        return path, s.id
