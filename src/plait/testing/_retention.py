"""Conformance of retention: idle sessions removed, every kept session whole and resumable.

:class:`RetentionConformance` checks the store's optional
:class:`~plait.store.RetentionStore` verbs (idle sessions, what an erase would remove,
the store's footprint, giving space back), then drives ``writer.sessions.retain`` over a
store of forks, rewinds and workspace checkpoints: what stays reads byte for byte as it
did, resumes, and undoes its rewinds; what goes takes its hidden heads and the
checkpoints only it named; a dry run changes nothing; two passes at once remove each
session once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from plait._time import now_micros
from plait.client import Client
from plait.errors import InvalidArgumentError
from plait.interop import to_jsonl
from plait.layout import branch
from plait.records import Record, UserRecord
from plait.session import Session, host_of
from plait.session.checkpoints import checkpoints_of
from plait.session.retention import Retained
from plait.store import RetentionStore, RunRegistry
from plait.store.base import Store, WriterLocks
from plait.testing._factory import ConformanceBase
from plait.testing._transcript import appended, new_row, users

__all__ = ["RetentionConformance"]

IDLE = timedelta(seconds=2)
"""How long the kit's idle sessions wait: writes this much apart are told apart."""
_PAUSE = 2.3


class RetentionConformance(ConformanceBase):
    """``RetentionStore`` and ``writer.sessions.retain`` on this store."""

    @pytest.fixture
    def writer(self, store: Store, tmp_path: Path) -> Iterator[Client]:
        """A client on the store under test, with ``writer_lock="write"`` (as a server).

        Retention keeps a session another writer holds: that needs the store's own locks.
        """
        self.needs(store, WriterLocks, "writer locks")
        with Client(tmp_path, store=store, writer_lock="write", lock_timeout=0) as c:
            yield c

    # -- the store's own verbs ------------------------------------------------------------

    def test_idle_sessions_are_those_written_before_the_time(self, store: Store) -> None:
        """Listed least recent first by their last write, a record's included; no hidden head."""
        self.needs(store, RetentionStore, "retention verbs")
        assert isinstance(store, RetentionStore)
        a = store.create(appended(new_row("a"), users(0, 2)), users(0, 2))
        b = store.create(appended(new_row("b"), users(0, 2)), users(0, 2))
        time.sleep(0.01)
        between = now_micros()
        time.sleep(0.01)
        store.append(a, users(2, 1))  # a's row is not written, its newest record is
        store.create(appended(new_row("c"), users(0, 1)), users(0, 1))
        assert [r.id for r in store.idle_sessions(between, None, 100)] == ["b"]
        later = now_micros() + 1
        assert [r.id for r in store.idle_sessions(later, None, 100)] == ["b", "a", "c"]
        assert [r.id for r in store.idle_sessions(later, None, 1)] == ["b"]
        assert store.idle_sessions(later, "/elsewhere", 100) == []
        current = store.get("b")
        assert current is not None
        store.move_head(current, replace(current, pk=0, layout=branch(b.layout, b.pk, 1, 1)), "h")
        assert "h" not in [r.id for r in store.idle_sessions(now_micros() + 1, None, 100)]

    def test_erase_plan_says_what_erase_removes(self, store: Store) -> None:
        """A plan counts exactly the records the erase then deletes; it writes nothing."""
        self.needs(store, RetentionStore, "retention verbs")
        assert isinstance(store, RetentionStore)
        s = store.create(appended(new_row("s"), users(0, 6)), users(0, 6))
        store.create(replace(new_row("f", parent_ids=("s",)), layout=branch(s.layout, s.pk, 2, 2)))
        store.move_head(s, replace(s, pk=0, layout=branch(s.layout, s.pk, 4, 4)), "h")
        before = store.footprint()
        plan = store.erase_plan(["s", "nobody"])
        assert (plan.sessions, plan.hidden_heads, plan.records) == (("s",), 1, 4)
        assert plan.record_bytes > 0
        assert store.footprint() == before
        store.erase("s")
        after = store.footprint()
        assert before.records - after.records == plan.records
        assert store.erase_plan(["s"]).records == 0
        # With the fork erased too, the tombstone the fork read goes, and its two rows.
        assert store.erase_plan(["f"]).records == 2

    def test_footprint_and_reclaim(self, store: Store) -> None:
        """The footprint counts what is held; giving space back leaves it readable."""
        self.needs(store, RetentionStore, "retention verbs")
        assert isinstance(store, RetentionStore)
        big: list[Record] = [UserRecord(seq=i, content="x" * 4000) for i in range(50)]
        store.create(appended(new_row("big"), big), big)
        held = store.footprint()
        assert held.records == 50 and held.sessions == 1 and held.bytes > 0
        store.erase("big")
        assert isinstance(store.reclaim(), str)
        after = store.footprint()
        assert after.records == 0
        if held.free_bytes is not None:  # PostgreSQL's VACUUM may add its maps' pages
            assert after.bytes <= held.bytes
        assert store.integrity_check() == []

    # -- writer.sessions.retain -------------------------------------------------------------

    def _talk(self, s: Session, n: int, word: str) -> None:
        for i in range(n):
            s.inject({"role": "user", "content": f"{word} q{i}"})
            s.inject({"role": "assistant", "content": f"{word} a{i}"})

    def _checkpointed(self, s: Session, folder: Path, files: dict[str, str]) -> str:
        """A tool call that changed ``folder`` to ``files``, its checkpoint in its record."""
        for name, text in files.items():
            (folder / name).write_text(text)
        after = checkpoints_of(host_of(s).store).checkpoint(folder)
        call = f"call-{after[:8]}"
        s.inject({
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": call, "name": "write_file", "arguments": {}}],
        })
        s.inject({
            "role": "tool",
            "content": "ok",
            "tool_call_id": call,
            "meta": {"workspace": {"after": after}},
        })
        return after

    def _touch(self, client: Client, ids: list[str]) -> None:
        """Write each session's row (its title), which moves its last write and no record."""
        for sid in ids:
            client.open(sid).rename("kept")

    def _snapshot(self, client: Client, ids: list[str]) -> dict[str, object]:
        out: dict[str, object] = {}
        for sid in ids:
            s = client.open(sid)
            out[sid] = (
                s.transcript.records,
                s.history(full=True),
                to_jsonl(s, header=False),  # the header says when it was exported
                s.resumable(),
                s.transcript.length,
                s.parent_session_ids,
            )
        return out

    def test_retention_keeps_every_kept_session_whole(
        self, writer: Client, tmp_path: Path
    ) -> None:
        """Forks, rewinds and checkpoints: what stays reads as before; what goes, goes."""
        store = writer.store
        parent = writer.open("parent")
        self._talk(parent, 3, "parent")
        folder = tmp_path / "files"
        folder.mkdir()
        shared = self._checkpointed(parent, folder, {"a.txt": "shared by the fork"})
        fork = parent.fork()  # shares every record so far, the checkpoint's too
        self._talk(parent, 2, "parent later")  # the parent's own rows: no kept one reads
        own = tmp_path / "own"
        own.mkdir()
        self._checkpointed(parent, own, {"b.txt": "the parent's alone"})
        rewound = writer.open("rewound-old")
        self._talk(rewound, 3, "old")
        rewound.transcript.rewind(2)
        self._talk(rewound, 1, "old again")
        kept = writer.open("kept-rewound")
        self._talk(kept, 3, "kept")
        kept.transcript.rewind(3)
        lonely = writer.open("lonely")
        self._talk(lonely, 4, "lonely")
        time.sleep(_PAUSE)
        fork.inject({"role": "user", "content": "the fork goes on"})
        kept.inject({"role": "user", "content": "kept goes on"})
        keep_ids = [fork.id, "kept-rewound"]
        before = self._snapshot(writer, keep_ids)
        self._touch(writer, keep_ids)  # recent, whatever reading them took on a slow machine
        held = store.footprint() if isinstance(store, RetentionStore) else None

        plan = writer.sessions.retain(IDLE, dry_run=True, all_workspaces=True, checkpoint_grace=0)
        assert plan.dry_run and sorted(plan.sessions) == ["lonely", "parent", "rewound-old"]
        assert self._snapshot(writer, keep_ids) == before
        assert sorted(i.id for i in writer.sessions.list()) == sorted(
            [*keep_ids, "lonely", "parent", "rewound-old"]
        )
        if held is not None:
            assert isinstance(store, RetentionStore)
            assert store.footprint() == held

        self._touch(writer, keep_ids)
        done = writer.sessions.retain(IDLE, all_workspaces=True, checkpoint_grace=0)
        assert not done.dry_run and sorted(done.sessions) == sorted(plan.sessions)
        assert (done.hidden_heads, done.records, done.record_bytes) == (
            plan.hidden_heads,
            plan.records,
            plan.record_bytes,
        )
        assert done.hidden_heads == 1 and done.skipped == ()
        assert sorted(i.id for i in writer.sessions.list()) == sorted(keep_ids)
        assert self._snapshot(writer, keep_ids) == before
        if held is not None:
            assert isinstance(store, RetentionStore)
            now = store.footprint()
            assert held.records - now.records == done.records > 0
            if held.free_bytes is not None:  # an engine that gives pages back says so
                assert done.bytes_after is not None and done.bytes_before is not None
                assert done.bytes_after <= done.bytes_before
        # Each kept session resumes and writes; the kept rewind still undoes.
        again = writer.open("kept-rewound")
        again.transcript.undo_rewind()
        assert [m.text for m in again.history()][-1] == "kept a2"
        resumed = writer.open(fork.id)
        resumed.inject({"role": "user", "content": "after retention"})
        assert resumed.history()[0].text == "parent q0"
        assert store.integrity_check() == []
        # The fork's checkpoint stays whole; the parent's own went (its blob and tree).
        assert checkpoints_of(store).reachable([shared])
        assert done.checkpoint_objects == plan.checkpoint_objects == 2

    def test_a_session_in_use_is_kept_and_named(self, writer: Client, tmp_path: Path) -> None:
        """A run in progress, or a writer holding the lock, keeps an idle session."""
        store = writer.store
        held = writer.open("held")
        self._talk(held, 1, "held")
        running = writer.open("running")
        self._talk(running, 1, "running")
        free = writer.open("free")
        self._talk(free, 1, "free")
        time.sleep(_PAUSE)
        other = Client(tmp_path, store=store)  # writer_lock="process": holds what it takes
        try:
            other.open("held").live.acquire()
            registered = False
            if isinstance(store, RunRegistry):
                store.run_begin("run-1", "running", "replica-1", {})
                registered = True
            done = writer.sessions.retain(IDLE, all_workspaces=True)
        finally:
            other.close()
        assert "held" in done.skipped and "held" not in done.sessions
        assert "free" in done.sessions
        if registered:
            assert "running" in done.skipped and writer.exists("running")
        assert writer.exists("held") and not writer.exists("free")

    def test_two_retentions_at_once_remove_each_session_once(
        self, writer: Client, tmp_path: Path
    ) -> None:
        """As two servers on one store would: no error, nothing removed twice, all removed."""
        for i in range(8):
            self._talk(writer.open(f"old-{i}"), 2, f"old {i}")
        keep = writer.open("keep")
        self._talk(keep, 1, "keep")
        time.sleep(_PAUSE)
        keep.inject({"role": "user", "content": "still here"})
        results: list[Retained] = []
        errors: list[BaseException] = []

        def one() -> None:
            mine = Client(tmp_path, store=writer.store, writer_lock="write", lock_timeout=0)
            try:
                results.append(mine.sessions.retain(IDLE, all_workspaces=True))
            except BaseException as exc:  # reported by the assert below
                errors.append(exc)
            finally:
                mine.close()

        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        removed = [sid for r in results for sid in r.sessions]
        assert sorted(removed) == sorted(f"old-{i}" for i in range(8))  # each once
        assert [i.id for i in writer.sessions.list()] == ["keep"]
        assert writer.store.integrity_check() == []

    @pytest.mark.parametrize("bad", ["banana", "-5d", "0s", -1, 0, "5 parsecs", True, None])
    def test_a_bad_age_is_refused_before_anything(self, writer: Client, bad: object) -> None:
        """Not a positive duration: InvalidArgumentError, nothing removed."""
        s = writer.open("stays")
        self._talk(s, 1, "x")
        with pytest.raises(InvalidArgumentError):
            writer.sessions.retain(bad, all_workspaces=True)  # type: ignore[arg-type]
        assert writer.exists("stays")
