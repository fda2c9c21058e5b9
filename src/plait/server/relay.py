"""The event bus side of the hub: sequencing a run's events, and relaying another's (D235).

The process that runs a session's run is its sequencer: between :meth:`Relay.broadcast`
and :meth:`Relay.unbroadcast` its channel sends every event to the store's bus (a record
whole when small, else as a marker of its seq). Every other process relays what it hears
to its own observers, in the same order with the same ids (:meth:`Relay.relay`), reading
from the store only the records that came as markers. A mixin of
:class:`~plait.server.sse.Hub`; see that module for ids, heads and catch-up reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from plait.errors import SessionNotFoundError
from plait.records import JSONValue
from plait.server.channels import Channel
from plait.server.wire import SseEvent, head_mark, parse_event_mark
from plait.store import BusMessage, EventBus

__all__ = ["BEAT", "INLINE_RECORD", "RELAY_SILENCE", "Relay"]

_log = logging.getLogger("plait.server")

INLINE_RECORD: Final = 16 * 1024
"""A record event up to this size goes to the bus whole, so relaying it reads no store."""
_TAKEOVER_SHIFT: Final = 20
"""Events one process may publish between two records before a takeover's ids could meet them."""
BEAT: Final = 2.0
"""Seconds a sequencer's channel stays silent on the bus before it sends an empty batch."""
RELAY_SILENCE: Final = 6.0
"""Seconds a relaying channel waits for the next batch before it reads the store itself."""


def _marker(item: list[JSONValue]) -> bool:
    """Whether a relayed item is a record's (``[id, seq]``, or ``[id, seq, event data]``)."""
    return isinstance(item[1], int) and not isinstance(item[1], bool)


def _inline(channel: Channel, item: list[JSONValue]) -> bool:
    """Whether a relayed record came whole and is the channel's next, on its own head."""
    if len(item) != 3 or not _marker(item) or not isinstance(item[2], dict):
        return False
    mark = item[0]
    return (
        item[1] == channel.last_seq + 1
        and isinstance(mark, str)
        and mark.endswith("~" + head_mark(channel.head))
    )


class Relay:
    """The hub's bus verbs: sequence this process's runs, relay the others' (a mixin)."""

    _channels: dict[str, Channel]
    _bus: EventBus | None
    _beat: asyncio.Task[None] | None

    # The hub's own verbs (plait.server.sse.Hub), which this part of it calls.
    _call: Callable[[Callable[[], Any]], Awaitable[Any]]
    _send: Callable[..., None]
    _catch_up: Callable[..., Any]
    _publish_read: Callable[[Channel, int, Any], bool]
    _end: Callable[[Channel], None]
    poke: Callable[[str], None]

    def taken_over(self, session_id: str, epoch: int) -> None:
        """A run of the session is taken over here at ``epoch`` (2 for the first takeover).

        The events this process adds after the last record count on past every id the
        run's old process may have given after it (``epoch << 20``), so a replica that
        relayed the old process never takes them for repeats of its events.
        """
        channel = self._channels.get(session_id)
        if channel is not None:
            channel.counter = max(channel.counter, epoch << _TAKEOVER_SHIFT)

    def broadcast(self, session_id: str) -> None:
        """A run of this process starts on the session: its channel becomes the sequencer.

        Until the matching :meth:`unbroadcast`, every event the channel publishes is
        counted and sent to the bus, watched here or not; the first call sends an
        empty batch at once, which tells the other processes to relay the session
        (await :meth:`announced` before the run's first write). A no-op without a bus.
        """
        channel = self._channels.get(session_id)
        if self._bus is None or channel is None:
            return
        channel.broadcasts += 1
        if channel.broadcasts == 1:
            # It relayed another process's run (taken over here now): that relay is over,
            # or it would hold back every read of the store (and so this run's records)
            # until the old process's silence ran out.
            channel.heard_at = None
            channel.inbox.clear()
            if channel.relaying is None and channel.held:
                channel.held = False
                self.poke(session_id)
            self._bus.publish_events(session_id, ())
            channel.sent_at = asyncio.get_running_loop().time()
            if self._beat is None:
                self._beat = asyncio.get_running_loop().create_task(self._beating())

    async def announced(self) -> None:
        """Wait until what this process sent to the bus so far is sent (no-op without one).

        A run awaits this before its first write: the other processes then hear that
        it started before they hear of that write from the change feed.
        """
        if self._bus is not None:
            await asyncio.to_thread(self._bus.flush_events)

    def unbroadcast(self, session_id: str) -> None:
        """A run of this process on the session ended (after its ``run_end``)."""
        channel = self._channels.get(session_id)
        if channel is not None and channel.broadcasts:
            channel.broadcasts -= 1

    async def _beating(self) -> None:
        """Send an empty batch for every sequencer channel silent for :data:`BEAT` seconds.

        The other processes then tell a run that is thinking (a long tool call) from
        one whose process died.
        """
        loop = asyncio.get_running_loop()
        try:
            while True:
                await asyncio.sleep(BEAT / 2)
                live = [c for c in self._channels.values() if c.broadcasts]
                if not live or self._bus is None:
                    return
                now = loop.time()
                for channel in live:
                    if now - channel.sent_at >= BEAT:
                        self._bus.publish_events(channel.session_id, ())
                        channel.sent_at = now
        finally:
            self._beat = None

    def watching(self, session_id: str) -> bool:
        """Whether someone here may watch the session: its batches are worth reading.

        Called on the bus listener's thread (a dictionary lookup, safe there).
        """
        return session_id in self._channels

    def _relaying(self, channel: Channel) -> bool:
        if channel.relaying is not None:
            return True
        heard = channel.heard_at
        return heard is not None and asyncio.get_running_loop().time() - heard < RELAY_SILENCE

    def relay(self, message: BusMessage) -> None:
        """Publish what another process sent for a session, in its order and with its ids.

        A batch for a session nobody watches here is dropped; one this process is
        the sequencer of is its own echo, or stale. ``lost`` (a batch gone unread)
        ends the relay: the channel reads the store itself.
        """
        channel = self._channels.get(message.session_id)
        if channel is None or channel.broadcasts:
            return
        if not channel.subscribers or message.kind != "events":
            self._unrelay(channel)
            return
        try:
            items = json.loads(message.body)
        except ValueError:
            _log.warning("an unreadable batch of events for session %s", channel.session_id)
            self._unrelay(channel)
            return
        if not self._relaying(channel):
            channel.relayed = None  # a relay starts (a run, or its new replica after a takeover)
        channel.heard_at = asyncio.get_running_loop().time()
        channel.inbox.extend(i for i in items if isinstance(i, list) and len(i) in (2, 3))
        if channel.relaying is None and channel.inbox:
            channel.relaying = asyncio.get_running_loop().create_task(self._relay(channel))

    def _unrelay(self, channel: Channel) -> None:
        """Stop relaying: the channel reads the store on its own again (and now)."""
        channel.heard_at = None
        if channel.relaying is None:
            channel.inbox.clear()
            if channel.held:
                channel.held = False
                self.poke(channel.session_id)

    async def _relay(self, channel: Channel) -> None:
        """Publish the channel's inbox in order: markers by store reads, the rest as heard."""
        try:
            while channel.poking is not None:  # a read begun before the relay goes first
                await asyncio.shield(channel.poking)
            while channel.inbox:
                item = channel.inbox.popleft()
                if _inline(channel, item):
                    self._relay_record(channel, item)
                    continue
                if _marker(item) or item[1] == "head":
                    await self._relay_read(channel, item)
                    continue
                mark, name, data = item
                if not (isinstance(mark, str) and isinstance(name, str) and isinstance(data, dict)):
                    continue
                seq, _ = parse_event_mark(mark)
                n_text = mark.partition("~")[0].partition(".")[2]
                at = (seq if seq is not None else -1, int(n_text) if n_text.isdigit() else 0)
                if channel.relayed is not None and at <= channel.relayed:
                    continue  # relayed already
                channel.relayed = at
                if seq == channel.last_seq:  # the events after a record count from there
                    channel.counter = max(channel.counter, at[1])
                self._send(channel, SseEvent(mark, name, data))
                if name == "run_end":
                    channel.heard_at = None  # the run is over: back to the store
        except SessionNotFoundError:
            self._end(channel)
        except Exception:  # a store failure: the channel reads the store itself again
            _log.exception("relaying session %s for its observers failed", channel.session_id)
            channel.heard_at = None
        finally:
            channel.relaying = None
            if channel.heard_at is None:  # the relay is over: catch up with the store
                channel.inbox.clear()
                channel.held = False
                self.poke(channel.session_id)

    def _relay_record(self, channel: Channel, item: list[JSONValue]) -> None:
        """Publish a record the batch carried whole: the next one, on the channel's head."""
        mark, seq, data = item
        assert isinstance(mark, str) and isinstance(seq, int) and isinstance(data, dict)
        channel.last_seq = seq
        channel.counter = 0
        channel.relayed = (seq, 0)
        self._send(channel, SseEvent(mark, "record", data))

    async def _relay_read(self, channel: Channel, item: list[JSONValue]) -> None:
        """Publish the records a run of markers names (one read, up to the last of them).

        A relayed ``head`` event is read too: up to the position it keeps, so the
        channel finds the head moved and says so with a ``head`` event of its own.
        """
        moved = not _marker(item)
        upto: JSONValue = item[1]
        if moved:
            data = item[2]
            keep = data.get("keep") if isinstance(data, dict) else None
            upto = keep - 1 if isinstance(keep, int) else -1
        inbox = channel.inbox
        while inbox and _marker(inbox[0]) and not _inline(channel, inbox[0]):
            upto = inbox.popleft()[1]
        if not isinstance(upto, int) or (upto <= channel.last_seq and not moved):
            return  # published already (by a read of the channel's own, before the relay)
        if moved:
            channel.relayed = None  # positions count on the new head
        known = channel.head.pk
        read = await self._call(partial(self._catch_up, channel, upto))
        if not self._publish_read(channel, known, read):
            channel.held = True
