"""PostgreSQL's store, its notifications: the change feed and the event bus, a part it holds.

``changes()`` is the feed of committed writes (``_pgfeed.py``, D165, D225); the event
bus passes run events between the processes serving one store (``_pgbus.py``, D235).
Kept apart from ``postgres.py`` so that module stays one concern: rows and records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from plait.store._bus import BusMessage

if TYPE_CHECKING:
    from plait.store.postgres._bus import BusListener, BusPublisher
    from plait.store.postgres._feed import ChangeFeed, Notifier
    from plait.store.sql._sealing import Sealer

__all__ = ["PgNotifications"]


class PgNotifications:
    """:class:`~plait.store.postgres.PostgresStore`'s feed and bus verbs (a part it holds).

    Args:
        feed: the change feed (``postgres/_feed.py``).
        notifier: the thread announcing this store's commits.
        bus_out: the event bus's sender (``postgres/_bus.py``).
        bus_in: the event bus's listener.
        check_open: the store's own check that it is still open.
        sealer: the store's sealer (None: a plain store), asked at each call.
    """

    def __init__(
        self,
        feed: ChangeFeed,
        notifier: Notifier,
        bus_out: BusPublisher,
        bus_in: BusListener,
        check_open: Callable[[], None],
        sealer: Callable[[], Sealer | None],
    ) -> None:
        self._feed = feed
        self._notifier = notifier
        self._bus_out = bus_out
        self._bus_in = bus_in
        self._check_open = check_open
        self._sealer = sealer

    def changes(self, timeout: float | None = None) -> Iterator[str]:
        """Listen for committed writes to this store's sessions, from every process.

        Every committed write (create, append, write, delete) notifies the
        channel :attr:`channel` (``plait_session``; ``plait_session.<schema>``
        for a store in a named schema) with the session's id, sent by the
        writing store after the commit (writes that commit close together are
        announced together, repeats folded: within ~10 ms of a write after a
        pause, ~50 ms while the store keeps writing, D225). Listening starts
        when this method is called, on a connection the store keeps for it, so
        a write committed after the call is never missed (unless its process
        dies between the commit and the announcement), and notifications that
        arrive between iterations wait for the next one (or the next call).
        There is no polling: the iterator sleeps on the connection's socket.

        Example::

            feed = store.changes(timeout=5.0)
            ...  # another process appends to session "s"
            for session_id in feed:
                print("changed:", session_id)

        Args:
            timeout: end the iteration after this many seconds without a
                notification; None waits for ever.

        Returns:
            An iterator of session ids, one per notification (repeats that
            pile up before they are sent are folded), this store's own writes
            included.

        Raises:
            StoreError: the store is closed or the server cannot be reached.
        """
        self._check_open()
        return self._feed.listen(timeout)

    def flush_changes(self, timeout: float = 5.0) -> bool:
        """Wait until this store's committed writes so far have been announced.

        Writes are announced just after they commit, by a thread of the store;
        this waits for it (:meth:`close` does too). Returns False if ``timeout``
        seconds passed first.
        """
        return self._notifier.flush(timeout)

    # -- the event bus (store/postgres/_bus.py) ----------------------------------------------

    def publish_events(self, session_id: str, events: Sequence[str]) -> None:
        """Queue a session's events (JSON texts) for the other processes' :meth:`events`.

        Sent by a thread of the store within ~15 ms, a batch per session and in the
        order queued, after the writes this store committed before the call. An
        encrypted store seals each event (a JSON string in the batch) under its store
        key: a running session's deltas are its content too (D320).
        """
        sealer = self._sealer()
        if sealer is not None:
            events = [json.dumps(sealer.seal_bus(session_id, e)) for e in events]
        self._bus_out.publish(session_id, events)

    def flush_events(self, timeout: float = 5.0) -> bool:
        """Wait until the events queued so far are sent; False if ``timeout`` passed first."""
        return self._bus_out.flush(timeout)

    def events(
        self, timeout: float | None = None, wanted: Callable[[str], bool] | None = None
    ) -> Iterator[BusMessage]:
        """:meth:`changes` (``changed``) and other stores' batches (``events``), in commit order.

        A batch deleted before it was read (a listener a minute behind) is ``lost``;
        after the listening connection is replaced, the batches sent meanwhile come
        first. See :meth:`EventBus.events <plait.store.EventBus.events>`.
        """
        self._check_open()
        heard = self._bus_in.listen(timeout, wanted)
        sealer = self._sealer()
        if sealer is None:
            return heard
        return (
            BusMessage(m.kind, m.session_id, _opened(sealer, m)) if m.kind == "events" else m
            for m in heard
        )


def _opened(sealer: Sealer, message: BusMessage) -> str:
    """A sealed batch's body with each event opened (see ``publish_events``)."""
    sealed = json.loads(message.body)
    return "[" + ",".join(sealer.open_bus(message.session_id, e) for e in sealed) + "]"

