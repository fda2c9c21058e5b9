"""Server-Sent Events: one channel per session, fanned out to every observer.

A :class:`Hub` keeps a :class:`Channel` per session that someone watches. Two
things feed a channel:

* the session's run events, through ``session.live.subscribe`` (text and
  tool-call deltas, usage, finish, tool start/end, ``iteration_end``, and a
  ``record`` event for every record a run appends);
* :meth:`Hub.poke`, which reads the records the store holds past the last one
  the channel published. Routes that write outside a run (inject, attach,
  rename, close ...) poke after writing, and every stream pokes on its
  keep-alive tick, so records written by another process arrive within one
  tick (decisions D84).

**Event ids.** A ``record`` event's id is the record's ``seq``; any other
event's id is ``"<seq>.<n>"``: the seq of the last record published before it,
and a counter. Each id ends with ``"~<head>"``, naming the head the seq counts
on. A client that reconnects with ``Last-Event-ID`` (or ``?after=SEQ``) gets
every record after that seq from the store, then the live stream: it loses no
record. Deltas are not replayed: they only preview a record that arrives whole.

**The head moves back.** A rewind, an undo of one or a pop gives the session's
id another head, whose records past some position differ from those already
published (positions are reused: the next record after a rewind takes the
first freed seq). A channel notices when it next reads the store (every write
route refreshes it; a run's start does too) and publishes a ``head`` event,
``{"keep": K, "end_seq": E}``: the records before position K stand, those from
K on are replaced by the ``record`` events that follow. A client reconnecting
with an id of a head that is no longer the session's gets ``head`` with
``keep`` 0 and every record in view again.

Everything here runs on the server's event loop thread; the store is read on
the host's store worker (D202). A poke is one task per channel at a time (a poke
meanwhile asks it for another round), and it publishes only what lies past the
channel's last record when its read comes back, so a record is never sent twice
nor out of order. An observer joins the channel before its backlog is read, and the
backlog stops where the live stream began: no record falls into the gap.

**Several processes** (``plait serve`` replicas on one PostgreSQL store, whose
store is an :class:`~plait.store.EventBus`; D235). The process that runs a
session is the sequencer of its events: from the run's start
(:meth:`Hub.broadcast`) to its ``run_end`` (:meth:`Hub.unbroadcast`) its channel
counts every event, watched here or not, and sends each to the bus: a record whole
(up to 16 KiB) or as a marker naming its seq and id (published only after its
append committed), any other event with its id and data. Another process relays
what it hears for a session someone watches there (:meth:`Hub.relay`, in
:mod:`plait.server.relay`): a record that came whole and is the channel's next goes
out as it came, a run of markers is one store read up to the last of them, any other
event goes out with the origin's id and data, one task per channel, in the order
heard; a run taken over counts its ids past the old process's (``taken_over``).
Meanwhile the channel's own pokes (the change feed, the keep-alive tick) wait, so
that no record goes out ahead of the sequence; after the relayed ``run_end``, or a
few seconds with nothing heard (the origin died: the origin sends an empty batch
every two seconds of silence), the channel reads the store on its own again.
On SQLite nothing of this runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TypeVar

from plait.errors import SessionNotFoundError
from plait.layout import shared_prefix
from plait.records import JSONValue, Record
from plait.server.channels import DEFAULT_MAX_QUEUE, Channel, Subscriber
from plait.server.relay import INLINE_RECORD, Relay
from plait.server.wire import SseEvent, event_json, head_mark, parse_event_mark, record_json
from plait.session import Session, SessionHost
from plait.store import EventBus
from plait.store.base import SessionRow

_T = TypeVar("_T")

__all__ = [
    "DEFAULT_MAX_QUEUE",
    "Channel",
    "Hub",
    "SseEvent",
    "Subscriber",
    "event_json",
    "head_mark",
    "parse_event_mark",
    "record_json",
]

_log = logging.getLogger("plait.server")



class Hub(Relay):
    """Every session channel of one server.

    Args:
        host: the client whose sessions the server serves.
        max_queue: how far one observer may fall behind before it is cut off.
    """

    def __init__(self, host: SessionHost, *, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        self._host = host
        self._max = max_queue
        self._channels: dict[str, Channel] = {}
        self._hooked: set[str] = set()
        store = host.store
        self._bus: EventBus | None = store if isinstance(store, EventBus) else None
        self._beat: asyncio.Task[None] | None = None

    async def _call(self, fn: Callable[[], _T]) -> _T:
        return await self._host.store_calls.run(fn)

    def _row(self, session_id: str) -> SessionRow:
        return self._host.lookup(session_id)

    async def channel(self, session_id: str) -> Channel:
        """Return the session's channel, subscribing to its run events the first time.

        Raises:
            SessionNotFoundError: an unknown id.
        """
        found = self._channels.get(session_id)
        if found is not None:
            return found

        def opened() -> tuple[SessionRow, Session]:
            row = self._row(session_id)
            return row, self._host.handle(row)

        row, handle = await self._call(opened)
        found = self._channels.get(session_id)  # another request made it meanwhile
        if found is not None:
            return found
        channel = Channel(session_id, row, last_seq=row.layout.end_seq - 1)
        self._channels[session_id] = channel
        if session_id not in self._hooked:
            handle.live.subscribe(lambda event: self.on_run_event(session_id, event))
            self._hooked.add(session_id)
        return channel

    async def watch(self, session_id: str) -> None:
        """Make sure the session's run events reach its channel (call before a run starts).

        A watched channel is brought up to the store first, so a head moved since it last
        read (a rewind) is published before the run's records, which count on the new head;
        an unwatched one is brought up when someone joins it.
        """
        channel = await self.channel(session_id)
        if channel.subscribers or self._bus is not None:  # a sequencer's ids start current
            await self.refresh(session_id)

    def on_run_event(self, session_id: str, event: object) -> None:
        """Publish one run event (a session subscriber; never raises into the run)."""
        channel = self._channels.get(session_id)
        if channel is None or not (channel.subscribers or channel.broadcasts):
            if channel is not None and getattr(event, "type", "") == "record":
                record = getattr(event, "record", None)
                if isinstance(record, Record):
                    channel.last_seq = max(channel.last_seq, record.seq)
                    channel.counter = 0
            return
        if getattr(event, "type", "") == "record":
            record = getattr(event, "record", None)
            if isinstance(record, Record):
                if record.seq == channel.last_seq + 1:
                    self._publish_record(channel, record)
                elif record.seq > channel.last_seq:
                    self.poke(session_id)  # a gap: what lies before it is in the store
            return
        self.publish(session_id, str(getattr(event, "type", "event")), event_json(event))

    def _send(self, channel: Channel, event: SseEvent, seq: int | None = None) -> None:
        """Hand an event to every observer (and to the bus, while broadcasting).

        ``seq``: the event is that record's (the bus gets a marker, not the record).
        """
        if channel.broadcasts and self._bus is not None:
            if seq is None:
                item = f'["{event.id}",{json.dumps(event.event)},{event.body}]'
            elif len(event.body) <= INLINE_RECORD:  # the record itself: no read elsewhere
                item = f'["{event.id}",{seq},{event.body}]'
            else:
                item = f'["{event.id}",{seq}]'

            self._bus.publish_events(channel.session_id, (item,))
            channel.sent_at = asyncio.get_running_loop().time()
        for sub in tuple(channel.subscribers):
            if sub.queue.qsize() >= self._max:
                sub.dropped = True
                channel.subscribers.discard(sub)
                sub.queue.put_nowait(None)
                continue
            sub.queue.put_nowait(event)

    def _publish_record(self, channel: Channel, record: Record) -> None:
        channel.last_seq = record.seq
        channel.counter = 0
        data: dict[str, JSONValue] = {
            "session_id": channel.session_id,
            "seq": record.seq,
            "record": record_json(record),
        }
        event = SseEvent(f"{record.seq}~{head_mark(channel.head)}", "record", data)
        self._send(channel, event, record.seq)

    def publish(self, session_id: str, name: str, data: dict[str, JSONValue]) -> None:
        """Publish an event that is not a record (a delta, ``run_start``, ``run_end`` ...)."""
        channel = self._channels.get(session_id)
        if channel is None or not (channel.subscribers or channel.broadcasts):
            return
        channel.counter += 1
        payload: dict[str, JSONValue] = {"session_id": session_id, **data}
        self._send(channel, self._mark_event(channel, name, payload))

    @staticmethod
    def _mark_event(channel: Channel, name: str, data: dict[str, JSONValue]) -> SseEvent:
        mark = f"{channel.last_seq}.{channel.counter}~{head_mark(channel.head)}"
        return SseEvent(mark, name, data)

    def _read(
        self, session_id: str, after: int, upto: int | None = None
    ) -> tuple[SessionRow, list[Record]]:
        """The session's row, and its records in view past ``after`` (and at most ``upto``).

        A store call.
        """
        row = self._row(session_id)
        return row, self._read_row(row, after, upto)

    def _read_row(self, row: SessionRow, after: int, upto: int | None = None) -> list[Record]:
        lo = max(after + 1, row.layout.view_start)
        hi = row.layout.end_seq if upto is None else min(row.layout.end_seq, upto + 1)
        if lo >= hi:
            return []
        return self._host.store.read(row, lo, hi)

    def _catch_up(
        self, channel: Channel, upto: int | None = None
    ) -> tuple[SessionRow, int | None, list[Record]]:
        """Read what the channel has not published: ``(row, keep, records)``; a store call.

        ``keep`` is None while the head is the one the channel knows; after the head
        moved, it is the first position whose record differs from what was published,
        and the records are read from there. ``upto``: read no record past this seq.
        """
        row = self._row(channel.session_id)
        old = channel.head
        if row.pk == old.pk:
            return row, None, self._read_row(row, channel.last_seq, upto)
        keep = min(
            shared_prefix(old.layout, old.pk, row.layout, row.pk), channel.last_seq + 1
        )
        return row, keep, self._read_row(row, keep - 1, upto)

    def _publish_read(
        self, channel: Channel, known: int, read: tuple[SessionRow, int | None, list[Record]]
    ) -> bool:
        """Publish what :meth:`_catch_up` read; False if the head moved meanwhile."""
        row, keep, records = read
        if keep is not None:
            if channel.head.pk != known:  # moved meanwhile: the caller reads once more
                return False
            self._moved(channel, row, keep)
        elif row.pk == channel.head.pk:
            channel.head = row  # the same head, grown
        for record in records:
            if record.seq == channel.last_seq + 1:  # else published meanwhile
                self._publish_record(channel, record)
        return True

    def _moved(self, channel: Channel, row: SessionRow, keep: int) -> None:
        """Publish that the head moved: records from ``keep`` on are replaced."""
        channel.head = row
        channel.last_seq = keep - 1
        channel.counter = 1
        data: dict[str, JSONValue] = {
            "session_id": channel.session_id,
            "keep": keep,
            "end_seq": row.layout.end_seq,
        }
        self._send(channel, self._mark_event(channel, "head", data))

    def poke(self, session_id: str) -> None:
        """Publish, soon, the records the store holds past the channel's last one.

        The store is read by a task of the channel's own; :meth:`refresh` waits
        for it. A session deleted meanwhile ends its streams.
        """
        channel = self._channels.get(session_id)
        if channel is None:
            return
        if self._relaying(channel):
            channel.held = True  # read once the relay ends: no record ahead of its sequence
            return
        if channel.poking is not None:
            channel.again = True  # it may have read before the write that asks for this
            return
        channel.poking = asyncio.get_running_loop().create_task(self._poke(channel))

    async def refresh(self, session_id: str) -> None:
        """:meth:`poke`, and wait until what the store holds now is published."""
        self.poke(session_id)
        channel = self._channels.get(session_id)
        task = channel.poking if channel is not None else None
        if task is not None:
            await asyncio.shield(task)

    async def published(self, session_id: str, records: Sequence[Record]) -> None:
        """Make sure ``records``, written in order by this process, are out.

        The channel publishes a run's records as they are written, so once it has
        published the last of them, with no read under way, there is nothing to read;
        else (a gap, or nothing written) this is :meth:`refresh`.
        """
        channel = self._channels.get(session_id)
        if (
            channel is not None
            and records
            and channel.poking is None
            and channel.last_seq >= records[-1].seq
        ):
            return
        await self.refresh(session_id)

    async def _poke(self, channel: Channel) -> None:
        session_id = channel.session_id
        try:
            while True:
                channel.again = False
                if not (channel.subscribers or channel.broadcasts):
                    try:
                        row = await self._call(lambda: self._row(session_id))
                    except SessionNotFoundError:
                        if self._channels.get(session_id) is channel:
                            self._channels.pop(session_id, None)
                        return
                    if not (channel.subscribers or channel.broadcasts):
                        channel.head = row
                        channel.last_seq = row.layout.end_seq - 1
                else:
                    known = channel.head.pk
                    try:
                        read = await self._call(partial(self._catch_up, channel))
                    except SessionNotFoundError:
                        self._end(channel)
                        return
                    if not self._publish_read(channel, known, read):
                        channel.again = True
                if not channel.again:
                    return
        except Exception:  # a store failure: the next poke (a keep-alive tick) tries again
            _log.exception("reading session %s for its observers failed", session_id)
        finally:
            channel.poking = None

    def poke_all(self) -> None:
        """:meth:`poke` every session someone is watching (a change feed that was down)."""
        for session_id, channel in tuple(self._channels.items()):
            if channel.subscribers:
                self.poke(session_id)

    def poke_watched(self, session_id: str) -> None:
        """:meth:`poke` a session only if someone is watching it (for change feeds)."""
        channel = self._channels.get(session_id)
        if channel is not None and channel.subscribers:
            self.poke(session_id)

    def _end(self, channel: Channel) -> None:
        for sub in tuple(channel.subscribers):
            sub.queue.put_nowait(None)
        channel.subscribers.clear()
        if self._channels.get(channel.session_id) is channel:
            self._channels.pop(channel.session_id, None)

    async def open(
        self, session_id: str, after: int | None, head: str | None = None
    ) -> tuple[list[SseEvent], Subscriber]:
        """Join a session's channel: return the backlog after ``after`` and the live queue.

        Args:
            session_id: the session.
            after: replay every record with a greater seq first; None for live only.
            head: the head ``after`` counts on (from the client's last event id); when
                it is no longer the session's, the backlog starts with a ``head`` event
                that keeps nothing, and replays every record in view.

        Raises:
            SessionNotFoundError: an unknown id.
        """
        channel = await self.channel(session_id)
        await self.refresh(session_id)  # bring the channel up to the store before joining it
        if self._channels.get(session_id) is not channel:  # deleted meanwhile
            raise SessionNotFoundError(session_id)
        sub = Subscriber()
        channel.subscribers.add(sub)  # what comes after this mark goes to the queue
        mark = channel.last_seq
        current = channel.head
        backlog: list[SseEvent] = []
        if head is not None and after is not None and head != head_mark(current):
            data: dict[str, JSONValue] = {
                "session_id": session_id, "keep": 0, "end_seq": current.layout.end_seq
            }
            backlog.append(SseEvent(f"-1.0~{head_mark(current)}", "head", data))
            after = -1
        if after is not None and after < mark:
            try:
                row, records = await self._call(lambda: self._read(session_id, after, mark))
            except BaseException:
                channel.subscribers.discard(sub)
                raise
            for record in records:
                data = {"session_id": session_id, "seq": record.seq, "record": record_json(record)}
                backlog.append(SseEvent(f"{record.seq}~{head_mark(row)}", "record", data))
        return backlog, sub

    def close(self, session_id: str, sub: Subscriber) -> None:
        """Leave a channel."""
        channel = self._channels.get(session_id)
        if channel is not None:
            channel.subscribers.discard(sub)

    def end_streams(self) -> None:
        """End every stream as the server stops listening; its own runs still go to the bus.

        A draining replica's runs go on for the drain grace: a channel that sequences
        one stays (with the bus's beat), so the other replicas still relay its events
        and its ``run_end``. :meth:`close_all` ends the rest once the runs are over.
        """
        for channel in tuple(self._channels.values()):
            if channel.broadcasts:
                for sub in tuple(channel.subscribers):
                    sub.queue.put_nowait(None)
                channel.subscribers.clear()
                continue
            if channel.relaying is not None:
                channel.relaying.cancel()
            self._end(channel)

    def close_all(self) -> None:
        """End every stream and channel (the server has stopped)."""
        if self._beat is not None:
            self._beat.cancel()
        for channel in tuple(self._channels.values()):
            if channel.relaying is not None:
                channel.relaying.cancel()
            self._end(channel)

    def observers(self, session_ids: Iterable[str] | None = None) -> int:
        """How many streams are open (on the given sessions, or on all)."""
        ids = self._channels.keys() if session_ids is None else session_ids
        return sum(len(self._channels[s].subscribers) for s in ids if s in self._channels)
