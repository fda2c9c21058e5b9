"""Retention: remove the sessions idle for longer than asked, and give their space back.

A session is idle since its last write: the later of its row's ``updated_at`` and its
newest record (the store's :meth:`~plait.store.RetentionStore.idle_sessions`). Each idle
session is removed by the store's own ``erase`` (D117), under its writer lock, after its
idleness is read again under that lock, so a session written meanwhile stays. A session
with a run in progress, or whose writer lock another process (or another client of this
one) holds, is kept and named as skipped. Erase keeps what a kept session reads: a kept fork
keeps its shared prefix whole, a kept session's hidden heads stay, so every kept session
still resumes (D310).

The workspace checkpoints the removed sessions' tool calls saved go with them, as far as
no kept session needs them; then the store gives the freed space back
(:meth:`~plait.store.RetentionStore.reclaim`: SQLite's incremental vacuum, PostgreSQL's
``VACUUM``; D311, D312). Running it twice at once (two servers on one store) is harmless:
each removal takes the session's writer lock, and a session already gone is passed over
(D313).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal, NamedTuple

from plait._checks import MAX_INT
from plait._time import now_micros
from plait.errors import (
    InvalidArgumentError,
    SessionLockedError,
    SessionNotFoundError,
    StoreCorruptError,
    StorePartMissingError,
    shown,
)
from plait.records import JSONValue
from plait.session import _turns, checkpoints
from plait.session.host import SessionHost
from plait.store import RetentionStore, RunRegistry, Store
from plait.store.base import HIDDEN_OPERATOR, SessionRow

__all__ = ["Retained", "parse_age", "retain"]

_AGE: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.ASCII)
_UNIT: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_AGE: Final = timedelta(days=100 * 366)
_RUNNING: Final = "running"


def parse_age(value: object, name: str = "older_than") -> timedelta:
    """A positive duration: a ``timedelta``, seconds, or text such as ``30d`` or ``1d12h``.

    Text is a number and a unit (``s``, ``m``, ``h``, ``d``, ``w``), several added up.

    Raises:
        InvalidArgumentError: anything else (zero, negative, unknown units, not a duration).
    """
    hint = "a duration such as 30d, 12h, 90m, 45s or 2w"
    age: timedelta | None = None
    if isinstance(value, timedelta):
        age = value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if value == value and abs(value) < _MAX_AGE.total_seconds():  # not NaN, not huge
            age = timedelta(seconds=value)
    elif isinstance(value, str):
        text = value.strip().lower()
        parts = _AGE.findall(text)
        if parts and _AGE.sub("", text).strip() == "":
            seconds = sum(float(n) * _UNIT[unit] for n, unit in parts)
            age = timedelta(seconds=seconds) if seconds < _MAX_AGE.total_seconds() else _MAX_AGE
        elif text.startswith("-"):
            raise InvalidArgumentError(f"{name} must be positive, not {shown(value)} ({hint})")
    if age is None:
        raise InvalidArgumentError(f"{name} is {hint}, not {shown(value)}")
    if age <= timedelta(0):
        raise InvalidArgumentError(f"{name} must be positive, not {shown(value)} ({hint})")
    if age > _MAX_AGE:
        raise InvalidArgumentError(f"{name} is at most 100 years, not {shown(value)}")
    return age


@dataclass(frozen=True, slots=True)
class Retained:
    """What a retention removed (or, in a dry run, would remove) and the space given back."""

    older_than: timedelta
    """How long a session had to be idle to go."""
    cutoff: datetime
    """Sessions whose last write is before this (UTC) were idle."""
    sessions: tuple[str, ...]
    """The ids of the sessions removed, least recently written first."""
    hidden_heads: int
    """What their rewinds had left (hidden heads), removed with them."""
    records: int
    """Records deleted: what the removed sessions wrote that no kept session reads, and the
    records of deleted sessions that nothing reads any more."""
    record_bytes: int
    """The bytes of those records' text (payload and metadata)."""
    checkpoint_objects: int
    """Workspace checkpoint objects (blobs and trees) only the removed sessions needed."""
    skipped: tuple[str, ...]
    """Idle sessions kept because a run was in progress or a writer held their lock."""
    bytes_before: int | None
    """The store's size before (SQLite: its file; PostgreSQL: its tables); None when the
    store does not say."""
    bytes_after: int | None
    """The store's size after giving space back (the same as before in a dry run)."""
    free_bytes: int | None
    """Space left free inside the store for later writes (SQLite's free pages); None
    where the engine does not say (PostgreSQL, whose ``VACUUM`` makes the deleted rows'
    space reusable without saying how much)."""
    reclaimed: str
    """How the space was given back: ``incremental vacuum``, ``vacuum``, ``vacuum full``,
    ``free pages kept for reuse`` (an older SQLite file), or ``nothing`` (a dry run, or
    nothing removed)."""
    dry_run: bool
    """Whether nothing was changed."""

    @property
    def bytes_freed(self) -> int:
        """How much smaller the store is (0 in a dry run or when it does not say)."""
        if self.bytes_before is None or self.bytes_after is None:
            return 0
        return max(0, self.bytes_before - self.bytes_after)

    def to_dict(self) -> dict[str, JSONValue]:
        """The report as JSON values (``plait db retain --json``)."""
        return {
            "older_than_seconds": self.older_than.total_seconds(),
            "cutoff": self.cutoff.isoformat(),
            "dry_run": self.dry_run,
            "sessions": list(self.sessions),
            "hidden_heads": self.hidden_heads,
            "records": self.records,
            "record_bytes": self.record_bytes,
            "checkpoint_objects": self.checkpoint_objects,
            "skipped": list(self.skipped),
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "bytes_freed": self.bytes_freed,
            "free_bytes": self.free_bytes,
            "reclaimed": self.reclaimed,
        }


def retain(
    host: SessionHost,
    older_than: object,
    *,
    dry_run: bool = False,
    workspace: str | None = None,
    vacuum: bool = False,
    checkpoint_grace: float = checkpoints.PRUNE_GRACE,
    spare: Callable[[SessionRow], bool] | None = None,
) -> Retained:
    """Remove the sessions of ``workspace`` (None: every one) idle for longer than asked.

    Args:
        host: whose store, locks and runs to respect.
        older_than: see :func:`parse_age`.
        dry_run: report what would go; change nothing.
        workspace: the workspace path, or None for the whole store.
        vacuum: where only a rewrite gives space back (SQLite without incremental vacuum,
            PostgreSQL's ``VACUUM FULL``), do it.
        checkpoint_grace: seconds: a checkpoint object used more recently stays (a
            tool call in flight may need it before its record names it).
        spare: idle sessions this returns True for are kept, unreported.

    Raises:
        InvalidArgumentError: a bad ``older_than``, ``dry_run``, ``vacuum`` or
            ``checkpoint_grace``.
    """
    age = parse_age(older_than)
    grace = checkpoint_grace
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace < 1e12:
        raise InvalidArgumentError(f"checkpoint_grace is seconds >= 0, not {shown(grace)}")
    for name, flag in (("dry_run", dry_run), ("vacuum", vacuum)):
        if not isinstance(flag, bool):
            raise InvalidArgumentError(f"{name} is True or False, not {shown(flag)}")
    store = host.store
    cutoff_us = now_micros() - int(age.total_seconds() * 1_000_000)
    planner = store if isinstance(store, RetentionStore) else None
    idle = [
        row
        for row in _idle(store, cutoff_us, workspace)
        if spare is None or not spare(row)
    ]
    busy = [row.id for row in idle if _busy(host, row.id)]
    chosen = [row for row in idle if row.id not in set(busy)]
    gone_ids = [row.id for row in chosen]
    # Measuring counts every row: a pass with nothing to do (most of a server's) skips it.
    measure = planner is not None and bool(chosen or vacuum or dry_run)
    before = planner.footprint() if planner is not None and measure else None
    cutoff = datetime.fromtimestamp(cutoff_us / 1_000_000, UTC)
    if dry_run:
        plan = planner.erase_plan(gone_ids) if planner is not None else None
        removed = set(gone_ids) | _hidden(store, gone_ids)
        refs = checkpoints.references(store) if gone_ids else {}
        gone = {c for c, by in refs.items() if by <= removed}
        keep = set(refs) - gone
        objects = checkpoints.forget(store, gone, keep, grace=grace, dry_run=True)
        return Retained(
            age,
            cutoff,
            tuple(gone_ids),
            plan.hidden_heads if plan is not None else len(removed) - len(gone_ids),
            plan.records if plan is not None else 0,
            plan.record_bytes if plan is not None else 0,
            objects,
            tuple(busy),
            before.bytes if before is not None else None,
            before.bytes if before is not None else None,
            before.free_bytes if before is not None else None,
            "nothing",
            True,
        )
    removed_ids: list[str] = []
    heads = records = octets = 0
    saved: set[str] = set()
    for row in chosen:
        done = _remove(host, row.id, cutoff_us, planner)
        if done == "busy":
            busy.append(row.id)
        elif isinstance(done, _Removed):
            removed_ids.append(row.id)
            heads += done.hidden_heads
            records += done.records
            octets += done.record_bytes
            saved |= done.checkpoints
    # One found held may have been held by another pass that removed it (two servers on
    # one store): it is not in use any more, only gone.
    busy = [session_id for session_id in busy if store.get(session_id) is not None]
    objects = 0
    if saved:
        objects = checkpoints.forget(store, saved, checkpoints.referenced(store), grace=grace)
    reclaimed = "nothing"
    after = before
    if planner is not None and before is not None and (removed_ids or vacuum):
        reclaimed = planner.reclaim(full=vacuum)
        after = planner.footprint()
    return Retained(
        age,
        cutoff,
        tuple(removed_ids),
        heads,
        records,
        octets,
        objects,
        tuple(busy),
        before.bytes if before is not None else None,
        after.bytes if after is not None else None,
        after.free_bytes if after is not None else None,
        reclaimed,
        False,
    )


def _idle(store: Store, cutoff_us: int, workspace: str | None) -> list[SessionRow]:
    if isinstance(store, RetentionStore):
        return store.idle_sessions(cutoff_us, workspace, MAX_INT)
    # A store without the verb: its listing, every row of it (recent() shows the last
    # write, the row's or its newest record's, as idle_sessions does).
    rows = store.recent(workspace, sys.maxsize)
    return sorted((r for r in rows if r.updated_at_us < cutoff_us), key=lambda r: r.updated_at_us)


def _busy(host: SessionHost, session_id: str, *, taken: int = 0) -> bool:
    """Whether a run is in progress on the session, or another writer holds its lock.

    ``taken``: holds of the lock the caller itself took. This host's own hold (a
    session it wrote and has not released) is no other writer: ``erase`` removes such a
    session too, and so does a retention through this host once it is idle.
    """
    store = host.store
    own = taken + (1 if host.holds_lock(session_id) else 0)
    if _turns.held(store, session_id) > own or _running(host, session_id):
        return True
    if taken:
        return False
    try:
        return store.locked_elsewhere(session_id)
    except StorePartMissingError:
        return False  # no writer locks: no other writer can be seen, the compare-and-set guards


def _running(host: SessionHost, session_id: str) -> bool:
    """Whether a run is in progress on the session: this host's, or any the store knows."""
    if host.runs.running(session_id):
        return True
    store = host.store
    if isinstance(store, RunRegistry):
        run = store.run_of(session_id)
        return run is not None and run.state == _RUNNING
    return False


def _hidden(store: Store, ids: Iterable[str]) -> set[str]:
    """The hidden heads of the sessions ``ids`` (theirs too): what an erase takes with them."""
    found: set[str] = set()
    todo = list(ids)
    while todo:
        for child in store.children(todo.pop()):
            if child in found:
                continue
            row = store.get(child)
            if row is not None and row.lineage_operator == HIDDEN_OPERATOR:
                found.add(child)
                todo.append(child)
    return found


class _Removed(NamedTuple):
    hidden_heads: int
    records: int
    record_bytes: int
    checkpoints: set[str]
    """The checkpoint ids the session and its hidden heads named."""


def _remove(
    host: SessionHost, session_id: str, cutoff_us: int, planner: RetentionStore | None
) -> _Removed | Literal["busy", "gone"]:
    """Erase one idle session under its writer lock.

    Returns what went; ``busy`` when a run or another writer holds it; ``gone`` when it
    was erased meanwhile (another retention) or written since it was listed.
    """
    store = host.store
    try:
        with host.locked(session_id):
            row = store.get(session_id)
            if row is None or row.updated_at_us >= cutoff_us:
                return "gone"  # erased by another retention, or written since it was listed
            if _busy(host, session_id, taken=1):
                return "busy"  # a writer of this process took it since it was listed
            heads = _hidden(store, [session_id])
            saved = checkpoints.ids_in(store.read(row, 0, row.layout.end_seq))
            for hidden_id in heads:
                hidden = store.get(hidden_id)
                if hidden is not None:
                    saved |= checkpoints.ids_in(store.read(hidden, 0, hidden.layout.end_seq))
            plan = planner.erase_plan([session_id]) if planner is not None else None
            store.erase(session_id)
    except SessionLockedError:
        return "busy"
    except SessionNotFoundError:
        return "gone"
    except StoreCorruptError:
        # Erased by another pass of this process while this one read it (its writer
        # lock is the process's, so both may hold it): on an encrypted store its rows
        # then read as sealed under a key that is gone.
        if store.get(session_id) is None:
            return "gone"
        raise
    host.forget(session_id)
    if plan is None:
        return _Removed(len(heads), 0, 0, saved)
    return _Removed(plan.hidden_heads, plan.records, plan.record_bytes, saved)
