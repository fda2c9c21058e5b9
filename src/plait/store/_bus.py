"""Run events passed between the processes serving one store: the optional ``EventBus``.

The process that runs a session's run sends its events (text deltas, tool events,
run start and end, markers for its records) to the others, which relay them to their
own observers with the same ids (``plait.server.sse``, D235). PostgreSQL's store has a
bus (``_pgbus.py``); one process on SQLite needs none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

__all__ = ["BusMessage", "EventBus"]


@dataclass(frozen=True, slots=True)
class BusMessage:
    """What an :class:`EventBus` listener hears, in the order the writes committed."""

    kind: Literal["changed", "events", "lost"]
    """A committed write (the change feed), another process's batch, or one gone unread."""
    session_id: str
    body: str = "[]"
    """For ``events``: the batch, a JSON array of the events in the order published."""


@runtime_checkable
class EventBus(Protocol):
    """Run events passed between the processes serving one store (optional; D235)."""

    def publish_events(self, session_id: str, events: Sequence[str]) -> None:
        """Queue events (JSON texts) for the other processes, sent in order, batched."""
        ...

    def flush_events(self, timeout: float = 5.0) -> bool:
        """Wait until what was queued so far is sent; False if ``timeout`` passed first."""
        ...

    def events(
        self, timeout: float | None = None, wanted: Callable[[str], bool] | None = None
    ) -> Iterator[BusMessage]:
        """Listen (from this call on) for other processes' batches and every write.

        Args:
            timeout: end the iteration after this many seconds of silence.
            wanted: the sessions whose batches to read (None: all); called on the
                listener's thread. Others are dropped unread.

        Raises:
            StoreError: the store is closed or its server cannot be reached.
        """
        ...
