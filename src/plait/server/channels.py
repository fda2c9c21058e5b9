"""A session's channel of live events, and one observer's queue (``plait.server.sse``)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from plait.records import JSONValue
from plait.server.wire import SseEvent
from plait.store.base import SessionRow

__all__ = ["DEFAULT_MAX_QUEUE", "Channel", "Subscriber"]

DEFAULT_MAX_QUEUE: Final = 10_000
"""How far an observer may fall behind before its stream ends (it reconnects, losing nothing)."""


@dataclass(eq=False)
class Subscriber:
    """One observer's queue; ``None`` in it ends the stream."""

    queue: asyncio.Queue[SseEvent | None] = field(default_factory=asyncio.Queue)
    dropped: bool = False
    """True when it fell too far behind and was cut off."""


@dataclass(eq=False)
class Channel:
    """The live events of one session."""

    session_id: str
    head: SessionRow
    """The session's row as the channel last read it: the head its seqs count on."""
    last_seq: int = -1
    """The seq of the last record published (-1: none yet)."""
    counter: int = 0
    """Events published since that record."""
    subscribers: set[Subscriber] = field(default_factory=set)
    poking: asyncio.Task[None] | None = None
    """The poke reading the store now, if one is."""
    again: bool = False
    """Whether a poke was asked for while one was reading (it reads once more)."""
    broadcasts: int = 0
    """Runs of this process in progress on the session: while any is, every event goes
    to the bus and counts, watched or not."""
    sent_at: float = 0.0
    """When the channel last sent to the bus (loop time)."""
    heard_at: float | None = None
    """When a batch of another process was last relayed here (loop time; None: none is)."""
    inbox: deque[list[JSONValue]] = field(default_factory=deque)
    """Relayed events not yet published: ``[id, seq]`` markers and ``[id, name, data]``."""
    relaying: asyncio.Task[None] | None = None
    """The task publishing the inbox, if one is."""
    held: bool = False
    """Whether a poke was asked for while relaying (it runs when the relay ends)."""
    relayed: tuple[int, int] | None = None
    """Where the last event relayed stands, ``(seq, n)`` of its id: ids only grow
    along a run, so one at or before it was relayed already (a batch sent twice)."""
