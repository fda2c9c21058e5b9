"""Seed 001 "Locks": one writer process per session, any number of readers, no stale locks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import Client
from plait.errors import SessionLockedError

# Every test here starts another process (a holder or a probe).
pytestmark = pytest.mark.slow

HOLDER = textwrap.dedent(
    """
    import sys, time
    from plait import Client
    client = Client(sys.argv[1], store=sys.argv[2])
    s = client.open("shared")
    s.inject({"role": "user", "content": "from the holder"})
    print("ready", flush=True)
    time.sleep(120)
    """
)

PROBE = textwrap.dedent(
    """
    import sys
    from plait import Client
    with Client(sys.argv[1], store=sys.argv[2]) as client:
        print(client.sessions.open_elsewhere("shared"))
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    path = tmp_path / "locks.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path), str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    yield proc, path
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_another_process_reads_but_cannot_write(
    holder: tuple[subprocess.Popen[str], Path], tmp_path: Path
) -> None:
    _, path = holder
    with Client(tmp_path, store=path) as client:
        s = client.open("shared")
        assert s.locked
        assert client.sessions.open_elsewhere("shared")
        # Reading takes no lock.
        assert [m.text for m in s.history()] == ["from the holder"]
        assert client.sessions.history_of("shared")[0].text == "from the holder"
        assert s.transcript.snapshot() is not None
        # Writing of every kind is refused, and nothing is written.
        version = s.live.version
        for write in (
            lambda: s.inject({"role": "user", "content": "intruder"}),
            lambda: s.rename("mine now"),
            lambda: s.trim(0),
            lambda: s.reset(),
            lambda: s.close(),
            lambda: s.scratchpad.set({"x": 1}),
            lambda: client.sessions.delete("shared"),
        ):
            with pytest.raises(SessionLockedError):
                write()
        assert s.live.refresh().live.version == version
        # Forking reads the source only: the branch is this process's to write.
        branch = s.fork()
        branch.inject({"role": "user", "content": "on my branch"})
        assert not branch.locked


def test_a_killed_holder_leaves_no_stale_lock(
    holder: tuple[subprocess.Popen[str], Path], tmp_path: Path
) -> None:
    proc, path = holder
    with Client(tmp_path, store=path) as client:
        s = client.open("shared")
        assert s.locked
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not s.locked
        s.inject({"role": "assistant", "content": "taken over"})
        assert [m.text for m in s.history()] == ["from the holder", "taken over"]


def _probe(tmp_path: Path, path: Path) -> str:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), str(path)],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


def test_release_lets_another_process_write(tmp_path: Path) -> None:
    path = tmp_path / "release.db"
    with Client(tmp_path, store=path) as client:
        s = client.open("shared")
        s.inject({"role": "user", "content": "x"})
        assert not s.locked  # this process's own lock is not "elsewhere"
        assert not client.sessions.open_elsewhere("shared")
        assert _probe(tmp_path, path) == "True"
        s.live.release()
        assert _probe(tmp_path, path) == "False"
        s.inject({"role": "user", "content": "y"})  # takes it again
        assert _probe(tmp_path, path) == "True"
    assert _probe(tmp_path, path) == "False"  # closing the client's store released it


def test_clients_of_one_process_share_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "same.db"
    one, two = Client(tmp_path, store=path), Client(tmp_path, store=path)
    one.open("shared").inject({"role": "user", "content": "a"})
    two.open("shared").inject({"role": "user", "content": "b"})
    one.close()
    two.open("shared").inject({"role": "user", "content": "c"})  # still held by two
    assert _probe(tmp_path, path) == "True"
    two.close()
    assert _probe(tmp_path, path) == "False"


def test_release_idle_lets_go_of_every_lock_but_a_running_session(tmp_path: Path) -> None:
    import asyncio
    import gc

    from plait.providers import ScriptedProvider

    path = tmp_path / "idle.db"
    with Client(tmp_path, store=path) as client:
        client.open("shared").inject({"role": "user", "content": "x"})
        gc.collect()  # the handle that took the lock is gone; the lock is still held
        assert _probe(tmp_path, path) == "True"
        assert client.host.release_idle() == 1
        assert _probe(tmp_path, path) == "False"
        assert client.host.release_idle() == 0
        s = client.open("shared")

        async def during_a_run() -> None:
            run = s.stream("hi", provider=ScriptedProvider(["hello"]))
            await asyncio.sleep(0)  # the run has written its request
            assert client.host.release_idle() == 0  # a running session keeps its lock
            await run
            assert client.host.release_idle() == 1

        asyncio.run(during_a_run())
        assert _probe(tmp_path, path) == "False"


REWINDER = textwrap.dedent(
    """
    import sys
    from plait import Client
    with Client(sys.argv[1], store=sys.argv[2]) as client:
        s = client.open(sys.argv[3])
        s.transcript.rewind(2)
        s.inject({"role": "assistant", "content": "after the rewind"})
    """
)


@pytest.mark.parametrize("writer_lock", ["process", "write"])
def test_a_writer_that_takes_its_lock_again_writes_on_the_head_another_moved(
    tmp_path: Path, writer_lock: str
) -> None:
    """Another process rewinds while this one has given its lock up: the next write goes
    on the rewound head (a new row), not on the end of the old one, hidden now."""
    db = tmp_path / "s.db"
    with Client(tmp_path, store=db, writer_lock=writer_lock) as client:  # type: ignore[arg-type]
        s = client.sessions.create([{"role": "user", "content": f"m{i}"} for i in range(5)])
        s.inject({"role": "assistant", "content": "a"})
        s.live.release()
        subprocess.run(
            [sys.executable, "-c", REWINDER, str(tmp_path), str(db), s.id],
            check=True,
            timeout=120,
        )
        s.inject({"role": "user", "content": "mine"})
        want = ["m0", "m1", "after the rewind", "mine"]
        assert [m.text for m in s.history()] == want
        with Client(tmp_path, store=db) as other:
            assert [m.text for m in other.open(s.id).history()] == want
