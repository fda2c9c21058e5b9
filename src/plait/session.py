"""Session: the handle users hold on one stored conversation.

A handle keeps the session's id and the last row it read; every write is a
compare-and-set on the head that row describes, so two writers can never
interleave a transcript, and the first write takes the session's writer lock
for this process (another process then only reads it). Reads refresh the row
first (one point lookup), so a handle always shows what is stored, including
what another process wrote.

Methods that only touch the store are plain calls (principle 3); the ones that
will call a model or run a tool arrive with the runs issue and are ``async``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal, Unpack

from plait._files import export_target, write_atomically
from plait._ids import is_session_id, new_id
from plait._runtypes import (
    Approval,
    EventHook,
    Question,
    Run,
    RunEvent,
    RunOptions,
    RunResult,
    RunSpec,
    check_timeout,
)
from plait._time import from_micros, now_micros
from plait.compaction import (
    LLM_INSTRUCTIONS,
    Compaction,
    CompactionPlan,
    Summarize,
    parse_options,
    self_compaction_default,
)
from plait.compaction import compact as write_compaction
from plait.compaction import plan as plan_compaction
from plait.context import SUMMARY_UNKNOWN, ContextReport, ModelInfo, Tally
from plait.errors import (
    InvalidArgumentError,
    NoSandboxError,
    NothingToDoError,
    PlaitError,
    SandboxClosedError,
    SessionBusyError,
    SessionClosedError,
    SessionLockedError,
    SessionNotFoundError,
    StaleSessionError,
    StoreCorruptError,
    StoreError,
    UnknownOptionError,
)
from plait.layout import Layout, branch, find_message, shared_prefix
from plait.lineage import Ancestry, root_of
from plait.providers import Provider, Request, TextDelta, Usage, select_provider
from plait.records import (
    COMPACTION_UNDONE,
    AssistantRecord,
    EventRecord,
    JSONValue,
    Message,
    Record,
    SummaryRecord,
    dumps,
    newest_summary,
    record_from_message,
)
from plait.render import ExportPage, LineageBox, collect_lineage, render_html, render_markdown
from plait.sandbox import Sandbox, backend_named
from plait.store import Store
from plait.store._context import context_report, count_pending, tool_spec_texts
from plait.store.base import LiveClientRow, ScratchpadEntry, SessionRow
from plait.tools import BUILTIN_TOOLS, Tool
from plait.views import (
    ResumeInfo,
    full_history,
    history,
    model_messages,
    resume_info,
    system_prompt,
)

__all__ = [
    "MAX_TITLE",
    "ChunkTable",
    "RootResult",
    "ScratchpadUpdate",
    "Session",
    "SessionHost",
    "SessionUsage",
    "Snapshot",
    "register_runner",
]

MAX_TITLE: Final = 200
"""The longest title :meth:`Session.rename` accepts, in characters."""

_RETRIES: Final = 64  # each lost race means another writer progressed: lock-free, not a spin
_MOUNT_MODES: Final = ("read_only", "read_write")
_POLICY_KEYS: Final = frozenset({"default_mount_mode"})
# Settings a branch inherits from its source; close state and provenance are not inherited.
_SETTINGS: Final = "settings"


def _check_count(value: object, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidArgumentError(f"{name} must be >= 0, got {value}")
    return value


def _json_object(value: object, what: str) -> dict[str, JSONValue]:
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{what} must be a dict, not {type(value).__name__}")
    out = dict(value)
    dumps(out)
    return out


def _clean_title(title: object) -> str:
    """Collapse white space and trim; blank or over MAX_TITLE characters is an error."""
    if not isinstance(title, str):
        raise InvalidArgumentError(f"a title must be a string, not {type(title).__name__}")
    clean = " ".join(title.split())
    if not clean:
        raise InvalidArgumentError("a title cannot be blank")
    if len(clean) > MAX_TITLE:
        raise InvalidArgumentError(f"a title is at most {MAX_TITLE} characters ({len(clean)})")
    return clean


def _moved(p: int, shared: int, start: int, pos: int) -> int:
    """Where position ``p`` of a merged-in branch lands in the merged transcript.

    Positions in the shared prefix stay; the copied tail ``[start, ...)`` moves
    to ``pos``; a position in between (hidden in that branch) lands at ``pos``.
    """
    if p < shared:
        return p
    return p - start + pos if p >= start else pos


def validate_workspace_policy(policy: object) -> dict[str, JSONValue]:
    """Check a workspace policy ``{default_mount_mode}`` and return it as a dict.

    Raises:
        UnknownOptionError: a key other than ``default_mount_mode``.
        InvalidArgumentError: a mount mode other than ``read_only`` / ``read_write``.
    """
    out = _json_object(policy, "workspace_policy")
    unknown = set(out) - _POLICY_KEYS
    if unknown:
        raise UnknownOptionError("workspace_policy", list(unknown), list(_POLICY_KEYS))
    mode = out.get("default_mount_mode", "read_write")
    if mode not in _MOUNT_MODES:
        raise InvalidArgumentError(
            f"default_mount_mode must be one of {', '.join(_MOUNT_MODES)}, not {mode!r}"
        )
    return out


@dataclass(frozen=True, slots=True)
class RootResult:
    """What ``add_root`` and ``remove_root`` return: seed 003's ``{ok, mounted_at?, error?}``."""

    ok: bool
    """Whether the change was made."""
    mounted_at: str | None
    """Where the root is (or was) mounted."""
    error: str | None
    """Why not, when ``ok`` is False."""


@dataclass(frozen=True, slots=True)
class ScratchpadUpdate:
    """What ``set_scratchpad`` and ``clear_scratchpad`` return: ``{ok, version, scratchpad}``."""

    ok: bool
    """Whether the change was stored."""
    version: int
    """The scratchpad version after the change."""
    scratchpad: Mapping[str, JSONValue] | None
    """The scratchpad now stored (None after a clear)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A read-only picture of a session: its transcript plus seed 003's fields."""

    id: str
    title: str | None
    length: int
    """Messages in view (events not counted)."""
    created_at: datetime
    updated_at: datetime
    status: str
    system_prompt: str | None
    """The newest system prompt in view."""
    tool_format: str
    """How tools are presented to the model (``native`` unless set)."""
    actor_chain: Mapping[str, JSONValue] | None
    """The RFC 8693 actor chain (bound by the service layer; None until then)."""
    scratchpad: Mapping[str, JSONValue] | None
    scratchpad_version: int
    parent_id: str | None
    parent_session_ids: tuple[str, ...]
    child_ids: tuple[str, ...]
    lineage_operator: str | None
    branched_at_event_index: int | None
    """For a ``fork_at`` branch: how many messages it kept."""
    version: int
    """The head version (changes with every write)."""
    records: tuple[Record, ...]
    """Every record in view, events included."""
    metadata: Mapping[str, JSONValue] = field(default_factory=dict)
    live_clients: tuple[LiveClientRow, ...] = ()
    """The live clients attached (seed 003; see :mod:`plait.live`), in the order they attached."""
    live_controller_id: str | None = None
    """The attached controller's client id, or None."""


class ChunkTable:
    """Seed 000's name for the transcript: ``chunk_table.rows`` is every record in view."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def rows(self) -> list[Record]:
        """The records in view, oldest first; each has ``.kind`` and ``.payload``."""
        return self._session.records

    def __len__(self) -> int:
        return self._session.refresh()._require_row().layout.size

    def __repr__(self) -> str:
        return f"ChunkTable(session={self._session.id!r})"


class SessionHost:
    """Owns a store and the live handles on its sessions (one handle per id).

    :class:`plait.Client` is the host users make; a bare host serves the
    seed-000 constructors (``Session.from_user_message``) with an in-memory
    store when no client is given.

    Args:
        store: the store to keep sessions in.
        workspace: the absolute workspace path new sessions belong to.
    """

    def __init__(self, store: Store, workspace: str) -> None:
        self.store: Store = store
        self.workspace: str = workspace
        self._handles: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._current: Session | None = None
        self._handles_lock = threading.Lock()
        self._runs: dict[str, Run] = {}
        self._subscribers: dict[str, list[EventHook]] = {}
        self._hidden_system: dict[tuple[str, int], str | None] = {}
        self._locked: set[str] = set()  # ids whose writer lock a handle of this host took
        self._usage: OrderedDict[tuple[int, int], tuple[int, SessionUsage]] = OrderedDict()
        self.exclusive_runs: bool = False
        """True: one run at a time on this host (a :class:`plait.Client`, seed 001)."""

    def _handle(self, row: SessionRow) -> Session:
        """Return the one live handle for a stored row, creating it if needed."""
        with self._handles_lock:
            handle = self._handles.get(row.id)
            if handle is None:
                handle = Session(self, row.id, row)
                self._handles[row.id] = handle
            elif handle._row is None or handle._row.version < row.version:
                handle._row = row
            return handle

    def _pending(self, session_id: str | None = None) -> Session:
        """Return a handle on a session that is stored only when first written."""
        return Session(self, session_id or new_id(), None)

    def _adopt(self, handle: Session) -> None:
        with self._handles_lock:
            self._handles[handle.id] = handle

    def _create_with(
        self,
        messages: Iterable[Mapping[str, JSONValue]],
        *,
        session_id: str | None,
        title: str | None,
        operator: str | None,
        metadata: Mapping[str, JSONValue] | None,
    ) -> Session:
        """Create a stored session holding ``messages``, all or nothing."""
        if session_id is not None and not is_session_id(session_id):
            raise InvalidArgumentError(f"{session_id!r} is not a valid session id")
        if isinstance(messages, Mapping | str | bytes):
            raise InvalidArgumentError("messages must be a list of message dicts")
        records = [record_from_message(m, seq=i) for i, m in enumerate(messages)]
        meta = _json_object(metadata or {}, "metadata")
        clean_title = _clean_title(title) if title is not None else None
        msgs = sum(1 for r in records if r.kind != "event")
        row = SessionRow(
            id=session_id or new_id(),
            workspace=self.workspace,
            layout=Layout((), len(records), msgs, 0, 0),
            title=clean_title,
            lineage_operator=operator,
            metadata=meta,
        )
        return self._handle(self.store.create(row, records))

    def get(self, session_id: str) -> Session:
        """Return the handle on a stored session (one handle per id), without making it current.

        Raises:
            SessionNotFoundError: unknown, unreadable, or an id that would leave the store.
        """
        return self._handle(self._lookup(session_id))

    def release_idle(self) -> int:
        """Give up the writer locks of this host's sessions that have no run in progress.

        A server calls it after each write it serves, so a session is locked by a
        process only while that process runs it (D94).

        Returns:
            How many locks were given up.
        """
        with self._handles_lock:
            ids = [i for i in self._locked if i not in self._runs]
            handles = [self._handles.get(i) for i in ids]
        for session_id, handle in zip(ids, handles, strict=True):
            if handle is not None:
                handle.release()
            else:  # the handle that took it is gone; the lock is still this host's
                self._locked.discard(session_id)
                self.store.unlock(session_id)
        return len(ids)

    def _make_current(self, handle: Session) -> Session:
        self._current = handle
        return handle

    def _lookup(self, session_id: object) -> SessionRow:
        """Return the row of a live session, or raise SessionNotFoundError."""
        if not is_session_id(session_id):
            raise SessionNotFoundError(session_id, "not a valid session id")
        assert isinstance(session_id, str)
        try:
            row = self.store.get(session_id)
        except StoreCorruptError as exc:
            raise SessionNotFoundError(session_id, f"cannot be read: {exc}") from exc
        if row is None:
            raise SessionNotFoundError(session_id)
        return row


_default_lock = threading.Lock()
_default_host: SessionHost | None = None


def _ephemeral_host() -> SessionHost:
    """The process-wide in-memory host behind ``Session.from_*`` without a client."""
    global _default_host
    with _default_lock:
        if _default_host is None:
            from plait.store import MemoryStore

            _default_host = SessionHost(MemoryStore(), "")
        return _default_host


Build = Callable[[SessionRow], tuple[Sequence[Record], SessionRow | None, ScratchpadEntry | None]]
"""Given the head, return (records to append, the new row or None if only appending, pad)."""


class Session:
    """A handle on one session: its transcript, lineage, title and scratchpad.

    Get one from a :class:`plait.Client` (``client.session``,
    ``client.sessions.open(id)``, ``client.open(id)``) or from the seed-000
    constructors :meth:`from_agent_prompt` and :meth:`from_user_message`.
    Handles are cheap; a client hands out one handle per session id.
    """

    __slots__ = ("__weakref__", "_host", "_id", "_row", "_sandbox", "_writer")

    def __init__(self, host: SessionHost, session_id: str, row: SessionRow | None) -> None:
        self._host = host
        self._id = session_id
        self._row = row
        self._writer = False
        self._sandbox: Sandbox | None = None

    # -- seed 000 constructors ----------------------------------------------------------

    @classmethod
    def from_agent_prompt(cls, prompt: str, *, client: SessionHost | None = None) -> Session:
        """Create a stored session holding one ``system`` record.

        Args:
            prompt: the agent's system prompt.
            client: where to keep it; default: a process-wide in-memory store.

        Raises:
            InvalidMessageError: if ``prompt`` is not a string.
        """
        return cls._seeded({"role": "system", "content": prompt}, client)

    @classmethod
    def from_user_message(cls, message: str, *, client: SessionHost | None = None) -> Session:
        """Create a stored session holding one ``user`` record.

        Args:
            message: what the user said.
            client: where to keep it; default: a process-wide in-memory store.
        """
        return cls._seeded({"role": "user", "content": message}, client)

    @classmethod
    def _seeded(cls, message: Mapping[str, JSONValue], client: SessionHost | None) -> Session:
        if not isinstance(message.get("content"), str):
            raise InvalidArgumentError("the text must be a string")
        host = client if client is not None else _ephemeral_host()
        handle = host._pending()
        handle.inject(message)
        return handle

    # -- identity and state -----------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id (a UUIDv7 unless the caller chose one)."""
        return self._id

    @property
    def host(self) -> SessionHost:
        """The client (or bare host) this handle belongs to."""
        return self._host

    @property
    def store(self) -> Store:
        """The store the session lives in."""
        return self._host.store

    @property
    def path(self) -> str:
        """Where the session is stored: the database file, or ``:memory:``."""
        return self._host.store.location

    @property
    def stored(self) -> bool:
        """Whether the session has been written to the store (a new one is not, until used)."""
        return self._row is not None

    @property
    def current(self) -> bool:
        """Whether this is its client's current session."""
        return self._host._current is self

    @property
    def version(self) -> int:
        """The head version this handle last saw (0 if not stored)."""
        return self._row.version if self._row is not None else 0

    @property
    def title(self) -> str | None:
        """The stored title, or None."""
        return self._fresh().title if self._row is not None else None

    @property
    def status(self) -> str:
        """``open`` or ``closed``."""
        return self._fresh().status if self._row is not None else "open"

    @property
    def closed(self) -> bool:
        """Whether the session was closed with :meth:`close`."""
        return self.status == "closed"

    @property
    def workspace(self) -> str:
        """The workspace the session belongs to."""
        return self._row.workspace if self._row is not None else self._host.workspace

    @property
    def parent_session_ids(self) -> tuple[str, ...]:
        """The lineage parents: one for a fork, several for a merge, none for a root."""
        return self._row.parent_ids if self._row is not None else ()

    @property
    def lineage_operator(self) -> str | None:
        """How the session was made: ``Session.fork``, ``Session.detach``, ...; None for a root."""
        return self._row.lineage_operator if self._row is not None else None

    @property
    def branched_at(self) -> int | None:
        """For a ``fork_at`` branch, how many messages of its parent it kept."""
        return self._row.branched_at if self._row is not None else None

    @property
    def created_at(self) -> datetime:
        """When the session was stored (UTC)."""
        return from_micros(self._require_row().created_at_us)

    @property
    def updated_at(self) -> datetime:
        """When the session was last written (UTC)."""
        return from_micros(self._fresh().updated_at_us)

    @property
    def length(self) -> int:
        """How many messages are in view (events are not counted).

        Raises:
            SessionNotFoundError: the session was never stored, or is gone.
        """
        return self._fresh().layout.length

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        state = f"v{self._row.version}" if self._row is not None else "not stored"
        return f"<Session {self._id} {state}>"

    @property
    def locked(self) -> bool:
        """Whether another process has the session open for writing (then this one only reads)."""
        if self._row is None or self._writer:
            return False
        return self._host.store.locked_elsewhere(self._id)

    def _ensure_writer(self) -> None:
        """Take the session's writer lock for this process, or raise SessionLockedError."""
        if not self._writer:
            if not self._host.store.lock(self._id):
                raise SessionLockedError(self._id)
            self._writer = True
            self._host._locked.add(self._id)

    def acquire(self) -> None:
        """Take the session's writer lock for this process now (a write takes it on demand).

        Raises:
            SessionLockedError: another process holds it.
        """
        self._ensure_writer()

    @property
    def holds_lock(self) -> bool:
        """Whether this handle holds the session's writer lock (see :attr:`locked`)."""
        return self._writer

    def release(self) -> None:
        """Give up this process's writer lock, so another process may write the session.

        The next write through this handle takes the lock again (or raises
        :class:`SessionLockedError` if another process took it meanwhile).
        """
        if self._writer:
            self._writer = False
            self._host._locked.discard(self._id)
            self._host.store.unlock(self._id)

    def refresh(self) -> Session:
        """Re-read the stored row (a no-op for a session not stored yet).

        Raises:
            SessionNotFoundError: the session was deleted.
        """
        if self._row is not None:
            row = self._host.store.get(self._id)
            if row is None:
                raise SessionNotFoundError(self._id, "deleted")
            self._row = row
        return self

    def _require_row(self) -> SessionRow:
        if self._row is None:
            raise SessionNotFoundError(self._id, "not stored yet: nothing was written to it")
        return self._row

    def _fresh(self) -> SessionRow:
        return self.refresh()._require_row()

    # -- reading ----------------------------------------------------------------------

    @property
    def records(self) -> list[Record]:
        """Every record in view, oldest first (events included)."""
        row = self._fresh()
        return self._host.store.read(row, row.layout.view_start, row.layout.end_seq)

    @property
    def chunk_table(self) -> ChunkTable:
        """Seed 000's table of records: ``chunk_table.rows``."""
        return ChunkTable(self)

    def tail(self, n: int = 20) -> list[Record]:
        """Return the last ``n`` records in view; the cost does not grow with the transcript.

        Raises:
            InvalidArgumentError: ``n`` is negative.
        """
        _check_count(n, "n")
        row = self._fresh()
        lay = row.layout
        return self._host.store.read(row, max(lay.view_start, lay.end_seq - n), lay.end_seq)

    def history(self, full: bool = False) -> list[Message]:
        """The conversation's messages.

        Args:
            full: False (default) for what the model works with: the newest
                compaction summary, then what followed it. True for every
                message as written, each summary where its compaction ran.
                Neither includes system prompts or events.

        Raises:
            SessionNotFoundError: the session was never stored.
        """
        records = self.records
        return full_history(records) if full else history(records)

    def snapshot(self) -> Snapshot | None:
        """Return a read-only snapshot, or None for a session not stored (seed 003)."""
        if self._row is None:
            return None
        try:
            row = self._fresh()
        except SessionNotFoundError:
            return None
        records = self._host.store.read(row, row.layout.view_start, row.layout.end_seq)
        settings = row.metadata.get(_SETTINGS, {})
        clients = tuple(self._host.store.live_clients(row.id))
        return Snapshot(
            id=row.id,
            title=row.title,
            length=row.layout.length,
            created_at=from_micros(row.created_at_us),
            updated_at=from_micros(row.updated_at_us),
            status=row.status,
            system_prompt=system_prompt(records),
            tool_format=str(settings.get("tool_format", "native")),
            actor_chain=row.metadata.get("actor_chain"),
            scratchpad=row.scratchpad,
            scratchpad_version=row.scratchpad_version,
            parent_id=row.parent_ids[0] if row.parent_ids else None,
            parent_session_ids=row.parent_ids,
            child_ids=tuple(self._host.store.children(row.id)),
            lineage_operator=row.lineage_operator,
            branched_at_event_index=row.branched_at,
            version=row.version,
            records=tuple(records),
            metadata=row.metadata,
            live_clients=clients,
            live_controller_id=next((c.client_id for c in clients if c.mode == "controller"), None),
        )

    def ancestry(self) -> Ancestry:
        """Return ``Ancestry(parent_id, child_ids, root_id)`` (seed 003).

        A parent that was deleted ends the walk to the root.
        """
        row = self._fresh()
        store = self._host.store

        def parent_of(sid: str) -> str | None:
            found = row if sid == row.id else store.get(sid)
            if found is None or not found.parent_ids:
                return None
            parent = found.parent_ids[0]
            return parent if store.get(parent) is not None else None

        return Ancestry(
            parent_id=row.parent_ids[0] if row.parent_ids else None,
            child_ids=tuple(store.children(row.id)),
            root_id=root_of(row.id, parent_of),
        )

    def stamp(self) -> str | None:
        """A value that changes exactly when the stored session changes, or None if not stored."""
        return self._host.store.stamp(self._id)

    def scratchpad(self) -> dict[str, JSONValue] | None:
        """Return the session's scratchpad, or None (seed 003)."""
        if self._row is None:
            raise SessionNotFoundError(self._id, "not stored yet")
        pad = self._fresh().scratchpad
        return dict(pad) if pad is not None else None

    def scratchpad_history(self) -> list[ScratchpadEntry]:
        """Return every version the scratchpad has had, oldest first."""
        self._require_row()
        return self._host.store.scratchpad_history(self._id)

    # -- writing ----------------------------------------------------------------------

    def _mutate(
        self, build: Build, *, expect_version: int | None = None, allow_closed: bool = False
    ) -> tuple[SessionRow, Sequence[Record]]:
        """Apply ``build`` to the head and store the result with compare-and-set.

        Without ``expect_version`` a lost race is retried on the new head (the
        verbs that use this do not depend on what they read); with it, a stale
        head raises :class:`StaleSessionError` and nothing is written.
        """
        if expect_version is not None:
            _check_count(expect_version, "expect_version")
            if expect_version != self.version:
                raise StaleSessionError(self._id, expect_version, self.version)
        if self._row is not None:
            self._ensure_writer()
        last: StaleSessionError | None = None
        for _ in range(_RETRIES):
            row = self._row
            if row is None:
                return self._create(build)
            if row.status == "closed" and not allow_closed:
                raise SessionClosedError(self._id)
            records, updated, pad = build(row)
            try:
                if updated is None and pad is None:
                    self._row = self._host.store.append(row, records)
                else:
                    target = updated if updated is not None else self._append(row, records)
                    self._row = self._host.store.write(row, target, records, pad)
                return self._row, records
            except StaleSessionError as exc:
                if expect_version is not None:
                    raise
                last = exc
                self.refresh()
        assert last is not None
        raise last

    def _create(self, build: Build) -> tuple[SessionRow, Sequence[Record]]:
        blank = SessionRow(id=self._id, workspace=self._host.workspace)
        records, updated, pad = build(blank)
        if updated is None:
            updated = self._append(blank, records)
        stored = self._host.store.create(updated, records)
        self._row = stored
        self._host._adopt(self)
        self._ensure_writer()
        if pad is not None:
            stored = self._row = self._host.store.write(stored, replace(stored), (), pad)
        return stored, records

    @staticmethod
    def _append(row: SessionRow, records: Sequence[Record]) -> SessionRow:
        messages = sum(1 for r in records if r.kind != "event")
        return replace(row, layout=row.layout.appended(len(records), messages))

    def _build_messages(self, messages: Sequence[Mapping[str, JSONValue]]) -> Build:
        def build(row: SessionRow) -> tuple[Sequence[Record], None, None]:
            start = row.layout.end_seq
            records = [
                record_from_message(m, seq=start + i, default_folds_from=row.layout.view_start)
                for i, m in enumerate(messages)
            ]
            return records, None, None

        return build

    def inject(
        self, message: Mapping[str, JSONValue], *, expect_version: int | None = None
    ) -> Record:
        """Append one message (seed 003's ``inject``).

        Args:
            message: ``{role, content, tool_calls?, tool_call_id?, tool_name?,
                ok?, meta?}`` with ``role`` one of system, user, assistant, tool,
                summary.
            expect_version: write only if the head is still this version.

        Returns:
            The stored record.

        Raises:
            InvalidMessageError: no role, an unknown role or key, a bad field.
            SessionClosedError: the session was closed.
            StaleSessionError: ``expect_version`` is not the head.
        """
        row = self._row
        if expect_version is None and row is not None and row.status == "open" and self._writer:
            # The agent-step fast path: one record, no retry bookkeeping.
            lay = row.layout
            record = record_from_message(
                message, seq=lay.end_seq, default_folds_from=lay.view_start
            )
            try:
                self._row = self._host.store.append(row, (record,))
                return record
            except StaleSessionError:
                self.refresh()  # someone else wrote first: take the general path on the new head
        return self.inject_many([message], expect_version=expect_version)[0]

    def inject_many(
        self,
        messages: Iterable[Mapping[str, JSONValue]],
        *,
        expect_version: int | None = None,
    ) -> list[Record]:
        """Append several messages in one transaction (for importers).

        Every message is checked before anything is written: one bad message
        and none are stored.

        Returns:
            The stored records, in order.
        """
        if isinstance(messages, Mapping | str | bytes):
            raise InvalidArgumentError("inject_many takes a list of messages")
        batch = list(messages)
        if not batch:
            raise InvalidArgumentError("inject_many needs at least one message")
        # build() validates every message before the store is touched.
        _, records = self._mutate(self._build_messages(batch), expect_version=expect_version)
        return list(records)

    def log_event(
        self,
        name: str,
        data: Mapping[str, JSONValue] | None = None,
        *,
        expect_version: int | None = None,
    ) -> EventRecord:
        """Append an event: something that happened that the model never sees.

        Args:
            name: what happened.
            data: a JSON object about it.
            expect_version: write only if the head is still this version (read
                :attr:`version` after :meth:`refresh`): a compare-and-set.

        Raises:
            InvalidArgumentError: a blank name or data that is not a JSON object.
            StaleSessionError: ``expect_version`` is not the head.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError("an event needs a non-blank name")
        payload = _json_object(data or {}, "event data")
        record = self._event(name, payload, expect_version=expect_version)
        assert isinstance(record, EventRecord)
        return record

    def _event(
        self,
        name: str,
        data: Mapping[str, JSONValue],
        change: Callable[[SessionRow], SessionRow] | None = None,
        *,
        allow_closed: bool = False,
        expect_version: int | None = None,
    ) -> Record:
        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow | None, None]:
            event = EventRecord(seq=row.layout.end_seq, name=name, data=dict(data))
            if change is None:
                return [event], None, None
            return [event], self._append(change(row), [event]), None

        return self._mutate(build, allow_closed=allow_closed, expect_version=expect_version)[1][0]

    def rename(self, title: str) -> str:
        """Set the title; returns it as stored (trimmed).

        Raises:
            InvalidArgumentError (a ValueError): blank, or over 200 characters.
        """
        clean = _clean_title(title)

        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow, None]:
            return (), replace(row, title=clean), None

        self._mutate(build, allow_closed=True)
        return clean

    def reset(self) -> None:
        """Hide the whole transcript from every view (seed 003's ``reset``).

        The id, title, scratchpad and lineage stay; the records stay stored (and
        other branches keep them). A ``session_reset`` event records the range
        hidden.

        Raises:
            SessionNotFoundError: the session was never stored.
        """
        self._require_row()

        def hide(row: SessionRow) -> SessionRow:
            lay = row.layout
            return replace(row, layout=replace(lay, view_start=lay.end_seq, view_msgs=lay.end_msgs))

        before = self._fresh().layout
        self._event("session_reset", {"hidden": [before.view_start, before.end_seq]}, hide)

    def trim(self, keep_last: int) -> int:
        """Keep only the last ``keep_last`` messages in view (seed 003's ``trim``).

        Returns:
            How many messages are kept (``keep_last``, or fewer if there were fewer).

        Raises:
            InvalidArgumentError: ``keep_last`` is negative or not an int.
            SessionNotFoundError: the session was never stored.
        """
        keep = _check_count(keep_last, "keep_last")
        row = self._fresh()
        if keep >= row.layout.length:
            return row.layout.length

        def hide(head: SessionRow) -> SessionRow:
            lay = head.layout
            kept = min(keep, lay.length)
            if kept == 0:
                start = lay.end_seq
            else:
                start = find_message(
                    lay, lay.end_msgs - kept, lambda s: self._host.store.probe(head, s)
                )
            return replace(
                head, layout=replace(lay, view_start=start, view_msgs=lay.end_msgs - kept)
            )

        self._event("session_trimmed", {"keep_last": keep}, hide)
        return keep

    def close(self, status: str | Mapping[str, JSONValue] | None = None) -> None:
        """Close the session, recording an ``agent_session_closed`` event (seed 003).

        A closed session stays readable and forkable; writing to its transcript
        raises :class:`SessionClosedError` until :meth:`reopen`. Closing a
        closed session does nothing.

        Args:
            status: why, as a string reason or a dict such as ``{"reason": "timeout"}``.

        Raises:
            InvalidArgumentError: ``status`` is neither a string, a dict nor None.
            SessionNotFoundError: the session was never stored.
        """
        if status is not None and not isinstance(status, str | Mapping):
            raise InvalidArgumentError("status must be a string reason or a dict")
        detail: JSONValue = dict(status) if isinstance(status, Mapping) else status
        dumps(detail)
        if self._fresh().status == "closed":
            return

        def shut(row: SessionRow) -> SessionRow:
            meta = dict(row.metadata)
            meta["closed"] = {"status": detail, "at_us": now_micros()}
            return replace(row, status="closed", metadata=meta)

        self._event("agent_session_closed", {"status": detail}, shut)

    def reopen(self) -> None:
        """Reopen a closed session so its transcript can be written again."""
        if self._fresh().status != "closed":
            return

        def reopen(row: SessionRow) -> SessionRow:
            meta = dict(row.metadata)
            meta.pop("closed", None)
            return replace(row, status="open", metadata=meta)

        self._event("agent_session_reopened", {}, reopen, allow_closed=True)

    def set_scratchpad(
        self,
        scratchpad: Mapping[str, JSONValue],
        *,
        source: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> ScratchpadUpdate:
        """Store a new scratchpad version (seed 003).

        Args:
            scratchpad: a JSON object.
            source: who wrote it (an agent, a tool, a person).
            reason: why.
            metadata: anything else about the change.

        Raises:
            InvalidArgumentError: not a JSON object, or a bad option.
        """
        pad = _json_object(scratchpad, "scratchpad")
        return self._set_pad(pad, source, reason, metadata)

    def clear_scratchpad(
        self,
        *,
        source: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> ScratchpadUpdate:
        """Clear the scratchpad, storing that as a new version (seed 003)."""
        return self._set_pad(None, source, reason, metadata)

    def _set_pad(
        self,
        pad: dict[str, JSONValue] | None,
        source: str | None,
        reason: str | None,
        metadata: Mapping[str, JSONValue] | None,
    ) -> ScratchpadUpdate:
        for name, value in (("source", source), ("reason", reason)):
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"{name} must be a string")
        meta = _json_object(metadata or {}, "metadata")
        self._require_row()

        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow, ScratchpadEntry]:
            version = row.scratchpad_version + 1
            entry = ScratchpadEntry(version, pad, source, reason, meta)
            return (), replace(row, scratchpad=pad, scratchpad_version=version), entry

        row, _ = self._mutate(build, allow_closed=True)
        return ScratchpadUpdate(True, row.scratchpad_version, row.scratchpad)

    # -- sandbox (seed 000 steps 5-7) -------------------------------------------------------

    def to(self, backend: str, spec: str | None = None) -> Session:
        """Set where this session's tools run; opens nothing. Returns the session (chainable).

        The target is stored with the session (branches inherit it). A handle
        this session held is released first: retargeting a branch gives it its
        own runtime instead of the one it shared.

        Args:
            backend: a backend name (``local``).
            spec: backend-specific; for ``local``, an existing folder to use
                (never deleted). Without it, a managed temporary workspace is
                created when the sandbox opens and deleted when it closes.

        Raises:
            InvalidArgumentError: an unknown backend or a spec that is not a string.
        """
        backend_named(backend)
        if spec is not None and not isinstance(spec, str):
            raise InvalidArgumentError("spec must be a string (for local: a folder path)")
        self.close_sandbox()
        self.set_settings(sandbox={"backend": backend, "spec": spec})
        return self

    @property
    def sandbox_backend(self) -> str | None:
        """The backend this session targets, or None."""
        target = self.settings.get("sandbox")
        if isinstance(target, Mapping) and isinstance(target.get("backend"), str):
            return str(target["backend"])
        return None

    @property
    def sandbox(self) -> Sandbox | None:
        """The sandbox handle this session holds now, or None (handles open on demand)."""
        return self._sandbox

    def require_sandbox(self) -> Sandbox:
        """Return the current handle, opening one on the target if there is none.

        Raises:
            NoSandboxError: no target and no handle ("no sandbox to take").
            SandboxClosedError: the session is bound to a closed handle.
        """
        if self._sandbox is not None:
            if self._sandbox.closed:
                raise SandboxClosedError("session sandbox is closed")
            return self._sandbox
        target = self.settings.get("sandbox")
        if not isinstance(target, Mapping) or not isinstance(target.get("backend"), str):
            raise NoSandboxError("no sandbox to take")
        spec = target.get("spec")
        self._sandbox = backend_named(target["backend"]).open(
            spec if isinstance(spec, str) else None
        )
        return self._sandbox

    def with_sandbox(self, handle: Sandbox) -> Session:
        """Bind an open sandbox handle to this session (taking a reference); returns the session.

        Raises:
            SandboxClosedError: the handle is closed.
        """
        if not isinstance(handle, Sandbox):
            raise InvalidArgumentError(f"with_sandbox takes a Sandbox, not {type(handle).__name__}")
        handle.acquire()
        self.close_sandbox()
        self._sandbox = handle
        return self

    def close_sandbox(self) -> None:
        """Release this session's handle; the sandbox closes when no session holds it."""
        handle, self._sandbox = self._sandbox, None
        if handle is not None:
            handle.release()

    def _share_sandbox(self, branch: Session) -> Session:
        """A branch made while a handle is open shares it (seed 000 step 7)."""
        if self._sandbox is not None and not self._sandbox.closed and branch._sandbox is None:
            branch._sandbox = self._sandbox.acquire()
        return branch

    def __enter__(self) -> Session:
        self.require_sandbox()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close_sandbox()

    # -- compaction (issue 4) -------------------------------------------------------------

    def compact_preview(
        self, options: Mapping[str, Any] | None = None, **more: Any
    ) -> CompactionPlan | None:
        """Return what :meth:`compact` would fold now, writing nothing (a dry run).

        Args:
            options: seed 003's compaction options (``keep_last``, ``compact_strategy``, ...).
            **more: the same options as keywords.

        Returns:
            The plan (folded and kept records, the ``folds`` range), or None when
            nothing is worth folding.

        Raises:
            UnknownOptionError: an option plait does not know.
            InvalidArgumentError: a bad value (a negative ``keep_last``, ...).
            NothingToDoError: already compacted to the newest message.
            SessionNotFoundError: the session was never stored.
        """
        parsed = parse_options({**(options or {}), **more})
        return plan_compaction(self.records, parsed)

    async def compact(
        self,
        options: Mapping[str, Any] | None = None,
        *,
        summarize: Summarize | None = None,
        provider: Provider | None = None,
        summary_provider: Provider | None = None,
        strategy: str | None = None,
        **more: Any,
    ) -> Compaction | None:
        """Fold the older part of the conversation into a summary now (seeds 001 and 003).

        Nothing is deleted: one summary record is appended, naming the range it
        folds, and :meth:`history` starts with it. :meth:`uncompact` undoes it.

        Args:
            options: seed 003's compaction options; unknown keys are an error.
            summarize: the model call behind the ``llm`` strategy; without it (and
                without a provider) the default is the model-free extractive summary
                with observation masking.
            provider: the session's model: with it the default strategy is ``llm``,
                summarizing through :func:`plait.providers.complete`.
            summary_provider: a (cheaper) model to summarize with instead of ``provider``.
            strategy: ``compact_strategy`` as a keyword (``"llm"``, ``"truncate"``, ...).
            **more: options as keywords.

        Returns:
            ``Compaction(summary, compressed, kept, ...)``, or None when there was
            nothing worth folding.

        Raises:
            NothingToDoError: already compacted to the newest message.
            UnknownOptionError, InvalidArgumentError: bad options.
            SessionLockedError: another process has the session open for writing.
            SessionClosedError: the session was closed.
        """
        if strategy is not None:
            if "compact_strategy" in more or "compact_strategy" in (options or {}):
                raise InvalidArgumentError("give strategy or compact_strategy, not both")
            more["compact_strategy"] = strategy
        parsed = parse_options({**(options or {}), **more})
        self._require_row()
        self._ensure_writer()
        self._count()  # the plan's token figures are the stored counts
        found = plan_compaction(self.records, parsed)
        if found is None:
            return None
        model = summary_provider or provider
        if summarize is None and model is not None:
            summarize = self._summarizer(model)
        done = await write_compaction(found, parsed, summarize=summarize)
        self.inject(done.message())
        return done

    def uncompact(self) -> SummaryRecord:
        """Undo the newest compaction: its summary is hidden and what it folded shows again.

        Appends a ``compaction_undone`` event naming the summary; nothing is
        deleted, so :meth:`history` falls back to the previous summary (or to
        the whole conversation).

        Returns:
            The summary that was hidden.

        Raises:
            NothingToDoError: there is no compaction to undo.
        """
        summary = newest_summary(self.records)
        if summary is None:
            raise NothingToDoError("there is no compaction to undo")
        self.log_event(COMPACTION_UNDONE, {"summary_seq": summary.seq})
        return summary

    @staticmethod
    def _summarizer(model: Provider) -> Summarize:
        """The ``llm`` strategy's model call: the messages, then a request for the summary."""

        async def summarize(messages: list[Message]) -> str:
            from plait.providers import complete

            request = Request(
                messages=[
                    Message("system", LLM_INSTRUCTIONS),
                    *messages,
                    Message("user", "Write the summary of the conversation above now."),
                ]
            )
            reply = await complete(model, request)
            return reply.text

        return summarize

    # -- context and self-compaction (issue 4) ----------------------------------------------

    def _count(self) -> SessionRow:
        """Count what was written since the last count (the writer stores it); the fresh row."""
        row = self._fresh()
        if self._writer:
            count_pending(self._host.store, row, persist=True)
        return row

    def _context(
        self, model: str | None, tools: Iterable[object] | None
    ) -> tuple[ContextReport, ModelInfo] | None:
        if self._row is None:
            return None
        row = self._fresh()
        store = self._host.store
        persist = self._writer
        if not persist:
            # A reader stores the counts too when no other process is writing the session
            # (counting is a compare-and-set on the counted prefix: D51), so a session only
            # ever read is counted once as well; a store that refuses is no error.
            try:
                persist = not store.locked_elsewhere(self._id)
            except StoreError:
                persist = False
        return context_report(
            store,
            row,
            model=model,
            tool_specs=tool_spec_texts(tools or ()),
            persist=persist,
            best_effort=not self._writer,
        )

    def context(
        self, model: str | None = None, tools: Iterable[object] | None = None
    ) -> ContextReport | None:
        """Measure the context the next request carries, by source (seed 001).

        Counted once: each record's tokens were counted once and stored with running
        tallies, so this reads a few rows whatever the transcript's length. Records written
        since the last count are counted now (and, by the session's writer, stored).

        Args:
            model: the model the next request goes to (its window and encoding); None for
                the model of the newest reply, else an unknown model's defaults.
            tools: the tool specs offered with the request (``ToolSpec``, ``Tool`` or
                ``{"name", "description", "parameters"}``), for the "Tool schemas" share.

        Returns:
            The :class:`~plait.context.ContextReport`, or None before the first reply.

        Raises:
            InvalidArgumentError: a tool that is not a tool spec.
            SessionNotFoundError: the session was deleted.
        """
        found = self._context(model, tools)
        return found[0] if found is not None else None

    def compaction_due(
        self, model: str | None = None, tools: Iterable[object] | None = None
    ) -> bool:
        """Whether the context is at least the model's ``compact_percent`` full.

        The run loop asks this before each model call and compacts when it is True (seed 001:
        "the agent compacts by itself at the model's compact_percent").

        Args:
            model: the model of the next request (None: the newest reply's model).
            tools: the tool specs it offers.

        Returns:
            False before the first reply.
        """
        found = self._context(model, tools)
        if found is None:
            return False
        report, info = found
        return report.fraction * 100 >= info.compact_percent

    @property
    def self_compaction_choice(self) -> bool | None:
        """The session's own choice: True, False, or None to follow the configuration."""
        value = self.settings.get("self_compaction")
        return value if isinstance(value, bool) else None

    @property
    def self_compaction(self) -> bool:
        """Whether self-compaction is in force: the session's choice, else the default.

        The default is ``PLAIT_SELF_COMPACTION`` (``1``/``true``/``yes``/``on``), else False.

        Raises:
            InvalidArgumentError: ``PLAIT_SELF_COMPACTION`` holds something else.
        """
        choice = self.self_compaction_choice
        return choice if choice is not None else self_compaction_default(os.environ)

    def use_self_compaction(self, choice: bool | None) -> None:
        """Choose whether this session may compact itself; None follows the configuration.

        The choice is written into the session's settings, so it survives a restart (and a
        branch inherits it); it applies from the next request, because the tool is offered
        when one starts.

        Raises:
            InvalidArgumentError: ``choice`` is not True, False or None.
            OSError: the choice could not be written; the one in force is unchanged.
        """
        if choice is not None and not isinstance(choice, bool):
            raise InvalidArgumentError(f"self-compaction is True, False or None, not {choice!r}")
        self.set_settings(self_compaction=choice)

    def set_metadata(self, key: str, value: JSONValue) -> None:
        """Store one top-level metadata value (None removes it), in one compare-and-set write.

        For keys the library and its layers own beside the settings (the actor
        chain, provenance ...). Unlike :meth:`set_settings`, a branch does not
        inherit them.

        Raises:
            InvalidArgumentError: a blank key, ``settings`` (use :meth:`set_settings`), or a
                value that is not JSON.
            SessionNotFoundError: the session was never stored.
        """
        if not isinstance(key, str) or not key.strip() or key == _SETTINGS:
            raise InvalidArgumentError(f"not a metadata key one may set: {key!r}")
        dumps({key: value})
        self._require_row()

        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow, None]:
            meta = dict(row.metadata)
            if value is None:
                meta.pop(key, None)
            else:
                meta[key] = value
            return (), replace(row, metadata=meta), None

        self._mutate(build, allow_closed=True)

    def set_settings(self, **settings: JSONValue) -> None:
        """Store session settings that branches inherit (``workspace_anchor``, ...).

        A value of None removes the key.
        """
        dumps(settings)

        def build(row: SessionRow) -> tuple[Sequence[Record], SessionRow, None]:
            meta = dict(row.metadata)
            merged = dict(meta.get(_SETTINGS, {}))
            for key, value in settings.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            meta[_SETTINGS] = merged
            return (), replace(row, metadata=meta), None

        self._mutate(build, allow_closed=True)

    @property
    def metadata(self) -> dict[str, JSONValue]:
        """The session's stored metadata: settings, provenance, close status (a copy)."""
        if self._row is None:
            return {}
        return dict(self._fresh().metadata)

    @property
    def workspace_anchor(self) -> str | None:
        """The folder tools treat as the workspace root (seed 003), or None."""
        anchor = self.settings.get("workspace_anchor")
        return anchor if isinstance(anchor, str) else None

    def set_workspace_anchor(self, anchor: str | None) -> bool:
        """Replace the workspace anchor (None clears it); returns True (seed 003).

        Raises:
            InvalidArgumentError: ``anchor`` is not a non-empty string or None.
        """
        if anchor is not None and (not isinstance(anchor, str) or not anchor):
            raise InvalidArgumentError("workspace_anchor must be a non-empty string or None")
        self.set_settings(workspace_anchor=anchor)
        return True

    @property
    def workspace_policy(self) -> dict[str, JSONValue]:
        """The workspace defaults, with ``default_mount_mode`` filled in (seed 003)."""
        policy = self.settings.get("workspace_policy")
        out: dict[str, JSONValue] = {"default_mount_mode": "read_write"}
        if isinstance(policy, Mapping):
            out.update(policy)
        return out

    def set_workspace_policy(self, policy: Mapping[str, JSONValue]) -> bool:
        """Update the workspace defaults (merged into the current ones); returns True.

        Raises:
            UnknownOptionError: a key other than ``default_mount_mode``.
            InvalidArgumentError: an unknown mount mode.
        """
        merged = dict(self.settings.get("workspace_policy") or {})
        merged.update(validate_workspace_policy(policy))
        self.set_settings(workspace_policy=merged)
        return True

    def add_root(
        self, root: str, *, mount_mode: str | None = None, mounted_at: str | None = None
    ) -> RootResult:
        """Mount another folder into the session's workspace (seed 003's ``add_root``).

        Args:
            root: an existing folder.
            mount_mode: ``read_only`` or ``read_write``; default: the workspace
                policy's ``default_mount_mode``.
            mounted_at: the name tools see it under (default: the folder's name).

        Returns:
            ``RootResult(ok, mounted_at, error)``: ``ok=False`` with the reason for a
            folder that does not exist or a name already mounted (nothing is stored).

        Raises:
            InvalidArgumentError: a mount mode other than ``read_only`` / ``read_write``.
        """
        mode = mount_mode or str(self.workspace_policy["default_mount_mode"])
        if mode not in _MOUNT_MODES:
            raise InvalidArgumentError(
                f"mount_mode must be one of {', '.join(_MOUNT_MODES)}, not {mode!r}"
            )
        if not isinstance(root, str) or not root:
            raise InvalidArgumentError("root must be a folder path")
        folder = os.path.abspath(os.path.expanduser(root))
        if not os.path.isdir(folder):
            return RootResult(False, None, f"{root!r} is not an existing folder")
        name = mounted_at or os.path.basename(folder.rstrip(os.sep)) or folder
        roots = self._roots()
        if any(r["mounted_at"] == name for r in roots):
            return RootResult(False, None, f"something is already mounted at {name!r}")
        roots.append({"path": folder, "mounted_at": name, "mount_mode": mode})
        self.set_settings(roots=roots)
        return RootResult(True, name, None)

    def remove_root(self, root: str) -> RootResult:
        """Unmount a root, named by its path or by where it is mounted (seed 003)."""
        roots = self._roots()
        folder = os.path.abspath(os.path.expanduser(root)) if isinstance(root, str) else None
        keep = [r for r in roots if r["mounted_at"] != root and r["path"] != folder]
        if len(keep) == len(roots):
            return RootResult(False, None, f"{root!r} is not mounted")
        gone = next(r for r in roots if r not in keep)
        self.set_settings(roots=keep or None)
        return RootResult(True, gone["mounted_at"], None)

    def list_roots(self) -> dict[str, JSONValue]:
        """Return ``{primary, additional}``: the workspace root and the mounted roots (seed 003).

        ``primary`` is the workspace anchor if one is set, else the open sandbox's
        folder, else the session's workspace.
        """
        if self.workspace_anchor is not None:
            primary = self.workspace_anchor
        elif self._sandbox is not None and not self._sandbox.closed:
            primary = str(self._sandbox.root)
        else:
            primary = self.workspace
        return {"primary": primary, "additional": [dict(r) for r in self._roots()]}

    def _roots(self) -> list[dict[str, str]]:
        raw = self.settings.get("roots")
        if not isinstance(raw, list):
            return []
        return [
            {k: str(v) for k, v in r.items()}
            for r in raw
            if isinstance(r, Mapping) and {"path", "mounted_at", "mount_mode"} <= set(r)
        ]

    @property
    def settings(self) -> dict[str, JSONValue]:
        """Session settings (inherited by branches)."""
        if self._row is None:
            return {}
        return dict(self._fresh().metadata.get(_SETTINGS, {}))

    # -- branching ------------------------------------------------------------------------

    def _branch_row(
        self,
        row: SessionRow,
        layout: Layout,
        dst: str | None,
        *,
        parents: tuple[str, ...],
        operator: str,
        branched_at: int | None = None,
        provenance: Mapping[str, JSONValue] | None = None,
    ) -> SessionRow:
        if dst is not None and not is_session_id(dst):
            raise InvalidArgumentError(f"{dst!r} is not a valid session id")
        meta: dict[str, JSONValue] = {}
        if _SETTINGS in row.metadata:
            meta[_SETTINGS] = row.metadata[_SETTINGS]
        if provenance:
            meta.update(provenance)
        return SessionRow(
            id=dst or new_id(),
            workspace=row.workspace,
            layout=layout,
            parent_ids=parents,
            lineage_operator=operator,
            branched_at=branched_at,
            scratchpad=row.scratchpad,
            scratchpad_version=row.scratchpad_version,
            metadata=meta,
        )

    def _spawn(self, row: SessionRow, records: Sequence[Record] = ()) -> Session:
        stored = self._host.store.create(row, records)
        return self._share_sandbox(self._host._handle(stored))

    def fork(self, dst: str | None = None) -> Session:
        """Branch from the current state: a new session that shares this transcript.

        Writes one session row and no records, whatever the transcript's length.
        The branch records this session as its parent (``Session.fork``); the
        two do not affect each other afterwards.

        Args:
            dst: the new session's id (default: a new UUIDv7).

        Raises:
            SessionNotFoundError: this session was never stored (an empty new session).
            SessionExistsError: ``dst`` is taken.
            InvalidArgumentError: ``dst`` is not a valid id.
        """
        row = self._fresh()
        lay = row.layout
        layout = branch(lay, row.pk, lay.end_seq, lay.end_msgs)
        return self._spawn(
            self._branch_row(row, layout, dst, parents=(row.id,), operator="Session.fork")
        )

    def fork_at(self, keep_first: int, dst: str | None = None) -> Session:
        """Branch keeping only the first ``keep_first`` messages in view (seed 003).

        Records ``branched_at`` (seed 003's ``branched_at_event_index``). Events
        between the kept messages are kept; those after the last kept message
        are not.

        Raises:
            InvalidArgumentError: ``keep_first`` is negative or more than ``length``.
            SessionNotFoundError, SessionExistsError: as for :meth:`fork`.
        """
        keep = _check_count(keep_first, "keep_first")
        row = self._fresh()
        lay = row.layout
        if keep > lay.length:
            raise InvalidArgumentError(
                f"keep_first={keep} but the session has only {lay.length} messages"
            )
        if keep == 0:
            cut = lay.view_start
        else:
            ordinal = lay.view_msgs + keep - 1
            cut = find_message(lay, ordinal, lambda s: self._host.store.probe(row, s)) + 1
        layout = branch(lay, row.pk, cut, lay.view_msgs + keep)
        return self._spawn(
            self._branch_row(
                row, layout, dst, parents=(row.id,), operator="Session.fork_at", branched_at=keep
            )
        )

    def detach(self, dst: str | None = None) -> Session:
        """Copy this transcript into a new lineage root (seed 000's ``detach``).

        Like :meth:`fork` it shares the records, but the new session has no
        parents (``parent_session_ids == ()``); ``metadata["detached_from"]``
        keeps where it came from.
        """
        row = self._fresh()
        lay = row.layout
        layout = branch(lay, row.pk, lay.end_seq, lay.end_msgs)
        return self._spawn(
            self._branch_row(
                row,
                layout,
                dst,
                parents=(),
                operator="Session.detach",
                provenance={"detached_from": row.id},
            )
        )

    def merge(self, *others: Session, dst: str | None = None) -> Session:
        """Join other branches into a new session whose parents are all of them.

        The merged transcript is this session's, followed by each other
        session's records past the prefix it shares with this one, in the order
        given. This session's records are shared, not copied; the others' are
        copied (they follow a different prefix).

        Raises:
            InvalidArgumentError: no other session, or one from another store.
            SessionNotFoundError: a session was never stored.
        """
        return self._join(others, dst=dst, operator="Session.merge")

    def _join(self, others: Sequence[Session], *, dst: str | None, operator: str) -> Session:
        """Merge's work, under a given lineage operator (``Session.run`` uses it too)."""
        if not others:
            raise InvalidArgumentError("merge needs at least one other session")
        row = self._fresh()
        rows: list[SessionRow] = []
        for other in others:
            if not isinstance(other, Session):
                raise InvalidArgumentError(f"merge takes sessions, not {type(other).__name__}")
            if other._host.store is not self._host.store:
                raise InvalidArgumentError(f"session {other.id} lives in another store")
            rows.append(other._fresh())
        lay = row.layout
        layout = branch(lay, row.pk, lay.end_seq, lay.end_msgs)
        copies: list[Record] = []
        pos = lay.end_seq
        for other_row in rows:
            if other_row.id == row.id:
                continue
            shared = shared_prefix(lay, row.pk, other_row.layout, other_row.pk)
            start = max(shared, other_row.layout.view_start)
            tail = self._host.store.read(other_row, start, other_row.layout.end_seq)
            offset = pos - start
            for record in tail:
                if isinstance(record, SummaryRecord):
                    record = replace(
                        record,
                        folds_from=_moved(record.folds_from, shared, start, pos),
                        folds_to=_moved(record.folds_to, shared, start, pos),
                    )
                copies.append(replace(record, seq=record.seq + offset))
            pos += len(tail)
        messages = sum(1 for r in copies if r.kind != "event")
        layout = replace(layout, end_seq=pos, end_msgs=layout.end_msgs + messages)
        parents = tuple(dict.fromkeys((row.id, *(r.id for r in rows))))
        new_row = self._branch_row(row, layout, dst, parents=parents, operator=operator)
        return self._spawn(new_row, copies)

    # -- exporting --------------------------------------------------------------------

    def export(self, path: str | os.PathLike[str] | None = None) -> str:
        """Write the conversation as one self-contained HTML page (seed 001's ``export``).

        The page shows every record in view as the terminal does (roles, tool
        calls with their arguments, tool results with ok or failed, summaries,
        events in small type), beside the request the next turn would send
        (the system prompt and :meth:`history`), under the session's lineage
        (its ancestors and descendants, drawn as an SVG). It loads nothing
        and runs no script; every piece of transcript text is escaped.

        A plain call (principle 3): it reads the store and writes one file,
        and calls no model.

        Args:
            path: where to write. Default: ``plait-<first 8 characters of the
                id>.html`` in the session's workspace. A relative path is taken
                from the current working directory; missing folders are made;
                an existing file is replaced.

        Returns:
            The absolute path written.

        Raises:
            InvalidArgumentError (a ValueError): the session has nothing stored
                (never written, or no record in view), or ``path`` is not a
                usable file path.
            SessionNotFoundError: the session was deleted.
            OSError: the file could not be written.
        """
        return self._write_export(path, "html")

    def export_markdown(self, path: str | os.PathLike[str] | None = None) -> str:
        """Write the conversation as one Markdown document; the same content as :meth:`export`.

        Transcript text is kept in code spans and fenced code blocks, where
        Markdown shows HTML and link syntax as written.

        Args:
            path: where to write. Default: ``plait-<id8>.md`` in the session's
                workspace; relative paths as for :meth:`export`.

        Returns:
            The absolute path written.

        Raises:
            InvalidArgumentError, SessionNotFoundError, OSError: as for :meth:`export`.
        """
        return self._write_export(path, "md")

    def _write_export(
        self, path: str | os.PathLike[str] | None, kind: Literal["html", "md"]
    ) -> str:
        """Read what the page shows, render it, and write it atomically; return the path."""
        if path is not None and not isinstance(path, str | os.PathLike):
            raise InvalidArgumentError(f"path must be a str or a path, not {type(path).__name__}")
        if self._row is None:
            raise InvalidArgumentError(f"session {self._id}: nothing stored yet, nothing to export")
        row = self._fresh()
        store = self._host.store
        records = store.read(row, row.layout.view_start, row.layout.end_seq)
        if not records:
            raise InvalidArgumentError(f"session {self._id}: no records in view, nothing to export")

        def describe(sid: str) -> LineageBox | None:
            found = row if sid == row.id else store.get(sid)
            if found is None:
                return None
            return LineageBox(
                found.id,
                found.title,
                found.lineage_operator,
                found.parent_ids,
                found.layout.length,
            )

        page = ExportPage(
            session_id=row.id,
            title=row.title,
            workspace=row.workspace,
            operator=row.lineage_operator,
            parent_ids=row.parent_ids,
            status=row.status,
            created_at=from_micros(row.created_at_us),
            updated_at=from_micros(row.updated_at_us),
            records=records,
            system_prompt=system_prompt(records),
            request=history(records),
            lineage=collect_lineage(row.id, describe, store.children),
        )
        text = render_html(page) if kind == "html" else render_markdown(page)
        return write_atomically(export_target(path, row.workspace, row.id, kind), text)

    # -- runs (issue 3; the loop itself is plait.run, registered below) ------------------

    def _start_run(
        self,
        text: str | None,
        *,
        streamed: bool,
        provider: Provider | str | None = None,
        tools: Sequence[Tool] | None = None,
        on_approval: Approval | None = None,
        on_question: Question | None = None,
        on_event: EventHook | None = None,
        timeout: float | None = None,
        keep_events: bool = False,
        max_steps: int = 20,
    ) -> Run:
        """Check everything, mark the session busy, and make the :class:`Run`."""
        if _RUNNER is None:  # pragma: no cover - importing plait imports plait.run
            raise InvalidArgumentError("no agent loop is registered: import plait.run first")
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InvalidArgumentError("a prompt needs some text")
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise InvalidArgumentError(f"max_steps must be a positive int, got {max_steps!r}")
        offered = tuple(BUILTIN_TOOLS if tools is None else tools)
        if not all(isinstance(t, Tool) for t in offered):
            raise InvalidArgumentError("tools must be plait Tools (see plait.tools.tool)")
        if len({t.name for t in offered}) != len(offered):
            raise InvalidArgumentError("tool names must be unique")
        check_timeout(timeout)
        if self.closed:
            raise SessionClosedError(self._id)
        if self.locked:
            raise SessionLockedError(self._id)
        model = self._provider(provider)
        host = self._host
        with host._handles_lock:
            self._check_idle()
        if isinstance(provider, str) and self.settings.get("model") != provider:
            self.set_settings(model=provider)  # seed 001: it continues on the model last named
        spec = RunSpec(model, offered, text, on_approval, on_question, max_steps)
        with host._handles_lock:
            self._check_idle()
            hooks = [h for h in (on_event,) if h is not None]
            hooks.append(lambda event: self._notify(event))
            runner = _RUNNER
            run = Run(
                self,
                lambda r: runner(self, spec, r),
                timeout=timeout,
                keep_events=keep_events,
                streamed=streamed,
                hooks=hooks,
                on_done=lambda: self._run_ended(),
            )
            host._runs[self._id] = run
            host._current = self  # seed 001: the handle a run uses becomes current again
        return run

    def _check_idle(self) -> None:
        """Raise SessionBusyError if a run is in progress here (or anywhere on a client)."""
        runs = self._host._runs
        if self._id in runs or (self._host.exclusive_runs and runs):
            raise SessionBusyError(self._id if self._id in runs else next(iter(runs)))

    def _run_ended(self) -> None:
        self._host._runs.pop(self._id, None)

    def _provider(self, provider: Provider | str | None) -> Provider:
        """Explicit provider or spec > the session's stored ``model`` setting > the default."""
        if provider is not None and not isinstance(provider, str):
            return provider
        if provider is not None:
            return select_provider(provider)
        stored = self.settings.get("model") if self._row is not None else None
        if isinstance(stored, str):
            try:
                return select_provider(stored)
            except PlaitError:  # the configuration no longer has it (seed 001): the default
                _log.info("session %s: model %r is unavailable; the default", self._id, stored)
        return select_provider(None)

    def _notify(self, event: RunEvent) -> None:
        """Pass a run's event to the session's subscribers (a failing one is skipped)."""
        for callback in tuple(self._host._subscribers.get(self._id, ())):
            try:
                callback(event)
            except Exception:  # a subscriber's bug must not break the run it watches
                _log.exception("subscriber of session %s failed on %s", self._id, event.type)

    async def prompt(self, text: str, **options: Unpack[RunOptions]) -> RunResult:
        """Send ``text`` to the model and run the tool calls it makes until it is done.

        Every step is appended as it happens (the request, each reply with its
        tool calls, one result per call), so the transcript is valid whenever
        the run stops. Tools run in the session's sandbox (``to("local")``
        when no target is set), within its roots and mount modes.

        Args:
            text: what the user says.
            provider: a :class:`plait.providers.Provider`, or a spec such as
                ``"openai:gpt-4o-mini"``. Default: the session's ``model``
                setting, else :func:`plait.providers.select_provider`'s choice
                (``PLAIT_MODEL``, an API key in the environment, else the
                embedded model).
            tools: the tools offered (default: shell, read_file, write_file,
                list_files).
            on_approval: asked before each tool call; False records a denied result.
            on_question: answers questions the model asks; when given, the
                ``ask_user`` tool is offered.
            on_event: called with every event (text deltas, records, tools ...).
            timeout: seconds the whole run may take.
            keep_events: keep every event in ``RunResult.events``.
            max_steps: the most model calls this request may make.

        Returns:
            The final text, the records appended, the usage.

        Raises:
            InvalidArgumentError: bad arguments (nothing is written).
            SessionBusyError: a run is in progress here (or, on a client, anywhere).
            SessionLockedError, SessionClosedError: as for any write.
            RunTimeoutError: ``timeout`` passed; ``resume()`` picks the run up.
            ProviderError: the model could not answer (what was recorded stays valid).
        """
        return await self._start_run(text, streamed=False, **options)

    def stream(self, text: str, **options: Unpack[RunOptions]) -> Run:
        """Start :meth:`prompt` as a :class:`Run`: ``async for event in session.stream(text)``.

        Awaiting the run returns its :class:`RunResult`. Arguments and errors
        are those of :meth:`prompt` (argument errors and SessionBusyError are
        raised here, at once).
        """
        return self._start_run(text, streamed=True, **options)

    def run(self, text: str, **options: Unpack[RunOptions]) -> RunResult:
        """:meth:`prompt` for code without an event loop: runs it to the end and returns.

        Raises:
            InvalidArgumentError: called inside a running event loop (await
                :meth:`prompt` there), or bad arguments.
            Everything :meth:`prompt` raises.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise InvalidArgumentError("run() blocks; inside an event loop, await prompt()")
        return asyncio.run(self.prompt(text, **options))

    def steer(self, message: str) -> None:
        """Send a message to the request in progress (seed 001's ``steer``).

        It is added as a user message before the run's next model call; a run
        that was about to finish makes one more call to read it.

        Raises:
            InvalidArgumentError: a blank message.
            NothingToDoError: no run is in progress on this session.
        """
        run = self._host._runs.get(self._id)
        if run is None or run.done:
            raise NothingToDoError(f"no run is in progress on session {self._id}")
        run.steer(message)

    def request_messages(self) -> list[Message]:
        """The messages the next model call sends: the system prompt, then :meth:`history`.

        The system prompt is the newest one in view; when a trim or a reset hid
        every system prompt, the newest one before the view is kept (the agent's
        instructions are configuration, not conversation: D91). A reply that was
        cut off is left out (D73).

        Its cost follows what the request carries, not the transcript: the stored
        tallies say where the newest summary and system prompt are, so a compacted
        session reads the summary and what it kept (D92).
        """
        if self._row is None:
            return []
        row = self._fresh()
        store = self._host.store
        lay = row.layout
        head = self._head_tally(row)
        lo = lay.view_start
        if head is not None and head.summary >= lay.view_start:
            found = store.read(row, head.summary, head.summary + 1)
            if found and isinstance(found[0], SummaryRecord):
                lo = max(lo, found[0].folds_to)
        records = store.read(row, lo, lay.end_seq)
        hidden: str | None = None
        if not any(r.kind == "system" for r in records):
            if head is not None:
                if head.system >= 0:
                    found = store.read(row, head.system, head.system + 1)
                    hidden = system_prompt(found)
            elif lay.view_start > 0:
                key = (row.id, lay.view_start)
                cache = self._host._hidden_system
                if key not in cache:  # read once per view start: the prefix never changes
                    cache[key] = system_prompt(store.read(row, 0, lay.view_start))
                hidden = cache[key]
        return model_messages(records, hidden)

    def _head_tally(self, row: SessionRow) -> Tally | None:
        """The running tally at the head, when it can be had for a few rows, else None."""
        store = self._host.store
        try:
            if row.layout.end_seq - store.counted_end(row) > _COUNT_ON_READ:
                return None  # a long uncounted tail (an import): reading the view is cheaper
            counted = count_pending(store, row, persist=self._writer, best_effort=True)
        except StoreError:
            return None
        head = counted.head
        return None if head.summary == SUMMARY_UNKNOWN else head

    @property
    def running(self) -> bool:
        """Whether a run is in progress on this session in this process."""
        return self._id in self._host._runs

    def resumable(self) -> ResumeInfo | None:
        """Say whether the last request was interrupted and how :meth:`resume` would pick it up.

        Reads without writing and without calling the model (a plain call, as
        every read is: principle 3). ``None`` when nothing was interrupted. It
        reads the transcript's tail back to the last turn, not the whole of it.
        """
        if self._row is None:
            return None
        n = 32
        while True:
            tail = self.tail(n)
            # The last user or assistant record decides; tool results and events after it count.
            if len(tail) < n or any(r.kind in ("user", "assistant") for r in tail):
                return resume_info(tail)
            n *= 8

    async def resume(self, **options: Unpack[RunOptions]) -> RunResult:
        """Pick up an interrupted request (seed 001) and run it to the end.

        What it does depends on :meth:`resumable`'s kind: ``call_model`` calls
        the model; ``recover_tools`` first adds a result to each call that has
        none, saying it was interrupted and may or may not have run (a tool is
        never run again on its own); ``retry_response`` asks again for the reply
        that was cut off; ``continue_response`` asks the model to continue.

        Raises:
            NothingToDoError: nothing was interrupted (the reason says why).
            Everything :meth:`prompt` raises.
        """
        return await self._resume(streamed=False, **options)

    def resume_stream(self, **options: Unpack[RunOptions]) -> Run:
        """:meth:`resume` as a :class:`Run` to iterate.

        Raises:
            NothingToDoError: nothing was interrupted (the reason says why).
        """
        return self._resume(streamed=True, **options)

    def _resume(self, *, streamed: bool, **options: Unpack[RunOptions]) -> Run:
        if self._row is None:
            raise NothingToDoError(f"session {self._id} has nothing stored to resume")
        if self.resumable() is None:
            raise NothingToDoError(
                f"session {self._id} was not interrupted: its last request has its answer"
            )
        return self._start_run(None, streamed=streamed, **options)

    async def ask(self, question: str, *, provider: Provider | str | None = None) -> str:
        """A side question about the conversation that adds nothing to it (seed 001).

        The model sees the request the next turn would send, then the question;
        no tools are offered and nothing is written. It may be asked while a
        run is in progress.

        Raises:
            InvalidArgumentError: a blank question.
            ProviderError: the model could not answer.
        """
        return "".join([piece async for piece in self.ask_stream(question, provider=provider)])

    def ask_stream(
        self, question: str, *, provider: Provider | str | None = None
    ) -> AsyncIterator[str]:
        """:meth:`ask`, returned as an async iterator of text pieces as the model writes them.

        Raises:
            InvalidArgumentError: a blank question (at once).
        """
        if not isinstance(question, str) or not question.strip():
            raise InvalidArgumentError("a question needs some text")
        model = self._provider(provider)
        request = Request([*self.request_messages(), Message("user", question)])
        return _text_stream(model, request)

    async def name_it(self, *, provider: Provider | str | None = None) -> str | None:
        """Give the session a title by asking the model, unless it already has one (seed 001).

        Returns:
            The title as stored: the existing one (left alone, the model is not
            asked), or the model's; ``None`` when there is no exchange yet to name.

        Raises:
            ProviderError: the model could not answer.
        """
        if self._row is None:
            return None
        if self.title is not None:
            return self.title
        messages = self.history()
        if not any(m.role == "user" for m in messages) or not any(
            m.role == "assistant" for m in messages
        ):
            return None
        model = self._provider(provider)
        transcript = "\n".join(f"{m.role}: {m.text[:500]}" for m in messages[-12:] if m.text)
        request = Request(
            [
                Message("system", _NAME_IT_PROMPT),
                Message("user", transcript),
            ],
            max_tokens=32,
        )
        reply = "".join([piece async for piece in _text_stream(model, request)])
        return self.rename(_title_from(reply, messages))

    @property
    def usage(self) -> SessionUsage:
        """Tokens the session's replies cost, added up from their ``meta["usage"]`` (in view).

        The sum is kept per session and view, so a later call reads only the records
        written since the last one.
        """
        if self._row is None:
            return SessionUsage()
        row = self._fresh()
        lay = row.layout
        key = (row.pk, lay.view_start)  # pk, not id: a deleted id may be reused
        cache = self._host._usage
        start, base = cache.pop(key, (lay.view_start, SessionUsage()))
        if start > lay.end_seq:  # cannot happen for one id; start over rather than trust it
            start, base = lay.view_start, SessionUsage()
        total = base + SessionUsage.from_records(self._host.store.read(row, start, lay.end_seq))
        cache[key] = (lay.end_seq, total)
        while len(cache) > _USAGE_CACHE:
            cache.popitem(last=False)  # least recently used
        return total

    def subscribe(self, callback: EventHook) -> Callable[[], None]:
        """Call ``callback`` with every event of every run on this session (seed 003).

        Subscribers live in this process, on this client; a fork does not copy
        them, a reset keeps them. Inside the callback, :func:`plait.current_id`
        is this session's id. An exception in a callback is logged and the run
        goes on.

        Returns:
            A function that removes the subscription.
        """
        if not callable(callback):
            raise InvalidArgumentError("a subscriber must be callable")
        subscribers = self._host._subscribers.setdefault(self._id, [])
        subscribers.append(callback)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                subscribers.remove(callback)

        return unsubscribe


_log = logging.getLogger("plait")

_USAGE_CACHE: Final = 1024  # sessions whose usage sum a host keeps (least recently used go)

_COUNT_ON_READ: Final = 256
"""At most this many uncounted records are counted to find where a request starts (D92)."""

_AUTO_TITLE_MAX: Final = 80  # a title the model gives is cut here (rename() allows MAX_TITLE)

_NAME_IT_PROMPT: Final = (
    "Give the conversation below a short title: at most six words, no quotes, no "
    "trailing punctuation. Answer with the title only."
)


def _title_from(reply: str, messages: Sequence[Message]) -> str:
    """A clean title from the model's answer; the first request's words when it gave none."""
    line = next((ln for ln in reply.strip().splitlines() if ln.strip()), "")
    line = line.strip().strip("\"'`*#").strip().rstrip(".:;!")
    if line.lower().startswith("title:"):
        line = line[6:].strip()
    if not line:
        first = next(m.text for m in messages if m.role == "user")
        line = " ".join(first.split()[:6]) or "Untitled"
    return line[:_AUTO_TITLE_MAX]


async def _text_stream(model: Provider, request: Request) -> AsyncIterator[str]:
    """The text pieces of one model call (tool calls ignored)."""
    async for event in model.stream(request):
        if isinstance(event, TextDelta) and event.text:
            yield event.text


@dataclass(frozen=True, slots=True)
class SessionUsage:
    """Tokens a session's replies cost (seed 001's ``session.usage``)."""

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    """Tokens the model wrote."""
    cached_tokens: int = 0
    """The part of ``input_tokens`` served from the provider's cache."""
    replies: int = 0
    """Replies that reported usage."""

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: SessionUsage) -> SessionUsage:
        return SessionUsage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.replies + other.replies,
        )

    @classmethod
    def from_records(cls, records: Iterable[Record]) -> SessionUsage:
        """Add up the ``meta["usage"]`` of the assistant records."""
        i = o = c = n = 0
        for record in records:
            if isinstance(record, AssistantRecord):
                usage = record.meta.get("usage")
                if isinstance(usage, dict):
                    counted = Usage.from_json(usage)
                    i, o, c, n = (
                        i + counted.input_tokens,
                        o + counted.output_tokens,
                        c + counted.cached_tokens,
                        n + 1,
                    )
        return cls(i, o, c, n)


RunBody = Callable[[Session, RunSpec, Run], Awaitable[RunResult]]
"""The agent loop: drives a session as a ``RunSpec`` says, reporting through the ``Run``."""

_RUNNER: RunBody | None = None


def register_runner(body: RunBody) -> None:
    """Install the agent loop that drives runs (``plait.run`` does this when imported)."""
    global _RUNNER
    _RUNNER = body
