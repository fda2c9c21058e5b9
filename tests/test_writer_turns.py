"""Writers that take turns: ``Client(writer_lock="write")`` holds the lock for one write or run."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import (
    InvalidArgumentError,
    SessionLockedError,
    SessionLockTimeoutError,
    StaleSessionError,
)
from plait.providers import Finish, ScriptedProvider, TextDelta
from plait.providers.base import Request as ModelRequest
from plait.store.sqlite._shardlocks import AVAILABLE, place
from tests.conftest import POSTGRES_SKIP, POSTGRES_URL

# Two worker processes serve one conversation, each appending its own numbered messages.
WORKER = textwrap.dedent(
    """
    import sys
    from plait import Client
    ws, target, name, n = sys.argv[1:5]
    with Client(ws, store=target, writer_lock="write", lock_timeout=60) as client:
        s = client.open("shared")
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(int(n)):
            s.inject({"role": "user", "content": f"{name} {i}"})
            s.transcript.log_event("tick", {"by": name, "i": i})
        print("done", flush=True)
        sys.stdin.readline()
    """
)

# Holds the lock in process mode (seed 001) until told to stop.
HOLDER = textwrap.dedent(
    """
    import sys
    from plait import Client
    ws, target = sys.argv[1:3]
    with Client(ws, store=target) as client:
        s = client.open("shared")
        s.inject({"role": "user", "content": "from the holder"})
        print("ready", flush=True)
        sys.stdin.readline()
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


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store another process can open: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return str(tmp_path / "turns.db")
    if POSTGRES_URL is None:
        pytest.skip(POSTGRES_SKIP)
    schema = request.getfixturevalue("pg_store_schema")
    return f"{POSTGRES_URL}?schema={schema}"


class Proc:
    """A Python child process spoken to line by line."""

    def __init__(self, script: str, *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )

    def line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def say(self, text: str = "go") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    yield started
    for p in started:
        p.stop()


def start(procs: list[Proc], script: str, *args: str) -> Proc:
    p = Proc(script, *args)
    procs.append(p)
    assert p.line() == "ready"
    return p


def probe(ws: Path, target: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ws), target],
        capture_output=True, text=True, check=True, env=env,
    )
    return done.stdout.strip()


@pytest.mark.slow
def test_two_worker_processes_serve_one_conversation(
    tmp_path: Path, target: str, procs: list[Proc]
) -> None:
    with Client(tmp_path, store=target, writer_lock="write") as client:
        client.open("shared").inject({"role": "system", "content": "be brief"})
        assert not client.open("shared").live.holds_lock  # the write gave it back
        n = 40
        workers = [start(procs, WORKER, str(tmp_path), target, name, str(n)) for name in "ab"]
        for w in workers:
            w.say()
        for w in workers:
            assert w.line() == "done"
        # Both still run, and neither holds the lock between its writes.
        assert probe(tmp_path, target) == "False"
        texts = [m.text for m in client.open("shared").history()]
        assert len(texts) == 2 * n  # none lost
        for name in "ab":  # each worker's in its order
            assert [t for t in texts if t.startswith(name)] == [f"{name} {i}" for i in range(n)]
        records = client.open("shared").transcript.records
        assert [r.seq for r in records] == list(range(1 + 4 * n))
        # This process writes on after them, through the same handle.
        s = client.open("shared")
        s.inject({"role": "user", "content": "last"})
        assert s.history()[-1].text == "last" and len(s.history()) == 2 * n + 1


@pytest.mark.slow
def test_process_mode_still_locks_the_second_process_out(
    tmp_path: Path, target: str, procs: list[Proc]
) -> None:
    start(procs, HOLDER, str(tmp_path), target)
    with Client(tmp_path, store=target) as client:
        s = client.open("shared")
        with pytest.raises(SessionLockedError) as found:
            s.inject({"role": "user", "content": "intruder"})
        assert not isinstance(found.value, SessionLockTimeoutError)  # refused at once


@pytest.mark.slow
def test_a_turn_that_waits_too_long_is_a_typed_error(
    tmp_path: Path, target: str, procs: list[Proc]
) -> None:
    holder = start(procs, HOLDER, str(tmp_path), target)
    with Client(tmp_path, store=target, writer_lock="write", lock_timeout=0.3) as client:
        s = client.open("shared")
        version = s.live.version
        for write in (
            lambda: s.inject({"role": "user", "content": "intruder"}),
            lambda: s.rename("mine"),
            lambda: client.sessions.delete("shared"),
            lambda: asyncio.run(s.prompt("hi", provider=ScriptedProvider(["no"]))),
        ):
            with pytest.raises(SessionLockTimeoutError) as found:
                write()
            assert isinstance(found.value, SessionLockedError)
            assert found.value.session_id == "shared" and found.value.timeout == 0.3
            assert "lock_timeout=0.3 s" in str(found.value)
        assert s.live.refresh().live.version == version  # nothing was written
        assert not s.live.holds_lock
        # The holder lets go: the same client's next turn goes through.
        holder.say("stop")
        holder.proc.wait()
        s.inject({"role": "user", "content": "my turn"})
        assert s.history()[-1].text == "my turn"


class Gated:
    """A provider whose reply waits until the test opens the gate (holding the run open)."""

    name = "gated"
    model = "gated"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        self.started.set()
        await self.gate.wait()
        yield TextDelta("hello")
        yield Finish("stop")


@pytest.mark.slow
def test_a_run_holds_the_lock_from_start_to_end(tmp_path: Path, target: str) -> None:
    with Client(tmp_path, store=target, writer_lock="write") as client:
        s = client.open("shared")
        s.inject({"role": "user", "content": "earlier"})
        model = Gated()

        async def go() -> str:
            run = s.stream("hi", provider=model)  # type: ignore[arg-type]
            await model.started.wait()  # the run has written its request, and waits
            during = await asyncio.to_thread(probe, tmp_path, target)
            model.gate.set()
            await run
            return during

        assert asyncio.run(go()) == "True"
        assert probe(tmp_path, target) == "False"
        assert not s.live.holds_lock
        assert [m.text for m in s.history()] == ["earlier", "hi", "hello"]


def test_an_expected_version_from_another_writer_is_checked_against_the_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cas.db"
    with Client(tmp_path, store=path, writer_lock="write") as one, Client(
        tmp_path, store=path, writer_lock="write"
    ) as two:
        a = one.open("shared")
        a.inject({"role": "user", "content": "1"})
        b = two.open("shared")
        b.inject({"role": "user", "content": "2"})
        # a's handle is behind; the version b saw is what is stored, and holds.
        a.inject({"role": "user", "content": "3"}, expect_version=b.live.version)
        with pytest.raises(StaleSessionError):
            b.inject({"role": "user", "content": "lost"}, expect_version=b.live.version - 1)
        assert [m.text for m in b.history()] == ["1", "2", "3"]


def test_two_clients_on_one_store_object_never_lock_each_other_out(tmp_path: Path) -> None:
    from plait.store import SQLiteStore

    path = tmp_path / "one.db"
    store = SQLiteStore(path)
    try:
        pinned = Client(tmp_path, store=store)  # process mode: keeps the lock
        turns = Client(tmp_path, store=store, writer_lock="write")
        pinned.open("shared").inject({"role": "user", "content": "a"})
        for i in range(3):
            turns.open("shared").inject({"role": "user", "content": f"t{i}"})
            pinned.open("shared").inject({"role": "user", "content": f"p{i}"})
        # The write-mode client gave back its own holds only: the other's lock stays.
        assert probe(tmp_path, str(path)) == "True"
        assert pinned.host.holds_lock("shared") and not turns.host.holds_lock("shared")
        assert len(turns.open("shared").history()) == 7
        assert pinned.host.release_idle() == 1
        assert probe(tmp_path, str(path)) == "False"
    finally:
        store.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd (Linux)")
def test_write_mode_keeps_no_descriptor_per_session_written(tmp_path: Path) -> None:
    path = tmp_path / "fds.db"
    with Client(tmp_path, store=path, writer_lock="write") as client:
        warm = client.open("warm")
        warm.inject({"role": "user", "content": "x"})
        before = _open_fds()
        handles = [client.open(f"user/{i}") for i in range(60)]
        for h in handles:
            h.inject({"role": "user", "content": "hi"})
            h.rename("named")
        assert _open_fds() == before
    with Client(tmp_path, store=path) as pinned:
        before = _open_fds()
        kept = [pinned.open(f"user/{i}") for i in range(20)]
        for h in kept:
            h.inject({"role": "user", "content": "again"})
        # Process mode: a descriptor per shard holding one of them (per session without
        # open file description locks).
        files = {place(f"user/{i}")[0] for i in range(20)} if AVAILABLE else range(20)
        assert _open_fds() == before + len(files)
        assert pinned.host.release_idle() == 20
        assert _open_fds() == before


def test_bad_writer_lock_settings_are_refused(tmp_path: Path) -> None:
    for kwargs in (
        {"writer_lock": "thread"},
        {"writer_lock": None},
        {"lock_timeout": -1},
        {"lock_timeout": float("nan")},
        {"lock_timeout": float("inf")},
        {"lock_timeout": "10"},
        {"lock_timeout": True},
    ):
        with pytest.raises(InvalidArgumentError):
            Client(tmp_path, store=":memory:", **kwargs)  # type: ignore[arg-type]
    with Client(tmp_path, store=":memory:", writer_lock="write", lock_timeout=0) as c:
        assert c.host.writer_lock == "write" and c.host.lock_timeout == 0.0


def test_a_turn_sees_what_another_writer_wrote_between_turns(tmp_path: Path) -> None:
    """Trust ends with the turn: the next run's request carries the other writer's message."""
    from plait.store import SQLiteStore

    path = tmp_path / "trust.db"
    model = ScriptedProvider(["first answer", "second answer"])
    other_store = SQLiteStore(path)  # another store object: nothing cached is shared
    try:
        with Client(tmp_path, store=path, writer_lock="write") as one, Client(
            tmp_path, store=other_store, writer_lock="write"
        ) as two:
            s = one.open("shared")
            s.run("first", provider=model)
            assert not s.live.holds_lock
            two.open("shared").inject({"role": "user", "content": "from elsewhere"})
            s.run("second", provider=model)
            sent = [m.text for m in model.requests[-1].messages]
            assert sent[-3:] == ["first answer", "from elsewhere", "second"]
            assert s.context() is not None  # the report counts what the other wrote too
            assert [m.text for m in s.history()][-2:] == ["second", "second answer"]
    finally:
        other_store.close()


def test_rewind_undo_erase_and_compaction_are_turns_too(tmp_path: Path) -> None:
    path = tmp_path / "verbs.db"
    with Client(tmp_path, store=path, writer_lock="write") as client:
        s = client.open("user/7")
        s.transcript.inject_many([{"role": "user", "content": f"m{i}"} for i in range(6)])
        hidden = s.transcript.rewind(2)
        assert s.transcript.length == 2 and not s.live.holds_lock
        assert probe_named(tmp_path, path, "user/7") == "False"
        s.transcript.undo_rewind(hidden)
        assert s.transcript.length == 6 and not s.live.holds_lock
        asyncio.run(s.compact(keep_last=2))
        assert not s.live.holds_lock and probe_named(tmp_path, path, "user/7") == "False"
        client.sessions.erase("user/7")
        assert not client.exists("user/7") and not client.host.holds_lock("user/7")


def probe_named(ws: Path, path: Path, sid: str) -> str:
    script = PROBE.replace('"shared"', repr(sid))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run(
        [sys.executable, "-c", script, str(ws), str(path)],
        capture_output=True, text=True, check=True, env=env,
    )
    return done.stdout.strip()
