"""pydantic-ai conversations in plait (``pip install 'plait[pydantic-ai]'``).

Two ways in, both writing ordinary plait sessions (history, context, fork,
compaction, export and the web page read them):

* **Message history**, for code that passes ``message_history=``::

      from plait.integrations.pydantic_ai import load_messages, save_messages

      result = await agent.run(prompt, message_history=load_messages(session))
      save_messages(session, result.new_messages())

* **pydantic-ai's** ``ConversationStore``, for code that passes ``conversation=``::

      store = PlaitConversationStore("chats.db")
      conversation = await store.load(cid) or Conversation(conversation_id=cid)
      await store.save(await agent.run(prompt, conversation=conversation))

Every message is kept verbatim (pydantic-ai's own JSON, so no field is lost)
and mapped to the plait records a reader expects (see
:mod:`plait.integrations._pydantic_parts`). In the store, a conversation is a
plait session under its id; a revision token is the session's version, so a
save is plait's compare-and-set (``expect_version``); a fork is ``fork_at``
(it shares the records); a branch moves the head with ``rewind`` and keeps the
history it leaves as a hidden plait branch (D177).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

from plait.client import Client
from plait.errors import (
    AdapterClosedError,
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
)
from plait.integrations._offload import in_thread, settled
from plait.integrations._pydantic_parts import (
    FORMAT,
    META_KEY,
    Group,
    dump,
    groups,
    load,
    message_dicts,
)
from plait.integrations._views import compacted
from plait.records import JSONValue, Record
from plait.session import Session
from plait.store import Store

try:
    from pydantic import TypeAdapter
    from pydantic_ai.conversation_store import (
        ConversationConflict,
        ConversationEntry,
        ConversationRecord,
        ConversationStore,
    )
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.tools import DeferredToolRequests
    from pydantic_ai.usage import RunUsage
except ImportError as exc:  # pragma: no cover - the extra is part of the test install
    raise MissingDependencyError("plait's pydantic-ai integration", "pydantic-ai") from exc

__all__ = [
    "FORMAT",
    "PlaitConversationStore",
    "from_records",
    "load_messages",
    "save_messages",
    "to_plait_messages",
]

_T = TypeVar("_T")
_OPERATOR: Final = "pydantic-ai"
_USAGE: TypeAdapter[RunUsage] = TypeAdapter(RunUsage)
_DEFERRED: TypeAdapter[DeferredToolRequests | None] = TypeAdapter(DeferredToolRequests | None)
_LISTED: Final = 10_000  # the most recent sessions read_records looks through
_FORKS: Final = ("Session.fork", "Session.fork_at")  # plait's own forks (not a rewind's branch)
_ANCESTORS: Final = 64  # how far up its lineage a plait fork's conversation is looked for


# -- message history ------------------------------------------------------------------------


def to_plait_messages(
    messages: Sequence[ModelMessage], *, parent: str | None = None
) -> list[dict[str, JSONValue]]:
    """The plait message dicts (``transcript.inject_many`` takes them) for pydantic-ai messages.

    Args:
        messages: the messages, oldest first.
        parent: the entry id of the message before the first one (None: none).
    """
    out: list[dict[str, JSONValue]] = []
    for raw in dump(messages):
        entry = str(uuid.uuid4())
        out.extend(message_dicts(raw, entry, parent))
        parent = entry
    return out


def _entries(records: Sequence[Record]) -> list[Group]:
    return groups(compacted(records))


def from_records(records: Sequence[Record]) -> list[ModelMessage]:
    """The pydantic-ai messages plait records hold, oldest first (as a compaction left them)."""
    return load([g.message for g in _entries(records)])


def load_messages(session: Session) -> list[ModelMessage]:
    """A plait session's conversation as ``message_history=`` takes it (empty if not stored)."""
    if not session.transcript.stored:
        return []
    return from_records(session.transcript.records)


def save_messages(session: Session, messages: Sequence[ModelMessage]) -> None:
    """Append pydantic-ai messages (``result.new_messages()``) to a plait session, in one write.

    Raises:
        InvalidArgumentError: a message holds a value with no JSON form; none is stored.
    """
    if not messages:
        return
    parent = _head_of(session) if session.transcript.stored else None
    session.transcript.inject_many(to_plait_messages(messages, parent=parent))


def _view_head(records: Sequence[Record]) -> str | None:
    """The entry id of the newest message of the view (as a compaction left it)."""
    found = _entries(records)
    return found[-1].entry if found else None


def _tips(state: JSONValue) -> dict[str, str]:
    """The ``tips`` of a conversation's stored state (a branch's head entry -> its session)."""
    tips = state.get("tips") if isinstance(state, dict) else None
    if not isinstance(tips, dict):
        return {}
    return {tip: sid for tip, sid in tips.items() if isinstance(sid, str)}


def _head_of(session: Session) -> str | None:
    """The entry id of a session's newest message: from its tail, past a summary from its view.

    A message that is none of pydantic-ai's (an opaque item of another format, which a
    plait run may leave) is passed over: the tail is read further back.
    """
    want = 1
    while True:
        tail = session.transcript.tail(want)
        if any(r.kind == "summary" for r in tail):  # written last, read first (or hidden)
            return _view_head(session.transcript.records)
        head = _head_entry(tail)
        if head is not None or sum(r.kind != "event" for r in tail) < want:
            return head
        want *= 4


def _head_entry(records: Sequence[Record]) -> str | None:
    """The entry id of the newest message among ``records``."""
    found = groups(records)
    for record in reversed(records):
        mine = record.meta.get(META_KEY)
        if isinstance(mine, dict) and isinstance(mine.get("entry"), str):
            return str(mine["entry"])
        if found and record in found[-1].records:
            return found[-1].entry
    return None


# -- the ConversationStore ----------------------------------------------------------------


def _count_through(records: Sequence[Record], entry: str) -> int | None:
    """How many messages (as ``fork_at`` and ``rewind`` count them) run through ``entry``."""
    last: Record | None = None
    for g in groups(records):
        if g.entry == entry:
            last = g.records[-1]
    if last is None:
        return None
    messages = [r for r in records if r.kind != "event"]
    return messages.index(last) + 1


class PlaitConversationStore(ConversationStore):
    """pydantic-ai's ``ConversationStore`` over plait sessions, one per conversation.

    Args:
        store: anything :func:`plait.store.open_store` takes (a path, ``":memory:"``, a
            ``postgresql://`` URL, a Store; None for ``$PLAIT_STORE`` or the
            default file), or a :class:`plait.Client` (used as is, never closed here;
            make it with ``writer_lock="write"`` for several processes to share one).
        workspace: the workspace of the sessions it creates (a client's own otherwise).
        lock_timeout: seconds a save waits for another writer of the same
            conversation (then ``SessionLockTimeoutError``); None for plait's default.

    ``delete`` erases: the records no other conversation's history shares are
    removed, with the branches the conversation left. Entries are found by id
    in the conversations this store object has read (every method of the base
    class reads the conversation first).
    """

    def __init__(
        self,
        store: Client | Store | str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] = ".",
        lock_timeout: float | None = None,
    ) -> None:
        if isinstance(store, Client):
            self._client, self._owns = store, False
        else:
            options: dict[str, Any] = {"store": store, "writer_lock": "write"}
            if lock_timeout is not None:
                options["lock_timeout"] = lock_timeout
            self._client, self._owns = Client(workspace, **options), True
        self._closed = False
        # entry id -> the plait session (a conversation or a branch it left) that holds it
        self._where: dict[str, str] = {}

    @property
    def client(self) -> Client:
        """The plait client the conversations are read and written through."""
        return self._client

    def close(self) -> None:
        """Close the store if this object opened it; later calls raise ``AdapterClosedError``."""
        if not self._closed:
            self._closed = True
            if self._owns:
                self._client.close()

    async def _call(self, fn: Callable[[], _T], write: bool = False) -> _T:
        if self._closed:
            raise AdapterClosedError("PlaitConversationStore is closed")
        return await (settled if write else in_thread)(self._client, fn)

    def _get(self, session_id: str) -> Session | None:
        try:
            return self._client.host.get(session_id)
        except SessionNotFoundError:
            return None

    @staticmethod
    def _revision(session: Session) -> str:
        # The creation time tells apart a conversation deleted and created again.
        return f"{session.transcript.created_at.isoformat()}/{session.live.version}"

    # -- the five primitives --------------------------------------------------------------

    async def read_record(self, conversation_id: str) -> ConversationRecord | None:
        """The record for a conversation, or None if the store does not have it."""
        return await self._call(lambda: self._record(conversation_id))

    def _record(self, conversation_id: str) -> ConversationRecord | None:
        session = self._get(conversation_id)
        state = self._state_of(session) if session is not None else None
        if session is None or state is None:
            return None  # a plait session, not a pydantic-ai conversation
        return self._record_of(session, state)

    def _state_of(self, session: Session) -> dict[str, Any] | None:
        """The conversation's stored state; for a plait fork of one, what ``fork`` would store.

        A fork made with plait's ``fork`` / ``fork_at`` keeps no state of its own: it is a
        fork of the nearest conversation up its lineage, in that one's scope, with the usage
        and deferred requests only if it kept the whole history (as ``store.fork`` does).
        The first save stores it.
        """
        state = session.settings.metadata.get(META_KEY)
        if isinstance(state, dict):
            return state
        row: Session | None = session
        for _ in range(_ANCESTORS):
            if row is None or row.lineage_operator not in _FORKS or not row.parent_session_ids:
                return None
            row = self._get(row.parent_session_ids[0])
            found = row.settings.metadata.get(META_KEY) if row is not None else None
            if row is not None and isinstance(found, dict):
                head = _head_of(session)
                whole = head == _head_of(row)
                return {
                    "usage": found.get("usage") if whole else None,
                    "deferred": found.get("deferred") if whole else None,
                    "scope": found.get("scope"),
                    "forked_from": row.id,
                    "forked_at": head,
                }
        return None

    def _record_of(self, session: Session, state: dict[str, Any]) -> ConversationRecord:
        head = _head_of(session)
        if head is not None:
            self._where[head] = session.id
        tips = _tips(state)
        self._where.update(tips)
        return ConversationRecord(
            conversation_id=session.id,
            head_id=head,
            usage=_USAGE.validate_python(state.get("usage") or {}),
            deferred_tool_requests=_DEFERRED.validate_python(state.get("deferred")),
            scope=state.get("scope"),
            forked_from=state.get("forked_from"),
            forked_at=state.get("forked_at"),
            branches=list(state.get("branches") or []),
            revision=self._revision(session),
            updated_at=session.transcript.updated_at,
        )

    async def read_records(
        self, *, scope: str | None = None, limit: int | None = None
    ) -> Sequence[ConversationRecord]:
        """The stored conversations (of ``scope``), most recently saved first, at most ``limit``."""
        return await self._call(lambda: self._records(scope, limit))

    def _records(self, scope: str | None, limit: int | None) -> list[ConversationRecord]:
        out: list[ConversationRecord] = []
        for info in self._client.sessions.list(_LISTED):
            if limit is not None and len(out) >= limit:
                break
            session = self._get(info.id)
            state = self._state_of(session) if session is not None else None
            if session is None or state is None:
                continue
            if scope is None or state.get("scope") == scope:
                out.append(self._record_of(session, state))
        return out

    async def write_record(
        self,
        record: ConversationRecord,
        *,
        new_entries: Sequence[ConversationEntry] = (),
        expected_revision: str | None,
    ) -> None:
        """Store ``record`` and its new entries as a compare-and-set on ``expected_revision``.

        On success ``record.revision`` is the conversation's new revision.

        Raises:
            ConversationConflict: the stored revision is not ``expected_revision``
                (or a conversation exists when it is None), or ``record.head_id`` names
                an entry the store does not have.
        """
        await self._call(lambda: self._write(record, list(new_entries), expected_revision), True)

    def _state(self, record: ConversationRecord, tips: dict[str, str]) -> dict[str, JSONValue]:
        return {
            "usage": _USAGE.dump_python(record.usage, mode="json"),
            "deferred": _DEFERRED.dump_python(record.deferred_tool_requests, mode="json"),
            "scope": record.scope,
            "forked_from": record.forked_from,
            "forked_at": record.forked_at,
            "branches": list(record.branches),
            "tips": {tip: tips[tip] for tip in record.branches if tip in tips},
        }

    def _messages(self, entries: list[ConversationEntry]) -> list[dict[str, JSONValue]]:
        raws = dump([e.message for e in entries])
        return [
            m
            for e, raw in zip(entries, raws, strict=True)
            for m in message_dicts(raw, e.id, e.parent_id)
        ]

    def _write(
        self, record: ConversationRecord, entries: list[ConversationEntry], expected: str | None
    ) -> None:
        cid = record.conversation_id
        session = self._get(cid)
        try:
            if expected is None:
                if session is not None:
                    raise ConversationConflict(cid)
                session = self._create(record, entries)
            else:
                if session is None or self._revision(session) != expected:
                    raise ConversationConflict(cid)
                self._update(session, record, entries, expected)
        except (StaleSessionError, SessionExistsError):
            raise ConversationConflict(cid) from None
        for entry in entries:
            self._where[entry.id] = cid
        record.revision = self._revision(session)

    def _create(self, record: ConversationRecord, entries: list[ConversationEntry]) -> Session:
        cid = record.conversation_id
        messages = self._messages(entries)
        start = entries[0].parent_id if entries else record.head_id
        if start is None:
            return self._client.sessions.create(
                messages,
                session_id=cid,
                lineage_operator=_OPERATOR,
                metadata={META_KEY: self._state(record, {})},
            )
        # A fork: share the history up to ``start`` with the session that holds it.
        places = [self._where.get(start), record.forked_from]
        origin = self._get(record.forked_from) if record.forked_from else None
        if origin is not None:
            state = origin.settings.metadata.get(META_KEY)
            places += list(_tips(state).values())
        found = self._find(start, places)
        if found is None:
            raise ConversationConflict(cid)
        source, keep = found
        fork = source.fork_at(keep, cid)
        if messages:
            fork.transcript.inject_many(messages)
        fork.settings.set_metadata(META_KEY, self._state(record, {}))
        return fork

    def _update(
        self,
        session: Session,
        record: ConversationRecord,
        entries: list[ConversationEntry],
        expected: str,
    ) -> None:
        version = int(expected.rsplit("/", 1)[1])
        state = session.settings.metadata.get(META_KEY)
        tips = _tips(state)
        records = session.transcript.records
        head = _view_head(records)
        start = entries[0].parent_id if entries else record.head_id
        if start != head:
            keep = 0 if start is None else _count_through(records, start)
            found = None if keep is not None or start is None else self._find(start, tips.values())
            if found is not None and start is not None:
                # Back to a branch the conversation left; this head becomes a branch in turn.
                branch = found[0].id
                left = session.transcript.undo_rewind(branch, expect_version=version)
                tips = {tip: sid for tip, sid in tips.items() if sid != branch}
                if head is not None:
                    tips[head] = left
                records = session.transcript.records
                head = _view_head(records)
                keep = _count_through(records, start)
                version = session.live.version
            if keep is None:
                raise ConversationConflict(record.conversation_id)
            if start != head:
                left = session.transcript.rewind(keep, expect_version=version)
                if head is not None:
                    tips[head] = left
                    self._where[head] = left
                version = session.live.version
        if entries:
            session.transcript.inject_many(self._messages(entries), expect_version=version)
        session.settings.set_metadata(META_KEY, self._state(record, tips))

    def _find(self, entry: str, places: Iterable[str | None]) -> tuple[Session, int] | None:
        """The first of ``places`` (session ids) holding ``entry``, and its count through it."""
        for place in places:
            session = self._get(place) if place else None
            records = session.transcript.records if session is not None else None
            keep = _count_through(records, entry) if records is not None else None
            if session is not None and keep is not None:
                return session, keep
        return None

    async def delete_record(self, conversation_id: str, *, expected_revision: str) -> None:
        """Erase a conversation: its records no other conversation shares, and its branches.

        Raises:
            ConversationConflict: no conversation with ``expected_revision`` is stored.
        """
        await self._call(lambda: self._delete(conversation_id, expected_revision), True)

    def _delete(self, conversation_id: str, expected: str) -> None:
        session = self._get(conversation_id)
        if session is None or self._revision(session) != expected:
            raise ConversationConflict(conversation_id)
        self._client.sessions.erase(conversation_id)

    async def read_entry(self, entry_id: str) -> ConversationEntry:
        """The entry with this id.

        Raises:
            KeyError: no conversation this store has read holds it.
        """
        history = await self.read_history(entry_id)
        return history[-1]

    async def read_history(
        self, head_id: str | None, *, limit: int | None = None
    ) -> list[ConversationEntry]:
        """The entries from the first to ``head_id`` (one read), or only the last ``limit``.

        Raises:
            KeyError: no conversation this store has read holds ``head_id``.
        """
        if head_id is None:
            return []
        return await self._call(lambda: self._history(head_id, limit))

    def _history(self, head_id: str, limit: int | None) -> list[ConversationEntry]:
        session = self._get(self._where.get(head_id, ""))
        if session is None:
            raise KeyError(head_id)
        found = _entries(session.transcript.records)
        ids = [g.entry for g in found]
        if head_id not in ids:
            raise KeyError(head_id)
        kept = found[: ids.index(head_id) + 1]
        if limit is not None:
            kept = kept[max(len(kept) - limit, 0) :] if limit else []
        messages = load([g.message for g in kept])
        for g in kept:
            self._where[g.entry] = session.id
        return [
            ConversationEntry(id=g.entry, parent_id=g.parent, message=m)
            for g, m in zip(kept, messages, strict=True)
        ]
