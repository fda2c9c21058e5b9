"""A plait-backed ``Session`` for the OpenAI Agents SDK (``pip install 'plait[openai-agents]'``).

A drop-in where ``SQLiteSession(session_id, db_path)`` stood::

    from plait.integrations.openai_agents import PlaitSession

    session = PlaitSession("user/123", "chats.db")
    result = await Runner.run(agent, "Hello", session=session)

The conversation is an ordinary plait session under the same id, so plait's API
reads it (``history()``, ``context()``, ``fork()``, ``compact()``, ``export()``,
the web page). Each item is one plait message (see
:mod:`plait.integrations._openai_items`): ``pop_item`` is one ``rewind``, O(1)
in the transcript's length and the store's size, and atomic.

The SDK's interface is async and plait's store calls are plain calls, so each
call runs on the client's store worker (D219). The client takes the writer lock for one
write at a time (``writer_lock="write"``), so several worker processes can serve
one conversation.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

from plait.client import Client
from plait.errors import (
    AdapterClosedError,
    InvalidArgumentError,
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
)
from plait.integrations._offload import in_thread, settled
from plait.integrations._openai_items import (
    FORMAT,
    item_message,
    name_results,
    record_items,
    unnamed_calls,
)
from plait.integrations._views import compacted
from plait.records import AssistantRecord, Record, hidden_summaries
from plait.session import Session as PlaitConversation
from plait.store import Store

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

__all__ = ["FORMAT", "PlaitSession"]

_T = TypeVar("_T")
_OPERATOR: Final = "openai-agents"
_CALLS_BACK: Final = 64  # how many messages back a tool result's call is looked for


def _settings(value: object) -> SessionSettings:
    try:
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
    except ImportError as exc:
        raise MissingDependencyError("plait's openai-agents session", "openai-agents") from exc
    if value is None:
        return SessionSettings()
    return coerce_session_settings(cast("SessionSettings | dict[str, Any]", value))


def _view_items(records: list[Record]) -> list[dict[str, Any]]:
    """The items of records in view: after a compaction, its summary and what it kept."""
    return [item for r in compacted(records) for item in record_items(r)]


def _newest_items(session: PlaitConversation) -> tuple[int, list[dict[str, Any]]] | None:
    """The items of the newest record ``get_items`` shows, and how many messages lie before it.

    Usually the last message (read from the tail). A message that shows as no item
    (a summary an ``uncompact`` hid, an opaque item of another format) still counts,
    so past one the view is read, and the rewind drops it with the item.
    """
    last = [r for r in session.transcript.tail(1) if r.kind != "event"]
    if last and last[-1].kind != "summary" and (items := record_items(last[-1])):
        return session.transcript.length - 1, items
    records = session.transcript.records
    hidden = hidden_summaries(records)
    messages = [r for r in records if r.kind != "event"]
    for n in range(len(messages) - 1, -1, -1):
        record = messages[n]
        if record.kind == "summary" and record.seq in hidden:
            continue
        if items := record_items(record):
            return n, items
    return None


class PlaitSession:
    """The SDK's ``Session`` protocol over a plait session of the same id.

    Args:
        session_id: the conversation's id, also its plait session id (any printable
            string up to 200 characters, such as ``user/123``).
        store: where it lives: anything :func:`plait.store.open_store` takes (a path,
            ``":memory:"``, a ``postgresql://`` URL, a Store; None for
            ``$PLAIT_STORE`` or the default file), or a :class:`plait.Client`
            (used as it is and never closed here; make it with
            ``writer_lock="write"`` for several processes to share a conversation).
        workspace: the workspace of the plait sessions it creates (a client's own otherwise).
        session_settings: the SDK's ``SessionSettings`` (or a dict of them), as
            ``SQLiteSession`` takes them; ``limit`` is the default of ``get_items``.
        lock_timeout: seconds a write waits for another writer of the same
            conversation (then ``SessionLockTimeoutError``); None for plait's default.
        clear: what ``clear_session`` does: ``"erase"`` (the default, as
            ``SQLiteSession`` deletes its rows: the records no other branch shares
            are removed) or ``"rewind"`` (the conversation starts again empty and
            the old head stays a hidden branch, so ``undo_rewind`` brings it back).

    Raises:
        MissingDependencyError: openai-agents is not installed.
        InvalidArgumentError: an invalid id or ``clear``.
        TypeError: unknown session settings (the SDK's own check).
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: Client | Store | str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] = ".",
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        lock_timeout: float | None = None,
        clear: Literal["erase", "rewind"] = "erase",
    ) -> None:
        self.session_settings = _settings(session_settings)
        if not isinstance(session_id, str) or not session_id or len(session_id) > 200:
            raise InvalidArgumentError(f"{session_id!r} is not a valid session id")
        if clear not in ("erase", "rewind"):
            raise InvalidArgumentError(f"clear must be 'erase' or 'rewind', not {clear!r}")
        self.session_id = session_id
        self._clear = clear
        self._closed = False
        if isinstance(store, Client):
            self._client, self._owns = store, False
        else:
            options: dict[str, Any] = {"store": store, "writer_lock": "write"}
            if lock_timeout is not None:
                options["lock_timeout"] = lock_timeout
            self._client, self._owns = Client(workspace, **options), True

    # -- plait's side ---------------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The plait client the conversation is read and written through."""
        return self._client

    def plait_session(self) -> PlaitConversation | None:
        """The plait session under this id (a plain call), or None before the first item."""
        self._check_open()
        try:
            return self._client.host.get(self.session_id)
        except SessionNotFoundError:
            return None

    def close(self) -> None:
        """Close the store if this session opened it; later calls raise ``AdapterClosedError``."""
        if not self._closed:
            self._closed = True
            if self._owns:
                self._client.close()

    def _check_open(self) -> None:
        if self._closed:
            raise AdapterClosedError(f"PlaitSession {self.session_id!r} is closed")

    async def _read(self, fn: Callable[[], _T]) -> _T:
        self._check_open()
        return await in_thread(self._client, fn)

    async def _write(self, fn: Callable[[], _T]) -> _T:
        self._check_open()
        return await settled(self._client, fn)

    # -- the SDK's Session protocol -------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation's items, oldest first; with ``limit``, only the newest ``limit``.

        ``limit`` defaults to ``session_settings.limit``; 0 returns none and a
        negative limit all of them, as ``SQLiteSession`` does. Reading the newest
        ``limit`` items costs the same however long the conversation is.
        """
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        return cast("list[TResponseInputItem]", await self._read(lambda: self._items(limit)))

    def _items(self, limit: int | None) -> list[dict[str, Any]]:
        session = self.plait_session()
        if session is None or limit == 0:
            return []
        if limit is None or limit < 0:
            return _view_items(session.transcript.records)
        want = limit
        while True:
            tail = session.transcript.tail(want)
            if any(r.kind == "summary" for r in tail):
                # A compaction's summary is written last but read first: read the whole view.
                return _view_items(session.transcript.records)[-limit:]
            items = _view_items(tail)
            # A message of another format reads as no item: read further back for them.
            if len(items) >= limit or sum(r.kind != "event" for r in tail) < want:
                return items[-limit:]
            want *= 2

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append items, in one transaction (one bad item and none is stored).

        Raises:
            InvalidArgumentError: an item is not a JSON object (or not JSON at all).
            SessionLockTimeoutError: another writer held it past ``lock_timeout``.
        """
        self._check_open()
        messages = [item_message(item) for item in items]
        if messages:
            await self._write(lambda: self._append(messages))

    def _append(self, messages: list[dict[str, Any]]) -> None:
        session = self.plait_session()
        names: dict[str, str] = {}
        if session is not None and (wanted := unnamed_calls(messages)):
            # An output added apart from its call (a run resumed after an approval).
            for record in session.transcript.tail(_CALLS_BACK):
                if isinstance(record, AssistantRecord):
                    names.update((c.id, c.name) for c in record.tool_calls if c.id in wanted)
        name_results(messages, names)
        if session is None:
            try:
                self._client.sessions.create(
                    messages, session_id=self.session_id, lineage_operator=_OPERATOR
                )
                return
            except SessionExistsError:  # another writer created it first
                session = self._client.host.get(self.session_id)
        session.transcript.inject_many(messages)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when there is none): one atomic rewind.

        The removed item stays in the plait session's lineage as a hidden branch
        (``undo_rewind`` brings it back). A message plait wrote itself that reads as
        several items (an assistant's text and tool calls) is rewound, and the items
        before the popped one appended again, under one hold of the writer lock.
        """
        return cast("TResponseInputItem | None", await self._write(self._pop))

    def _pop(self) -> dict[str, Any] | None:
        session = self.plait_session()
        if session is None:
            return None
        while True:
            version = session.live.version
            found = _newest_items(session)
            if found is None:
                return None
            keep, items = found
            if len(items) == 1:
                try:
                    session.transcript.rewind(keep, expect_version=version)
                except StaleSessionError:  # another writer moved the head: read it again
                    continue
                return items[0]
            # A message plait wrote (an assistant's text and its calls) is several items:
            # it goes, and the items before the popped one come back, under one lock hold.
            with self._client.host.locked(self.session_id):
                try:
                    session.transcript.rewind(keep, expect_version=version)
                except StaleSessionError:
                    continue
                session.transcript.inject_many([item_message(i) for i in items[:-1]])
            return items[-1]

    async def clear_session(self) -> None:
        """Remove every item (``clear="erase"``: the records; ``"rewind"``: from view)."""
        await self._write(self._clear_now)

    def _clear_now(self) -> None:
        session = self.plait_session()
        if session is None:
            return
        if self._clear == "rewind":
            if session.transcript.length:
                session.transcript.rewind(0)
            return
        with contextlib.suppress(SessionNotFoundError):  # erased by another writer meanwhile
            self._client.sessions.erase(self.session_id)

    def __repr__(self) -> str:
        return f"<PlaitSession {self.session_id!r}>"
