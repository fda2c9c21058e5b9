"""Client: a workspace's view of a store, and the collection of its sessions (seed 001).

How a stored session is shown in lists and stats is :mod:`plait.client.listing`'s.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Final

from plait._checks import check_int
from plait._files import usable_path
from plait._ids import is_session_id
from plait.client.listing import (
    STATE_ONLY,
    SessionInfo,
    SessionStats,
    conversations,
    is_conversation,
)
from plait.errors import (
    InvalidArgumentError,
    SessionNotFoundError,
    StorePartMissingError,
    shown,
)
from plait.lineage import Ancestry
from plait.records import JSONLike, JSONValue, Message
from plait.session import (
    DEFAULT_LOCK_TIMEOUT,
    Session,
    SessionHost,
    Snapshot,
    WriterLockMode,
    checkpoints,
    retention,
    validate_workspace_policy,
)
from plait.session.counting import shown_lengths
from plait.store import Store, TranscriptStore, open_store
from plait.store.base import SessionRow
from plait.store.search import SearchHit, SearchStore

__all__ = [
    "STATE_ONLY",
    "Client",
    "SessionCollection",
    "SessionInfo",
    "SessionStats",
    "conversations",
    "is_conversation",
]

DEFAULT_LIMIT: Final = 20


def _check_limit(limit: object) -> int:
    return check_int(limit, "limit", lo=1)


class SessionCollection:
    """``client.sessions``: the stored sessions of the client's workspace."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(
        self,
        limit: int = DEFAULT_LIMIT,
        *,
        all_workspaces: bool = False,
        prefix: str | None = None,
    ) -> builtins.list[SessionInfo]:
        """List stored sessions, most recently active first.

        Args:
            limit: at most this many (a positive int).
            all_workspaces: list every workspace's sessions, not only this one's.
            prefix: only sessions whose id starts with this (``"user/42/"``: the
                conversations kept under one key); plait's stores read only those.

        Raises:
            InvalidArgumentError (a ValueError): ``limit`` is not a positive int, or
                ``prefix`` is not text.
        """
        n = _check_limit(limit)
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidArgumentError(f"prefix must be text, not {type(prefix).__name__}")
        store = self._client.store
        rows = conversations(store, None if all_workspaces else self._client.workspace, n, prefix)
        lengths = shown_lengths(store, rows)
        return [SessionInfo.from_row(r, n) for r, n in zip(rows, lengths, strict=True)]

    def search(
        self, query: str, *, limit: int = 20, all_workspaces: bool = False
    ) -> builtins.list[SearchHit]:
        """Search the text of every stored session's messages, newest message first.

        Args:
            query: words (all must match) and ``"quoted phrases"``; SQLite also reads
                FTS5's operators, PostgreSQL web search's.
            limit: at most this many hits (a positive int).
            all_workspaces: search every workspace's sessions, not only this one's.

        Returns:
            A hit (session id, title, position, role, snippet with each matched term
            between ``«`` and ``»``) per message and live session that shows it: a
            message forks share is a hit in each fork.

        Raises:
            InvalidArgumentError (a ValueError): an empty query or a bad ``limit``;
                :class:`~plait.errors.SearchQueryError` for a query the store cannot parse.
            StorePartMissingError (a StoreError): the store keeps no full-text index.
        """
        n = _check_limit(limit)
        store = self._client.store
        if not isinstance(store, SearchStore):
            raise StorePartMissingError("search", "SearchStore", "searching sessions")
        return store.search(query, n, None if all_workspaces else self._client.workspace)

    def new(self) -> Session:
        """Start an empty conversation and make it current (stored when first written).

        Returns:
            The new session's handle, now ``client.session``.
        """
        host = self._client.host
        return host.make_current(host.new_session())

    def open(self, session_id: str) -> Session:
        """Continue a stored conversation and make it current.

        Args:
            session_id: the stored session's id.

        Returns:
            The one live handle on that session, now ``client.session``.

        Raises:
            SessionNotFoundError: unknown, unreadable, or an id that would leave the store.
        """
        host = self._client.host
        return host.make_current(host.get(session_id))

    def latest(self) -> Session | None:
        """Continue the most recently active session of this workspace, or return None.

        Returns:
            Its handle, now ``client.session``; None when the workspace has none stored.
        """
        rows = conversations(self._client.store, self._client.workspace, 1)
        if not rows:
            return None
        host = self._client.host
        return host.make_current(host.handle(rows[0]))

    def _row_in(self, session_id: str, workspace: str | os.PathLike[str] | None) -> SessionRow:
        row = self._client.host.lookup(session_id)
        if workspace is not None and row.workspace != _workspace_path(workspace):
            raise SessionNotFoundError(session_id, f"not in workspace {os.fspath(workspace)!r}")
        return row

    def history_of(
        self,
        session_id: str,
        *,
        workspace: str | os.PathLike[str] | None = None,
        full: bool = True,
    ) -> builtins.list[Message]:
        """Read any stored session's messages without making it current.

        Args:
            session_id: the session.
            workspace: if given, the session must belong to this workspace.
            full: every message as written (default), or only what the model works with.

        Raises:
            SessionNotFoundError: unknown, not in ``workspace``, or an invalid id.
        """
        # Through the session's own reads: messages straight from the stored rows (D205).
        return self._client.host.handle(self._row_in(session_id, workspace)).history(full=full)

    def stamp(
        self, session_id: str, *, workspace: str | os.PathLike[str] | None = None
    ) -> str | None:
        """A value that changes exactly when the stored session changes, or None.

        One point read; poll it and read the conversation only when it moved.
        """
        try:
            self._row_in(session_id, workspace)
        except SessionNotFoundError:
            return None
        return self._client.store.stamp(session_id)

    def create(
        self,
        messages: Iterable[Mapping[str, JSONValue]] = (),
        *,
        session_id: str | None = None,
        title: str | None = None,
        lineage_operator: str | None = None,
        metadata: Mapping[str, JSONLike] | None = None,
    ) -> Session:
        """Create a stored session holding ``messages``, in one transaction (for importers).

        Every message is checked first; a bad one raises and nothing is stored.
        The new session does not become current.

        Args:
            messages: message dicts as :meth:`Session.inject` takes them.
            session_id: the id (default: a new UUIDv7).
            title: a title (trimmed; blank or over 200 characters is an error).
            lineage_operator: how it was made, e.g. ``Session.import``.
            metadata: provenance and other JSON metadata kept with the session.

        Raises:
            InvalidMessageError: a message is malformed.
            InvalidArgumentError: a bad id, title or metadata.
            SessionExistsError: ``session_id`` is taken.
        """
        return self._client.host.create_session(
            messages,
            session_id=session_id,
            title=title,
            operator=lineage_operator,
            metadata=metadata,
        )

    def open_elsewhere(
        self, session_id: str, *, workspace: str | os.PathLike[str] | None = None
    ) -> bool:
        """Whether another process has the stored session open for writing (a snapshot).

        Raises:
            SessionNotFoundError: unknown, not in ``workspace``, or an invalid id.
            StorePartMissingError: the store has no writer locks, so it cannot say (D420).
        """
        row = self._row_in(session_id, workspace)
        if self._client.host.holds_lock(row.id):
            return False
        return self._client.store.locked_elsewhere(row.id)

    def delete(self, session_id: str) -> None:
        """Delete a stored session. Branches that share its records keep them.

        Raises:
            SessionNotFoundError: unknown or invalid id.
            SessionLockedError: another process has it open for writing (with
                ``writer_lock="write"``: SessionLockTimeoutError, after ``lock_timeout``).
        """
        self._remove(session_id, erase=False)

    def erase(self, session_id: str) -> None:
        """Delete a stored session and remove its records, for users who must forget data.

        Unlike :meth:`delete` (whose tombstone keeps every record while a branch shares
        any), this removes at once every record of the session and of its hidden heads
        that no other live session reads: a fork keeps the prefix it shares, nothing
        more. SQLite overwrites the freed pages and truncates its write-ahead log;
        PostgreSQL frees the rows at its next ``VACUUM``.

        Raises:
            SessionNotFoundError: unknown or invalid id.
            SessionLockedError: another process has it open for writing.
        """
        self._remove(session_id, erase=True)

    def retain(
        self,
        older_than: timedelta | float | str,
        *,
        dry_run: bool = False,
        all_workspaces: bool = False,
        vacuum: bool = False,
        checkpoint_grace: float = checkpoints.PRUNE_GRACE,
    ) -> retention.Retained:
        """Remove the sessions idle for longer than ``older_than``; give their space back.

        Each idle session (no write since) is erased as :meth:`erase` does, with its
        hidden heads and the checkpoints no kept session needs; what a kept session
        reads stays, so every kept session still resumes. A session in a run, held by
        a writer, or holding a framework's state is kept (D310-D313).

        Args:
            older_than: a ``timedelta``, seconds, or text such as ``30d``, ``12h``, ``2w``.
            dry_run: report what would go; change nothing.
            all_workspaces: every session of the store, not only this workspace's.
            vacuum: rewrite the store where only that gives space back (an older SQLite
                file; PostgreSQL's ``VACUUM FULL``, which locks each table meanwhile).
            checkpoint_grace: seconds of recent use that keep a checkpoint object.

        Raises:
            InvalidArgumentError: not a positive duration, a flag not a bool, or a bad grace.
        """
        if not isinstance(all_workspaces, bool):
            raise InvalidArgumentError(f"all_workspaces is True or False, not {all_workspaces!r}")
        return retention.retain(
            self._client.host,
            older_than,
            dry_run=dry_run,
            workspace=None if all_workspaces else self._client.workspace,
            vacuum=vacuum,
            checkpoint_grace=checkpoint_grace,
            spare=lambda row: not is_conversation(row),
        )

    def prune_checkpoints(
        self, *, dry_run: bool = False, grace: float = checkpoints.PRUNE_GRACE
    ) -> checkpoints.Pruned:
        """Remove the workspace checkpoint objects no live session or branch references.

        Every session of the store (all workspaces) is read; an object any tool record
        still needs, directly or through a tree, stays, and so does one written or used
        within ``grace`` seconds (a checkpoint whose tool call has not been recorded yet).

        Args:
            dry_run: count what would go; delete nothing.
            grace: seconds of recent use that keep an object (default one hour).

        Returns:
            How many ids are referenced and how many objects went (or would go).

        Raises:
            InvalidArgumentError: a bad ``dry_run`` or ``grace``.
        """
        return checkpoints.prune(self._client.store, grace=grace, dry_run=dry_run)

    def _remove(self, session_id: str, *, erase: bool) -> None:
        host = self._client.host
        row = host.lookup(session_id)
        with host.locked(row.id):
            if erase:
                host.store.erase(row.id)
            else:
                host.store.delete(row.id)
        host.forget(row.id)


def _workspace_path(workspace: str | os.PathLike[str]) -> str:
    """The absolute, resolved folder a workspace argument names.

    Raises:
        InvalidArgumentError: not a path the file system can name, or a loop of symlinks.
    """
    try:
        raw = os.fspath(workspace)
    except TypeError:
        raise InvalidArgumentError(
            f"a workspace is a folder path, not {shown(workspace)}"
        ) from None
    try:
        return str(Path(usable_path(raw, workspace)).expanduser().resolve())
    except (OSError, RuntimeError) as exc:  # RuntimeError: a loop of symlinks
        raise InvalidArgumentError(
            f"cannot resolve the workspace {shown(workspace)}: {exc}"
        ) from exc


class Client:
    """A workspace's entry to the stored sessions.

    Usable as ``with Client(".") as client:`` and ``async with``. The client
    opens the store it was given by path (and closes it on exit); a
    :class:`plait.store.Store` passed in stays open.

    One way per verb: ``client.session`` is the current conversation;
    ``client.sessions`` lists, starts (``new``, ``create``), continues (``open``,
    ``latest``), reads and removes stored ones; ``client.open(id)`` is seed 003's
    idempotent open-or-create; ``exists``, ``snapshot`` and ``ancestry`` read one
    session by id and tolerate unknown ids. ``client.host`` is the machinery that
    servers and framework adapters share with it (D410).

    Args:
        workspace: the folder the sessions belong to (default: the working directory).
        store: a Store (or a store with only some of its parts: every TranscriptStore
            member at least, the rest served or refused, see ``plait.store.PARTS``), a
            path, ``":memory:"``, or None for ``$PLAIT_STORE`` or the default file.
        resume: start on this stored session instead of a new one.
        writer_lock: ``"process"`` (default, seed 001): a session this client writes
            stays locked for writing by this process until it ends or calls
            ``release()``; another process reads it but cannot write it. ``"write"``:
            the lock is taken for one write, or one run (``prompt``, ``stream``,
            ``run``, ``compact``) from start to end, and given back after, so the
            worker processes of a server take turns on one conversation. A turn that
            finds the lock taken waits for it.
        lock_timeout: how long a ``"write"`` turn waits for the lock, in seconds
            (default 10; 0 asks once).
        encryption_key: the master key of an encrypted store opened by path
            (``plait db keygen``, D320); None for ``$PLAIT_ENCRYPTION_KEY``'s, if set.

    Raises:
        InvalidArgumentError: ``workspace`` is not a folder path, or ``store`` is none of these.
        SessionNotFoundError: ``resume`` names no stored session.
        InvalidArgumentError: an unknown ``writer_lock`` or a bad ``lock_timeout``.
        EncryptionKeyError: an encrypted store without its key, or with another.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] = ".",
        *,
        store: TranscriptStore | str | os.PathLike[str] | None = None,
        resume: str | None = None,
        writer_lock: WriterLockMode = "process",
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        encryption_key: str | bytes | None = None,
    ) -> None:
        owns = not isinstance(store, TranscriptStore)
        folder = _workspace_path(workspace)  # checked before a store is opened for it
        self._owns_store = owns
        self.host: SessionHost = SessionHost(
            open_store(store, encryption_key=encryption_key), folder
        )
        """The store, the one live handle per session and the run board behind this client:
        the machinery a server or a framework adapter shares with it, not a user's verbs."""
        self.store: Store = self.host.store
        """The store the sessions are kept in."""
        self.workspace: str = folder
        """The absolute folder this client's sessions belong to."""
        # session_stats: id -> (stamp when read, stats), so unchanged sessions are not re-read.
        self._stats: dict[str, tuple[str, SessionStats]] = {}
        self.sessions: SessionCollection = SessionCollection(self)
        """The stored sessions of this workspace."""
        try:
            self.host.set_writer_lock(writer_lock, lock_timeout)
            self.host.exclusive_runs = True  # seed 001: a client runs one thing at a time
            if resume is not None:
                self.sessions.open(resume)
        except BaseException:
            self.close()
            raise

    @property
    def session(self) -> Session:
        """The current conversation (a new, empty one until another is opened)."""
        host = self.host
        current = host.current
        if current is None:
            current = host.make_current(host.new_session())
        return current

    def open(
        self,
        session_id: str | None = None,
        *,
        workspace_anchor: str | None = None,
        workspace_policy: dict[str, JSONValue] | None = None,
    ) -> Session:
        """Open or create a session by id (seed 003's idempotent ``open``).

        Unlike ``sessions.open``, an unknown id is created (stored at once, so
        ``exists`` is then True), and the session does not become current;
        ``None`` mints a UUIDv7.

        Args:
            session_id: the id to open or create.
            workspace_anchor: the folder tools treat as the workspace root.
            workspace_policy: ``{"default_mount_mode": "read_only" | "read_write"}``.

        Returns:
            The one live handle on the session.

        Raises:
            InvalidArgumentError: an invalid id, anchor or policy.
        """
        settings: dict[str, JSONValue] = {}
        if workspace_anchor is not None:
            if not isinstance(workspace_anchor, str) or not workspace_anchor:
                raise InvalidArgumentError("workspace_anchor must be a non-empty string")
            settings["workspace_anchor"] = workspace_anchor
        if workspace_policy is not None:
            settings["workspace_policy"] = validate_workspace_policy(workspace_policy)
        host = self.host
        if session_id is not None:
            try:
                handle = host.get(session_id)
            except SessionNotFoundError:
                if not isinstance(session_id, str) or not is_session_id(session_id):
                    raise InvalidArgumentError(
                        f"{shown(session_id)} is not a valid session id"
                    ) from None
            else:
                if settings and any(handle.settings.get(k) != v for k, v in settings.items()):
                    handle.settings.set(**settings)
                return handle
        handle = host.new_session(session_id)
        handle.settings.set(**settings)
        return handle

    def exists(self, session_id: object) -> bool:
        """Whether a stored session has this id; False for anything that is not an id.

        Args:
            session_id: anything; only a stored session's id answers True.

        Returns:
            True when the store holds a live session under that id.
        """
        try:
            self.host.lookup(session_id)
        except SessionNotFoundError:
            return False
        return True

    def snapshot(self, session_id: object) -> Snapshot | None:
        """Return a session's snapshot, or None for an unknown id (seed 003).

        Args:
            session_id: the session; anything that is not a stored id gives None.

        Returns:
            The session's :class:`~plait.session.Snapshot`, or None.
        """
        try:
            row = self.host.lookup(session_id)
        except SessionNotFoundError:
            return None
        return self.host.handle(row).transcript.snapshot()

    def ancestry(self, session_id: object) -> Ancestry | None:
        """Return a session's ancestry, or None for an unknown id (seed 003).

        Args:
            session_id: the session; anything that is not a stored id gives None.

        Returns:
            Its parent, children and root, or None.
        """
        try:
            row = self.host.lookup(session_id)
        except SessionNotFoundError:
            return None
        return self.host.handle(row).transcript.ancestry()

    def session_stats(self, ids: Iterable[str] | None = None) -> builtins.list[SessionStats]:
        """What each session holds: entries, replies, tokens and cached share (seed 001).

        A plain call (principle 3: it only reads the store). Each session is
        read only when its stamp moved since this client last counted it; an
        unchanged one costs one point read.

        Args:
            ids: the sessions, in the order wanted. None: the current session
                (all zeros while it is not stored yet, as for its id given here).

        Returns:
            One :class:`SessionStats` per id, in the order given.

        Raises:
            InvalidArgumentError: ``ids`` is a string or holds something that is not one.
            SessionNotFoundError: an id names no stored session (other than the
                current, not yet stored, one).
        """
        if ids is None:
            wanted = [self.session.id]
        elif isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
            raise InvalidArgumentError("ids must be a list of session ids (or None)")
        else:
            wanted = list(ids)
        for sid in wanted:
            if not isinstance(sid, str):
                raise InvalidArgumentError(f"a session id is a string, not {type(sid).__name__}")
        return [self._stats_of(sid) for sid in wanted]

    def _stats_of(self, session_id: str) -> SessionStats:
        current = self.host.current
        if current is not None and current.id == session_id and not current.transcript.stored:
            return SessionStats(session_id, 0, 0, 0, 0, 0, 0.0)
        stamp = self.store.stamp(session_id) if is_session_id(session_id) else None
        cached = self._stats.get(session_id)
        if stamp is not None and cached is not None and cached[0] == stamp:
            return cached[1]
        # The stamp was read first: a write after it makes the next call read again.
        row = self.host.lookup(session_id)
        records = self.store.read(row, row.layout.view_start, row.layout.end_seq)
        stats = SessionStats.from_records(row.id, records)
        if stamp is not None:
            self._stats[session_id] = (stamp, stats)
        return stats

    def close(self) -> None:
        """Give back the sessions' sandboxes, and close the store if the client opened it.

        A temporary sandbox folder plait made for a session goes now. Idempotent.
        """
        host = self.host
        host.close_sandboxes()
        host.store_calls.close()  # what runs and the server handed over runs first
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(workspace={self.workspace!r}, store={self.store.location!r})"
