"""One writer at a time, readers never blocked, nothing lost: 8 processes race on one session."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from plait import Client
from plait.errors import SessionLockedError

WRITERS = 8
BURSTS = 4
BURST = 10


def _writer(ws: Path, path: Path, sid: str, n: int, go: Path, wfd: int) -> None:
    code = 1
    try:
        rng = random.Random(n)
        while not go.exists():  # start together, so that the race is a race
            time.sleep(0.0005)
        with Client(ws, store=path) as client:
            s = client.open(sid)
            refused = 0
            for m in range(BURSTS):
                while True:
                    try:
                        s.inject({"role": "user", "content": f"{n}:{m}:0"})
                        break
                    except SessionLockedError:
                        refused += 1
                        time.sleep(rng.uniform(0.0005, 0.003))
                for j in range(1, BURST):
                    s.inject({"role": "assistant", "content": f"{n}:{m}:{j}"})
                s.live.release()
            os.write(wfd, f"{refused}\n".encode())
        code = 0
    finally:
        os._exit(code)


def _reader(ws: Path, path: Path, sid: str, stop: Path, wfd: int) -> None:
    code = 1
    try:
        reads, last = 0, 0
        with Client(ws, store=path) as client:
            while not stop.exists():
                messages = client.sessions.history_of(sid)
                assert len(messages) >= last, "a reader saw the transcript shrink"
                last = len(messages)
                reads += 1
        os.write(wfd, f"{reads}\n".encode())
        code = 0
    finally:
        os._exit(code)


def _fork(target: object, *args: object) -> tuple[int, int]:
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(rfd)
        target(*args, wfd)  # type: ignore[operator]
    os.close(wfd)
    return pid, rfd


def _collect(pid: int, rfd: int) -> str:
    _, status = os.waitpid(pid, 0)
    out = os.read(rfd, 1024).decode().strip()
    os.close(rfd)
    assert os.waitstatus_to_exitcode(status) == 0
    return out


@pytest.mark.slow
def test_eight_processes_race_for_one_session(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    with Client(tmp_path, store=path) as client:
        sid = client.sessions.create([{"role": "system", "content": "race"}]).id
    stop, go = tmp_path / "stop", tmp_path / "go"
    reader = _fork(_reader, tmp_path, path, sid, stop)
    writers = [_fork(_writer, tmp_path, path, sid, n, go) for n in range(WRITERS)]
    # This process holds the lock as the writers start, so the race is contended
    # however the machine schedules them: their first tries are refused.
    with Client(tmp_path, store=path) as holder:
        held = holder.open(sid)
        held.live.acquire()
        go.touch()
        time.sleep(0.3)
        held.live.release()
    refused = sum(int(_collect(pid, rfd)) for pid, rfd in writers)
    stop.touch()
    reads = int(_collect(*reader))

    with Client(tmp_path, store=path) as client:
        texts = [m.text for m in client.sessions.history_of(sid)]
    # Nothing lost: every burst of every writer is there.
    assert len(texts) == WRITERS * BURSTS * BURST
    # One writer at a time: each burst is contiguous and in order.
    for start in range(0, len(texts), BURST):
        burst = texts[start : start + BURST]
        n, m, _ = burst[0].split(":")
        assert burst == [f"{n}:{m}:{j}" for j in range(BURST)], burst
    assert {t.rsplit(":", 1)[0] for t in texts} == {
        f"{n}:{m}" for n in range(WRITERS) for m in range(BURSTS)
    }
    # The writers met a held lock (the race was real), and the reader read throughout
    # without ever being refused (a refusal would have failed the reader).
    assert refused > 0
    assert reads > 0
