"""What the LangGraph saver removes, and what it frees (D341, D342).

:class:`Retention` is the saver's half that rewrites and deletes threads:
``delete_thread``, ``prune``, ``delete_for_runs``, ``copy_thread``, and the
collection of channel values (objects of the store's object space) that no live
record holds any more. A mixin of the saver, over :class:`ThreadSpace`.

A rewrite moves a namespace's session to new heads holding only the kept
checkpoints, then erases the old heads. The last move names the heads it replaces
in the new head's metadata (:data:`DROP`), in the same transaction: from that
commit on no saver reads them, so a process killed before the erase leaves a
thread that reads as pruned, and the next write, prune or delete erases them.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Final

from plait.errors import InvalidArgumentError, PlaitError, SessionNotFoundError
from plait.integrations._langgraph_records import (
    DROP,
    MARK,
    Branches,
    Thread,
    kept_records,
)
from plait.integrations._langgraph_space import ThreadSpace
from plait.layout import branch
from plait.session.checkpoints import collect_objects, held_by

__all__ = ["Retention"]

_OPERATOR: Final = "langgraph"


class Retention(ThreadSpace):
    """Deleting, pruning and copying threads, and freeing their channel values."""

    _object_grace: float
    _lock: threading.RLock  # the saver's: one call at a time

    def _held_by_heads(self, ids: Sequence[str]) -> set[str]:
        """The objects the records of these sessions (heads) hold."""
        store = self._client.store
        found: set[str] = set()
        for session_id in ids:
            row = store.get(session_id)
            if row is not None:
                for record in store.read(row, 0, row.layout.end_seq):
                    found.update(held_by(record))
        return found

    def _collect(self, candidates: set[str]) -> None:
        """Delete those of ``candidates`` no live record holds (used within the grace: kept)."""
        if candidates:
            collect_objects(self._client.store, candidates, grace=self._object_grace)

    def _erase_heads(self, ids: Sequence[str]) -> set[str]:
        """Erase these hidden heads; the objects their records held (to collect)."""
        held = self._held_by_heads(ids)
        self._hidden.clear()  # the hidden heads of some session change
        for hidden in ids:
            with contextlib.suppress(PlaitError):  # gone already: a crash came after it
                self._client.store.erase(hidden)
            self._cache.pop(hidden, None)
        return held

    def _finish_rewrite(self, session_id: str, space: Branches) -> None:
        """Erase the heads a rewrite dropped but a crash left (the caller holds the lock)."""
        if space.leftover:
            self._collect(self._erase_heads(space.leftover))
            space.leftover = []

    def delete_thread(self, thread_id: str) -> None:
        """Erase every session of the thread (its namespaces', with their branches).

        plait's erase keeps the records a copied thread still shares; the channel
        values no other thread holds go from the object space (D342).
        """
        with self._lock:
            candidates: set[str] = set()
            for ns, session_id in self._sessions(thread_id).items():
                space = self._read(thread_id, ns)
                heads = [h.row.id for h in space.heads] if space is not None else [session_id]
                candidates |= self._held_by_heads([*heads, *(space.leftover if space else ())])
                with contextlib.suppress(SessionNotFoundError):
                    self._client.sessions.erase(session_id)
                for head in heads:
                    self._cache.pop(head, None)
            self._collect(candidates)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove the checkpoints whose metadata names one of ``run_ids``, with their writes.

        Every thread of the store is looked at (LangGraph's savers do the same); a
        namespace that keeps nothing is erased, one that keeps some is rewritten (see
        :meth:`prune`).
        """
        runs = set(run_ids)
        if not runs:
            return
        with self._lock:
            candidates: set[str] = set()
            for thread_id in self._threads():
                for ns in self._sessions(thread_id):
                    space = self._read(thread_id, ns)
                    if space is None:
                        continue
                    keep = {
                        cid
                        for cid, data in space.checkpoints.items()
                        if self._load(data["metadata"]).get("run_id") not in runs
                    }
                    candidates |= self._keep_only(thread_id, ns, keep)
            self._collect(candidates)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only each namespace's newest checkpoint (``keep_latest``) or none (``delete``).

        A namespace is rewritten: its session's id moves to a new head holding the
        kept checkpoint, its writes, the values it names and the messages it holds
        (the same records, copied once), the old heads (the branches time travel
        left too) are erased, and the channel values no live record holds any more
        leave the object space.

        Raises:
            InvalidArgumentError: an unknown strategy.
        """
        if strategy not in ("keep_latest", "delete"):
            raise InvalidArgumentError(f"unknown prune strategy {strategy!r}")
        with self._lock:
            candidates: set[str] = set()
            for thread_id in thread_ids:
                if strategy == "delete":
                    self.delete_thread(thread_id)
                    continue
                for ns in self._sessions(thread_id):
                    space = self._read(thread_id, ns)
                    if space is not None and space.checkpoints:
                        keep = {max(space.checkpoints)}
                        candidates |= self._keep_only(thread_id, ns, keep)
            self._collect(candidates)

    def _keep_only(self, thread_id: str, ns: str, keep: set[str]) -> set[str]:
        """Rewrite a namespace's session to hold only the checkpoints ``keep``.

        Returns:
            The objects the records it removed held (candidates for collection).
        """
        session_id = self._session_id(thread_id, ns)
        with self._client.host.locked(session_id):
            space = self._read(thread_id, ns)
            if space is None:
                return set()
            freed = self._erase_heads(space.leftover)
            space.leftover = []
            if keep >= set(space.checkpoints):
                return freed  # nothing of it goes (its branches stay branches)
            heads = [h.row.id for h in space.heads]
            freed |= self._held_by_heads(heads)
            if not keep & set(space.checkpoints):
                self._client.sessions.erase(session_id)
                for head in heads:
                    self._cache.pop(head, None)
                return freed
            self._rewrite(session_id, space, keep)
            return freed

    def _rewrite(self, session_id: str, space: Branches, keep: set[str]) -> None:
        """Move the session to new heads holding ``keep``, then erase the old heads.

        One new head per old head that holds a kept checkpoint, so branches stay
        branches; the one the id ends on holds the newest kept checkpoint of the
        current branch (else the newest kept one). Each move is a transaction; the
        old heads stay readable until the last, which drops them all (D341).
        """
        groups: dict[int, tuple[Thread, dict[str, Any]]] = {}
        for cid in sorted(keep & set(space.checkpoints)):
            home = space.home[cid]
            versions = self._load(space.checkpoints[cid]["checkpoint"])["channel_versions"]
            groups.setdefault(id(home), (home, {}))[1][cid] = versions
        order = sorted(groups.values(), key=lambda g: (g[0] is space.current, max(g[1])))
        store = self._client.store
        old_current = f"{_OPERATOR}-old-{uuid.uuid4().hex}"
        dropped = [old_current, *(h.row.id for h in space.heads[1:])]
        for n, (home, versions) in enumerate(order):
            row = store.get(session_id)
            assert row is not None
            records = kept_records(store.read(home.row, 0, home.row.layout.end_seq), home, versions)
            messages = sum(r.kind != "event" for r in records)
            layout = branch(home.row.layout, home.row.pk, 0, 0).appended(len(records), messages)
            metadata = dict(row.metadata)
            last = n == len(order) - 1
            if last:
                metadata[DROP] = dropped
            hidden = old_current if n == 0 else f"{_OPERATOR}-branch-{uuid.uuid4().hex}"
            head = replace(row, pk=0, layout=layout, metadata=metadata)
            store.move_head(row, head, hidden, records)
            self._moved(session_id, last)
        for head_id in [session_id, *dropped]:
            self._cache.pop(head_id, None)
        self._erase_heads(dropped)

    def _moved(self, session_id: str, last: bool) -> None:
        """A seam after each move of a rewrite, before the old heads are erased.

        Nothing to do here: a test stops its process at it, to show that a crash
        between the swap and the erase leaves a thread that reads as rewritten.
        """

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread, every checkpoint and write, as plait forks of its sessions.

        Each namespace's session is forked (one new row that shares its records:
        the cost does not grow with the thread), then marked as the target's; each
        branch time travel left on the source (a hidden head) becomes a hidden head
        of the copy, one row each, sharing its records too (D340). A source with no
        checkpoint copies nothing.

        Raises:
            SessionExistsError: the target thread has a session already.
            InvalidArgumentError: a target id plait cannot use as a session id.
        """
        with self._lock:
            for ns, session_id in sorted(self._sessions(source_thread_id).items()):
                space = self._read(source_thread_id, ns)
                target = self._session_id(target_thread_id, ns)
                fork = self._client.host.get(session_id).fork(target)
                fork.settings.set_metadata(MARK, {"thread": target_thread_id, "ns": ns})
                if DROP in fork.settings.metadata:
                    fork.settings.set_metadata(DROP, None)
                if space is not None and len(space.heads) > 1:
                    self._copy_branches(target, space.heads[1:])

    def _copy_branches(self, target: str, heads: Sequence[Thread]) -> None:
        """Give the session ``target`` a hidden head sharing each of ``heads``' records.

        Only a move of the id hides a head: the id moves onto a copy of each branch
        in turn, then back to the row it had (an undo), leaving the copies hidden.
        """
        store = self._client.store
        own = f"{_OPERATOR}-branch-{uuid.uuid4().hex}"
        for n, head in enumerate(heads):
            row = store.get(target)
            assert row is not None
            end = head.row.layout
            layout = branch(end, head.row.pk, end.end_seq, end.end_msgs)
            hidden = own if n == 0 else f"{_OPERATOR}-branch-{uuid.uuid4().hex}"
            store.move_head(row, replace(row, pk=0, layout=layout), hidden, [])
        row, back = store.get(target), store.get(own)
        assert row is not None and back is not None
        store.move_head(row, back, f"{_OPERATOR}-branch-{uuid.uuid4().hex}", [])

    @contextlib.contextmanager
    def turn(self, thread_id: str) -> Iterator[None]:
        """Hold the thread's writer lock for a whole run: other processes wait their turn.

        A saver refuses the checkpoint of a run that another run continued first
        (:class:`~plait.errors.ThreadConflictError`); a run inside ``turn`` instead
        waits, before it reads the thread, until the run of another process ends
        (up to the client's ``lock_timeout``, with ``writer_lock="write"``, the
        saver's own), then continues from that run's last checkpoint::

            with saver.turn("t1"):
                graph.invoke(inputs, {"configurable": {"thread_id": "t1"}})

        Raises:
            SessionLockTimeoutError: another process held the thread the whole
                ``lock_timeout`` (SessionLockedError with a client in ``process``
                mode that another process holds).
            InvalidArgumentError: a thread id plait cannot use as a session id.
        """
        with self._client.host.locked(self._session_id(thread_id, "")):
            yield
