"""Google ADK sessions kept in plait: :class:`PlaitSessionService`.

``Runner(agent=..., app_name=..., session_service=PlaitSessionService("sessions.db"))``
keeps every ADK session in a plait store (a file, ``:memory:``, a
``postgresql://`` URL) and behaves as ADK's own ``InMemorySessionService``
does: the same events back, the same state after each delta, ``temp:`` keys
never stored, the same ``GetSessionConfig`` filters and listing order.

How it is stored:

* The session ``(app_name, user_id, session_id)`` is the plait session
  ``adk/<app_name>/<user_id>/<session_id>`` (``/`` and ``%`` inside a part
  escaped as ``%2F`` and ``%25``; a part too long for its share of the 200
  characters of an id ends in a hash).
* Every event is kept verbatim (its pydantic JSON) and, where it is a
  message, also as plait records: a user's text is a user message, a model's
  text and function calls an assistant message, each function response a
  tool message; the event rides on the first record's
  ``meta["google_adk"]["event"]``. Any other event (state only, thoughts,
  code execution, files) is an opaque item of format ``google-adk``. So
  ``history()``, the context report, compaction, fork, export and the web
  page read the conversation while ADK reads its events.
* ADK's rewind (an event naming the invocation to rewind before) is a
  :meth:`~plait.session.Session.rewind` too: plait's view drops the rewound
  turns, a hidden head keeps them, and ``get_session`` still returns every event.
* A plait fork of an ADK session (``fork``, ``fork_at``) under an ADK
  session's id is an ADK session too: ADK reads its events, and its state
  as ADK would have it after them (their deltas over the initial state).
* Session state and the last update time are the session's metadata
  (``metadata["google_adk"]``). App state (``app:``) and user state
  (``user:``) are shared by many sessions, so each lives in a session of its
  own, ``adk/<app_name>`` and ``adk/<app_name>/<user_id>``, one metadata value
  per key (``state:<key>``, holding ``{"v": value}``): writers of different
  keys never undo each other.

An event and its state deltas are several writes, not one transaction: the
event first, then app, user and session state, all under one hold of the
session's writer lock, so another process's append to the same session comes
wholly before or after. A session whose stored update time is newer than the
one a caller holds is refused with ADK's ``StaleSessionError``, as ADK's
persistent services refuse it.
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

from plait.client import Client
from plait.errors import MissingDependencyError, SessionExistsError, SessionNotFoundError
from plait.errors import StaleSessionError as PlaitStaleSessionError
from plait.integrations._keys import id_part, scan, unescape
from plait.integrations._offload import in_thread, settled
from plait.records import JSONValue, Record
from plait.session import Session as PlaitSession
from plait.store import Store
from plait.store.base import SessionRow

try:
    from google.adk.errors import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import (
        SessionNotFoundError as AdkSessionNotFoundError,
    )
    from google.adk.events.event import Event
    from google.adk.sessions import BaseSessionService, Session
    from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
    from google.adk.sessions.state import State
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("plait.integrations.google_adk", "google-adk") from exc

from plait.integrations._adk_events import (
    EVENT_FORMAT,
    NS,
    check_state,
    event_of,
    keyed_events,
    split,
    to_json,
)
from plait.integrations._adk_events import messages as event_messages

__all__ = ["EVENT_FORMAT", "ID_PREFIX", "PlaitSessionService", "session_id_for"]

ID_PREFIX: Final = "adk"
"""The first part of every plait session id this service makes."""
_RETRIES: Final = 16
_STATE: Final = "state:"  # the metadata key prefix of one app or user state value
_APP_BUDGET: Final = 50
_USER_BUDGET: Final = 60
_SESSION_BUDGET: Final = 200 - len(ID_PREFIX) - _APP_BUDGET - _USER_BUDGET - 3
_ANCESTORS: Final = 64  # how far up its lineage a plait fork's ADK session is looked for


def session_id_for(app_name: str, user_id: str | None = None, session_id: str | None = None) -> str:
    """The plait id of an ADK session, or of the session holding app (or user) state."""
    parts = [ID_PREFIX, id_part(app_name, _APP_BUDGET)]
    if user_id is not None:
        parts.append(id_part(user_id, _USER_BUDGET))
    if session_id is not None:
        parts.append(id_part(session_id, _SESSION_BUDGET))
    return "/".join(parts)


class PlaitSessionService(BaseSessionService):
    """An ADK ``BaseSessionService`` whose sessions are plait sessions.

    Args:
        store: where the sessions live: anything :func:`plait.store.open_store`
            takes (a path, ``":memory:"``, a ``postgresql://`` URL, a Store),
            or None for ``$PLAIT_STORE`` or the default file.
        workspace: the workspace new sessions belong to (default: the working directory).
        lock_timeout: how long a write waits for another process's write, in seconds.

    Several processes may serve one store: the writer lock is taken for one
    write at a time (``writer_lock="write"``).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] = ".",
        lock_timeout: float = 10.0,
    ) -> None:
        self.client = Client(workspace, store=store, writer_lock="write", lock_timeout=lock_timeout)
        """The plait client the sessions are read and written through."""

    def close(self) -> None:
        """Close the store if this object opened it."""
        self.client.close()

    def session(self, app_name: str, user_id: str, session_id: str) -> PlaitSession:
        """The plait session that holds an ADK session.

        Raises:
            plait.errors.SessionNotFoundError: no such ADK session.
        """
        return self.client.host.get(session_id_for(app_name, user_id, session_id))

    # -- BaseSessionService ---------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session; ``app:`` and ``user:`` keys of ``state`` go to their scopes.

        Raises:
            AlreadyExistsError: ``session_id`` is taken for this app and user.
            plait.errors.InvalidArgumentError: a state value cannot be JSON (NaN, bytes
                not UTF-8); nothing is stored.
        """
        return await settled(
            self.client, lambda: self._create_now(app_name, user_id, state, session_id)
        )

    def _create_now(
        self, app_name: str, user_id: str, state: dict[str, Any] | None, session_id: str | None
    ) -> Session:
        session_id = session_id.strip() if session_id else None
        check_state(state)
        if session_id and self._row(session_id_for(app_name, user_id, session_id)):
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        app, user, own = split(state or {})
        self._put_scope(session_id_for(app_name), app_name, None, app)
        self._put_scope(session_id_for(app_name, user_id), app_name, user_id, user)
        session_id = session_id or Event.new_id()
        now = time.time()
        info: dict[str, JSONValue] = {
            "kind": "session",
            "app_name": app_name,
            "user_id": user_id,
            "session_id": session_id,
            "state": to_json(own),
            # What a plait fork of this session replays its events' deltas over.
            "initial": to_json(own),
            "last_update_time": now,
        }
        try:
            self.client.sessions.create(
                session_id=session_id_for(app_name, user_id, session_id),
                lineage_operator="google_adk.create_session",
                metadata={NS: info},
            )
        except SessionExistsError:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        made = Session(
            id=session_id, app_name=app_name, user_id=user_id, state=dict(own), last_update_time=now
        )
        return self._merged(made)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (filtered by ``config``) and merged state, or None."""
        return await in_thread(
            self.client, lambda: self._get_now(app_name, user_id, session_id, config)
        )

    def _get_now(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None
    ) -> Session | None:
        session_id = session_id.strip() if session_id else session_id
        row = self._row(session_id_for(app_name, user_id, session_id))
        info = self._info(row) if row is not None else None
        if row is None or info is None:
            return None
        want = config.num_recent_events if config else None
        after = config.after_timestamp if config else None
        events = [] if want == 0 else self._events(row, want, after)
        if want:
            events = events[-want:]
        if after is not None:
            i = len(events) - 1
            while i >= 0 and events[i].timestamp >= after:
                i -= 1
            events = events[i + 1 :]
        session = self._bare(info)
        session.events = events
        return self._merged(session)

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (one user's, or everyone's) without events, oldest update first."""
        return await in_thread(self.client, lambda: self._list_now(app_name, user_id))

    def _list_now(self, app_name: str, user_id: str | None) -> ListSessionsResponse:
        prefix = session_id_for(app_name, user_id) + "/"
        found = []
        scopes: dict[str, dict[str, Any]] = {}
        for row in scan(self.client.store, prefix):
            info = self._info(row)
            if info is None:
                continue
            if info.get("app_name") != app_name or user_id not in (None, info.get("user_id")):
                continue
            found.append(self._merged(self._bare(info), scopes))
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=found)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Erase a session: its records go, except those a plait branch of it still shares."""
        session_id = session_id.strip() if session_id else session_id
        doomed = session_id_for(app_name, user_id, session_id)
        await settled(self.client, lambda: self._erase_now(doomed))

    def _erase_now(self, doomed: str) -> None:
        try:
            self.client.sessions.erase(doomed)
        except SessionNotFoundError:
            return

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in this app, without the ``user:`` prefix."""
        return await in_thread(self.client, lambda: self._scope(session_id_for(app_name, user_id)))

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store an event and its state deltas (``temp:`` keys are applied, never stored).

        Raises:
            SessionNotFoundError: (ADK's) the session is not stored.
            StaleSessionError: (ADK's) the stored session changed after ``session`` was read.
            plait.errors.InvalidArgumentError: a state value cannot be JSON (NaN, bytes
                not UTF-8); nothing is stored and ``session`` is left as it was.
        """
        if event.partial:
            return event
        delta = event.actions.state_delta if event.actions else None
        check_state(delta)
        temp = {k: v for k, v in (delta or {}).items() if k.startswith(State.TEMP_PREFIX)}
        stored = await settled(self.client, lambda: self._append_now(session, event))
        if stored is None:
            return event  # an equal re-delivery: neither stored twice nor applied twice
        # Once stored, the session in hand takes the event as ADK's database service gives
        # it: the temp: keys applied (the stored event has them trimmed), then the rest.
        session.state.update(temp)
        self._commit_event_to_session(session, stored)
        session.last_update_time = stored.timestamp
        return stored

    def _append_now(self, session: Session, event: Event) -> Event | None:
        """Check, then store, an event and its deltas under one hold of the session's lock.

        Another process's append comes wholly before or after: its stored update time
        makes this one stale, or this one's state is merged over what it stored.
        Returns the stored (trimmed) event, or None for an equal re-delivery.
        """
        sid = session_id_for(session.app_name, session.user_id, session.id)
        with self.client.host.locked(sid):
            info = self._check_append(session, event)
            if info is None:
                return None
            event = self._trim_temp_delta_state(event)
            self._persist(session, event, info)
            return event

    def _check_append(self, session: Session, event: Event) -> dict[str, JSONValue] | None:
        """The stored session's metadata, or None for an equal re-delivery of its newest event.

        Raises:
            SessionNotFoundError, StaleSessionError: ADK's, as :meth:`append_event` says.
        """
        sid = session_id_for(session.app_name, session.user_id, session.id)
        row = self._row(sid)
        info = self._info(row) if row is not None else None
        if row is None or info is None:
            raise AdkSessionNotFoundError(f"Session {session.id} not found.")
        stored_time = info.get("last_update_time")
        if isinstance(stored_time, int | float) and stored_time > session.last_update_time:
            raise StaleSessionError(
                "The last_update_time provided in the session object is earlier than the "
                "update_time in storage. Please check if it is a stale session."
            )
        newest = self._events(row, 1, None)
        if newest and newest[-1].id == event.id and newest[-1] == event:
            return None
        return info

    def _persist(self, session: Session, event: Event, info: dict[str, JSONValue]) -> None:
        """Store an event, then its app, user and session state deltas."""
        sid = session_id_for(session.app_name, session.user_id, session.id)
        offset = info.get("offset")
        self._store_event(sid, event, offset if isinstance(offset, int) else 0)
        delta = event.actions.state_delta if event.actions else {}
        app, user, own = split(delta or {})
        self._put_scope(session_id_for(session.app_name), session.app_name, None, app)
        self._put_scope(
            session_id_for(session.app_name, session.user_id),
            session.app_name,
            session.user_id,
            user,
        )
        state = dict(cast(Mapping[str, JSONValue], info.get("state") or {}))
        state.update({k: to_json(v) for k, v in own.items()})
        info["state"] = state
        info["last_update_time"] = event.timestamp
        self.client.host.handle(self.client.host.lookup(sid)).settings.set_metadata(NS, info)

    # -- internals ------------------------------------------------------------------------

    def _store_event(self, sid: str, event: Event, offset: int) -> None:
        """Append an event's records; a rewind event first rewinds plait's view too.

        An event is ordered by the session's version before the write, plus ``offset``
        in a plait fork: its version starts again below the orders of the events it kept.
        """
        target = event.actions.rewind_before_invocation_id if event.actions else None
        last: PlaitStaleSessionError | None = None
        for _ in range(_RETRIES):
            row = self.client.host.lookup(sid)
            plait = self.client.host.handle(row)
            try:
                keep = self._before_invocation(row, target) if target else None
                if keep is not None:
                    # ADK rewinds by an event its readers apply; plait's view follows, and
                    # the rewound events stay in a hidden head that get_session still reads.
                    plait.transcript.rewind(keep, expect_version=plait.live.version)
                messages = event_messages(event, plait.live.version + offset)
                plait.transcript.inject_many(messages, expect_version=plait.live.version)
                return
            except PlaitStaleSessionError as exc:
                last = exc  # another writer came first: the event goes after its write
        assert last is not None
        raise last

    def _before_invocation(self, row: SessionRow, invocation: str) -> int | None:
        """How many messages come before the invocation's first event (None: not in view)."""
        count = 0
        for record in self.client.store.read(row, row.layout.view_start, row.layout.end_seq):
            if record.kind == "event":
                continue  # plait's own events are not messages: rewind does not count them
            kept = record.meta.get(NS)
            if isinstance(kept, Mapping) and "event" in kept:
                found = cast(Mapping[str, Any], kept["event"]).get("invocation_id")
                if found == invocation:
                    return count
            count += 1
        return None

    def _row(self, session_id: str) -> SessionRow | None:
        try:
            return self.client.host.lookup(session_id)
        except SessionNotFoundError:
            return None

    def _info(self, row: SessionRow) -> dict[str, JSONValue] | None:
        """What the service keeps for the ADK session a row holds (None: it holds none).

        A session this service made keeps it in its metadata. A plait fork of one
        (``fork``, ``fork_at``, under an ADK session's id) keeps none: its identity is
        read from its id, and its state is the one ADK would have at its last event,
        the deltas of its events replayed over its source's initial state. The first
        event appended to it stores what is read here.
        """
        info = row.metadata.get(NS)
        if isinstance(info, Mapping):
            return dict(info) if info.get("kind") == "session" else None
        parts = row.id.split("/")
        if len(parts) != 4 or parts[0] != ID_PREFIX:
            return None
        app_name, user_id, session_id = (unescape(p) for p in parts[1:])
        if session_id_for(app_name, user_id, session_id) != row.id:
            return None  # a part too long for the id was shortened: it cannot be read back
        source = self._source(row)
        records = self.client.store.read(row, 0, row.layout.end_seq)
        events = self._events(row, None, None, records)
        if source is None and not events:
            return None  # a plait session under an ADK-like id, not an ADK session's copy
        initial = (source or {}).get("initial")
        state = dict(cast(Mapping[str, JSONValue], initial)) if isinstance(initial, Mapping) else {}
        for event in events:
            delta = event.actions.state_delta if event.actions else {}
            state.update({k: to_json(v) for k, v in split(delta or {})[2].items()})
        kept = keyed_events(records)
        return {
            "kind": "session",
            "app_name": app_name,
            "user_id": user_id,
            "session_id": session_id,
            "state": state,
            "initial": cast(JSONValue, initial) if isinstance(initial, Mapping) else {},
            "last_update_time": events[-1].timestamp if events else row.created_at_us / 1e6,
            # Its events are ordered after those it kept (see _store_event).
            "offset": max(kept, default=-1) + 1,
        }

    def _source(self, row: SessionRow) -> Mapping[str, JSONValue] | None:
        """The stored info of the nearest ADK session up ``row``'s lineage, or None."""
        seen = {row.id}
        for _ in range(_ANCESTORS):
            parent = self._row(row.parent_ids[0]) if row.parent_ids else None
            if parent is None or parent.id in seen:
                return None
            info = parent.metadata.get(NS)
            if isinstance(info, Mapping) and info.get("kind") == "session":
                return cast(Mapping[str, JSONValue], info)
            seen.add(parent.id)
            row = parent
        return None

    @staticmethod
    def _bare(info: Mapping[str, Any]) -> Session:
        """The ADK session of a stored row's info: its own state, no events yet."""
        return Session(
            id=info["session_id"],
            app_name=info["app_name"],
            user_id=info["user_id"],
            state=dict(info.get("state") or {}),
            last_update_time=float(info.get("last_update_time", 0.0)),
        )

    def _merged(self, session: Session, scopes: dict[str, dict[str, Any]] | None = None) -> Session:
        """``session`` with the app's and the user's state merged in under their prefixes.

        ``scopes`` keeps the scopes already read, so a listing reads each one once.
        """
        for key, value in self._scope(session_id_for(session.app_name), scopes).items():
            session.state[State.APP_PREFIX + key] = value
        user = self._scope(session_id_for(session.app_name, session.user_id), scopes)
        for key, value in user.items():
            session.state[State.USER_PREFIX + key] = value
        return session

    def _scope(
        self, scope_id: str, scopes: dict[str, dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        if scopes is not None:
            if scope_id not in scopes:
                scopes[scope_id] = self._scope(scope_id)
            return copy.deepcopy(scopes[scope_id])
        row = self._row(scope_id)
        if row is None:
            return {}
        # Each value is wrapped ({"v": value}) so that a None value is kept, not removed.
        return {
            key.removeprefix(_STATE): value["v"]
            for key, value in row.metadata.items()
            if key.startswith(_STATE) and isinstance(value, Mapping)
        }

    def _put_scope(
        self, scope_id: str, app_name: str, user_id: str | None, delta: Mapping[str, Any]
    ) -> None:
        """Store app or user state values, one metadata value per key."""
        if not delta:
            return
        row = self._row(scope_id)
        if row is None:
            kind = "app_state" if user_id is None else "user_state"
            info: dict[str, JSONValue] = {"kind": kind, "app_name": app_name, "user_id": user_id}
            values: dict[str, JSONValue] = {_STATE + k: {"v": to_json(v)} for k, v in delta.items()}
            try:
                self.client.sessions.create(
                    session_id=scope_id,
                    lineage_operator="google_adk.state",
                    metadata={NS: info, **values},
                )
                return
            except SessionExistsError:
                row = self.client.host.lookup(scope_id)  # another writer made it: update it
        scope = self.client.host.handle(row)
        for key, value in delta.items():
            scope.settings.set_metadata(_STATE + key, {"v": to_json(value)})

    def _events(
        self,
        row: SessionRow,
        want: int | None,
        after: float | None,
        records: list[Record] | None = None,
    ) -> list[Event]:
        """The session's events, reading back from the head only as far as the filters need.

        After a rewind, the events it cut are in hidden heads: every head is read, and the
        events ordered by the version they were written at. ``records``: the row's records,
        when the caller has read them all already.
        """
        hidden = self.client.host.handle(row).transcript.hidden_heads()
        if not hidden:
            if records is not None and want is None and after is None:
                return [e for e in map(event_of, records) if e]
            return list(self._read_back(row, want, after))
        store = self.client.store
        found = keyed_events(
            records if records is not None else store.read(row, 0, row.layout.end_seq)
        )
        for head_id in hidden:
            held = self._row(head_id)
            if held is not None:
                found.update(keyed_events(store.read(held, 0, held.layout.end_seq)))
        return [found[at] for at in sorted(found)]

    def _read_back(self, row: SessionRow, want: int | None, after: float | None) -> Iterator[Event]:
        hi = row.layout.end_seq
        chunk = max(2 * want, 16) if want else hi
        found: list[Event] = []
        while hi > 0:
            lo = max(0, hi - chunk)
            batch = [e for e in map(event_of, self.client.store.read(row, lo, hi)) if e]
            found[:0] = batch
            hi = lo
            enough = want is None or len(found) >= want
            reached = after is None or (bool(found) and found[0].timestamp < after)
            if enough and reached:
                break
            chunk *= 2
        yield from found
