"""SQLite's writer locks as files: bounded descriptors, one byte per session, fork and kill -9.

On 64-bit Linux a session's lock is a byte of one of a few shard files
(``plait.store.sqlite._shardlocks``); elsewhere, and in the last test here, a ``flock`` file of
its own. Each test starts another process (a holder or a checker).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import Client
from plait.store.sqlite import SQLiteStore
from plait.store.sqlite import _shardlocks as shard_locks
from plait.store.sqlite._flock import FlockLocks

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not shard_locks.AVAILABLE, reason="open file description locks (Linux)"),
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd"),
]

MANY = 3000
"""Sessions a holder writes: more than the common default limit of 1,024 open files."""

SMALL = 8
"""Descriptors besides the shards a store may add: its database, log and shared memory."""


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _ids(n: int) -> list[str]:
    return [f"user/{i}" for i in range(n)]


def _run(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, check=True,
    )
    return out.stdout.strip()


# Writes each of the sessions through the public API and reports each kind of answer.
WRITER = """
    import sys
    from plait import Client
    from plait.errors import SessionLockedError
    with Client(sys.argv[1], store=sys.argv[2]) as client:
        got = {"written": 0, "refused": 0, "elsewhere": 0}
        for i in range(int(sys.argv[3])):
            sid = f"user/{i}"
            got["elsewhere"] += client.sessions.open_elsewhere(sid)
            try:
                client.open(sid).inject({"role": "user", "content": "other"})
                got["written"] += 1
            except SessionLockedError:
                got["refused"] += 1
        print(got["written"], got["refused"], got["elsewhere"])
"""


def test_a_process_writing_many_sessions_keeps_few_descriptors(tmp_path: Path) -> None:
    db = tmp_path / "many.db"
    with Client(tmp_path, store=db) as client:
        client.open("warm").inject({"role": "user", "content": "x"})
        client.host.release_idle()
        before = _fds()
        for sid in _ids(MANY):
            client.open(sid).inject({"role": "user", "content": "mine"})
        assert _fds() <= before + shard_locks.SHARDS
        assert all(client.host.holds_lock(sid) for sid in _ids(MANY))
        # Another process reads each one as taken and is refused every write.
        assert _run(WRITER, str(tmp_path), str(db), str(MANY)) == f"0 {MANY} {MANY}"
        assert client.host.release_idle() == MANY
        assert _fds() == before  # the last hold of a shard closes its descriptor
    # Let go: the other process writes every one of them.
    assert _run(WRITER, str(tmp_path), str(db), str(MANY)) == f"{MANY} 0 0"
    with Client(tmp_path, store=db) as client:
        assert client.sessions.history_of("user/7")[-1].text == "other"


# Takes the locks through a store, reports its descriptors, then waits to be killed.
HOLDER = """
    import os, sys, time
    from plait.store.sqlite import SQLiteStore
    store = SQLiteStore(sys.argv[1])
    before = len(os.listdir("/proc/self/fd"))
    assert all(store.lock(f"user/{i}") for i in range(int(sys.argv[2])))
    print(len(os.listdir("/proc/self/fd")) - before, flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, int]]:
    db = str(tmp_path / "held.db")
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), db, str(MANY)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    added = int(proc.stdout.readline())
    yield proc, db, added
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_a_killed_holder_of_many_locks_leaves_none(
    holder: tuple[subprocess.Popen[str], str, int],
) -> None:
    proc, db, added = holder
    assert 0 < added <= shard_locks.SHARDS  # one descriptor per shard, whatever the sessions
    store = SQLiteStore(db)
    try:
        assert all(store.locked_elsewhere(sid) for sid in _ids(MANY))
        assert not any(store.lock(sid) for sid in _ids(MANY))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not any(store.locked_elsewhere(sid) for sid in _ids(MANY))
        assert all(store.lock(sid) for sid in _ids(MANY))
    finally:
        store.close()


# One store on stdin: "lock ID", "unlock ID", "elsewhere ID"; one answer a line.
PEER = """
    import sys
    from plait.store.sqlite import SQLiteStore
    store = SQLiteStore(sys.argv[1])
    print("open", flush=True)
    for line in sys.stdin:
        verb, _, sid = line.strip().partition(" ")
        if verb == "lock":
            print(store.lock(sid), flush=True)
        elif verb == "unlock":
            store.unlock(sid)
            print("done", flush=True)
        else:
            print(store.locked_elsewhere(sid), flush=True)
"""


class _Peer:
    def __init__(self, db: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(PEER), db],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.ask("") == "open"

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if command:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[_Peer]:
    found = _Peer(str(tmp_path / "peer.db"))
    yield found
    found.stop()


def _same_shard() -> tuple[str, str]:
    by_shard: dict[int, str] = {}
    for i in itertools.count():
        sid = f"neighbour/{i}"
        shard = shard_locks.place(sid)[0]
        if shard in by_shard:
            return by_shard[shard], sid
        by_shard[shard] = sid
    raise AssertionError("unreachable")


def test_two_sessions_of_one_shard_are_two_locks(tmp_path: Path, peer: _Peer) -> None:
    a, b = _same_shard()
    assert shard_locks.place(a)[0] == shard_locks.place(b)[0]
    assert shard_locks.place(a)[1] != shard_locks.place(b)[1]
    store = SQLiteStore(str(tmp_path / "peer.db"))
    try:
        assert peer.ask(f"lock {a}") == "True"
        assert store.locked_elsewhere(a) and not store.locked_elsewhere(b)
        assert store.lock(b) is True  # its neighbour in the file is another process's
        assert store.lock(a) is False
        assert peer.ask(f"lock {b}") == "False"
        assert peer.ask(f"elsewhere {b}") == "True"
        # Letting go of one byte leaves the other: in either process.
        store.unlock(b)
        assert peer.ask(f"elsewhere {b}") == "False"
        assert store.locked_elsewhere(a)
        assert peer.ask(f"lock {b}") == "True"
        assert peer.ask(f"unlock {a}") == "done"
        assert store.lock(a) is True and store.lock(b) is False
    finally:
        store.close()
    assert peer.ask(f"elsewhere {a}") == "False"


def test_a_forked_child_holds_none_of_its_parents_locks(tmp_path: Path, peer: _Peer) -> None:
    a, b = _same_shard()
    store = SQLiteStore(str(tmp_path / "peer.db"))
    try:
        assert store.lock(a) is True
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its parent's lock is another process's
            code = 1
            try:
                seen = (store.locked_elsewhere(a), store.lock(a), store.lock(b))
                store.unlock(a)  # holds nothing: must not free the parent's byte
                store.close()
                os.write(write, repr(seen).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        _, status = os.waitpid(pid, 0)
        seen = os.read(read, 100).decode()
        os.close(read)
        assert os.waitstatus_to_exitcode(status) == 0
        assert seen == "(True, False, True)"  # it took b for itself, a byte beside the parent's
        assert peer.ask(f"elsewhere {a}") == "True"  # the parent still holds it
        assert peer.ask(f"lock {b}") == "True"  # the child's went with it
        assert store.lock(a) is True and not store.locked_elsewhere(a)
    finally:
        store.close()
    assert peer.ask(f"lock {a}") == "True"


# Takes a lock, forks a child that lives on, and waits to be killed.
FORKING_HOLDER = """
    import os, sys, time
    from plait.store.sqlite import SQLiteStore
    store = SQLiteStore(sys.argv[1])
    assert store.lock("s")
    r, w = os.pipe()
    if os.fork() == 0:
        os.write(w, b"x")  # the fork's handlers have run: the inherited descriptors are closed
        time.sleep(120)
        os._exit(0)
    os.read(r, 1)
    print("ready", flush=True)
    time.sleep(120)
"""


def test_a_killed_parent_s_lock_goes_while_its_child_lives(tmp_path: Path) -> None:
    db = str(tmp_path / "fork.db")
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(FORKING_HOLDER), db],
        stdout=subprocess.PIPE, text=True,
    )
    children: list[str] = []
    store = SQLiteStore(db)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        listed = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        if not listed.exists():
            pytest.skip("the kernel lists no children in /proc")
        children = listed.read_text().split()
        assert len(children) == 1
        assert store.locked_elsewhere("s") and not store.lock("s")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert Path(f"/proc/{children[0]}").exists()  # the child lives on, orphaned
        # The child kept no description holding the byte: the lock went with the parent.
        assert not store.locked_elsewhere("s")
        assert store.lock("s") is True
    finally:
        store.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(child), signal.SIGKILL)


FLOCK_HOLDER = """
    import sys, time
    from pathlib import Path
    from plait.store.sqlite._flock import FlockLocks
    locks = FlockLocks(Path(sys.argv[1]))
    assert locks.lock("s")
    print("ready", flush=True)
    time.sleep(120)
"""


def test_the_flock_fallback_still_locks_per_session(tmp_path: Path) -> None:
    folder = tmp_path / "x.db-locks"
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(FLOCK_HOLDER), str(folder)],
        stdout=subprocess.PIPE, text=True,
    )
    locks = FlockLocks(folder)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert locks.locked_elsewhere("s") and locks.lock("s") is False
        assert locks.lock("t") is True and not locks.locked_elsewhere("t")
        assert len(os.listdir(folder)) == 2  # a file per session
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not locks.locked_elsewhere("s") and locks.lock("s") is True
    finally:
        locks.release_all()
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_holder_of_the_old_per_session_file_is_seen(tmp_path: Path) -> None:
    db = tmp_path / "mixed.db"
    # A process of the layout before shards, on the same database's lock folder.
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(FLOCK_HOLDER), f"{db}-locks"],
        stdout=subprocess.PIPE, text=True,
    )
    store = SQLiteStore(str(db))
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert store.locked_elsewhere("s") and store.lock("s") is False
        assert store.lock("t") is True  # its old file is nobody's
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not store.locked_elsewhere("s") and store.lock("s") is True
    finally:
        store.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
