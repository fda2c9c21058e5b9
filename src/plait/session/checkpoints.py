"""Workspace checkpoints tied to the transcript: the files as they were at each message.

Before and after each tool call that may change files (any tool not marked
``read_only``), the session's workspace is checkpointed (:class:`plait.sandbox.CheckpointStore`:
content-addressed, so an unchanged tree costs its 64-character id), and both ids are kept
in the tool record's ``meta["workspace"]``. The files at message ``n`` are then the
``after`` of the newest such record at or before ``n`` or, when the first one comes later,
its ``before``. The checkpoints live beside a SQLite store's file, in a temporary folder
for an in-memory store, and in the store's own object space for any other store that
offers one (:class:`~plait.store.ObjectStore`: PostgreSQL's tables), so another machine
on the same store can restore them (D147); only the stat cache, which is this machine's,
stays under ``$PLAIT_HOME``. A store with no object space keeps them there too (D114).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from plait.errors import InvalidArgumentError, NothingToDoError
from plait.records import EventRecord, JSONValue, Record, ToolRecord
from plait.sandbox import CheckpointStore, FileChange
from plait.session._objects import StoreObjects
from plait.session._part import head_of
from plait.session._values import check_count
from plait.store import ObjectStore, Store, default_path
from plait.store.base import HIDDEN_OPERATOR

if TYPE_CHECKING:
    from plait.session._head import Head
    from plait.session.session import Session

__all__ = [
    "HELD",
    "PRUNE_GRACE",
    "SAVED",
    "Pruned",
    "StoreObjects",
    "checkpoint_at",
    "checkpoints_of",
    "collect_objects",
    "diff_files",
    "forget",
    "ids_in",
    "held_by",
    "held_objects",
    "meta",
    "prune",
    "referenced",
    "references",
    "take",
    "unheld",
    "unheld_ids",
    "restore",
    "rewind_with_files",
    "undo_rewind_with_files",
]

HELD = "objects"
"""The key of a record's list of the objects it holds in the store's object space.

An event's ``data[HELD]`` or another record's ``meta[HELD]``: 64-hex digests that
:func:`prune` (``plait db prune-checkpoints``) and :func:`collect_objects` keep
while a live session or hidden head holds the record.
"""

SAVED = "workspace_checkpoint"
"""The event that records the workspace as it was then: ``{"after": id, "reason": ...}``."""

PRUNE_GRACE = 3600.0
"""Seconds: objects used more recently than this are never pruned (a tool call in flight)."""

_lock = threading.Lock()
_stores: weakref.WeakKeyDictionary[Store, CheckpointStore] = weakref.WeakKeyDictionary()


def checkpoints_of(store: Store) -> CheckpointStore:
    """The checkpoint store of ``store`` (one per store, made on first use)."""
    with _lock:
        found = _stores.get(store)
        if found is not None:
            return found
        location = store.location
        if location and location != ":memory:" and os.path.isfile(location):
            found = CheckpointStore.beside(location)
        elif location == ":memory:" or not location:
            folder = tempfile.mkdtemp(prefix="plait-checkpoints-")
            found = CheckpointStore(folder)
            # An in-memory store's checkpoints go with it, like its records.
            weakref.finalize(store, shutil.rmtree, folder, True)
        else:
            digest = hashlib.sha256(location.encode()).hexdigest()[:16]
            local = default_path().parent / "checkpoints" / digest
            space = StoreObjects(store) if isinstance(store, ObjectStore) else None
            found = CheckpointStore(local, objects=space)
        _stores[store] = found
        return found


def take(head: Head, folder: Path) -> str | None:
    """Checkpoint ``folder`` now; None when the session keeps no checkpoints."""
    if head.settings().get("workspace_checkpoints") is False:
        return None
    return checkpoints_of(head.store).checkpoint(folder)


def _ids(record: Record) -> tuple[str | None, str | None]:
    if isinstance(record, EventRecord):
        if record.name != SAVED:
            return None, None
        after = record.data.get("after")
        return None, after if isinstance(after, str) else None
    if not isinstance(record, ToolRecord):
        return None, None
    found = record.meta.get("workspace")
    if not isinstance(found, Mapping):
        return None, None
    before, after = found.get("before"), found.get("after")
    return (before if isinstance(before, str) else None, after if isinstance(after, str) else None)


def ids_in(records: Iterable[Record]) -> set[str]:
    """The checkpoint ids the records name (a tool call's before and after, a saved workspace)."""
    found: set[str] = set()
    for record in records:
        for checkpoint_id in _ids(record):
            if checkpoint_id is not None:
                found.add(checkpoint_id)
    return found


def forget(
    store: Store,
    gone: Collection[str],
    keep: Collection[str],
    *,
    grace: float = PRUNE_GRACE,
    dry_run: bool = False,
) -> int:
    """Remove the objects of the checkpoints ``gone`` that no checkpoint in ``keep`` needs.

    What a removed session's tool calls saved goes with it; an object no checkpoint names
    (another user of the store's object space keeps its own) is never looked at, and one
    used within ``grace`` seconds stays. Returns how many objects went (or would).
    """
    if not gone:
        return 0
    space = checkpoints_of(store)
    # In a store's own object space, what records hold (HELD) may equal a gone blob.
    also = held_objects(store) if _shares(space, store) else set()
    return space.forget(gone, keep, grace=grace, dry_run=dry_run, also=also)


def checkpoint_at(records: Sequence[Record], messages: int) -> str:
    """The checkpoint of the files as they were after the first ``messages`` messages.

    Args:
        records: the records in view, in order (events are not messages).
        messages: how many messages to count, as ``fork_at`` counts them.

    Raises:
        NothingToDoError: no tool call of the transcript recorded its workspace.
    """
    last_after: str | None = None
    first_later: str | None = None
    index = 0
    for record in records:
        if record.kind == "event":
            # A saved workspace (a rewind's) is the files as they were after the
            # messages before it.
            saved = _ids(record)[1]
            if saved is not None and index <= messages:
                last_after = saved
            continue
        before, after = _ids(record)
        if index < messages:
            last_after = after or last_after
        elif first_later is None and before is not None:
            first_later = before
        index += 1
    found = last_after or first_later
    if found is None:
        raise NothingToDoError("no tool call of this session recorded its workspace")
    return found


def restore(head: Head, records: Sequence[Record], at: int, folder: Path) -> str:
    """Make ``folder`` hold the files as they were at message ``at``; returns the checkpoint."""
    checkpoint = checkpoint_at(records, at)
    checkpoints_of(head.store).restore(folder, checkpoint)
    return checkpoint


def diff_files(head: Head, records: Sequence[Record], a: int, b: int) -> tuple[FileChange, ...]:
    """What changed on disk between message ``a`` and message ``b``."""
    if a < 0 or b < 0:
        raise InvalidArgumentError("message positions must be >= 0")
    count = sum(1 for r in records if r.kind != "event")
    for name, at in (("a", a), ("b", b)):
        if at > count:  # no message there to have files after: not the last ones silently
            raise InvalidArgumentError(f"{name}={at} but the session has only {count} messages")
    store = checkpoints_of(head.store)
    return store.diff(checkpoint_at(records, a), checkpoint_at(records, b))


def meta(before: str | None, after: str | None) -> dict[str, JSONValue]:
    """The ``meta["workspace"]`` of a checkpointed tool call."""
    out: dict[str, JSONValue] = {}
    if before is not None:
        out["before"] = before
    if after is not None:
        out["after"] = after
    return out


@dataclass(frozen=True, slots=True)
class Pruned:
    """What pruning workspace checkpoints did (or, in a dry run, would do)."""

    referenced: int
    """Checkpoint ids still referenced by a tool record of a live session or branch."""
    removed: int
    """Objects (blobs and trees) removed, or that a dry run would remove."""
    dry_run: bool
    """Whether nothing was deleted."""
    unheld: int = 0
    """Referenced ids this store holds no checkpoint for (a bundle's from another store,
    or forged): ignored, since there is nothing of theirs to keep."""


def referenced(store: Store) -> set[str]:
    """Every checkpoint id a live session or hidden head references, in any workspace.

    Each session's whole layout is read, records hidden from its view included (an
    uncompact or a rewind's undo may show them again), so a checkpoint shared by
    forks is kept while any of them is.
    """
    return set(references(store))


def references(store: Store) -> dict[str, set[str]]:
    """Every checkpoint id a live session or hidden head references, and which sessions do.

    Read as :func:`referenced` reads them.
    """
    return _walk(store)[0]


def held_objects(store: Store) -> set[str]:
    """Every object of the store's object space a live session or hidden head holds.

    A record holds the objects its :data:`HELD` list names (an event's data, a
    message's meta): values kept beside the transcript, such as a LangGraph
    checkpoint's channel values. Read as :func:`referenced` reads the sessions.
    """
    return _walk(store)[1]


def held_by(record: Record) -> list[str]:
    """The objects ``record`` holds (its :data:`HELD` list; malformed entries left out)."""
    found = record.data.get(HELD) if isinstance(record, EventRecord) else record.meta.get(HELD)
    if not isinstance(found, list):
        return []
    return [d for d in found if isinstance(d, str) and _DIGEST.fullmatch(d)]


def _walk(store: Store) -> tuple[dict[str, set[str]], set[str]]:
    found: dict[str, set[str]] = {}
    held: set[str] = set()
    rows = store.recent(None, sys.maxsize)
    seen = {row.id for row in rows}
    while rows:
        row = rows.pop()
        for record in store.read(row, 0, row.layout.end_seq):
            before, after = _ids(record)
            for checkpoint_id in (before, after):
                if checkpoint_id is not None:
                    found.setdefault(checkpoint_id, set()).add(row.id)
            held.update(held_by(record))
        # A rewind's hidden heads are listed nowhere but the lineage; an undo brings
        # one back, with the files it names.
        for child in store.children(row.id):
            if child not in seen:
                hidden = store.get(child)
                if hidden is not None and hidden.lineage_operator == HIDDEN_OPERATOR:
                    seen.add(child)
                    rows.append(hidden)
    return found, held


def collect_objects(
    store: Store, candidates: Collection[str] | None, *, grace: float, dry_run: bool = False
) -> int:
    """Delete the objects of the store's own object space that no record holds.

    Only ``candidates`` are looked at (None: every object); one used within the
    last ``grace`` seconds stays (a writer may be about to name it), and so does
    one a workspace checkpoint kept in that space reaches. Returns how many went
    (or, in a dry run, would go); 0 for a store without an object space.
    """
    if not isinstance(store, ObjectStore):
        return 0
    pool = set(store.object_digests()) if candidates is None else set(candidates)
    if not pool:
        return 0
    refs, held = _walk(store)
    space = checkpoints_of(store)
    if _shares(space, store):
        ids = set(refs) - unheld_ids(space, set(refs))
        held |= space.reachable({i for i in ids if _whole(space, i)})
    if grace:
        held |= set(store.object_digests(int((time.time() - grace) * 1_000_000)))
    gone = sorted((pool & set(store.object_has(sorted(pool)))) - held)
    if gone and not dry_run:
        store.object_delete(gone)
    return len(gone)


def prune(store: Store, *, grace: float = PRUNE_GRACE, dry_run: bool = False) -> Pruned:
    """Remove the checkpoint objects no live session references (see :class:`Pruned`).

    Raises:
        InvalidArgumentError: ``grace`` is not a number of seconds >= 0.
    """
    if not isinstance(dry_run, bool):
        raise InvalidArgumentError(f"dry_run is True or False, not {dry_run!r}")
    refs, objects = _walk(store)
    keep = set(refs)
    space = checkpoints_of(store)
    held = keep - unheld_ids(space, keep)
    shared = _shares(space, store)
    also = objects if shared else set()  # others' objects in the same space stay
    try:
        removed = space.prune(held, grace=grace, dry_run=dry_run, also=also)
    except InvalidArgumentError:
        if not isinstance(grace, int | float) or isinstance(grace, bool) or grace < 0:
            raise
        # A held object named like a checkpoint that is not one whole (an id a bundle
        # brought that names one of this store's files): kept out, the rest pruned.
        held = {i for i in held if _whole(space, i)}
        removed = space.prune(held, grace=grace, dry_run=dry_run, also=also)
    if not shared and isinstance(store, ObjectStore):
        # Workspace checkpoints live in a folder here: the store's own object space
        # holds only what records hold (HELD), so what none holds goes.
        cutoff = int((time.time() - grace) * 1_000_000)
        recent = set(store.object_digests(cutoff)) if grace else set()
        gone = sorted(set(store.object_digests()) - objects - recent)
        if gone and not dry_run:
            store.object_delete(gone)
        removed += len(gone)
    return Pruned(len(keep), removed, dry_run, len(keep) - len(held))


_DIGEST = re.compile(r"[0-9a-f]{64}")


def _shares(space: CheckpointStore, store: object) -> bool:
    """Whether the workspace checkpoints are kept in ``store``'s own object space."""
    return isinstance(space.objects, StoreObjects) and space.objects.store is store


def unheld_ids(space: CheckpointStore, ids: Collection[str]) -> set[str]:
    """Which of ``ids`` name no object ``space`` holds (malformed ones included)."""
    wellformed = {i for i in ids if _DIGEST.fullmatch(i)}
    return (set(ids) - wellformed) | (space.objects.missing(wellformed) if wellformed else set())


def _whole(space: CheckpointStore, checkpoint_id: str) -> bool:
    try:
        space.require(checkpoint_id)
    except InvalidArgumentError:  # WorkspaceTooDeepError included: it is one
        return False
    return True


def unheld(store: Store) -> dict[str, set[str]]:
    """The checkpoint ids sessions reference that the store holds no object for, and by whom.

    A bundle carries its tool records' checkpoint ids; imported into another store (or
    forged) they name nothing here: a restore to them fails, pruning ignores them.
    """
    found = references(store)
    missing = unheld_ids(checkpoints_of(store), found)
    return {i: found[i] for i in sorted(missing)}


def _refuse_rewind(records: Sequence[Record], keep_first: int) -> None:
    """Refuse, before anything is written, a rewind the store would refuse."""
    messages = [i for i, r in enumerate(records) if r.kind != "event"]
    if keep_first > len(messages):
        raise InvalidArgumentError(
            f"cannot keep the first {keep_first} messages: the session has only {len(messages)}"
        )
    cut = messages[keep_first - 1] + 1 if keep_first else 0
    if cut >= len(records):
        raise NothingToDoError(f"nothing lies past message {keep_first}")


def rewind_with_files(
    session: Session,
    keep_first: int,
    expect_version: int | None,
    rewind: Callable[[int | None], str],
) -> str:
    """Rewind ``session`` and bring its workspace back to the files at message ``keep_first``.

    The files as they are now are checkpointed first and recorded in a
    ``workspace_checkpoint`` event at the old head, so the hidden head the rewind
    leaves holds them (an undo with files restores them, and pruning keeps them). The
    rewound session records the files it was given the same way.

    Args:
        session: the session to rewind.
        keep_first: the messages it keeps.
        expect_version: the caller's compare-and-set on the head, or None.
        rewind: moves the head (given the version to expect); returns the hidden head.

    Raises:
        NothingToDoError: no checkpoint tells the files at ``keep_first``, or nothing
            lies past it (nothing written).
        InvalidArgumentError: more messages than the session has, or the checkpoint
            lacks objects (nothing written).
    """
    check_count(keep_first, "keep_first")
    transcript = session.transcript
    records = transcript.records
    _refuse_rewind(records, keep_first)
    target = checkpoint_at(records, keep_first)
    space = checkpoints_of(head_of(session).store)
    space.require(target)
    folder = session.workspace.tool_context().root
    now = space.checkpoint(folder)
    transcript.log_event(SAVED, {"after": now, "reason": "rewind"}, expect_version=expect_version)
    hidden = rewind(session.live.version)
    space.restore(folder, target)
    transcript.log_event(SAVED, {"after": target, "reason": "rewound"})
    return hidden


def undo_rewind_with_files(
    session: Session,
    branch_id: str | None,
    expect_version: int | None,
    undo: Callable[[int | None], str],
) -> str:
    """Undo a rewind and bring back the files the restored head ends with.

    The files as they are now are recorded first (a ``workspace_checkpoint`` event on
    the head being replaced, which becomes a hidden head in turn), so what the rewound
    session did on disk can be brought back the same way and is kept by pruning.

    Raises:
        NothingToDoError: no rewind to undo, or the restored head tells no files.
        InvalidArgumentError: ``branch_id`` is not a hidden head, or its checkpoint lacks
            objects (nothing written in any of these cases).
    """
    heads = session.transcript.hidden_heads()
    if not heads:
        raise NothingToDoError(f"{session.id} has no rewind to undo")
    store = head_of(session).store
    chosen = heads[0] if branch_id is None else branch_id
    row = store.get(chosen) if chosen in heads else None
    if row is None:
        raise InvalidArgumentError(f"{chosen!r} is not a hidden head of {session.id}")
    hidden = store.read(row, row.layout.view_start, row.layout.end_seq)
    target = checkpoint_at(hidden, row.layout.length)
    space = checkpoints_of(store)
    space.require(target)
    folder = session.workspace.tool_context().root
    saved = space.checkpoint(folder)
    session.transcript.log_event(
        SAVED, {"after": saved, "reason": "undo_rewind"}, expect_version=expect_version
    )
    result = undo(session.live.version)
    space.restore(folder, target)
    return result
