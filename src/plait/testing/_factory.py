"""How the kit opens stores: a factory of targets, an importable opener, a peer process."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar, cast

import pytest

from plait.store import PARTS, parts_of
from plait.store.base import Store, TranscriptStore

__all__ = ["ConformanceBase", "Peer", "StoreFactory", "parts_supported"]


def parts_supported(store: object) -> frozenset[str]:
    """The optional parts ``store`` offers itself: the kit classes of those run, the rest skip.

    Args:
        store: an open store (or anything: an object that offers no part gives the empty set).

    Returns:
        Keys of :data:`plait.store.PARTS` (``"writer_locks"``, ``"search"``, ...). A part
        plait serves by a fallback for a store without it is not counted.
    """
    return parts_of(store)


class StoreFactory:
    """Fresh stores for the kit: a target per test, and the opener that opens it.

    Subclass it and set :attr:`opener` (or keep plait's ``open_store``) and
    :meth:`new_target`; override :meth:`dispose` when a target leaves something
    behind that ``tmp_path`` does not (a database schema, a bucket), and
    :meth:`lose_lock` when the store's writer lock can be lost while its holder
    lives (a lock held on a server connection).
    """

    opener: ClassVar[str] = "plait.store:open_store"
    """``"module:callable"``: called with a target string, returns an open store.

    Named by import path, not passed as an object, so that another process (the
    lock tests start some) can open the same target.
    """
    shared: ClassVar[bool] = True
    """Whether two opens of one target see the same sessions (False for an in-memory store)."""

    def new_target(self, tmp_path: Path) -> str:
        """Return a target for one test, where nothing is stored yet.

        Args:
            tmp_path: the test's own temporary folder.
        """
        return str(tmp_path / "store")

    def open(self, target: str) -> TranscriptStore:
        """Open the store at ``target`` with :attr:`opener`."""
        return cast(TranscriptStore, resolve(self.opener)(target))

    lock_kept: ClassVar[str] = (
        "the factory gives no way to lose a writer lock while its holder lives "
        "(StoreFactory.lose_lock)"
    )
    """Why the lost-lock cases do not apply: the store's writer lock is lost only with
    its process (a kernel file lock), so there is no second writer to fence. Said when
    they are skipped, which they are while :meth:`lose_lock` is not implemented."""

    def dispose(self, target: str) -> None:
        """Remove what a test's target left outside its ``tmp_path`` (nothing by default)."""

    def lose_lock(self, store: TranscriptStore, session_id: str) -> None:
        """Make ``store``'s process lose its writer lock on ``session_id``, telling it nothing.

        What a cut connection does to a lock held on a server (an idle timeout, a
        proxy, a failover; PostgreSQL: ``pg_terminate_backend`` of the connection
        holding it): the lock is free for another process, while the holder still
        believes it holds it. The default skips the test, saying :attr:`lock_kept`.

        Args:
            store: a store of this process that holds the session's lock.
            session_id: the session.
        """
        pytest.skip(self.lock_kept)


def resolve(name: str) -> Callable[[str], Any]:
    """Import ``"module:attribute"``.

    Raises:
        ValueError: the name is not of that form.
    """
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"opener {name!r}: expected 'module:callable'")
    found: Any = importlib.import_module(module)
    for part in attr.split("."):
        found = getattr(found, part)
    return cast(Callable[[str], Any], found)


# One store in another process, driven line by line on its stdin: each command is
# answered by one line on stdout. It speaks only the store protocols.
_PEER = textwrap.dedent(
    """
    import importlib, sys
    from plait.records import UserRecord
    module, _, attr = sys.argv[1].partition(":")
    opener = importlib.import_module(module)
    for part in attr.split("."):
        opener = getattr(opener, part)
    store = opener(sys.argv[2])
    print("open", flush=True)
    for line in sys.stdin:
        verb, _, arg = line.strip().partition(" ")
        if verb == "lock":
            print("locked" if store.lock(arg) else "refused", flush=True)
        elif verb == "unlock":
            store.unlock(arg)
            print("unlocked", flush=True)
        elif verb == "elsewhere":
            print(store.locked_elsewhere(arg), flush=True)
        elif verb == "append":
            sid, n = arg.split()
            row = store.get(sid)
            for _ in range(int(n)):
                seq = row.layout.end_seq
                row = store.append(row, [UserRecord(seq=seq, content=f"peer {seq}")])
            print(row.layout.end_seq, flush=True)
        elif verb == "turns":
            # Writes through the public API, taking the writer lock for each one.
            from plait import Client
            sid, n = arg.rsplit(" ", 1)
            with Client("/ws", store=store, writer_lock="write", lock_timeout=60) as client:
                session = client.open(sid)
                for i in range(int(n)):
                    session.inject({"role": "user", "content": f"peer {i}"})
            print(n, flush=True)
        elif verb == "close":
            store.close()
            print("closed", flush=True)
            break
    """
)


class Peer:
    """A store on the same target, opened in another process (a subprocess of this one).

    Args:
        factory: opens the store (its :attr:`StoreFactory.opener` is imported there).
        target: the target this test's store was opened on.
    """

    def __init__(self, factory: StoreFactory, target: str) -> None:
        env = dict(os.environ)
        # The opener may live in the test suite's own modules: the peer imports what
        # this process can.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _PEER, factory.opener, target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._read() == "open"

    def _read(self) -> str:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            code = self._proc.wait()
            raise AssertionError(f"the peer process ended (exit code {code}) without answering")
        return line.strip()

    def ask(self, command: str) -> str:
        """Send one command and return the peer's answer.

        Commands: ``lock ID``, ``unlock ID``, ``elsewhere ID``, ``append ID N`` (store
        appends), ``turns ID N`` (N messages through a ``writer_lock="write"`` client) and
        ``close``.
        """
        assert self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()
        return self._read()

    def send(self, command: str) -> None:
        """Send a command without waiting for its answer (collect it with :meth:`answer`)."""
        assert self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()

    def answer(self) -> str:
        """The answer to the last command sent with :meth:`send`."""
        return self._read()

    @property
    def running(self) -> bool:
        """Whether the peer process is still alive."""
        return self._proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the peer, as a crash would: it gets no chance to let go of anything."""
        os.kill(self._proc.pid, signal.SIGKILL)
        self._proc.wait()

    def stop(self) -> None:
        """End the peer, however it is (idempotent)."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()


class ConformanceBase:
    """The fixtures every conformance class shares: a fresh store per test, and its target."""

    factory: ClassVar[StoreFactory]
    """Set by the test class that runs the kit."""

    @pytest.fixture
    def store_target(self, tmp_path: Path) -> Iterator[str]:
        """A fresh target, disposed of after the test."""
        target = self.factory.new_target(tmp_path)
        try:
            yield target
        finally:
            self.factory.dispose(target)

    @pytest.fixture
    def store(self, store_target: str) -> Iterator[Store]:
        """The store at the test's target, closed after the test.

        Typed as the full :class:`Store`; a test of a narrower protocol first
        checks (and skips) through :meth:`needs`.
        """
        opened = self.factory.open(store_target)
        try:
            yield cast(Store, opened)
        finally:
            opened.close()

    @staticmethod
    def needs(store: object, protocol: type, what: str) -> None:
        """Skip the test unless ``store`` implements ``protocol``; the reason names the part."""
        if not isinstance(store, protocol):
            part = next((n for n, p in PARTS.items() if p.protocol is protocol), None)
            named = f", the part {part!r}" if part is not None else ""
            pytest.skip(f"{type(store).__name__} offers no {what} ({protocol.__name__}{named})")

    @pytest.fixture
    def peers(self, store_target: str) -> Iterator[Callable[[], Peer]]:
        """Start peers on the test's target; every one is stopped after the test."""
        if not self.factory.shared:
            pytest.skip("the store is private to its process: no other process can open it")
        started: list[Peer] = []

        def start() -> Peer:
            peer = Peer(self.factory, store_target)
            started.append(peer)
            return peer

        try:
            yield start
        finally:
            for peer in started:
                peer.stop()
