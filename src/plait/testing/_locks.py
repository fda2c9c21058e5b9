"""Conformance of writer locks: one writer process per session, readers never blocked.

The tests that need another process start a :class:`~plait.testing._factory.Peer`
on the same target and are marked ``slow``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from plait.errors import SessionLockedError, WriterLockLostError
from plait.layout import branch
from plait.store.base import Store, WriterLocks
from plait.testing._factory import ConformanceBase, Peer
from plait.testing._transcript import appended, new_row, users

__all__ = ["WriterLockConformance"]

_WHAT = "writer locks"

_DEATH_NOTICED_S = 10.0
"""How long a dead holder's lock may take to go: a server notices a dropped connection
(PostgreSQL: a killed process's socket) a little after the process is gone."""


def _eventually(check: Callable[[], bool]) -> bool:
    """Whether ``check`` holds now or within :data:`_DEATH_NOTICED_S` (asked again and again)."""
    deadline = time.monotonic() + _DEATH_NOTICED_S
    while not check():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _taken_over(store: Store, peer: Peer, session_id: str) -> None:
    """Once this process lost its lock on ``session_id``: the peer takes it and appends one.

    The lock may take a moment to go (the server notices the cut connection), so the
    peer asks again until it has it.
    """
    assert _eventually(lambda: peer.ask(f"lock {session_id}") == "locked"), "never free"
    row = store.get(session_id)
    assert row is not None
    assert peer.ask(f"append {session_id} 1") == str(row.layout.end_seq + 1)


def _texts(store: Store, session_id: str) -> list[str]:
    row = store.get(session_id)
    assert row is not None
    return [r.text for r in store.read(row, 0, row.layout.end_seq)]


class WriterLockConformance(ConformanceBase):
    """The :class:`~plait.store.base.WriterLocks` protocol.

    A lock belongs to the process: every store of the process on the same target
    shares it, taking it again does nothing, and it dies with the process however
    that ends (SIGKILL included), so no lock is ever stale. Where a lock can be lost
    while its holder lives (:meth:`StoreFactory.lose_lock`), a holder whose lock was
    lost and taken by another process writes nothing: every write of its raises
    :class:`~plait.errors.WriterLockLostError`.
    """

    def test_a_lock_is_taken_again_without_harm(self, store: Store) -> None:
        """Locking twice holds it; this process's own lock is never "elsewhere"."""
        self.needs(store, WriterLocks, _WHAT)
        store.create(new_row("s"))
        assert store.lock("s") is True
        assert store.lock("s") is True
        assert store.locked_elsewhere("s") is False
        store.unlock("s")
        store.unlock("s")  # not held: a no-op
        assert store.locked_elsewhere("s") is False
        assert store.lock("s") is True

    @pytest.mark.slow
    def test_a_held_lock_refuses_another_process(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """While another process holds a session's lock this one cannot take it; per session."""
        self.needs(store, WriterLocks, _WHAT)
        store.create(new_row("s"))
        store.create(new_row("t"))
        peer = peers()
        assert peer.ask("lock s") == "locked"
        assert store.locked_elsewhere("s") is True
        assert store.lock("s") is False
        assert store.locked_elsewhere("t") is False
        assert store.lock("t") is True
        assert peer.ask("lock t") == "refused"
        assert peer.ask("elsewhere t") == "True"

    @pytest.mark.slow
    def test_a_released_lock_can_be_taken_by_another_process(
        self, store: Store, store_target: str, peers: Callable[[], Peer]
    ) -> None:
        """``unlock`` and ``close`` let go: another process takes the lock next."""
        self.needs(store, WriterLocks, _WHAT)
        store.create(new_row("s"))
        peer = peers()
        assert store.lock("s") is True
        assert peer.ask("elsewhere s") == "True"
        assert peer.ask("lock s") == "refused"
        store.unlock("s")
        assert peer.ask("elsewhere s") == "False"
        assert peer.ask("lock s") == "locked"
        assert store.locked_elsewhere("s") is True
        assert peer.ask("unlock s") == "unlocked"
        assert store.locked_elsewhere("s") is False
        # Closing a store releases what it held.
        other = self.factory.open(store_target)
        assert isinstance(other, WriterLocks) and other.lock("s") is True
        assert peer.ask("lock s") == "refused"
        other.close()
        assert peer.ask("lock s") == "locked"

    @pytest.mark.slow
    def test_the_stores_of_one_process_share_its_locks(
        self, store: Store, store_target: str, peers: Callable[[], Peer]
    ) -> None:
        """Two stores of one process on one target hold one lock until both let go."""
        self.needs(store, WriterLocks, _WHAT)
        store.create(new_row("s"))
        peer = peers()
        other = self.factory.open(store_target)
        try:
            assert isinstance(other, WriterLocks)
            assert store.lock("s") is True
            assert other.lock("s") is True  # this process holds it already
            assert other.locked_elsewhere("s") is False
            store.unlock("s")
            assert peer.ask("elsewhere s") == "True"  # still held, through the other store
            other.unlock("s")
            assert peer.ask("elsewhere s") == "False"
        finally:
            other.close()

    @pytest.mark.slow
    def test_a_killed_holder_leaves_no_stale_lock(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """A holder killed with SIGKILL loses its lock: the next process takes it at once."""
        self.needs(store, WriterLocks, _WHAT)
        store.create(new_row("s"))
        peer = peers()
        assert peer.ask("lock s") == "locked"
        assert store.locked_elsewhere("s") is True
        peer.kill()
        assert _eventually(lambda: not store.locked_elsewhere("s")), "the dead holder's lock stayed"
        assert store.lock("s") is True

    @pytest.mark.slow
    def test_readers_are_never_blocked_by_a_writer(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """While another process holds the lock and appends, every read answers, in order."""
        self.needs(store, WriterLocks, _WHAT)
        store.create(appended(new_row("s"), users(0, 1)), users(0, 1))
        store.create(new_row("c", parent_ids=("s",)))
        peer = peers()
        assert peer.ask("lock s") == "locked"
        total = 1 + 200
        peer.send("append s 200")
        seen, reads = 0, 0
        while True:
            row = store.get("s")
            assert row is not None
            records = store.read(row, 0, row.layout.end_seq)
            assert len(records) == row.layout.end_seq >= seen, "a reader saw the transcript shrink"
            assert [r.seq for r in records] == list(range(len(records)))
            assert store.stamp("s") is not None
            assert [r.id for r in store.recent("/ws", 5)][:2] in (["s", "c"], ["c", "s"])
            assert store.children("s") == ["c"]
            seen, reads = row.layout.end_seq, reads + 1
            if seen == total:
                break
            assert peer.running, "the writer process ended before it finished"
        assert peer.answer() == str(total)
        assert reads > 0 and store.locked_elsewhere("s") is True

    @pytest.mark.slow
    def test_a_lock_passes_between_processes_in_turn(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """Taken and let go again and again, by turns: each unlock frees it for the other.

        What writers taking turns (``writer_lock="write"``) rely on: an unlock is seen by
        another process at once, and a lock taken many times leaves nothing behind.
        """
        self.needs(store, WriterLocks, _WHAT)
        store.create(new_row("s"))
        peer = peers()
        for _ in range(20):
            assert store.lock("s") is True
            assert peer.ask("lock s") == "refused"
            store.unlock("s")
            assert peer.ask("lock s") == "locked"
            assert store.lock("s") is False
            assert peer.ask("unlock s") == "unlocked"
        assert store.locked_elsewhere("s") is False
        assert peer.ask("elsewhere s") == "False"

    @pytest.mark.slow
    def test_any_session_id_is_its_own_lock(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """Ids holding ``/``, dots or Unicode lock their own session, and only it."""
        self.needs(store, WriterLocks, _WHAT)
        ids = ("user/123", "user", "../../etc/passwd", "a/b/../c", "über/日本", "x" * 200)
        for sid in ids:
            store.create(new_row(sid))
        peer = peers()
        assert peer.ask("lock user/123") == "locked"
        assert peer.ask("lock ../../etc/passwd") == "locked"
        assert store.locked_elsewhere("user/123") is True
        assert store.locked_elsewhere("../../etc/passwd") is True
        for sid in ("user", "a/b/../c", "über/日本", "x" * 200):
            assert store.locked_elsewhere(sid) is False, sid
            assert store.lock(sid) is True, sid
        assert store.lock("user/123") is False
        assert peer.ask("unlock user/123") == "unlocked"
        assert store.lock("user/123") is True

    @pytest.mark.slow
    def test_writers_of_two_processes_take_turns_on_one_session(
        self, store: Store, tmp_path: Path, peers: Callable[[], Peer]
    ) -> None:
        """``Client(writer_lock="write")`` in two processes: every message kept, in order.

        Each write takes the lock and gives it back, so neither process is locked out,
        and a compare-and-set that finds the other's write re-reads and appends after it.
        """
        self.needs(store, WriterLocks, _WHAT)
        from plait.client import Client

        n = 30
        with Client(tmp_path, store=store, writer_lock="write", lock_timeout=60) as client:
            client.open("shared/1").inject({"role": "system", "content": "be brief"})
            peer = peers()
            peer.send(f"turns shared/1 {n}")
            mine = client.open("shared/1")
            for i in range(n):
                mine.inject({"role": "user", "content": f"here {i}"})
            assert peer.answer() == str(n)
            assert not mine.live.holds_lock and store.locked_elsewhere("shared/1") is False
            texts = [m.text for m in client.open("shared/1").history()]
        assert len(texts) == 2 * n
        for who in ("here", "peer"):
            assert [t for t in texts if t.startswith(who)] == [f"{who} {i}" for i in range(n)]

    @pytest.mark.slow
    def test_a_writer_whose_lock_was_lost_and_taken_writes_nothing(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """Lost, then taken by another process: append, write, move_head, delete refused.

        Each raises :class:`WriterLockLostError` (a :class:`SessionLockedError`) and
        leaves the session as the new holder wrote it; once the old holder lets go, it
        can take the lock again and write.
        """
        self.needs(store, WriterLocks, _WHAT)
        row = store.create(appended(new_row("s"), users(0, 2)), users(0, 2))
        assert store.lock("s") is True
        row = store.append(row, users(2, 1))  # the holder writes
        peer = peers()
        assert peer.ask("lock s") == "refused"
        self.factory.lose_lock(store, "s")
        _taken_over(store, peer, "s")
        now = store.get("s")
        assert now is not None
        rewound = replace(now, pk=0, layout=branch(now.layout, now.pk, 1, 1))
        titled, lost = replace(now, title="lost"), users(4, 1, "lost")
        attempts: list[tuple[str, Callable[[], object]]] = [
            ("append at the old head", lambda: store.append(row, users(3, 1, "lost"))),
            ("append at the new head", lambda: store.append(now, users(4, 1, "lost"))),
            ("append of two", lambda: store.append(now, users(4, 2, "lost"))),
            ("write", lambda: store.write(now, appended(titled, lost), lost)),
            ("move_head", lambda: store.move_head(now, rewound, "hidden-1")),
            ("delete", lambda: store.delete("s")),
        ]
        for what, attempt in attempts:
            with pytest.raises(WriterLockLostError) as refused:
                attempt()
            assert isinstance(refused.value, SessionLockedError), what
            assert refused.value.session_id == "s", what
        after = store.get("s")
        assert after is not None and after.version == now.version and after.title is None
        assert _texts(store, "s") == ["m0", "m1", "m2", "peer 3"]
        assert store.children("s") == []
        # Let go, the old holder is a writer like any other: it takes the lock in turn.
        store.unlock("s")
        assert peer.ask("unlock s") == "unlocked"
        assert store.lock("s") is True
        store.append(after, users(4, 1, "back"))
        assert _texts(store, "s")[-2:] == ["peer 3", "back4"]

    @pytest.mark.slow
    def test_two_processes_never_both_append_after_a_lost_lock(
        self, store: Store, peers: Callable[[], Peer]
    ) -> None:
        """While the new holder appends, every append of the one that lost the lock fails.

        The old holder tries at the head it reads each time (so no compare-and-set
        could stop it): the lock's loss alone does, and what follows the cut is the
        new holder's records, all of them, in order.
        """
        self.needs(store, WriterLocks, _WHAT)
        row = store.create(appended(new_row("s"), users(0, 1)), users(0, 1))
        assert store.lock("s") is True
        store.append(row, users(1, 1))
        peer = peers()
        self.factory.lose_lock(store, "s")
        _taken_over(store, peer, "s")
        n = 100
        peer.send(f"append s {n}")
        refused = 0
        while True:
            head = store.get("s")
            assert head is not None
            seq = head.layout.end_seq
            try:
                store.append(head, [*users(seq, 1, "lost")])
            except WriterLockLostError:
                refused += 1
            if not peer.running or seq >= 3 + n:
                break
        assert peer.answer() == str(3 + n)
        assert refused > 0
        texts = _texts(store, "s")
        assert texts == ["m0", "m1", *(f"peer {i}" for i in range(2, 3 + n))]
